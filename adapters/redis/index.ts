/**
 * The `redis` adapter (also used for `valkey`): each world gets a private slice of one shared Redis server, reached
 * through the service's `admin_url` (default `redis://127.0.0.1:6379`). Two modes, chosen by the `mode` option:
 *
 * - `"db"` (default): the slice is a numbered logical DB. Numbers are allocated in DB 0 under the hash `berth:slices`
 *   (field = `<owner>:<slice name>`, value = DB number) by Lua scripts, so allocation is atomic across every project
 *   and every berth installation on the server; the allocated DB carries the marker key `berth:slice` = the same
 *   `<owner>:<name>`, checked before anything is flushed.
 * - `"prefix"`: the slice is the key prefix `<name>:` in the admin URL's DB; owned slices are the members
 *   `<owner>:<name>` of the set `berth:prefixes` in that DB.
 *
 * Every verb opens one short-lived connection, which never retries and is always closed.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { describeCause, errorCode, NETWORK_CODES, parseAdminUrl, secretsOf } from "../shared.js"

const ADAPTER = "redis"
const DEFAULT_URL = "redis://127.0.0.1:6379"
const CONNECT_TIMEOUT_MS = 3_000
/** a server that accepts the TCP connection but never answers must not hang a verb either */
const READY_TIMEOUT_MS = 5_000
/** when `CONFIG GET databases` is refused (managed servers often rename CONFIG) */
const DEFAULT_DATABASES = 16
const SCAN_COUNT = 500
/** the allocation hash, in DB 0 */
const SLICES_KEY = "berth:slices"
/** owners are `[a-z0-9_]`, so `<owner>:<name>` splits unambiguously */
const SAFE_OWNER = /^[a-z0-9_]+$/
const tagged = (owner: string, name: string): string => `${owner}:${name}`
const ownedBy = (owner: string, members: ReadonlyArray<string>): ReadonlyArray<string> =>
  members
    .filter((member) => member.startsWith(`${owner}:`))
    .map((member) => member.slice(owner.length + 1))
    .sort()
/** the ownership marker inside each allocated DB */
const MARKER_KEY = "berth:slice"
/** the set of owned prefixes, in the admin URL's DB */
const PREFIXES_KEY = "berth:prefixes"
/** no `:` (it ends the prefix) and no glob characters (the prefix is used in SCAN MATCH) */
const SAFE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/
const MAX_NAME = 200

type Mode = "db" | "prefix"

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** A driver or server error, kept raw until the verb classifies it. */
class RedisFailure extends Data.TaggedError("RedisFailure")<{
  readonly phase: "connect" | "command"
  readonly cause: unknown
}> {}

/** Where the admin URL points, with what must never be printed. */
interface Server {
  /** the admin URL without its DB path, query or fragment */
  readonly connectUrl: string
  /** the admin URL as given (or the default), for `resolve` */
  readonly url: URL
  /** the admin URL's own DB (0 when it names none) */
  readonly db: number
  /** `host:port`, for messages */
  readonly location: string
  /** the raw and decoded password, scrubbed from every message */
  readonly secrets: ReadonlyArray<string>
}

const checkName = (name: string): Effect.Effect<string, AdapterError> =>
  SAFE_NAME.test(name) && name.length <= MAX_NAME
    ? Effect.succeed(name)
    : Effect.fail(
        fail(
          "invalid",
          `refusing slice name ${JSON.stringify(name)}: it must match ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ and be at most ${MAX_NAME} characters`
        )
      )

const modeOf = (options: Readonly<Record<string, unknown>>): Effect.Effect<Mode, AdapterError> => {
  const mode = options.mode
  if (mode === undefined || mode === "db") return Effect.succeed("db")
  if (mode === "prefix") return Effect.succeed("prefix")
  return Effect.fail(fail("invalid", `mode must be "db" or "prefix", not ${JSON.stringify(mode)}`))
}

/** Parses `admin_url` without ever echoing it: it may carry a password. */
const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.flatMap(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["redis:", "rediss:"],
      kind: "a redis:// or rediss:// URL",
      example: "redis://[:password@]host:port[/db]",
      variable: "REDIS_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    serverAt
  )

