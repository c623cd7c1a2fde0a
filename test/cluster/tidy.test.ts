/**
 * What a round tidies of this machine's copies of worlds that run anywhere (cluster/tidy.ts), over the real state
 * database, a fake `Worlds` that records what it is told, and the test clock. No cluster database, no root.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import type { WorldCommand } from "../../src/actors/protocol.js"
import { makeTidy } from "../../src/cluster/tidy.js"
import { makeClusterState, updateView } from "../../src/cluster/view.js"
import { ANYWHERE_SETTING, anywhereIds } from "../../src/domain/cluster.js"
import { formatFenced } from "../../src/domain/fence.js"
import type { WorldState } from "../../src/domain/world-state.js"
import type { QueueEntry } from "../../src/services/Admission.js"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { machineNamed, rowOf } from "./parts.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const registryLayer = () => {
  const home = mkdtempSync(join(tmpdir(), "berth-tidy-"))
  folders.push(home)
  return RegistryLive.pipe(Layer.provide(Home.layerAt(home)))
}

const setup = (worlds: ReadonlyArray<readonly [string, WorldState, "up" | "down"]>) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const project = yield* registry.upsertProject({ name: "shop", commonDir: "/tmp/shop/.git", mainRoot: "/tmp/shop" })
    const ids: Record<string, number> = {}
    for (const [name, observed, desired] of worlds) {
      const w = yield* registry.createWorld({ projectId: project.id, name, path: "", branch: name, isMain: false })
      yield* registry.setObserved(w.id, observed, null)
      yield* registry.setDesired(w.id, desired)
      ids[name] = w.id
    }
    yield* registry.setSetting(ANYWHERE_SETTING, Object.values(ids))
    const told: Array<[number, WorldCommand["_tag"]]> = []
    const waiting = new Map<number, QueueEntry>()
    const state = yield* makeClusterState
    const folder = mkdtempSync(join(tmpdir(), "berth-tidy-fenced-"))
    folders.push(folder)
    const fencedFile = join(folder, "fenced.json")
    const tidy = yield* makeTidy({
      registry,
      worlds: { tell: (id, command) => Effect.sync(() => void told.push([id, command._tag])) },
      admission: { entry: (id) => waiting.get(id) },
      state,
      fencedFile,
      daemon: 4242
    })
    const letGo: Array<string> = []
    const store = { letGo: (_p: string, slug: string) => Effect.sync(() => void letGo.push(slug)) }
    return { registry, ids, told, waiting, state, fencedFile, tidy, letGo, store }
  })

describe("a round's tidying", () => {
  it.effect("takes down each copy the watchdog fenced, once, with an event that says so", () =>
    Effect.gen(function* () {
      const t = yield* setup([
        ["a", "running", "up"],
        ["b", "stopped", "down"],
        ["c", "failed", "up"]
      ])
      const { a, b, c } = t.ids as { a: number; b: number; c: number }
      writeFileSync(t.fencedFile, formatFenced({ daemon: 4242, session: "s1", at: 1_000, worlds: [a, b, c] }))
      yield* t.tidy.countFenced
      // b was stopped and wanted down already: nothing to count
      expect(t.told).toEqual([
        [a, "Down"],
        [c, "Down"]
      ])
      expect((yield* t.registry.events(a)).map((e) => e.kind)).toContain("fenced")
      // the same record again, or another daemon's: counted once
      yield* t.tidy.countFenced
      writeFileSync(t.fencedFile, formatFenced({ daemon: 1, session: "s9", at: 2_000, worlds: [a] }))
      yield* t.tidy.countFenced
      expect(t.told).toHaveLength(2)
    }).pipe(Effect.provide(registryLayer()))
  )

  it.effect("stops a copy given to another machine, removes one nobody wants here, and forgets a world gone", () =>
    Effect.gen(function* () {
      const t = yield* setup([
        ["moved", "running", "up"],
        ["removed", "stopped", "down"],
        ["mine", "running", "up"]
      ])
      const { moved, removed, mine } = t.ids as { moved: number; removed: number; mine: number }
      yield* t.registry.setSetting(ANYWHERE_SETTING, [moved, removed, mine, 999])
      const rows = [
        rowOf("shop", "moved", "m2"),
        rowOf("shop", "removed", null, "removed"),
        rowOf("shop", "mine", "m1")
      ]
      yield* t.tidy.tidy(rows, "m1", t.store)
      expect(t.told).toEqual([
        [moved, "Down"],
        [removed, "Remove"]
      ])
      // the removed world and the one the registry no longer has are unmarked; the others stay marked
      expect(anywhereIds(yield* t.registry.getSetting(ANYWHERE_SETTING))).toEqual([moved, mine])
    }).pipe(Effect.provide(registryLayer()))
  )

  it.effect("lets a world that waits in line here go once it has waited 2 s and another machine has room", () =>
    Effect.gen(function* () {
      const t = yield* setup([["queued", "queued", "up"]])
      const id = t.ids.queued as number
      t.waiting.set(id, { worldId: id, since: 0, position: 1, reason: undefined })
      const room = { admits: true, running: 0, waiting: 0, anywhere: 0, draining: false }
      yield* updateView(t.state, (v) => ({
        ...v,
        machines: [machineNamed("m1", 1), { ...machineNamed("m2", 2), room }]
      }))
      const rows = [rowOf("shop", "queued", "m1")]
      yield* TestClock.adjust(1_000)
      yield* t.tidy.tidy(rows, "m1", t.store)
      expect(t.told).toEqual([])
      yield* TestClock.adjust(1_000)
      yield* t.tidy.tidy(rows, "m1", t.store)
      expect(t.told).toEqual([[id, "Down"]])
      expect(t.letGo).toEqual(["queued"])
    }).pipe(Effect.provide(registryLayer()))
  )
})
