import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { Redis } from "ioredis"
import type { Slice } from "../contract.js"
import { runNames, runOwner, sliceMaker } from "../testing.js"
import { redisAdapter } from "./index.js"

/** A real server: `REDIS_ADMIN_URL`, or the local one. */
const adminUrl = process.env.REDIS_ADMIN_URL ?? "redis://127.0.0.1:6379"

/** Every slice a test makes starts with `prefix`, so parallel runs never meet and afterAll finds them all. */
const { prefix, fresh } = runNames()

/** this run's installation: slices are marked `<owner>:<name>` */
const owner = runOwner()
const tag = (name: string): string => `${owner}:${name}`

const slice = sliceMaker({ adapter: "redis", service: "cache", owner, adminUrl })
const sliceOf = (name: string, mode: "db" | "prefix", extra: Partial<Slice> = {}): Slice =>
  slice(name, { options: { mode }, ...extra })

/** Runs `f` on a connection to `url` (ioredis reads the DB and `keyPrefix` from it), always closed. */
const withRedis = <A>(url: string, f: (client: Redis) => Promise<A>): Effect.Effect<A> =>
  Effect.promise(async () => {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
    client.on("error", () => undefined)
    await client.connect()
    try {
      return await f(client)
    } finally {
      await client.quit().catch(() => client.disconnect())
    }
  })

const allocations = (): Effect.Effect<Record<string, string>> =>
  withRedis(adminUrl, (client) => client.hgetall("berth:slices"))

const dbOf = (name: string): Effect.Effect<number | undefined> =>
  Effect.map(allocations(), (all) => (all[tag(name)] === undefined ? undefined : Number(all[tag(name)])))

const listed = (mode: "db" | "prefix"): Effect.Effect<ReadonlyArray<string>, unknown> =>
  Effect.map(redisAdapter.list({ storage: "/nonexistent", adminUrl, options: { mode }, owner }), (names) =>
    names.filter((name) => name.startsWith(prefix))
  )

afterAll(async () => {
  const client = new Redis(adminUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  client.on("error", () => undefined)
  await client.connect()
  try {
    const all = await client.hgetall("berth:slices")
    for (const [name, db] of Object.entries(all)) {
      if (!name.includes(prefix)) continue
      await client.select(Number(db))
      if ((await client.get("berth:slice")) === name) await client.flushdb()
      await client.select(0)
      await client.hdel("berth:slices", name)
    }
    for (const name of await client.smembers("berth:prefixes")) {
      if (name.includes(prefix)) await client.srem("berth:prefixes", name)
    }
    let cursor = "0"
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 500)
      cursor = next
      if (keys.length > 0) await client.unlink(...keys)
    } while (cursor !== "0")
  } finally {
    await client.quit().catch(() => client.disconnect())
  }
})