const serverAt = (url: URL): Effect.Effect<Server, AdapterError> => {
  const path = url.pathname.replace(/^\//, "")
  const db = path === "" ? 0 : Number(path)
  if (!Number.isInteger(db) || db < 0) {
    return Effect.fail(fail("invalid", "admin_url's path must be a DB number (redis://host:port/<db>)"))
  }
  const connect = new URL(url.href)
  connect.pathname = ""
  connect.search = ""
  connect.hash = ""
  const secrets = secretsOf(url)
  return Effect.succeed({
    connectUrl: connect.href,
    url,
    db,
    location: `${url.hostname || "127.0.0.1"}:${url.port || "6379"}`,
    secrets
  })
}

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** Turns a driver or server error into the adapter's vocabulary, naming the slice and server but no password. */
const classify = (server: Server, action: string, name: string, failure: RedisFailure): AdapterError => {
  const code = errorCode(failure.cause)
  const text = describeCause(failure.cause) || code || "unknown error"
  const detail = scrub(server, text)
  if (/^(NOAUTH|WRONGPASS)\b/.test(text)) {
    return fail(
      "authentication",
      `Redis at ${server.location} refused the admin_url credentials; could not ${action} slice "${name}": ${detail}`
    )
  }
  if (
    failure.phase === "connect" ||
    (code !== undefined && NETWORK_CODES.has(code)) ||
    text === "Connection is closed."
  ) {
    return fail("unreachable", `cannot reach Redis at ${server.location} to ${action} slice "${name}": ${detail}`)
  }
  return fail("failed", `could not ${action} slice "${name}" on Redis at ${server.location}: ${detail}`)
}

/** One connection on `db` for the length of the scope; closed even when connecting fails half way. */
const connect = (server: Server, db: number): Effect.Effect<Redis, RedisFailure, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new Redis(server.connectUrl, {
          db,
          lazyConnect: true,
          connectTimeout: CONNECT_TIMEOUT_MS,
          maxRetriesPerRequest: 1,
          retryStrategy: () => null,
          enableOfflineQueue: false
        })
        // errors are also reported as events; unhandled, they would crash the daemon
        client.on("error", () => undefined)
        let timer: NodeJS.Timeout | undefined
        try {
          await Promise.race([
            client.connect(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(
                () => reject(new Error(`no answer within ${READY_TIMEOUT_MS / 1000} s`)),
                READY_TIMEOUT_MS
              )
            })
          ])
        } catch (cause) {
          client.disconnect()
          throw cause
        } finally {
          clearTimeout(timer)
        }
        return client
      },
      catch: (cause) => new RedisFailure({ phase: "connect", cause })
    }),
    (client) =>
      Effect.promise(() =>
        client.quit().then(
          () => undefined,
          () => client.disconnect()
        )
      )
  )

const run = <A>(f: () => Promise<A>): Effect.Effect<A, RedisFailure> =>
  Effect.tryPromise({ try: f, catch: (cause) => new RedisFailure({ phase: "command", cause }) })

