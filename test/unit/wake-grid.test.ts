import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { onTick, untilTick, WAKE_TICK_MS } from "../../src/domain/wake-grid.js"

const now = FastCheck.integer({ min: 0, max: 4_000_000_000_000 })
const period = FastCheck.integer({ min: 1, max: 600_000 })

describe("the wake grid", () => {
  it("a periodic wait ends at the next multiple of its period, within one period", () => {
    expect(untilTick(0, 2_000)).toBe(2_000)
    expect(untilTick(1_999, 2_000)).toBe(1)
    expect(untilTick(2_000, 2_000)).toBe(2_000)
    FastCheck.assert(
      FastCheck.property(now, period, (t, p) => {
        const wait = untilTick(t, p)
        expect(wait).toBeGreaterThan(0)
        expect(wait).toBeLessThanOrEqual(p)
        expect((t + wait) % p).toBe(0)
      })
    )
  })

  it("loops of different periods come due on the same ticks: every 2 s and every 3 s meet every 6 s", () => {
    const dues = (p: number, from: number, until: number) => {
      const out: Array<number> = []
      for (let t = from + untilTick(from, p); t <= until; t += untilTick(t, p)) out.push(t)
      return out
    }
    const two = dues(2_000, 12_345, 60_000)
    const three = dues(3_000, 1_001, 60_000)
    expect(two.filter((t) => three.includes(t))).toEqual([
      18_000, 24_000, 30_000, 36_000, 42_000, 48_000, 54_000, 60_000
    ])
  })

  it("a chosen wait is kept or lengthened by less than one tick, to end on a tick", () => {
    expect(onTick(500, 2_000, WAKE_TICK_MS)).toBe(2_500)
    expect(onTick(1_000, 2_000, WAKE_TICK_MS)).toBe(2_000)
    expect(onTick(1_234, 2_000, 0)).toBe(2_000)
    FastCheck.assert(
      FastCheck.property(now, FastCheck.integer({ min: 0, max: 600_000 }), period, (t, w, tick) => {
        const wait = onTick(t, w, tick)
        expect(wait).toBeGreaterThanOrEqual(w)
        expect(wait).toBeLessThan(w + tick)
        expect((t + wait) % tick).toBe(0)
      })
    )
  })
})
