/**
 * The shop example end to end: two worlds with postgres + redis + rabbitmq slices on this machine's shared servers,
 * an app that writes to all three, and proof — through the app and straight from the servers — that a world writes
 * only to its own slices while another runs beside it, and that `remove` leaves nothing of either behind.
 */
import { randomBytes } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import amqp from "amqplib"
import * as Effect from "effect/Effect"
import { Redis } from "ioredis"
import pg from "pg"
import type { Adapter, Slice } from "../../adapters/contract.js"
import { postgresAdapter } from "../../adapters/postgres/index.js"
import { rabbitmqAdapter } from "../../adapters/rabbitmq/index.js"
import { redisAdapter } from "../../adapters/redis/index.js"
import { ownerOf } from "../../src/services/slices/Slices.js"
import { type Sandbox, sandboxes, varsFrom, worldFrom } from "./harness.js"

const repo = resolve(import.meta.dirname, "../..")
const example = join(repo, "examples/shop")

/** The stock local servers (see .ci/run); the example's own `.env` says the same, the environment wins. */
const POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
const REDIS = "redis://127.0.0.1:6379"
const RABBITMQ = "amqp://guest:guest@127.0.0.1:5672"
const MANAGEMENT = "http://127.0.0.1:15672"
const GUEST = `Basic ${Buffer.from("guest:guest").toString("base64")}`

/** A project name of its own per run, so that parallel runs never share a slice name on the servers. */
const suffix = randomBytes(4).toString("hex")
const project = `shop-e2e-${suffix}`
/** how berth spells the project in slice names (`<project>_<world>_<service>`) */
const ident = `shop_e2e_${suffix}`
const worlds = ["one", "two"] as const

const env = {
  // app.cjs and db.cjs are CommonJS: NODE_PATH lends them berth's own pg, ioredis and amqplib
  NODE_PATH: join(repo, "node_modules"),
  SHOP_POSTGRES_URL: POSTGRES,
  SHOP_REDIS_URL: REDIS,
  SHOP_RABBITMQ_URL: RABBITMQ
}

