/**
 * The registry's reads go through a connection of their own (Registry.ts): each read sees every write committed
 * before it, and never a transaction the writing connection has open — a world's services saved in one transaction
 * are read all or none, however the reading fiber and the writing one take turns. The read connection writes nothing.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { serviceRow } from "./registry-helpers.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const layer = () => {
  const home = mkdtempSync(join(tmpdir(), "berth-registry-reads-"))
  folders.push(home)
  return RegistryLive.pipe(Layer.provideMerge(Home.layerAt(home)))
}

/** A project with one world in it, as the tests below start. */
const aWorld = Effect.gen(function* () {
  const registry = yield* Registry
  const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
  const world = yield* registry.createWorld({
    projectId: project.id,
    name: "a",
    path: "/tmp/a",
    branch: "a",
    isMain: false
  })
  return { registry, project, world }
})

describe("Registry reads", () => {
  it.effect("see each write as soon as it is committed", () =>
    Effect.gen(function* () {
      const { registry, project, world: w } = yield* aWorld
      expect(yield* registry.projectLabelled(project.label)).toEqual(project)
      expect((yield* registry.world(w.id))?.name).toBe("a")
      expect((yield* registry.findWorld(project.id, "a"))?.id).toBe(w.id)
      yield* registry.setObserved(w.id, "running", null)
      expect((yield* registry.world(w.id))?.observed).toBe("running")
      yield* registry.saveService(serviceRow(w.id, "web", "healthy"))
      expect((yield* registry.services(w.id)).map((s) => s.observed)).toEqual(["healthy"])
      yield* registry.setSetting("k", { n: 1 })
      expect(yield* registry.getSetting("k")).toEqual({ n: 1 })
      yield* registry.updateSetting("k", () => ({ n: 2 }))
      expect(yield* registry.getSetting("k")).toEqual({ n: 2 })
      yield* registry.deleteWorld(w.id)
      expect(yield* registry.world(w.id)).toBeUndefined()
    }).pipe(Effect.provide(layer()))
  )

  it.effect("never see a transaction half done, while it is under way", () =>
    Effect.gen(function* () {
      const { registry, world: w } = yield* aWorld
      const rows = Array.from({ length: 400 }, (_, i) => serviceRow(w.id, `s${i}`, "running"))
      let done = false
      const seen: Array<number> = []
      // the reader takes a turn whenever the runtime lets the writing fiber yield, mid-transaction included
      const reader = yield* Effect.fork(
        Effect.gen(function* () {
          while (!done) {
            seen.push((yield* registry.services(w.id)).length)
            yield* Effect.yieldNow()
          }
        })
      )
      yield* registry.saveServices(w.id, rows)
      done = true
      yield* Fiber.join(reader)
      expect(seen.length).toBeGreaterThan(1)
      expect(seen.filter((n) => n !== 0 && n !== rows.length)).toEqual([])
      expect((yield* registry.services(w.id)).length).toBe(rows.length)
    }).pipe(Effect.provide(layer()))
  )
})
