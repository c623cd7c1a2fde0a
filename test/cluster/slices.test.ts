/**
 * The cluster's record of the slices of worlds that run anywhere (store.ts, cluster/slices.ts), against a real
 * PostgreSQL database: a slice is claimed under its owner's generation of the world, found ready (used as it is) by the
 * machine the world moves to, and never made, overwritten or dropped by a machine the cluster gave up on.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sharedSlicesOf } from "../../src/cluster/slices.js"
import { type AnywhereRow, makeStore, type Store } from "../../src/cluster/store.js"
import { clusterOwner } from "../../src/domain/cluster.js"
import type { SharedSlices } from "../../src/services/slices/SliceLedger.js"

const database = `berth_slices_${randomBytes(4).toString("hex")}`
const psql = (sql: string) =>
  execFileSync("psql", ["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-qAtc", sql], { encoding: "utf8" })

describe("the slices of worlds that run anywhere, in the cluster's tables", () => {
  let runtime: ManagedRuntime.ManagedRuntime<PgClient.PgClient | SqlClient.SqlClient, unknown>
  let store: Store
  const run = <A, E>(effect: Effect.Effect<A, E, PgClient.PgClient | SqlClient.SqlClient>) => runtime.runPromise(effect)

  beforeAll(async () => {
    psql(`CREATE DATABASE ${database}`)
    runtime = ManagedRuntime.make(
      PgClient.layer({ url: Redacted.make(`postgres://postgres@127.0.0.1:5432/${database}`) })
    )
    store = await run(makeStore)
    await run(store.migrate)
    await run(store.createAnywhere)
  })
  afterAll(async () => {
    await runtime?.dispose()
    psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
  })

  const world = { project: "shop", slug: "feat-a" }
  /** the ledger of `machine` as it sees the world's row now (`row`: as it last read it, which may be stale) */
  const ledgerOf = async (machine: string, row?: AnywhereRow): Promise<SharedSlices> => {
    const seen = row ?? (await run(store.anywhere(world)))[0]
    const of = sharedSlicesOf(store, machine, "cabc", () => Effect.succeed(seen))
    return Option.getOrThrow(await Effect.runPromise(of(world.project, world.slug)))
  }

  /** the world wanted up (again), placed on no machine yet */
  const wantUp = Effect.suspend(() =>
    store.want({
      ...world,
      name: "feat-a",
      branch: "feat-a",
      remote: "/srv/origin.git",
      selection: { services: [], groups: [] },
      env: {},
      desired: "up"
    })
  )

  it("names the cluster with an id of its own, the same for every member, made once", async () => {
    const id = await run(store.clusterId)
    expect(id).toMatch(/^[0-9a-f]{32}$/)
    await run(store.createAnywhere)
    expect(await run(store.clusterId)).toBe(id)
    expect(clusterOwner(id)).toMatch(/^c[a-z0-9]{11}$/)
    expect(clusterOwner(id)).toBe(clusterOwner(id))
    expect(clusterOwner(`${id}x`)).not.toBe(clusterOwner(id))
  })

  it("fences every write by the world's owner and generation, and hands a made slice to the machine the world moves to", async () => {
    await run(wantUp)
    expect(await run(store.reassign(world.project, world.slug, null, "h1"))).toBe(true)
    const h1 = await ledgerOf("h1")
    const h1Row = (await run(store.anywhere(world)))[0] as AnywhereRow
    expect(await run(h1.claim("db", "shop_feat_a_db", "server-1"))).toBe("provisioning")
    expect(await run(h1.ready("db"))).toBe(true)
    // claimed again by its maker (the next up): made already, used as it is
    expect(await run(h1.claim("db", "shop_feat_a_db", "server-1"))).toBe("ready")

    // the world moves to h2; h1 still reads its old row (frozen, cut off)
    expect(await run(store.reassign(world.project, world.slug, "h1", "h2"))).toBe(true)
    const stale = await ledgerOf("h1", h1Row)
    expect(await run(stale.claim("db", "shop_feat_a_db", "server-1"))).toBeUndefined()
    expect(await run(stale.claim("cache", "shop_feat_a_cache", "server-1"))).toBeUndefined()
    expect(await run(stale.ready("db"))).toBe(false)
    expect(await run(stale.holds)).toBe(false)
    expect(await run(stale.dropped("db"))).toBe(false)
    // the slice the world runs on is never h1's to drop, nor one of the same name on a server written another way
    // (it may be the same server); a slice of another name is
    expect(await run(stale.mayDrop("db", "shop_feat_a_db", "server-1"))).toBe(false)
    expect(await run(stale.mayDrop("db", "shop_feat_a_db", "server-9"))).toBe(false)
    expect(await run(stale.mayDrop("db", "shop_feat_a_db_old", "server-1"))).toBe(true)
    // nor is it for a machine that ran the world and finds its row gone
    const gone = Option.getOrThrow(
      await Effect.runPromise(
        sharedSlicesOf(store, "h1", "cabc", () => Effect.succeed("gone" as const))(world.project, world.slug)
      )
    )
    expect(await run(gone.mayDrop("db", "shop_feat_a_db", "server-1"))).toBe(false)
    expect(await run(gone.claim("db", "shop_feat_a_db", "server-1"))).toBeUndefined()

    // h2 reaches the same server: the world's data, as it is
    const h2 = await ledgerOf("h2")
    expect(await run(h2.holds)).toBe(true)
    expect(await run(h2.claim("db", "shop_feat_a_db", "server-1"))).toBe("ready")
    expect(await run(h2.mayDrop("db", "shop_feat_a_db", "server-1"))).toBe(true)

    // on to h3, which writes the server another way: the slice may be the very one the world ran on, so it is
    // "moved" (used as it is where it exists, made where it does not), and h1's copy is still never dropped
    expect(await run(store.reassign(world.project, world.slug, "h2", "h3"))).toBe(true)
    const h3 = await ledgerOf("h3")
    expect(await run(h3.claim("db", "shop_feat_a_db", "server-3"))).toBe("moved")
    expect(await run(stale.mayDrop("db", "shop_feat_a_db", "server-1"))).toBe(false)
    // h3 stopped before it said the slice is ready: its next claim still never takes it for half-made
    expect(await run(h3.claim("db", "shop_feat_a_db", "server-3"))).toBe("moved")
    expect(await run(h3.ready("db"))).toBe(true)
    expect(await run(h3.claim("db", "shop_feat_a_db", "server-3"))).toBe("ready")
    // a slice not yet ready when its server changed is h3's to make
    expect(await run(h3.claim("cache", "shop_feat_a_cache", "server-3"))).toBe("provisioning")
    expect(await run(h3.claim("cache", "shop_feat_a_cache", "server-4"))).toBe("provisioning")
    expect(await run(h3.dropped("db"))).toBe(true)
    expect(await run(h3.claim("db", "shop_feat_a_db", "server-3"))).toBe("provisioning")

    // removed: the record goes with the world's row
    await run(store.setDesired(world.project, world.slug, "removed"))
    await run(store.letGo(world.project, world.slug, "h3"))
    expect(await run(store.anywhere(world))).toEqual([])
    const left = await run(
      Effect.flatMap(PgClient.PgClient, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM berth_slices`)
    )
    expect(left[0]?.n).toBe(0)
    // what its record still held (h3 claimed both again, and made neither) is kept as orphans, for any member's gc
    const orphans = async () => [...(await run(store.sliceOrphans))].sort((a, b) => a.name.localeCompare(b.name))
    expect(await orphans()).toEqual([
      { name: "shop_feat_a_cache", server: "server-4", claimed: false },
      { name: "shop_feat_a_db", server: "server-3", claimed: false }
    ])
    await run(store.clearOrphan("shop_feat_a_db", "server-3"))

    // the same world wanted again claims the name: what is there is its own now, never an orphan's
    await run(wantUp)
    expect(await run(store.reassign(world.project, world.slug, null, "h1"))).toBe(true)
    expect(await run((await ledgerOf("h1")).claim("cache", "shop_feat_a_cache", "server-4"))).toBe("provisioning")
    expect(await run(store.sliceOrphans)).toEqual([{ name: "shop_feat_a_cache", server: "server-4", claimed: true }])
    await run(store.clearOrphan("shop_feat_a_cache", "server-4"))
    expect(await run(store.sliceOrphans)).toEqual([])
  })
})