/** Every file of the example (demo.sh and README.md included: harmless), with the project renamed. */
const exampleFiles = (): Record<string, string> => {
  const files: Record<string, string> = {}
  for (const entry of readdirSync(example, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    files[relative(example, path)] = readFileSync(path, "utf8")
  }
  const toml = files["berth.toml"]!
  files["berth.toml"] = toml.replace(/^name = "shop"$/m, `name = "${project}"`)
  if (files["berth.toml"] === toml) throw new Error('examples/shop/berth.toml no longer has `name = "shop"`')
  return files
}

const boxes = sandboxes()
let box: Sandbox | undefined
let owner: string | undefined

/** Drops whatever this run's berth installation still owns on the three servers, through the adapters themselves. */
const sweep = async (mark: string) => {
  const servers: ReadonlyArray<readonly [string, Adapter, string, Record<string, unknown>]> = [
    ["postgres", postgresAdapter, POSTGRES, {}],
    ["redis", redisAdapter, REDIS, { mode: "db" }],
    ["rabbitmq", rabbitmqAdapter, RABBITMQ, {}]
  ]
  for (const [adapter, implementation, adminUrl, options] of servers) {
    const scope = { owner: mark, adminUrl, options, storage: "" }
    const names = await Effect.runPromise(Effect.orElseSucceed(implementation.list(scope), () => []))
    for (const name of names) {
      const slice: Slice = { ...scope, adapter, project, world: "", service: "", name }
      await Effect.runPromise(Effect.ignore(implementation.teardown(slice)))
    }
  }
}

afterAll(async () => {
  // even after a failure: remove the worlds through berth, stop everything, then drop what is left (the golden)
  if (box !== undefined) {
    for (const world of worlds) await box.run(["remove", world, "--force"], { env, timeoutMs: 30_000 }).catch(() => {})
  }
  boxes.cleanup()
  if (owner !== undefined) await sweep(owner)
}, 90_000)

const berth = async (args: ReadonlyArray<string>) => {
  const r = await box!.run(args, { env, timeoutMs: 60_000 })
  expect(r.code, `berth ${args.join(" ")}: ${r.stderr}`).toBe(0)
  return r.stdout
}

interface Order {
  readonly id: number
  readonly item: string
}

interface State {
  readonly world: string
  readonly database: string
  readonly redisDb: number
  readonly vhost: string
  readonly orders: ReadonlyArray<Order>
  readonly counter: number
  readonly queued: number
}

const withPg = async <A>(url: string, f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

const itemsIn = (url: string) =>
  withPg(url, async (c) =>
    (await c.query<{ item: string }>("SELECT item FROM orders ORDER BY id")).rows.map((r) => r.item)
  )

const databasesLike = (prefix: string) =>
  withPg(POSTGRES, async (c) =>
    (
      await c.query<{ datname: string }>(
        "SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY datname",
        [prefix]
      )
    ).rows.map((r) => r.datname)
  )

/** Messages waiting in `orders` of a vhost, asked of the broker directly. */
const queued = async (vhost: string) => {
  const connection = await amqp.connect(`${RABBITMQ}/${encodeURIComponent(vhost)}`)
  try {
    const channel = await connection.createChannel()
    return (await channel.checkQueue("orders")).messageCount
  } finally {
    await connection.close()
  }
}

const vhostsLike = async (prefix: string) => {
  const res = await fetch(`${MANAGEMENT}/api/vhosts?columns=name`, { headers: { authorization: GUEST } })
  expect(res.status).toBe(200)
  return ((await res.json()) as ReadonlyArray<{ name: string }>).map((v) => v.name).filter((n) => n.startsWith(prefix))
}

const withRedis = async <A>(url: string, f: (client: Redis) => Promise<A>): Promise<A> => {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await client.connect()
  try {
    return await f(client)
  } finally {
    client.disconnect()
  }
}

describe("the shop example", () => {
  it("writes only to its own world's database, Redis DB and vhost while a second world runs beside it", async () => {
    box = await boxes.project(exampleFiles())
    owner = ownerOf(box.home)

    // two worlds side by side: the first builds the golden database, the second is a copy of it too
    for (const world of worlds) {
      const up = worldFrom(await berth(["up", world, "--json"]))
      expect(up.services.find((s) => s.name === "app")?.state).toBe("healthy")
    }
    const coords = Object.fromEntries(
      await Promise.all(worlds.map(async (w) => [w, varsFrom(await berth(["env", w, "--json"]))] as const))
    ) as Record<(typeof worlds)[number], Record<string, string>>
    const { one, two } = coords
    expect(one.DB_URL).toBe(`postgres://postgres@127.0.0.1:5432/${ident}_one_db`)
    expect(two.DB_URL).toBe(`postgres://postgres@127.0.0.1:5432/${ident}_two_db`)
    expect(one.CACHE_URL).toMatch(/^redis:\/\/127\.0\.0\.1:6379\/\d+$/)
    expect(two.CACHE_URL).toMatch(/^redis:\/\/127\.0\.0\.1:6379\/\d+$/)
    expect(one.CACHE_URL).not.toBe(two.CACHE_URL)
    expect(one.MQ_URL).toMatch(new RegExp(`^amqp://guest:[^@]+@127\\.0\\.0\\.1:5672/${ident}_one_mq$`))
    expect(two.MQ_URL).toMatch(new RegExp(`^amqp://guest:[^@]+@127\\.0\\.0\\.1:5672/${ident}_two_mq$`))
    const app = (world: "one" | "two") => `http://127.0.0.1:${coords[world].APP_PORT}`

    // orders go to world one only
    for (const [i, item] of ["teapot", "kettle", "cups"].entries()) {
      const res = await fetch(`${app("one")}/orders`, { method: "POST", body: JSON.stringify({ item }) })
      expect(res.status).toBe(201)
      expect(await res.json()).toMatchObject({ world: "one", order: { item }, counter: i + 1 })
    }

    // each app reports its own world's slices: one saw the orders, two still has only the seed
    const stateOf = async (world: "one" | "two") => (await (await fetch(`${app(world)}/state`)).json()) as State
    const [s1, s2] = [await stateOf("one"), await stateOf("two")]
    expect(s1).toMatchObject({ world: "one", database: `${ident}_one_db`, vhost: `${ident}_one_mq` })
    expect(s2).toMatchObject({ world: "two", database: `${ident}_two_db`, vhost: `${ident}_two_mq` })
    expect(s1.redisDb).toBe(Number(one.CACHE_URL!.split("/").pop()))
    expect(s2.redisDb).toBe(Number(two.CACHE_URL!.split("/").pop()))
    expect(s1.orders.map((o) => o.item)).toEqual(["welcome kit", "teapot", "kettle", "cups"])
    expect(s2.orders.map((o) => o.item)).toEqual(["welcome kit"])
    expect([s1.counter, s1.queued]).toEqual([3, 3])
    expect([s2.counter, s2.queued]).toEqual([0, 0])

    // and the servers agree, asked directly
    expect(await itemsIn(one.DB_URL!)).toEqual(["welcome kit", "teapot", "kettle", "cups"])
    expect(await itemsIn(two.DB_URL!)).toEqual(["welcome kit"])
    const goldens = await databasesLike(`golden_${ident}_db_`)
    expect(goldens).toHaveLength(1)
    expect(await itemsIn(`postgres://postgres@127.0.0.1:5432/${goldens[0]}`)).toEqual(["welcome kit"])
    expect(await withRedis(one.CACHE_URL!, (r) => r.get("orders:count"))).toBe("3")
    expect(await withRedis(two.CACHE_URL!, (r) => r.get("orders:count"))).toBeNull()
    expect(await queued(s1.vhost)).toBe(3)
    expect(await queued(s2.vhost)).toBe(0)

    // remove drops both worlds' slices from the servers
    for (const world of worlds) await berth(["remove", world, "--force"])
    expect(await databasesLike(`${ident}_`)).toEqual([])
    expect(await vhostsLike(`${ident}_`)).toEqual([])
    const allocations = await withRedis(REDIS, (r) => r.hkeys("berth:slices"))
    expect(allocations.filter((field) => field.startsWith(`${owner}:`))).toEqual([])
    for (const [url, name] of [
      [one.CACHE_URL!, `${ident}_one_cache`],
      [two.CACHE_URL!, `${ident}_two_cache`]
    ] as const) {
      // the DB may already serve someone else's slice: it only must no longer be marked as ours
      expect(await withRedis(url, (r) => r.get("berth:slice"))).not.toBe(`${owner}:${name}`)
    }
    // the golden stays for the next world (afterAll drops it)
    expect(await databasesLike(`golden_${ident}_db_`)).toEqual(goldens)
  }, 60_000)
})
