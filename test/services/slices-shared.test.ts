/**
 * The slices of a world that runs anywhere, as `Slices` treats them, over the real Registry (SQLite) and the embedded
 * `dir` adapter, with the cluster's record played by a ledger the test answers for: a slice the record says is made is
 * used as it is, a machine the cluster gave up on touches nothing, and the slice the world runs on elsewhere is never
 * dropped by a stale copy's teardown. (The record itself is tested against PostgreSQL in test/cluster/slices.test.ts.)
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { type SharedSlices, SliceLedger, type SliceOrphans } from "../../src/services/slices/SliceLedger.js"
import { Slices, SlicesLive, type SliceWorld } from "../../src/services/slices/Slices.js"
import { dirSlice } from "./slice-helpers.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const db = dirSlice("db", "fill")

/** What the cluster's record answers, and what was asked of it. */
interface Record {
  claim: "ready" | "moved" | "provisioning" | undefined
  ready: boolean
  holds: boolean
  mayDrop: boolean
  readonly asked: Array<string>
  /** the server each claim named, by slice name */
  readonly servers: Map<string, string>
  /** the cluster's orphans, as its record lists them */
  orphans: Array<{ readonly name: string; readonly server: string; readonly claimed: boolean }>
}

const layer = (record: Record) => {
  const home = mkdtempSync(join(tmpdir(), "berth-slices-shared-"))
  folders.push(home)
  /** notes what was asked, then answers as the record says */
  const ask = <A>(what: string, answer: () => A) =>
    Effect.sync(() => {
      record.asked.push(what)
      return answer()
    })
  const shared: SharedSlices = {
    owner: "cabc123",
    claim: (service, name, server) =>
      ask(`claim ${service} ${name}`, () => {
        record.servers.set(name, server)
        return record.claim
      }),
    ready: (service) => ask(`ready ${service}`, () => record.ready),
    holds: ask("holds", () => record.holds),
    mayDrop: (service) => ask(`mayDrop ${service}`, () => record.mayDrop),
    dropped: (service) => ask(`dropped ${service}`, () => true)
  }
  const orphans: SliceOrphans = {
    owner: shared.owner,
    list: Effect.sync(() => record.orphans),
    cleared: (name, server) =>
      ask(`cleared ${name}`, () => {
        record.orphans = record.orphans.filter((o) => o.name !== name || o.server !== server)
      })
  }
  const ledger = Layer.succeed(SliceLedger, {
    of: () => Effect.succeed(Option.some(shared)),
    orphans: Effect.succeed(Option.some(orphans)),
    install: () => Effect.void
  })
  return SlicesLive.pipe(
    Layer.provideMerge(Layer.mergeAll(RegistryLive, ledger)),
    Layer.provideMerge(Home.layerAt(home))
  )
}

const world = Effect.gen(function* () {
  const registry = yield* Registry
  const project = yield* registry.upsertProject({ name: "shop", mainRoot: "/nowhere/shop", commonDir: "/nowhere/.git" })
  const row =
    (yield* registry.findWorld(project.id, "feat-a")) ??
    (yield* registry.createWorld({
      projectId: project.id,
      name: "feat-a",
      path: "/nowhere/shop",
      branch: "feat-a",
      isMain: false
    }))
  return { id: row.id, project: project.label, name: row.name, slug: row.slug, path: row.path } satisfies SliceWorld
})

/** Provisions the world's `db`; its migrate writes `notes` in the slice's folder and counts its runs. */
const provision = (w: SliceWorld, fills: { n: number }) =>
  Effect.flatMap(Slices, (slices) =>
    slices.provision(
      w,
      [db],
      () => undefined,
      (_service, urls) =>
        Effect.sync(() => {
          fills.n++
          writeFileSync(join(urls.get("db") ?? "", "notes"), "the world's data")
        })
    )
  )

