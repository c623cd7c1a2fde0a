import * as fc from "effect/FastCheck"
import { describe, expect, it } from "vitest"
import { passDue, quietWaitMs, RECONCILE_QUIET_MAX_MS, RECONCILE_TICK_MS } from "../../src/domain/reconcile-pace.js"

describe("the reconciler's pace", () => {
  it("waits one look after a change, then twice as long after each quiet pass, up to its most", () => {
    expect([0, 1, 2, 3, 4, 5, 40].map(quietWaitMs)).toEqual([3_000, 6_000, 12_000, 24_000, 30_000, 30_000, 30_000])
  })

  it("passes at once on a change or a vanished worktree, however quiet it was", () => {
    fc.assert(
      fc.property(fc.nat(100), fc.nat(100_000), fc.boolean(), (quietPasses, sinceLastPassMs, vanished) => {
        expect(passDue({ changed: true, vanished, sinceLastPassMs, quietPasses })).toBe(true)
        expect(passDue({ changed: false, vanished: true, sinceLastPassMs, quietPasses })).toBe(true)
      })
    )
  })

  it("never waits less than a look nor longer than its most while nothing changes", () => {
    fc.assert(
      fc.property(fc.nat(1_000), (quietPasses) => {
        const wait = quietWaitMs(quietPasses)
        expect(wait).toBeGreaterThanOrEqual(RECONCILE_TICK_MS)
        expect(wait).toBeLessThanOrEqual(RECONCILE_QUIET_MAX_MS)
        expect(passDue({ changed: false, vanished: false, sinceLastPassMs: wait - 1, quietPasses })).toBe(false)
        expect(passDue({ changed: false, vanished: false, sinceLastPassMs: wait, quietPasses })).toBe(true)
        expect(quietWaitMs(quietPasses + 1)).toBeGreaterThanOrEqual(wait)
      })
    )
  })
})
