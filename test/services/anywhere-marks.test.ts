/**
 * The marks that say which of a machine's worlds are copies of worlds that run anywhere (what its fence stops when it
 * is cut off, and what it tidies once the world moved or was removed), kept in the real Registry (SQLite): entities
 * mark their worlds while the publishing loop unmarks others, all at once, and no mark is lost.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { markAnywhere } from "../../src/cluster/anywhere.js"
import { ANYWHERE_SETTING, anywhereIds } from "../../src/domain/cluster.js"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

/** The real Registry, whose reads of a setting answer a moment later (as a busy database's would). */
const layer = () => {
  const home = mkdtempSync(join(tmpdir(), "berth-anywhere-marks-"))
  folders.push(home)
  const slowReads = Layer.effect(
    Registry,
    Effect.map(Registry, (real) => ({
      ...real,
      getSetting: (key: string) => Effect.tap(real.getSetting(key), () => Effect.yieldNow())
    }))
  )
  return slowReads.pipe(Layer.provide(RegistryLive), Layer.provide(Home.layerAt(home)))
}

describe("marks of worlds that run anywhere", () => {
  it.effect("keeps every mark when many worlds are marked and unmarked at once", () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      yield* markAnywhere(registry, [100, 101, 102, 103], true)
      const marking = Array.from({ length: 30 }, (_, i) => markAnywhere(registry, [i + 1], true))
      const unmarking = [markAnywhere(registry, [100, 102], false), markAnywhere(registry, [103], false)]
      yield* Effect.all([...marking, ...unmarking], { concurrency: "unbounded", discard: true })
      const marked = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))
      expect([...marked].sort((a, b) => a - b)).toEqual([...Array.from({ length: 30 }, (_, i) => i + 1), 101])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("marks a world once however often it is marked", () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      yield* Effect.all([markAnywhere(registry, [7], true), markAnywhere(registry, [7], true)], {
        concurrency: "unbounded"
      })
      expect(anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))).toEqual([7])
    }).pipe(Effect.provide(layer()))
  )
})