describe("the slices of a world that runs anywhere", () => {
  const record: Record = {
    claim: "provisioning",
    ready: true,
    holds: true,
    mayDrop: true,
    asked: [],
    servers: new Map(),
    orphans: []
  }

  it.layer(layer(record))((it) => {
    it.effect("are claimed and marked ready in the record, then used as they are wherever it says they are made", () =>
      Effect.gen(function* () {
        const registry = yield* Registry
        const w = yield* world
        const fills = { n: 0 }
        const first = yield* provision(w, fills)
        const folder = first.get("db") ?? ""
        expect(fills.n).toBe(1)
        expect(record.asked).toEqual(["claim db shop_feat_a_db", "ready db"])

        // the machine it moves to: no record of its own, the cluster's says it is made
        for (const row of yield* registry.slices(w.id)) yield* registry.forgetSlice(row.id)
        record.claim = "ready"
        record.asked.length = 0
        const again = yield* provision(w, fills)
        expect(again.get("db")).toBe(folder)
        expect(fills.n).toBe(1)
        expect(readFileSync(join(folder, "notes"), "utf8")).toBe("the world's data")
        expect(record.asked).toEqual(["claim db shop_feat_a_db"])
      })
    )

    it.effect(
      "recorded ready on a server written another way, are used as they are where they exist, made where not",
      () =>
        Effect.gen(function* () {
          const registry = yield* Registry
          const w = yield* world
          const fills = { n: 0 }
          record.claim = "provisioning"
          const folder = (yield* provision(w, fills)).get("db") ?? ""
          expect(fills.n).toBe(1)

          // the machine it moves to reaches the same server by another spelling: the world's data stays as it is
          for (const row of yield* registry.slices(w.id)) yield* registry.forgetSlice(row.id)
          record.claim = "moved"
          record.asked.length = 0
          expect((yield* provision(w, fills)).get("db")).toBe(folder)
          expect(fills.n).toBe(1)
          expect(readFileSync(join(folder, "notes"), "utf8")).toBe("the world's data")
          // and the record says it is ready there, so the next move takes it as it is too
          expect(record.asked).toEqual(["claim db shop_feat_a_db", "ready db"])

          // another server indeed: nothing there yet, so the slice is made and filled
          for (const row of yield* registry.slices(w.id)) yield* registry.forgetSlice(row.id)
          rmSync(folder, { recursive: true, force: true })
          expect((yield* provision(w, fills)).get("db")).toBe(folder)
          expect(fills.n).toBe(2)
          expect(readFileSync(join(folder, "notes"), "utf8")).toBe("the world's data")
          record.claim = "provisioning"
        })
    )

    it.effect("touch nothing on a machine the cluster gave the world up on", () =>
      Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        const w = yield* world
        const folder = (yield* slices.addresses(w.id)).get("db") ?? ""
        const fills = { n: 0 }
        record.claim = undefined
        const refused = yield* Effect.flip(provision(w, fills))
        expect(refused._tag).toBe("WorldMovedAway")
        expect(refused.message).toContain("the cluster has given the world to another machine meanwhile")
        expect(fills.n).toBe(0)
        expect(readFileSync(join(folder, "notes"), "utf8")).toBe("the world's data")

        // made here, then given away before it was marked ready: nothing of it is dropped
        for (const row of yield* registry.slices(w.id)) yield* registry.forgetSlice(row.id)
        rmSync(folder, { recursive: true, force: true })
        record.claim = "provisioning"
        record.ready = false
        record.holds = false
        const late = yield* Effect.flip(provision(w, fills))
        expect(late._tag).toBe("WorldMovedAway")
        expect(late.message).toContain("given the world to another machine")
        expect(existsSync(join(folder, "notes"))).toBe(true)
        record.ready = true
        record.holds = true
      })
    )

    it.effect("are kept by a stale copy's teardown while the world runs on them elsewhere, dropped otherwise", () =>
      Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        const w = yield* world
        record.claim = "ready"
        yield* provision(w, { n: 0 })
        const folder = (yield* slices.addresses(w.id)).get("db") ?? ""
        record.mayDrop = false
        record.asked.length = 0
        expect(yield* slices.teardown(w)).toEqual([])
        expect(existsSync(join(folder, "notes"))).toBe(true)
        expect(yield* registry.slices(w.id)).toEqual([])
        expect(record.asked).toEqual(["mayDrop db"])

        yield* provision(w, { n: 0 })
        record.mayDrop = true
        record.asked.length = 0
        expect(yield* slices.teardown(w)).toEqual([])
        expect(existsSync(folder)).toBe(false)
        expect(record.asked).toEqual(["mayDrop db", "dropped db"])
      })
    )

    it.effect(
      "left behind by a world removed while its machine was away, are dropped by gc on a machine that reaches their server",
      () =>
        Effect.gen(function* () {
          const slices = yield* Slices
          const registry = yield* Registry
          const w = yield* world
          record.claim = "provisioning"
          yield* provision(w, { n: 0 })
          const folder = (yield* slices.addresses(w.id)).get("db") ?? ""
          const server = record.servers.get("shop_feat_a_db") ?? ""
          expect(server).not.toBe("")
          // this machine forgets it (the world went elsewhere, then was removed there); the record keeps it as an orphan
          for (const row of yield* registry.slices(w.id)) yield* registry.forgetSlice(row.id)
          const orphan = { name: "shop_feat_a_db", server, claimed: false }

          // a world that claimed the name since owns what is there: only the orphan's record goes
          record.orphans = [{ ...orphan, claimed: true }]
          record.asked.length = 0
          expect((yield* slices.gc(false)).entries).toEqual([])
          expect(existsSync(join(folder, "notes"))).toBe(true)
          expect(record.asked).toEqual(["cleared shop_feat_a_db"])

          // one on a server this machine does not know is left to the machines that do
          record.orphans = [{ ...orphan, server: "elsewhere" }]
          expect((yield* slices.gc(false)).entries).toEqual([])
          expect(record.orphans).toHaveLength(1)

          record.orphans = [orphan]
          const dry = yield* slices.gc(true)
          expect(dry.entries.map((e) => [e.reason, e.name, e.outcome])).toEqual([
            ["left by a removed world", "shop_feat_a_db", "would drop"]
          ])
          expect(existsSync(join(folder, "notes"))).toBe(true)
          const swept = yield* slices.gc(false)
          expect(swept.entries.map((e) => [e.reason, e.name, e.outcome])).toEqual([
            ["left by a removed world", "shop_feat_a_db", "dropped"]
          ])
          expect(existsSync(folder)).toBe(false)
          expect(record.orphans).toEqual([])
        })
    )
  })
})
