/**
 * The daemon's own gc sweep against provisions in flight, over the real Slices, the real Registry (SQLite) and the
 * embedded `dir` adapter: a world's slice is never dropped while it is being made or filled, at any moment of it.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Model from "../../src/domain/config/model.js"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { SliceLedgerLive } from "../../src/services/slices/SliceLedger.js"
import { Slices, SlicesLive, type SliceWorld } from "../../src/services/slices/Slices.js"
import { dirSlice } from "./slice-helpers.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const slice = dirSlice

/** where a dir slice's address points */
const pathOf = (address: string) => (address.startsWith("file:") ? fileURLToPath(address) : address)

/** Run when gc asks for the slice servers: after it has read the rows, before it lists servers and draws its plan. */
let beforeListing: Effect.Effect<void> = Effect.void

const layer = () => {
  const home = mkdtempSync(join(tmpdir(), "berth-slices-gc-"))
  folders.push(home)
  const registry = Layer.effect(
    Registry,
    Effect.map(Registry, (real) => ({
      ...real,
      sliceServers: () =>
        Effect.zipRight(
          Effect.suspend(() => beforeListing),
          real.sliceServers()
        )
    }))
  ).pipe(Layer.provide(RegistryLive))
  return SlicesLive.pipe(
    Layer.provideMerge(Layer.merge(registry, SliceLedgerLive)),
    Layer.provideMerge(Home.layerAt(home))
  )
}

const world = Effect.gen(function* () {
  const registry = yield* Registry
  const project = yield* registry.upsertProject({
    name: "shop",
    mainRoot: "/nowhere/shop",
    commonDir: "/nowhere/shop/.git"
  })
  const row = yield* registry.createWorld({
    projectId: project.id,
    name: "one",
    path: "/nowhere/shop",
    branch: "one",
    isMain: false
  })
  return { id: row.id, project: project.label, name: row.name, slug: row.slug, path: row.path } satisfies SliceWorld
})

/**
 * A provision of `services` into a new world, forked, whose slice `blocked` stops in its migrate until `release`; it
 * is there once the call returns.
 */
const provisionBlocked = (services: ReadonlyArray<Model.SliceService>, blocked: string) =>
  Effect.gen(function* () {
    const slices = yield* Slices
    const w = yield* world
    const filling = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const init = (service: Model.SliceService) =>
      service.name === blocked
        ? Effect.zipRight(Deferred.succeed(filling, undefined), Deferred.await(release))
        : Effect.void
    const provision = yield* Effect.fork(slices.provision(w, services, () => undefined, init))
    yield* Deferred.await(filling)
    return { w, provision, release: Deferred.succeed(release, undefined) }
  })

describe("gc while a world's slices are provisioned", () => {
  it.effect(
    "drops neither the slice being filled nor one waiting its turn to be filled",
    () =>
      Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        // the first slice's migrate blocks until the test lets it go; the second waits behind it
        const { provision, release, w } = yield* provisionBlocked(
          [slice("first", "block"), slice("second", "true")],
          "first"
        )
        // the daemon's own sweep, now: both rows are provisioning and both are being made
        const swept = yield* slices.gc(false, {}, true)
        expect(swept.entries).toEqual([])
        yield* release
        const urls = yield* Fiber.join(provision)
        expect([...urls.keys()].sort()).toEqual(["first", "second"])
        const rows = yield* registry.slices(w.id)
        expect(rows.map((r) => [r.service, r.state]).sort()).toEqual([
          ["first", "ready"],
          ["second", "ready"]
        ])
        expect((yield* slices.gc(false, {}, true)).entries).toEqual([])
      }).pipe(Effect.provide(layer())),
    20_000
  )

  it.effect(
    "drops no slice whose provision ended after the sweep read the registry",
    () =>
      Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        const { provision, release, w } = yield* provisionBlocked([slice("only", "block")], "only")
        // the sweep reads the rows (provisioning), then the provision ends before the sweep acts on what it read
        beforeListing = Effect.zipRight(release, Effect.asVoid(Fiber.await(provision)))
        const swept = yield* slices
          .gc(false, {}, true)
          .pipe(Effect.ensuring(Effect.sync(() => (beforeListing = Effect.void))))
        expect(swept.entries).toEqual([])
        yield* Fiber.join(provision)
        expect((yield* registry.slices(w.id)).map((r) => [r.service, r.state])).toEqual([["only", "ready"]])
      }).pipe(Effect.provide(layer())),
    20_000
  )
})

describe("two gc runs at once", () => {
  it.effect(
    "a gc asked while the daemon's sweep is under way waits for it, and finds what the sweep dropped gone",
    () =>
      Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        // a world's slice that the registry then forgets, and the world gone: the dir adapter still lists it, unrecorded
        const { provision, release, w } = yield* provisionBlocked([slice("lost", "block")], "lost")
        yield* release
        const urls = yield* Fiber.join(provision)
        const lost = (yield* registry.slices(w.id)).find((r) => r.service === "lost")!
        yield* registry.forgetSlice(lost.id)
        yield* registry.deleteWorld(w.id)
        // the sweep stops after reading the rows, until the test lets it go; each gc that gets that far is counted
        const sweepGoes = yield* Deferred.make<void>()
        let listed = 0
        beforeListing = Effect.suspend(() => {
          listed++
          return listed === 1 ? Deferred.await(sweepGoes) : Effect.void
        })
        const sweep = yield* Effect.fork(slices.gc(false, {}, true))
        yield* Effect.yieldNow()
        const asked = yield* Effect.fork(slices.gc(false))
        for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
        // the user's gc has not begun: it would read the same servers and race the sweep's drops
        expect(listed).toBe(1)
        expect(yield* Fiber.poll(asked)).toEqual(Option.none())
        yield* Deferred.succeed(sweepGoes, undefined)
        const swept = yield* Fiber.join(sweep)
        const done = yield* Fiber.join(asked)
        beforeListing = Effect.void
        expect(swept.entries.map((e) => [e.name, e.outcome])).toContainEqual([lost.name, "dropped"])
        expect(done.entries.filter((e) => e.name === lost.name)).toEqual([])
        expect(existsSync(pathOf(urls.get("lost")!))).toBe(false)
      }).pipe(Effect.provide(layer())),
    20_000
  )
})