describe("redisAdapter", () => {
  it("declares clone", () => {
    expect(redisAdapter.capabilities).toEqual({ clone: true })
  })

  it.live("keeps another berth installation's slices out of reach, in both modes", () =>
    Effect.gen(function* () {
      const name = fresh("shared")
      // db mode: each installation gets its own DB for the same name, and lists only its own
      expect(yield* redisAdapter.provision(sliceOf(name, "db", { owner: "elsewhere" }))).toBe(true)
      expect(yield* listed("db")).not.toContain(name)
      expect(yield* redisAdapter.provision(sliceOf(name, "db"))).toBe(true)
      const mine = yield* redisAdapter.resolve(sliceOf(name, "db"))
      const theirs = yield* redisAdapter.resolve(sliceOf(name, "db", { owner: "elsewhere" }))
      expect(mine).not.toBe(theirs)
      yield* redisAdapter.teardown(sliceOf(name, "db"))
      yield* redisAdapter.teardown(sliceOf(name, "db", { owner: "elsewhere" }))
      // prefix mode: one key space, so the name is taken
      expect(yield* redisAdapter.provision(sliceOf(name, "prefix", { owner: "elsewhere" }))).toBe(true)
      expect((yield* Effect.flip(redisAdapter.provision(sliceOf(name, "prefix")))).kind).toBe("taken")
      expect((yield* Effect.flip(redisAdapter.teardown(sliceOf(name, "prefix")))).kind).toBe("not-owned")
      expect(yield* listed("prefix")).not.toContain(name)
      yield* redisAdapter.teardown(sliceOf(name, "prefix", { owner: "elsewhere" }))
    })
  )

  describe('mode "db"', () => {
    it.live("marks the DB it provisions, resolves and lists it", () =>
      Effect.gen(function* () {
        const name = fresh("main")
        expect(yield* redisAdapter.provision(sliceOf(name, "db"))).toBe(true)
        const db = yield* dbOf(name)
        expect(db).toBeGreaterThanOrEqual(1)
        const url = yield* redisAdapter.resolve(sliceOf(name, "db"))
        expect(new URL(url).pathname).toBe(`/${db}`)
        expect(yield* withRedis(url, (client) => client.get("berth:slice"))).toBe(tag(name))
        expect(yield* listed("db")).toContain(name)
        yield* redisAdapter.teardown(sliceOf(name, "db"))
      })
    )

    it.live("clones every key (with TTLs) and keeps the target's marker", () =>
      Effect.gen(function* () {
        const golden = fresh("golden")
        const copy = fresh("copy")
        yield* redisAdapter.provision(sliceOf(golden, "db"))
        yield* redisAdapter.provision(sliceOf(copy, "db"))
        const goldenUrl = yield* redisAdapter.resolve(sliceOf(golden, "db"))
        const copyUrl = yield* redisAdapter.resolve(sliceOf(copy, "db"))
        yield* withRedis(goldenUrl, async (client) => {
          await client.set("a", "1")
          await client.set("b", "2", "PX", 600_000)
          await client.rpush("list", "x", "y")
        })
        yield* withRedis(copyUrl, (client) => client.set("stale", "old"))
        yield* redisAdapter.clone(sliceOf(golden, "db"), sliceOf(copy, "db"))
        const copied = yield* withRedis(copyUrl, async (client) => ({
          a: await client.get("a"),
          b: await client.get("b"),
          ttl: await client.pttl("b"),
          list: await client.lrange("list", 0, -1),
          stale: await client.get("stale"),
          marker: await client.get("berth:slice")
        }))
        expect(copied.a).toBe("1")
        expect(copied.b).toBe("2")
        expect(copied.ttl).toBeGreaterThan(0)
        expect(copied.list).toEqual(["x", "y"])
        expect(copied.stale).toBeNull()
        expect(copied.marker).toBe(tag(copy))
        // the copy is independent
        yield* withRedis(copyUrl, (client) => client.set("a", "changed"))
        expect(yield* withRedis(goldenUrl, (client) => client.get("a"))).toBe("1")
        // a clone into a missing target provisions it
        const third = fresh("third")
        yield* redisAdapter.clone(sliceOf(golden, "db"), sliceOf(third, "db"))
        const thirdUrl = yield* redisAdapter.resolve(sliceOf(third, "db"))
        expect(yield* withRedis(thirdUrl, (client) => client.get("a"))).toBe("1")
        for (const name of [golden, copy, third]) yield* redisAdapter.teardown(sliceOf(name, "db"))
      })
    )

    it.live("refuses to clone from a missing slice", () =>
      Effect.gen(function* () {
        const error = yield* Effect.flip(
          redisAdapter.clone(sliceOf(fresh("missing"), "db"), sliceOf(fresh("target"), "db"))
        )
        expect(error.kind).toBe("failed")
      })
    )

    it.live("tears down: flushes the DB and frees the number", () =>
      Effect.gen(function* () {
        const name = fresh("gone")
        yield* redisAdapter.provision(sliceOf(name, "db"))
        const db = yield* dbOf(name)
        const url = yield* redisAdapter.resolve(sliceOf(name, "db"))
        yield* withRedis(url, (client) => client.set("k", "v"))
        yield* redisAdapter.teardown(sliceOf(name, "db"))
        expect(yield* dbOf(name)).toBeUndefined()
        expect(yield* withRedis(url, (client) => client.dbsize())).toBe(0)
        expect(yield* listed("db")).not.toContain(name)
        expect(db).toBeDefined()
      })
    )

    it.live("refuses to flush a DB whose marker names another slice", () =>
      Effect.gen(function* () {
        const name = fresh("hijacked")
        yield* redisAdapter.provision(sliceOf(name, "db"))
        const url = yield* redisAdapter.resolve(sliceOf(name, "db"))
        yield* withRedis(url, (client) => client.set("berth:slice", "someone_else"))
        const error = yield* Effect.flip(redisAdapter.teardown(sliceOf(name, "db")))
        expect(error.kind).toBe("not-owned")
        yield* withRedis(url, (client) => client.set("berth:slice", tag(name)))
        yield* redisAdapter.teardown(sliceOf(name, "db"))
      })
    )

    it.live("a clone killed between emptying its target and re-marking it leaves a DB listed, finished, freed", () =>
      Effect.gen(function* () {
        const name = fresh("crash")
        yield* redisAdapter.provision(sliceOf(name, "db"))
        const url = yield* redisAdapter.resolve(sliceOf(name, "db"))
        // the clone's first step on its target, alone: FLUSHDB takes the marker with everything else
        yield* withRedis(url, (client) => client.flushdb())
        expect(yield* listed("db")).toContain(name)
        // provision finds it allocated to this slice and marks it again; the address is the same
        expect(yield* redisAdapter.provision(sliceOf(name, "db"))).toBe(false)
        expect(yield* withRedis(url, (client) => client.get("berth:slice"))).toBe(tag(name))
        expect(yield* redisAdapter.resolve(sliceOf(name, "db"))).toBe(url)
        // teardown frees one left unmarked too
        yield* withRedis(url, (client) => client.flushdb())
        yield* redisAdapter.teardown(sliceOf(name, "db"))
        expect(yield* dbOf(name)).toBeUndefined()
        expect(yield* listed("db")).not.toContain(name)
      })
    )

    it.live("never flushes an allocated DB that holds keys without the slice's marker", () =>
      Effect.gen(function* () {
        const name = fresh("unmarked")
        yield* redisAdapter.provision(sliceOf(name, "db"))
        const url = yield* redisAdapter.resolve(sliceOf(name, "db"))
        yield* withRedis(url, (client) => client.flushdb().then(() => client.set("precious", "1")))
        expect((yield* Effect.flip(redisAdapter.teardown(sliceOf(name, "db")))).kind).toBe("not-owned")
        expect(yield* withRedis(url, (client) => client.get("precious"))).toBe("1")
        yield* withRedis(url, (client) => client.flushdb())
        yield* redisAdapter.teardown(sliceOf(name, "db"))
      })
    )
  })

  describe('mode "prefix"', () => {
    it.live("provisions, resolves to a keyPrefix URL, and tears down only its own keys", () =>
      Effect.gen(function* () {
        const a = fresh("pa")
        const b = fresh("pb")
        expect(yield* redisAdapter.provision(sliceOf(a, "prefix"))).toBe(true)
        expect(yield* redisAdapter.provision(sliceOf(a, "prefix"))).toBe(false)
        yield* redisAdapter.provision(sliceOf(b, "prefix"))
        expect(yield* listed("prefix")).toEqual(expect.arrayContaining([a, b]))
        const urlA = yield* redisAdapter.resolve(sliceOf(a, "prefix"))
        const parsed = new URL(urlA)
        expect(parsed.pathname).toBe("/0")
        expect(parsed.searchParams.get("keyPrefix")).toBe(`${a}:`)
        expect(
          yield* redisAdapter.resolve(
            sliceOf("acme_cache", "prefix", { adminUrl: "redis://:s3cret@cache.local:6390/2" })
          )
        ).toBe("redis://:s3cret@cache.local:6390/2?keyPrefix=acme_cache:")
        // ioredis honours keyPrefix from the URL
        yield* withRedis(urlA, (client) => client.set("k", "from-a"))
        yield* withRedis(adminUrl, async (client) => {
          await client.set(`${b}:k`, "from-b")
          for (let i = 0; i < 1200; i++) await client.set(`${a}:bulk:${i}`, "x")
        })
        expect(yield* withRedis(adminUrl, (client) => client.get(`${a}:k`))).toBe("from-a")
        yield* redisAdapter.teardown(sliceOf(a, "prefix"))
        expect(yield* withRedis(adminUrl, (client) => client.get(`${a}:k`))).toBeNull()
        expect(yield* withRedis(adminUrl, (client) => client.exists(`${a}:bulk:7`))).toBe(0)
        expect(yield* withRedis(adminUrl, (client) => client.get(`${b}:k`))).toBe("from-b")
        expect(yield* listed("prefix")).not.toContain(a)
        yield* redisAdapter.teardown(sliceOf(a, "prefix"))
        yield* redisAdapter.teardown(sliceOf(b, "prefix"))
        expect(yield* withRedis(adminUrl, (client) => client.get(`${b}:k`))).toBeNull()
      })
    )

    it.live("clones one prefix into another, keeping TTLs", () =>
      Effect.gen(function* () {
        const golden = fresh("pgolden")
        const copy = fresh("pcopy")
        yield* redisAdapter.provision(sliceOf(golden, "prefix"))
        yield* redisAdapter.provision(sliceOf(copy, "prefix"))
        yield* withRedis(adminUrl, async (client) => {
          await client.set(`${golden}:a`, "1")
          await client.set(`${golden}:b`, "2", "PX", 600_000)
          await client.set(`${copy}:stale`, "old")
        })
        yield* redisAdapter.clone(sliceOf(golden, "prefix"), sliceOf(copy, "prefix"))
        const copied = yield* withRedis(adminUrl, async (client) => ({
          a: await client.get(`${copy}:a`),
          b: await client.get(`${copy}:b`),
          ttl: await client.pttl(`${copy}:b`),
          noTtl: await client.pttl(`${copy}:a`),
          stale: await client.get(`${copy}:stale`),
          golden: await client.get(`${golden}:a`)
        }))
        expect(copied).toMatchObject({ a: "1", b: "2", noTtl: -1, stale: null, golden: "1" })
        expect(copied.ttl).toBeGreaterThan(0)
        yield* redisAdapter.teardown(sliceOf(golden, "prefix"))
        yield* redisAdapter.teardown(sliceOf(copy, "prefix"))
      })
    )
  })

  it.live("reports an unreachable server", () =>
    Effect.gen(function* () {
      for (const mode of ["db", "prefix"] as const) {
        const error = yield* Effect.flip(
          redisAdapter.provision(sliceOf(fresh("down"), mode, { adminUrl: "redis://127.0.0.1:1" }))
        )
        expect(error.kind).toBe("unreachable")
        expect(error.adapter).toBe("redis")
      }
      const secret = yield* Effect.flip(
        redisAdapter.list({
          storage: "/nonexistent",
          adminUrl: "redis://:hunter2@127.0.0.1:1/0",
          options: {},
          owner: "t"
        })
      )
      expect(secret.kind).toBe("unreachable")
      expect(secret.message).not.toContain("hunter2")
    })
  )

  it.live("refuses an unknown mode and a non-redis URL", () =>
    Effect.gen(function* () {
      const slice = { ...sliceOf(fresh("bad"), "db"), options: { mode: "cluster" } }
      expect((yield* Effect.flip(redisAdapter.provision(slice))).kind).toBe("invalid")
      const url = sliceOf(fresh("bad"), "db", { adminUrl: "http://127.0.0.1:6379" })
      expect((yield* Effect.flip(redisAdapter.provision(url))).kind).toBe("invalid")
    })
  )
})
