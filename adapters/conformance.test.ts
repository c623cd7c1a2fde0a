/**
 * The conformance suite (`conformance.ts`) against every built-in adapter and its real server. One more adapter is
 * one more entry in `subjects`: its admin URL, its name limit, a probe that writes and reads a value through the
 * resolved URL with the server's own client, and, where the server can hold one, something unmarked of a slice's name.
 */
import { createHash, randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import amqp from "amqplib"
import { Redis } from "ioredis"
import { Kafka, logLevel } from "kafkajs"
import { MongoClient } from "mongodb"
import { createConnection } from "mysql2/promise"
import { connect as natsConnect, type NatsConnection } from "nats"
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client
} from "@aws-sdk/client-s3"
import { afterAll } from "vitest"
import pg from "pg"
import { clickhouseAdapter } from "./clickhouse/index.js"
import { conformance, type Subject } from "./conformance.js"
import type { Slice } from "./contract.js"
import { dirAdapter } from "./dir/index.js"
import { elasticsearchAdapter } from "./elasticsearch/index.js"
import { kafkaAdapter } from "./kafka/index.js"
import { mongodbAdapter } from "./mongodb/index.js"
import { mysqlAdapter } from "./mysql/index.js"
import { natsAdapter } from "./nats/index.js"
import { postgresAdapter } from "./postgres/index.js"
import { qdrantAdapter } from "./qdrant/index.js"
import { rabbitmqAdapter } from "./rabbitmq/index.js"
import { s3Adapter } from "./s3/index.js"
import { startS3rver } from "./s3/s3rver.js"
import { redisAdapter } from "./redis/index.js"
import { MAX_STORAGE_NAME } from "./shared.js"
import { sqliteAdapter } from "./sqlite/index.js"

const postgresUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const mysqlUrl = process.env.MYSQL_ADMIN_URL ?? "mysql://root@127.0.0.1:3306/"
const redisUrl = process.env.REDIS_ADMIN_URL ?? "redis://127.0.0.1:6379"
const rabbitUrl = process.env.RABBITMQ_ADMIN_URL ?? "amqp://guest:guest@127.0.0.1:5672"
const rabbitManagement = process.env.RABBITMQ_MANAGEMENT_URL ?? "http://127.0.0.1:15672"
const natsUrl = process.env.NATS_ADMIN_URL ?? "nats://127.0.0.1:4222"
const clickhouseUrl = process.env.CLICKHOUSE_ADMIN_URL ?? "http://default@127.0.0.1:8123"

/**
 * Servers no machine of this project runs (no package installs them here): their subjects run when a variable names
 * one, and are reported as skipped, with the reason, when none does.
 */
const optionalServer = (variable: string, what: string, fallback: string) => {
  const url = process.env[variable]
  return url === undefined || url === ""
    ? { url: fallback, skip: `${variable} is not set (no ${what} server on this machine)` }
    : { url, skip: undefined }
}
const mongodb = optionalServer("BERTH_TEST_MONGODB_URL", "MongoDB", "mongodb://127.0.0.1:27017")
const elasticsearch = optionalServer(
  "BERTH_TEST_ELASTICSEARCH_URL",
  "Elasticsearch or OpenSearch",
  "http://127.0.0.1:9200"
)
const qdrant = optionalServer("BERTH_TEST_QDRANT_URL", "Qdrant", "http://127.0.0.1:6333")
const kafka = optionalServer("BERTH_TEST_KAFKA_URL", "Kafka or Redpanda", "kafka://127.0.0.1:9092")

/** `url` with its host's port replaced: the adapter pointed at a closed port or a proxy on 127.0.0.1. */
const withPort = (url: string, port: number): string => {
  const next = new URL(url)
  next.hostname = "127.0.0.1"
  next.port = String(port)
  return next.href
}
const portOf = (url: string, fallback: number): number => Number(new URL(url).port || fallback)

// --- probes: each writes and reads through the resolved URL with the server's own client -------------------------

const withPg = async <A>(url: string, f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  client.on("error", () => undefined)
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end().catch(() => undefined)
  }
}

