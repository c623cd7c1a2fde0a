/**
 * Every world's latest events in one read (what a status of all worlds carries), in the real Registry (SQLite): the
 * same events, in the same order, as asking each world on its own.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const layer = () => {
  const home = mkdtempSync(join(tmpdir(), "berth-registry-events-"))
  folders.push(home)
  return RegistryLive.pipe(Layer.provide(Home.layerAt(home)))
}

describe("Registry.recentEvents", () => {
  it.effect("answers each world's latest events, newest first, as each world's own read does", () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
      const worlds = yield* Effect.forEach(["a", "b", "c"], (name) =>
        registry.createWorld({ projectId: project.id, name, path: "", branch: name, isMain: false })
      )
      const [a, b] = [worlds[0]!, worlds[1]!]
      // interleaved, more than the limit for one world, none for the third, and one of no world at all
      for (let i = 0; i < 7; i++) {
        yield* registry.addEvent({ worldId: a.id, service: null, kind: "note", message: `a${i}` })
        if (i % 3 === 0) yield* registry.addEvent({ worldId: b.id, service: "web", kind: "note", message: `b${i}` })
      }
      yield* registry.addEvent({ worldId: null, service: null, kind: "note", message: "machine" })

      const recent = yield* registry.recentEvents(4)
      for (const w of worlds) {
        const mine = recent.filter((e) => e.worldId === w.id).map(({ worldId: _, ...e }) => e)
        expect(mine).toEqual(yield* registry.events(w.id, 4))
      }
      expect(recent.filter((e) => e.worldId === a.id).map((e) => e.message)).toEqual(["a6", "a5", "a4", "a3"])
      expect(recent.filter((e) => e.worldId === b.id).map((e) => e.message)).toEqual(["b6", "b3", "b0"])
      expect(recent.some((e) => e.message === "machine")).toBe(false)
    }).pipe(Effect.provide(layer()))
  )
})