/** Runs a verb on one connection to `db`; raw failures become AdapterErrors naming the slice. */
const withServer = <A>(
  server: Server,
  db: number,
  action: string,
  name: string,
  body: (client: Redis) => Effect.Effect<A, RedisFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.scoped(Effect.flatMap(connect(server, db), body)).pipe(
    Effect.catchTag("RedisFailure", (failure) => Effect.fail(classify(server, action, name, failure)))
  )

const isReplyError = (cause: unknown): boolean => cause instanceof Error && cause.name === "ReplyError"

/** Keys matching a glob, a SCAN batch at a time (never KEYS). */
const scanEach = (
  client: Redis,
  match: string | undefined,
  batch: (keys: ReadonlyArray<string>) => Effect.Effect<void, RedisFailure | AdapterError>
): Effect.Effect<void, RedisFailure | AdapterError> =>
  Effect.gen(function* () {
    let cursor = "0"
    do {
      const [next, keys] = yield* run(() =>
        match === undefined
          ? client.scan(cursor, "COUNT", SCAN_COUNT)
          : client.scan(cursor, "MATCH", match, "COUNT", SCAN_COUNT)
      )
      cursor = next
      if (keys.length > 0) yield* batch(keys)
    } while (cursor !== "0")
  })

// ---------------------------------------------------------------------------------------------------------------
// mode "db"

/**
 * Returns `{status, db}`: 1 = allocated now, 0 = already allocated, -1 = no DB free, -2 = the allocated DB is marked
 * as another slice's. A DB is free when no slice holds it and it is empty (or marked as this very slice, left over
 * from an interrupted teardown), so data berth did not put there is never handed out.
 */
const ALLOCATE = `
local name = ARGV[1]
local databases = tonumber(ARGV[2])
redis.call('SELECT', 0)
local existing = redis.call('HGET', KEYS[1], name)
if existing then
  local db = tonumber(existing)
  redis.call('SELECT', db)
  local mark = redis.call('GET', KEYS[2])
  local status = 0
  if not mark then
    redis.call('SET', KEYS[2], name)
  elseif mark ~= name then
    status = -2
  end
  redis.call('SELECT', 0)
  return {status, db}
end
local used = {}
for _, value in ipairs(redis.call('HVALS', KEYS[1])) do
  local number = tonumber(value)
  if number then used[number] = true end
end
for db = 1, databases - 1 do
  if not used[db] then
    redis.call('SELECT', db)
    local mark = redis.call('GET', KEYS[2])
    if mark == name or (not mark and redis.call('DBSIZE') == 0) then
      redis.call('SET', KEYS[2], name)
      redis.call('SELECT', 0)
      redis.call('HSET', KEYS[1], name, db)
      return {1, db}
    end
  end
end
redis.call('SELECT', 0)
return {-1, 0}
`

/**
 * Returns `{status, db}`: 1 = flushed and freed, 0 = not allocated, -1 = the DB is not marked as this slice's. An
 * unmarked empty DB (the app ran FLUSHDB) is freed too.
 */
const RELEASE = `
local name = ARGV[1]
redis.call('SELECT', 0)
local existing = redis.call('HGET', KEYS[1], name)
if not existing then return {0, 0} end
local db = tonumber(existing)
redis.call('SELECT', db)
local mark = redis.call('GET', KEYS[2])
if mark == name or (not mark and redis.call('DBSIZE') == 0) then
  redis.call('FLUSHDB')
  redis.call('SELECT', 0)
  redis.call('HDEL', KEYS[1], name)
  return {1, db}
end
redis.call('SELECT', 0)
return {-1, db}
`

/** Returns `{status, db}`: 1 = ours, 0 = not allocated, -1 = marked as someone else's, -2 = unmarked. */
const LOOKUP = `
local name = ARGV[1]
redis.call('SELECT', 0)
local existing = redis.call('HGET', KEYS[1], name)
if not existing then return {0, 0} end
local db = tonumber(existing)
redis.call('SELECT', db)
local mark = redis.call('GET', KEYS[2])
redis.call('SELECT', 0)
if mark == name then return {1, db} end
if mark then return {-1, db} end
return {-2, db}
`

const evalPair = (client: Redis, script: string, args: ReadonlyArray<string | number>) =>
  Effect.map(
    run(() => client.eval(script, 2, SLICES_KEY, MARKER_KEY, ...args)),
    (reply): readonly [number, number] => {
      const pair = Array.isArray(reply) ? reply : []
      return [Number(pair[0]), Number(pair[1])]
    }
  )

const databasesOf = (client: Redis): Effect.Effect<number, RedisFailure> =>
  run(() => client.config("GET", "databases")).pipe(
    Effect.map((reply) => {
      const value = Array.isArray(reply) ? Number(reply[1]) : Number.NaN
      return Number.isInteger(value) && value > 0 ? value : DEFAULT_DATABASES
    }),
    Effect.catchIf(
      (failure) => isReplyError(failure.cause),
      () => Effect.succeed(DEFAULT_DATABASES)
    )
  )

const allocate = (
  client: Redis,
  server: Server,
  name: string
): Effect.Effect<readonly [boolean, number], RedisFailure | AdapterError> =>
  Effect.gen(function* () {
    const databases = yield* databasesOf(client)
    const [status, db] = yield* evalPair(client, ALLOCATE, [name, databases])
    if (status === -1) {
      return yield* Effect.fail(
        fail(
          "failed",
          `the logical DBs of Redis at ${server.location} are all used (${databases - 1} besides DB 0); cannot provision slice "${name}": set mode = "prefix" for this service, or raise the server's \`databases\` setting`
        )
      )
    }
    if (status === -2) {
      return yield* Effect.fail(
        fail(
          "taken",
          `DB ${db} on Redis at ${server.location}, allocated to slice "${name}", is marked as another slice's; leaving it alone`
        )
      )
    }
    return [status === 1, db] as const
  })

const provisionDb = (server: Server, name: string): Effect.Effect<boolean, AdapterError> =>
  withServer(server, 0, "provision", name, (client) =>
    Effect.map(allocate(client, server, name), ([created]) => created)
  )

const lookupDb = (client: Redis, server: Server, name: string, action: string) =>
  Effect.gen(function* () {
    const [status, db] = yield* evalPair(client, LOOKUP, [name])
    if (status === 0) {
      return yield* Effect.fail(
        fail(
          "failed",
          `cannot ${action}: slice "${name}" has no DB on Redis at ${server.location} (provision it first)`
        )
      )
    }
    if (status !== 1) {
      return yield* Effect.fail(
        fail("not-owned", `cannot ${action}: DB ${db} on Redis at ${server.location} is not marked as slice "${name}"`)
      )
    }
    return db
  })

const resolveDb = (server: Server, name: string): Effect.Effect<string, AdapterError> =>
  withServer(server, 0, "resolve", name, (client) =>
    Effect.map(lookupDb(client, server, name, "resolve"), (db) => {
      const url = new URL(server.url.href)
      url.pathname = `/${db}`
      return url.href
    })
  )

const teardownDb = (server: Server, name: string): Effect.Effect<void, AdapterError> =>
  withServer(server, 0, "tear down", name, (client) =>
    Effect.gen(function* () {
      const [status, db] = yield* evalPair(client, RELEASE, [name])
      if (status === -1) {
        return yield* Effect.fail(
          fail(
            "not-owned",
            `DB ${db} on Redis at ${server.location}, allocated to slice "${name}", holds keys but is not marked as that slice; leaving it alone`
          )
        )
      }
    })
  )

/** Copies one batch of keys to another DB: COPY (Redis 6.2+), else DUMP/RESTORE keeping TTLs. */
const copyKeys = (
  client: Redis,
  keys: ReadonlyArray<string>,
  source: number,
  target: number
): Effect.Effect<void, RedisFailure> =>
  Effect.gen(function* () {
    const wanted = keys.filter((key) => key !== MARKER_KEY)
    if (wanted.length === 0) return
    const copied = yield* run(async () => {
      const pipeline = client.pipeline()
      for (const key of wanted) pipeline.call("COPY", key, key, "DB", target, "REPLACE")
      const results = (await pipeline.exec()) ?? []
      const unknown = results.some(([error]) => error !== null && /unknown command/i.test(error.message))
      if (unknown) return false
      const failed = results.find(([error]) => error !== null)
      if (failed?.[0]) throw failed[0]
      return true
    })
    if (copied) return
    yield* dumpRestore(client, wanted, (key) => key, { from: source, to: target })
  })

/**
 * DUMP and PTTL each key, then RESTORE it (REPLACE) under `rename(key)`: in the current DB, or in `move.to` (then
 * switching back to `move.from`, the current DB).
 */
const dumpRestore = (
  client: Redis,
  keys: ReadonlyArray<string>,
  rename: (key: string) => string,
  move: { readonly from: number; readonly to: number } | undefined
): Effect.Effect<void, RedisFailure> =>
  run(async () => {
    const read = client.pipeline()
    for (const key of keys) read.dumpBuffer(key).pttl(key)
    const results = (await read.exec()) ?? []
    const write = client.multi()
    let writes = 0
    if (move !== undefined) write.select(move.to)
    keys.forEach((key, index) => {
      const dump = results[index * 2]
      const ttl = results[index * 2 + 1]
      if (dump?.[0]) throw dump[0]
      if (ttl?.[0]) throw ttl[0]
      const payload = dump?.[1]
      // the key expired or vanished between SCAN and DUMP
      if (!Buffer.isBuffer(payload)) return
      // PTTL is -1 for a key without expiry; RESTORE takes 0 for that
      const pttl = Math.max(Number(ttl?.[1]) || 0, 0)
      write.restore(rename(key), pttl, payload, "REPLACE")
      writes++
    })
    // nothing was sent yet: a MULTI is only written on exec
    if (writes === 0) return
    if (move !== undefined) write.select(move.from)
    const written = (await write.exec()) ?? []
    const failed = written.find(([error]) => error !== null)
    if (failed?.[0]) throw failed[0]
  })

const cloneDb = (server: Server, from: string, to: string): Effect.Effect<void, AdapterError> =>
  withServer(server, 0, "clone into", to, (client) =>
    Effect.gen(function* () {
      const source = yield* lookupDb(client, server, from, `clone "${from}" into "${to}"`)
      // a missing target is provisioned first
      const [, target] = yield* allocate(client, server, to)
      yield* lookupDb(client, server, to, `clone "${from}" into "${to}"`)
      // the target (ours) is emptied, keeping its marker
      yield* run(() => client.select(target))
      yield* run(() => client.flushdb())
      yield* run(() => client.set(MARKER_KEY, to))
      yield* run(() => client.select(source))
      yield* scanEach(client, undefined, (keys) => copyKeys(client, keys, source, target))
    })
  )

const listDb = (server: Server, owner: string): Effect.Effect<ReadonlyArray<string>, AdapterError> =>
  withServer(server, 0, "list", SLICES_KEY, (client) =>
    Effect.map(
      run(() => client.hkeys(SLICES_KEY)),
      (fields) => ownedBy(owner, fields)
    )
  )

// ---------------------------------------------------------------------------------------------------------------
// mode "prefix"

const prefixOf = (name: string): string => `${name}:`
/** names are checked against SAFE_NAME already; this keeps the pattern literal regardless */
const globOf = (name: string): string => `${prefixOf(name).replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`

const deletePrefix = (client: Redis, name: string): Effect.Effect<void, RedisFailure | AdapterError> =>
  scanEach(client, globOf(name), (keys) => Effect.asVoid(run(() => client.unlink(...keys))))

/** the owner of prefix slice `name` other than `owner`, if another installation holds it */
const otherOwner = (client: Redis, owner: string, name: string) =>
  Effect.map(
    run(() => client.smembers(PREFIXES_KEY)),
    (members) => members.find((member) => member.endsWith(`:${name}`) && member !== tagged(owner, name))
  )

const provisionPrefix = (server: Server, owner: string, name: string): Effect.Effect<boolean, AdapterError> =>
  withServer(server, server.db, "provision", name, (client) =>
    Effect.gen(function* () {
      if ((yield* otherOwner(client, owner, name)) !== undefined) {
        return yield* Effect.fail(
          fail("taken", `prefix "${name}:" on Redis at ${server.location} belongs to another berth installation`)
        )
      }
      return (yield* run(() => client.sadd(PREFIXES_KEY, tagged(owner, name)))) === 1
    })
  )

const resolvePrefix = (server: Server, name: string): Effect.Effect<string, AdapterError> => {
  const url = new URL(server.url.href)
  url.pathname = `/${server.db}`
  const params = url.search
    .replace(/^\?/, "")
    .split("&")
    .filter((part) => part !== "" && !part.startsWith("keyPrefix="))
  // `:` is left as is: ioredis reads `keyPrefix` from the query as its own option
  url.search = `?${[...params, `keyPrefix=${encodeURIComponent(name)}:`].join("&")}`
  return Effect.succeed(url.href)
}

const teardownPrefix = (server: Server, owner: string, name: string): Effect.Effect<void, AdapterError> =>
  withServer(server, server.db, "tear down", name, (client) =>
    Effect.gen(function* () {
      const owned = yield* run(() => client.sismember(PREFIXES_KEY, tagged(owner, name)))
      if (owned !== 1) {
        if ((yield* otherOwner(client, owner, name)) === undefined) return
        return yield* Effect.fail(
          fail("not-owned", `prefix "${name}:" on Redis at ${server.location} belongs to another berth installation`)
        )
      }
      yield* deletePrefix(client, name)
      yield* run(() => client.srem(PREFIXES_KEY, tagged(owner, name)))
    })
  )

const clonePrefix = (server: Server, owner: string, from: string, to: string): Effect.Effect<void, AdapterError> =>
  withServer(server, server.db, "clone into", to, (client) =>
    Effect.gen(function* () {
      const owned = yield* run(() => client.sismember(PREFIXES_KEY, tagged(owner, from)))
      if (owned !== 1) {
        return yield* Effect.fail(
          fail(
            "failed",
            `cannot clone: prefix slice "${from}" is not provisioned on Redis at ${server.location} (provision it first)`
          )
        )
      }
      if ((yield* otherOwner(client, owner, to)) !== undefined) {
        return yield* Effect.fail(
          fail("not-owned", `prefix "${to}:" on Redis at ${server.location} belongs to another berth installation`)
        )
      }
      yield* run(() => client.sadd(PREFIXES_KEY, tagged(owner, to)))
      yield* deletePrefix(client, to)
      const source = prefixOf(from)
      const target = prefixOf(to)
      yield* scanEach(client, globOf(from), (keys) =>
        dumpRestore(client, keys, (key) => `${target}${key.slice(source.length)}`, undefined)
      )
    })
  )

const listPrefix = (server: Server, owner: string): Effect.Effect<ReadonlyArray<string>, AdapterError> =>
  withServer(server, server.db, "list", PREFIXES_KEY, (client) =>
    Effect.map(
      run(() => client.smembers(PREFIXES_KEY)),
      (members) => ownedBy(owner, members)
    )
  )

// ---------------------------------------------------------------------------------------------------------------

const prepare = (slice: Pick<Slice, "adminUrl" | "options" | "owner">) =>
  SAFE_OWNER.test(slice.owner)
    ? Effect.all([serverOf(slice.adminUrl), modeOf(slice.options)])
    : Effect.fail(fail("invalid", `refusing owner ${JSON.stringify(slice.owner)}: it must match ^[a-z0-9_]+$`))

const provision = (slice: Slice): Effect.Effect<boolean, AdapterError> =>
  Effect.gen(function* () {
    const name = yield* checkName(slice.name)
    const [server, mode] = yield* prepare(slice)
    return yield* mode === "db"
      ? provisionDb(server, tagged(slice.owner, name))
      : provisionPrefix(server, slice.owner, name)
  })

/**
 * Whose the name is now (see `Adapter.standing`). A DB is allocated to the name as this installation tags it, so
 * another installation's slice of the same name is another DB: only a prefix can be someone else's.
 */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.gen(function* () {
    const name = yield* checkName(slice.name)
    const [server, mode] = yield* prepare(slice)
    if (mode === "db") {
      return yield* withServer(server, 0, "look at", name, (client) =>
        Effect.map(evalPair(client, LOOKUP, [tagged(slice.owner, name)]), ([status]) =>
          status === 0 ? ("missing" as const) : ("ours" as const)
        )
      )
    }
    return yield* withServer(server, server.db, "look at", name, (client) =>
      Effect.gen(function* () {
        if ((yield* otherOwner(client, slice.owner, name)) !== undefined) return "foreign" as const
        const mine = yield* run(() => client.sismember(PREFIXES_KEY, tagged(slice.owner, name)))
        return mine === 1 ? ("ours" as const) : ("missing" as const)
      })
    )
  })

const resolve = (slice: Slice): Effect.Effect<string, AdapterError> =>
  Effect.gen(function* () {
    const name = yield* checkName(slice.name)
    const [server, mode] = yield* prepare(slice)
    return yield* mode === "db" ? resolveDb(server, tagged(slice.owner, name)) : resolvePrefix(server, name)
  })

const teardown = (slice: Slice): Effect.Effect<void, AdapterError> =>
  Effect.gen(function* () {
    const name = yield* checkName(slice.name)
    const [server, mode] = yield* prepare(slice)
    yield* mode === "db" ? teardownDb(server, tagged(slice.owner, name)) : teardownPrefix(server, slice.owner, name)
  })

const clone = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  Effect.gen(function* () {
    const source = yield* checkName(from.name)
    const target = yield* checkName(to.name)
    if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone slice "${source}" onto itself`))
    const [server, mode] = yield* prepare({
      adminUrl: to.adminUrl ?? from.adminUrl,
      options: to.options,
      owner: to.owner
    })
    const fromMode = yield* modeOf(from.options)
    if (fromMode !== mode) {
      return yield* Effect.fail(fail("invalid", `cannot clone a "${fromMode}" slice into a "${mode}" slice`))
    }
    if (from.owner !== to.owner) {
      return yield* Effect.fail(fail("invalid", "cannot clone a slice of another berth installation"))
    }
    yield* mode === "db"
      ? cloneDb(server, tagged(to.owner, source), tagged(to.owner, target))
      : clonePrefix(server, to.owner, source, target)
  })

const list = (scope: ListScope): Effect.Effect<ReadonlyArray<string>, AdapterError> =>
  Effect.flatMap(prepare(scope), ([server, mode]) =>
    mode === "db" ? listDb(server, scope.owner) : listPrefix(server, scope.owner)
  )

export const redisAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve,
  teardown,
  clone,
  list,
  standing
}