const postgresProbe: Subject["probe"] = {
  put: (url, key, value) =>
    withPg(url, async (client) => {
      await client.query("CREATE TABLE IF NOT EXISTS probe (k text PRIMARY KEY, v text)")
      await client.query("INSERT INTO probe VALUES ($1, $2)", [key, value])
    }),
  get: (url, key) =>
    withPg(url, async (client) => {
      const found = await client.query<{ t: string | null }>("SELECT to_regclass('public.probe')::text AS t")
      if (found.rows[0]?.t === null) return undefined
      const rows = await client.query<{ v: string }>("SELECT v FROM probe WHERE k = $1", [key])
      return rows.rows[0]?.v
    })
}

const withMysql = async <A>(
  url: string,
  f: (connection: Awaited<ReturnType<typeof createConnection>>) => Promise<A>
): Promise<A> => {
  const connection = await createConnection({ uri: url })
  connection.on("error", () => undefined)
  try {
    return await f(connection)
  } finally {
    await connection.end().catch(() => connection.destroy())
  }
}

const mysqlProbe: Subject["probe"] = {
  put: (url, key, value) =>
    withMysql(url, async (connection) => {
      await connection.query("CREATE TABLE IF NOT EXISTS probe (k VARCHAR(64) PRIMARY KEY, v TEXT)")
      await connection.query("INSERT INTO probe VALUES (?, ?)", [key, value])
    }),
  get: (url, key) =>
    withMysql(url, async (connection) => {
      const [tables] = await connection.query("SHOW TABLES LIKE 'probe'")
      if (!Array.isArray(tables) || tables.length === 0) return undefined
      const [rows] = await connection.query("SELECT v FROM probe WHERE k = ?", [key])
      const row = Array.isArray(rows) ? (rows[0] as { v?: string } | undefined) : undefined
      return row?.v
    })
}

const withRedis = async <A>(url: string, f: (client: Redis) => Promise<A>): Promise<A> => {
  // ioredis reads the DB and keyPrefix from the URL
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  client.on("error", () => undefined)
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.quit().catch(() => client.disconnect())
  }
}

const redisProbe: Subject["probe"] = {
  put: (url, key, value) => withRedis(url, (client) => client.set(key, value).then(() => undefined)),
  get: (url, key) => withRedis(url, (client) => client.get(key).then((value) => value ?? undefined))
}

const withAmqp = async <A>(url: string, f: (channel: amqp.Channel) => Promise<A>): Promise<A> => {
  const connection = await amqp.connect(url)
  connection.on("error", () => undefined)
  try {
    const channel = await connection.createChannel()
    channel.on("error", () => undefined)
    return await f(channel)
  } finally {
    await connection.close().catch(() => undefined)
  }
}

