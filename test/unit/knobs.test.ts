import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import { readText } from "../../src/domain/knobs.js"

/** A provider over `values` that counts how often it is asked. */
const counting = (values: Record<string, string>) => {
  const inner = ConfigProvider.fromMap(new Map(Object.entries(values)))
  const asked = { count: 0 }
  const provider = ConfigProvider.make({
    load: (config) => {
      asked.count++
      return inner.load(config)
    },
    flattened: inner.flattened
  })
  return { provider, asked }
}

describe("readText", () => {
  it.effect("reads a knob as its provider gives it: trimmed, empty as unset", () =>
    Effect.gen(function* () {
      const { provider } = counting({ BERTH_A: "  file.log ", BERTH_EMPTY: "  " })
      const read = Effect.all([readText("BERTH_A"), readText("BERTH_EMPTY"), readText("BERTH_MISSING")])
      expect(yield* Effect.withConfigProvider(read, provider)).toEqual(["file.log", undefined, undefined])
    })
  )

  it.effect("asks a provider once per name, set or not (a missing knob's read is Config's whole failure path)", () =>
    Effect.gen(function* () {
      const { provider, asked } = counting({ BERTH_A: "a" })
      const reads = Effect.forEach(["BERTH_A", "BERTH_MISSING", "BERTH_A", "BERTH_MISSING", "BERTH_MISSING"], readText)
      expect(yield* Effect.withConfigProvider(reads, provider)).toEqual(["a", undefined, "a", undefined, undefined])
      expect(asked.count).toBe(2)
    })
  )

  it.effect(
    "another provider gives its own values: a test or an embedding program is never answered from another's",
    () =>
      Effect.gen(function* () {
        const first = counting({ BERTH_TRACE: "/tmp/one" })
        const second = counting({})
        expect(yield* Effect.withConfigProvider(readText("BERTH_TRACE"), first.provider)).toBe("/tmp/one")
        expect(yield* Effect.withConfigProvider(readText("BERTH_TRACE"), second.provider)).toBeUndefined()
        expect(yield* Effect.withConfigProvider(readText("BERTH_TRACE"), first.provider)).toBe("/tmp/one")
      })
  )
})