/** A value is a message on a queue named after the key, read back and requeued. */
const rabbitProbe: Subject["probe"] = {
  put: (url, key, value) =>
    withAmqp(url, async (channel) => {
      await channel.assertQueue(key, { durable: true })
      channel.sendToQueue(key, Buffer.from(value))
      await channel.close()
    }),
  get: (url, key) =>
    withAmqp(url, async (channel) => {
      const found = await channel.checkQueue(key).then(
        () => true,
        () => false
      )
      if (!found) return undefined
      for (let i = 0; i < 50; i++) {
        const message = await channel.get(key)
        if (message !== false) {
          channel.nack(message, false, true)
          return message.content.toString()
        }
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      return undefined
    })
}

const rabbitApi = (method: string, path: string, body?: unknown): Promise<Response> => {
  const admin = new URL(rabbitUrl)
  const auth = Buffer.from(`${decodeURIComponent(admin.username)}:${decodeURIComponent(admin.password)}`)
  return fetch(`${rabbitManagement}${path}`, {
    method,
    headers: {
      authorization: `Basic ${auth.toString("base64")}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
}

interface SqliteDatabase {
  readonly prepare: (sql: string) => {
    readonly run: (...params: ReadonlyArray<unknown>) => unknown
    readonly get: (...params: ReadonlyArray<unknown>) => unknown
  }
  readonly exec: (sql: string) => unknown
  readonly close: () => unknown
}
const SqliteDatabase = createRequire(import.meta.url)("better-sqlite3") as new (file: string) => SqliteDatabase
const withSqlite = <A>(url: string, f: (db: SqliteDatabase) => A): Promise<A> => {
  const db = new SqliteDatabase(fileURLToPath(url))
  try {
    return Promise.resolve(f(db))
  } finally {
    db.close()
  }
}

const sqliteProbe: Subject["probe"] = {
  put: (url, key, value) =>
    withSqlite(url, (db) => {
      db.exec("CREATE TABLE IF NOT EXISTS probe (k TEXT PRIMARY KEY, v TEXT)")
      db.prepare("INSERT INTO probe VALUES (?, ?)").run(key, value)
    }),
  get: (url, key) =>
    withSqlite(url, (db) => {
      if (db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'probe'").get() === undefined) return undefined
      const row = db.prepare("SELECT v FROM probe WHERE k = ?").get(key) as { v?: string } | undefined
      return row?.v
    })
}

const dirProbe: Subject["probe"] = {
  put: (path, key, value) => Promise.resolve(writeFileSync(join(path, key), value)),
  get: (path, key) => Promise.resolve(existsSync(join(path, key)) ? readFileSync(join(path, key), "utf8") : undefined)
}

/** A NATS client on a resolved URL: the server without the query, and the prefix the query names. */
const withNats = async <A>(url: string, f: (nc: NatsConnection, prefix: string) => Promise<A>): Promise<A> => {
  const parsed = new URL(url)
  const user = decodeURIComponent(parsed.username)
  const pass = decodeURIComponent(parsed.password)
  const nc = await natsConnect({
    servers: `${parsed.hostname}:${parsed.port || 4222}`,
    ...(user === "" ? {} : pass === "" ? { token: user } : { user, pass })
  })
  try {
    return await f(nc, parsed.searchParams.get("prefix") ?? "")
  } finally {
    await nc.close()
  }
}

/** A value is a key in the slice's KV bucket `<prefix>probe`. */
const natsProbe: Subject["probe"] = {
  put: (url, key, value) =>
    withNats(url, async (nc, prefix) => {
      const kv = await nc.jetstream().views.kv(`${prefix}probe`)
      await kv.put(key, value)
    }),
  get: (url, key) =>
    withNats(url, async (nc, prefix) => {
      const jsm = await nc.jetstreamManager()
      const exists = await jsm.streams.info(`KV_${prefix}probe`).then(
        () => true,
        () => false
      )
      if (!exists) return undefined
      const entry = await (await nc.jetstream().views.kv(`${prefix}probe`, { bindOnly: true })).get(key)
      return entry === null || entry.operation !== "PUT" ? undefined : entry.string()
    })
}

const natsAdmin = <A>(f: (nc: NatsConnection) => Promise<A>): Promise<A> => withNats(natsUrl, (nc) => f(nc))

/** One statement to ClickHouse's HTTP interface at `url` (its `?database=` included), credentials as a header. */
const clickhouse = async (url: string, sql: string): Promise<string> => {
  const target = new URL(url)
  const auth = Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`)
  target.username = ""
  target.password = ""
  const response = await fetch(target, {
    method: "POST",
    body: sql,
    headers: { authorization: `Basic ${auth.toString("base64")}` }
  })
  const text = await response.text()
  if (!response.ok) throw new Error(text)
  return text
}

const clickhouseProbe: Subject["probe"] = {
  put: async (url, key, value) => {
    await clickhouse(url, "CREATE TABLE IF NOT EXISTS probe (k String, v String) ENGINE = Log")
    await clickhouse(url, `INSERT INTO probe VALUES ('${key}', '${value}')`)
  },
  get: async (url, key) => {
    if ((await clickhouse(url, "EXISTS TABLE probe")).trim() !== "1") return undefined
    const found = (await clickhouse(url, `SELECT v FROM probe WHERE k = '${key}'`)).trim()
    return found === "" ? undefined : found
  }
}

// an S3 server of the suite's own (s3rver), started before the table is read
const s3 = await startS3rver()
afterAll(() => s3.close())

/** What an application does with `${files.url}` (`s3://KEY:SECRET@bucket/prefix/?endpoint=…`): a client and a place. */
const s3At = (text: string) => {
  const url = new URL(text)
  const client = new S3Client({
    endpoint: url.searchParams.get("endpoint") ?? "",
    region: url.searchParams.get("region") ?? "us-east-1",
    forcePathStyle: url.searchParams.get("use_path_style") === "true",
    credentials: { accessKeyId: decodeURIComponent(url.username), secretAccessKey: decodeURIComponent(url.password) },
    maxAttempts: 1
  })
  return { client, bucket: url.hostname, prefix: decodeURIComponent(url.pathname.slice(1)) }
}

const s3Probe: Subject["probe"] = {
  put: async (url, key, value) => {
    const { bucket, client, prefix } = s3At(url)
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${key}`, Body: value }))
  },
  get: async (url, key) => {
    const { bucket, client, prefix } = s3At(url)
    return client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}${key}` })).then(
      (output) => output.Body?.transformToString(),
      () => undefined
    )
  }
}

/** The administrator's client, outside the adapter. */
const s3Admin = () =>
  s3At(`s3://S3RVER:S3RVER@x/?endpoint=http://127.0.0.1:${s3.port}&region=us-east-1&use_path_style=true`).client
const bucketOf = (name: string) => name.replaceAll("_", "-")
const S3_SHARED = "conformance-shared"
/** someone's object under a slice's prefix in the shared bucket (only for names that are safe keys) */
const s3Theirs = (slice: Slice) => (/^[a-z][a-z0-9_]*$/.test(slice.name) ? `${slice.name}/theirs` : undefined)
const withMongo = async <A>(url: string, f: (client: MongoClient) => Promise<A>): Promise<A> => {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5000 })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.close()
  }
}

/** A value is a document `{ _id: key, v: value }` in the collection `probe` of the URL's database. */
const mongodbProbe: Subject["probe"] = {
  put: (url, key, value) =>
    withMongo(url, async (client) => {
      await client.db().collection<{ _id: string; v: string }>("probe").insertOne({ _id: key, v: value })
    }),
  get: (url, key) =>
    withMongo(url, async (client) => {
      const found = await client.db().collection<{ _id: string; v: string }>("probe").findOne({ _id: key })
      return found?.v
    })
}

/** A REST call to the cluster at `url` (credentials as a header); the parsed answer, or undefined on a 404. */
const elastic = async (url: string, method: string, path: string, body?: unknown): Promise<unknown> => {
  const target = new URL(url)
  const auth = Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`)
  const response = await fetch(`${target.protocol}//${target.host}/${path}`, {
    method,
    headers: {
      ...(target.username === "" ? {} : { authorization: `Basic ${auth.toString("base64")}` }),
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  if (response.status === 404) return undefined
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return JSON.parse(text) as unknown
}

/** A value is a document `{ v }` with the key as its id in the index `<prefix>probe`. */
const elasticsearchProbe: Subject["probe"] = {
  put: async (url, key, value) => {
    const prefix = new URL(url).searchParams.get("prefix") ?? ""
    await elastic(url, "PUT", `${prefix}probe/_doc/${encodeURIComponent(key)}?refresh=true`, { v: value })
  },
  get: async (url, key) => {
    const prefix = new URL(url).searchParams.get("prefix") ?? ""
    const found = (await elastic(url, "GET", `${prefix}probe/_doc/${encodeURIComponent(key)}`)) as
      | { _source?: { v?: string } }
      | undefined
    return found?._source?.v
  }
}

/** A REST call to Qdrant at `url` (its password the API key); the `result`, or undefined on a 404. */
const qdrantApi = async (url: string, method: string, path: string, body?: unknown): Promise<unknown> => {
  const target = new URL(url)
  const key = decodeURIComponent(target.password)
  const response = await fetch(`${target.protocol}//${target.host}/${path}`, {
    method,
    headers: {
      ...(key === "" ? {} : { "api-key": key }),
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  if (response.status === 404) return undefined
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return (JSON.parse(text) as { result?: unknown }).result
}

/** Qdrant point ids are integers or UUIDs: a key's is the UUID-shaped digest of it. */
const pointId = (key: string): string => {
  const hex = createHash("sha256").update(key).digest("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`
}

/** A value is the payload `{ v }` of a point in the collection `<prefix>probe`. */
const qdrantProbe: Subject["probe"] = {
  put: async (url, key, value) => {
    const collection = `${new URL(url).searchParams.get("prefix") ?? ""}probe`
    if ((await qdrantApi(url, "GET", `collections/${collection}`)) === undefined) {
      await qdrantApi(url, "PUT", `collections/${collection}`, { vectors: { size: 1, distance: "Dot" } })
    }
    await qdrantApi(url, "PUT", `collections/${collection}/points?wait=true`, {
      points: [{ id: pointId(key), vector: [1], payload: { v: value } }]
    })
  },
  get: async (url, key) => {
    const collection = `${new URL(url).searchParams.get("prefix") ?? ""}probe`
    const point = (await qdrantApi(url, "GET", `collections/${collection}/points/${pointId(key)}`)) as
      | { payload?: { v?: string } }
      | undefined
    return point?.payload?.v
  }
}

/** A kafkajs client for the broker a (resolved) kafka:// URL names, without SASL or TLS. */
const kafkaClient = (url: string): Kafka =>
  new Kafka({
    clientId: "berth-conformance",
    brokers: [`${new URL(url).hostname}:${new URL(url).port || 9092}`],
    logLevel: logLevel.NOTHING
  })

const withKafkaAdmin = async <A>(url: string, f: (admin: ReturnType<Kafka["admin"]>) => Promise<A>): Promise<A> => {
  const admin = kafkaClient(url).admin()
  await admin.connect()
  try {
    return await f(admin)
  } finally {
    await admin.disconnect()
  }
}

/** A value is the last message with the key on the topic `<prefix>probe`, read by a group under the prefix. */
const kafkaProbe: Subject["probe"] = {
  put: async (url, key, value) => {
    const topic = `${new URL(url).searchParams.get("prefix") ?? ""}probe`
    await withKafkaAdmin(url, (admin) => admin.createTopics({ topics: [{ topic, numPartitions: 1 }] }))
    const producer = kafkaClient(url).producer()
    await producer.connect()
    try {
      await producer.send({ topic, messages: [{ key, value }] })
    } finally {
      await producer.disconnect()
    }
  },
  get: async (url, key) => {
    const prefix = new URL(url).searchParams.get("prefix") ?? ""
    const topic = `${prefix}probe`
    const offsets = await withKafkaAdmin(url, async (admin) =>
      (await admin.listTopics()).includes(topic) ? admin.fetchTopicOffsets(topic) : undefined
    )
    const end = Number(offsets?.[0]?.high ?? 0)
    if (end === 0) return undefined
    const consumer = kafkaClient(url).consumer({ groupId: `${prefix}probe-${randomBytes(3).toString("hex")}` })
    await consumer.connect()
    try {
      await consumer.subscribe({ topic, fromBeginning: true })
      let found: string | undefined
      await new Promise<void>((done) => {
        // a message that never comes fails the case instead of hanging it
        setTimeout(done, 15_000).unref()
        void consumer.run({
          eachMessage: async ({ message }) => {
            if (message.key?.toString() === key) found = message.value?.toString()
            if (Number(message.offset) + 1 >= end) done()
          }
        })
      })
      return found
    } finally {
      await consumer.disconnect()
    }
  }
}

// --- the table ---------------------------------------------------------------------------------------------------

export const subjects: ReadonlyArray<Subject> = [
  {
    label: "postgres",
    adapterName: "postgres",
    adapter: postgresAdapter,
    adminUrl: postgresUrl,
    maxName: 63,
    probe: postgresProbe,
    unmarked: {
      make: (slice) =>
        withPg(postgresUrl, (client) => client.query(`CREATE DATABASE "${slice.name}"`)).then(() => undefined),
      exists: (slice) =>
        withPg(postgresUrl, (client) =>
          client.query("SELECT 1 FROM pg_database WHERE datname = $1", [slice.name]).then((r) => r.rows.length === 1)
        ),
      remove: (slice) =>
        withPg(postgresUrl, (client) => client.query(`DROP DATABASE IF EXISTS "${slice.name}" WITH (FORCE)`)).then(
          () => undefined
        )
    },
    server: { port: portOf(postgresUrl, 5432), at: (port) => ({ adminUrl: withPort(postgresUrl, port) }) }
  },
  {
    label: "mysql (MariaDB)",
    adapterName: "mariadb",
    adapter: mysqlAdapter,
    adminUrl: mysqlUrl,
    maxName: 64,
    probe: mysqlProbe,
    unmarked: {
      make: (slice) => withMysql(mysqlUrl, (c) => c.query(`CREATE DATABASE \`${slice.name}\``)).then(() => undefined),
      exists: (slice) =>
        withMysql(mysqlUrl, (c) =>
          c
            .query("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", [slice.name])
            .then(([rows]) => Array.isArray(rows) && rows.length === 1)
        ),
      remove: (slice) =>
        withMysql(mysqlUrl, (c) => c.query(`DROP DATABASE IF EXISTS \`${slice.name}\``)).then(() => undefined)
    },
    server: { port: portOf(mysqlUrl, 3306), at: (port) => ({ adminUrl: withPort(mysqlUrl, port) }) }
  },
  {
    label: "redis (db)",
    adapterName: "redis",
    adapter: redisAdapter,
    adminUrl: redisUrl,
    options: { mode: "db" },
    maxName: 200,
    probe: redisProbe,
    // a server has 16 DBs by default, shared with every other test run
    concurrency: 3,
    server: { port: portOf(redisUrl, 6379), at: (port) => ({ adminUrl: withPort(redisUrl, port) }) }
  },
  {
    label: "redis (prefix)",
    adapterName: "valkey",
    adapter: redisAdapter,
    adminUrl: redisUrl,
    options: { mode: "prefix" },
    maxName: 200,
    probe: redisProbe,
    server: { port: portOf(redisUrl, 6379), at: (port) => ({ adminUrl: withPort(redisUrl, port) }) }
  },
  {
    label: "rabbitmq",
    adapterName: "rabbitmq",
    adapter: rabbitmqAdapter,
    adminUrl: rabbitUrl,
    options: { management_url: rabbitManagement },
    maxName: 63,
    probe: rabbitProbe,
    unmarked: {
      make: (slice) =>
        rabbitApi("PUT", `/api/vhosts/${encodeURIComponent(slice.name)}`, {}).then((r) => {
          if (!r.ok) throw new Error(`PUT vhost: ${r.status}`)
        }),
      exists: (slice) => rabbitApi("GET", `/api/vhosts/${encodeURIComponent(slice.name)}`).then((r) => r.ok),
      remove: (slice) => rabbitApi("DELETE", `/api/vhosts/${encodeURIComponent(slice.name)}`).then(() => undefined)
    },
    server: {
      port: portOf(rabbitManagement, 15672),
      at: (port) => ({ adminUrl: rabbitUrl, options: { management_url: withPort(rabbitManagement, port) } }),
      cutAt: 1
    }
  },
  {
    label: "nats",
    adapterName: "nats",
    adapter: natsAdapter,
    adminUrl: natsUrl,
    options: { copy_messages: true },
    maxName: 64,
    probe: natsProbe,
    unmarked: {
      make: (slice) =>
        natsAdmin(async (nc) => {
          const jsm = await nc.jetstreamManager()
          await jsm.streams.add({ name: `${slice.name}-theirs`, subjects: [`${slice.name}-theirs.>`] })
        }),
      exists: (slice) =>
        natsAdmin(async (nc) =>
          (await nc.jetstreamManager()).streams.info(`${slice.name}-theirs`).then(
            () => true,
            () => false
          )
        ),
      remove: (slice) =>
        natsAdmin(async (nc) => {
          await (await nc.jetstreamManager()).streams.delete(`${slice.name}-theirs`).catch(() => false)
        })
    },
    server: { port: portOf(natsUrl, 4222), at: (port) => ({ adminUrl: withPort(natsUrl, port) }) }
  },
  {
    label: "clickhouse",
    adapterName: "clickhouse",
    adapter: clickhouseAdapter,
    adminUrl: clickhouseUrl,
    maxName: 64,
    probe: clickhouseProbe,
    unmarked: {
      make: (slice) => clickhouse(clickhouseUrl, `CREATE DATABASE \`${slice.name}\``).then(() => undefined),
      exists: (slice) =>
        clickhouse(clickhouseUrl, `SELECT count() FROM system.databases WHERE name = '${slice.name}'`).then(
          (count) => count.trim() === "1"
        ),
      remove: (slice) => clickhouse(clickhouseUrl, `DROP DATABASE IF EXISTS \`${slice.name}\``).then(() => undefined)
    },
    server: { port: portOf(clickhouseUrl, 8123), at: (port) => ({ adminUrl: withPort(clickhouseUrl, port) }), cutAt: 1 }
  },
  {
    label: "s3 (bucket)",
    adapterName: "s3",
    adapter: s3Adapter,
    adminUrl: s3.adminUrl,
    maxName: 63,
    probe: s3Probe,
    // a bucket holding someone's object under a slice's name (an empty unmarked bucket is what a crash leaves)
    unmarked: {
      make: async (slice) => {
        await s3Admin().send(new CreateBucketCommand({ Bucket: bucketOf(slice.name) }))
        await s3Admin().send(new PutObjectCommand({ Bucket: bucketOf(slice.name), Key: "theirs", Body: "x" }))
      },
      exists: (slice) =>
        s3Admin()
          .send(new HeadObjectCommand({ Bucket: bucketOf(slice.name), Key: "theirs" }))
          .then(
            () => true,
            () => false
          ),
      remove: async (slice) => {
        await s3Admin()
          .send(new DeleteObjectCommand({ Bucket: bucketOf(slice.name), Key: "theirs" }))
          .catch(() => undefined)
        await s3Admin()
          .send(new DeleteBucketCommand({ Bucket: bucketOf(slice.name) }))
          .catch(() => undefined)
      }
    },
    server: { port: s3.port, at: (port) => ({ adminUrl: withPort(s3.adminUrl, port) }), cutAt: 1 }
  },
  {
    label: "s3 (prefix)",
    adapterName: "minio",
    adapter: s3Adapter,
    adminUrl: s3.adminUrl,
    options: { mode: "prefix", bucket: S3_SHARED },
    maxName: 63,
    probe: s3Probe,
    // an object under a slice's prefix that berth did not put there
    unmarked: {
      make: async (slice) => {
        const key = s3Theirs(slice)
        if (key === undefined) throw new Error(`not a key: ${slice.name}`)
        await s3Admin()
          .send(new CreateBucketCommand({ Bucket: S3_SHARED }))
          .catch(() => undefined)
        await s3Admin().send(new PutObjectCommand({ Bucket: S3_SHARED, Key: key, Body: "x" }))
      },
      exists: (slice) =>
        s3Admin()
          .send(new HeadObjectCommand({ Bucket: S3_SHARED, Key: s3Theirs(slice) }))
          .then(
            () => true,
            () => false
          ),
      remove: async (slice) => {
        const key = s3Theirs(slice)
        if (key !== undefined) await s3Admin().send(new DeleteObjectCommand({ Bucket: S3_SHARED, Key: key }))
      }
    },
    server: {
      port: s3.port,
      at: (port) => ({
        adminUrl: withPort(s3.adminUrl, port),
        options: { mode: "prefix", bucket: S3_SHARED }
      }),
      cutAt: 1
    }
  },
  {
    label: "mongodb",
    adapterName: "mongodb",
    adapter: mongodbAdapter,
    adminUrl: mongodb.url,
    maxName: 63,
    probe: mongodbProbe,
    unmarked: {
      make: (slice) =>
        withMongo(mongodb.url, (client) => client.db(slice.name).collection("theirs").insertOne({ x: 1 })).then(
          () => undefined
        ),
      exists: (slice) =>
        withMongo(mongodb.url, async (client) => (await client.db(slice.name).listCollections().toArray()).length > 0),
      remove: (slice) => withMongo(mongodb.url, (client) => client.db(slice.name).dropDatabase()).then(() => undefined)
    },
    server: { port: portOf(mongodb.url, 27017), at: (port) => ({ adminUrl: withPort(mongodb.url, port) }) },
    skip: mongodb.skip
  },
  {
    label: "elasticsearch",
    adapterName: "elasticsearch",
    adapter: elasticsearchAdapter,
    adminUrl: elasticsearch.url,
    maxName: 100,
    probe: elasticsearchProbe,
    unmarked: {
      make: (slice) => elastic(elasticsearch.url, "PUT", `${slice.name}-theirs`).then(() => undefined),
      exists: (slice) => elastic(elasticsearch.url, "GET", `${slice.name}-theirs`).then((found) => found !== undefined),
      remove: (slice) => elastic(elasticsearch.url, "DELETE", `${slice.name}-theirs`).then(() => undefined)
    },
    server: {
      port: portOf(elasticsearch.url, 9200),
      at: (port) => ({ adminUrl: withPort(elasticsearch.url, port) }),
      cutAt: 1
    },
    skip: elasticsearch.skip
  },
  {
    label: "qdrant",
    adapterName: "qdrant",
    adapter: qdrantAdapter,
    adminUrl: qdrant.url,
    maxName: 100,
    probe: qdrantProbe,
    unmarked: {
      make: (slice) =>
        qdrantApi(qdrant.url, "PUT", `collections/${slice.name}-theirs`, {
          vectors: { size: 1, distance: "Dot" }
        }).then(() => undefined),
      exists: (slice) =>
        qdrantApi(qdrant.url, "GET", `collections/${slice.name}-theirs`).then((found) => found !== undefined),
      remove: (slice) => qdrantApi(qdrant.url, "DELETE", `collections/${slice.name}-theirs`).then(() => undefined)
    },
    server: { port: portOf(qdrant.url, 6333), at: (port) => ({ adminUrl: withPort(qdrant.url, port) }), cutAt: 1 },
    skip: qdrant.skip
  },
  {
    label: "kafka",
    adapterName: "kafka",
    adapter: kafkaAdapter,
    adminUrl: kafka.url,
    maxName: 100,
    probe: kafkaProbe,
    unmarked: {
      make: (slice) =>
        withKafkaAdmin(kafka.url, (admin) => admin.createTopics({ topics: [{ topic: `${slice.name}-theirs` }] })).then(
          () => undefined
        ),
      exists: (slice) =>
        withKafkaAdmin(kafka.url, async (admin) => (await admin.listTopics()).includes(`${slice.name}-theirs`)),
      remove: (slice) =>
        withKafkaAdmin(kafka.url, (admin) => admin.deleteTopics({ topics: [`${slice.name}-theirs`] })).catch(
          () => undefined
        )
    },
    server: { port: portOf(kafka.url, 9092), at: (port) => ({ adminUrl: withPort(kafka.url, port) }) },
    skip: kafka.skip
  },
  {
    label: "sqlite",
    adapterName: "sqlite",
    adapter: sqliteAdapter,
    adminUrl: undefined,
    maxName: MAX_STORAGE_NAME,
    probe: sqliteProbe,
    unmarked: {
      make: (slice) => {
        mkdirSync(slice.storage, { recursive: true })
        return withSqlite(pathToFileURL(join(slice.storage, `${slice.name}.sqlite`)).href, (db) => {
          db.exec("CREATE TABLE theirs (x)")
        })
      },
      exists: (slice) => Promise.resolve(existsSync(join(slice.storage, `${slice.name}.sqlite`))),
      remove: (slice) => Promise.resolve(rmSync(join(slice.storage, `${slice.name}.sqlite`), { force: true }))
    }
  },
  {
    label: "dir",
    adapterName: "dir",
    adapter: dirAdapter,
    adminUrl: undefined,
    maxName: MAX_STORAGE_NAME,
    probe: dirProbe,
    unmarked: {
      make: (slice) => {
        mkdirSync(join(slice.storage, slice.name), { recursive: true })
        return Promise.resolve(writeFileSync(join(slice.storage, slice.name, "theirs"), "x"))
      },
      exists: (slice) => Promise.resolve(existsSync(join(slice.storage, slice.name, "theirs"))),
      remove: (slice) => Promise.resolve(rmSync(join(slice.storage, slice.name), { recursive: true, force: true }))
    }
  }
]

for (const subject of subjects) conformance(subject)
