import * as fc from "effect/FastCheck"
import { describe, expect, it } from "vitest"
import {
  EXPECTED_MAX_MS,
  firstListenerPollMs,
  LISTENER_POLL_MAX_MS,
  LISTENER_POLL_MIN_MS,
  listenerPollFamilies,
  listenerPollGapMs,
  listenerPollTries,
  listenedNow
} from "../../src/domain/listener-pace.js"

describe("the pace of the wait for a starting service's listener", () => {
  it("tries briskly at first, then less often as the wait grows, never slower than its most", () => {
    expect([0, 100, 200, 400, 1_000, 5_000, 60_000].map((w) => listenerPollGapMs(w))).toEqual([
      10, 10, 10, 20, 50, 250, 250
    ])
    fc.assert(
      fc.property(fc.nat(600_000), fc.nat(600_000), (a, b) => {
        const gap = listenerPollGapMs(a)
        expect(gap).toBeGreaterThanOrEqual(LISTENER_POLL_MIN_MS)
        expect(gap).toBeLessThanOrEqual(LISTENER_POLL_MAX_MS)
        // a listener is seen within a twentieth of the time waited (or the briskest gap), whenever it comes
        expect(gap).toBeLessThanOrEqual(Math.max(LISTENER_POLL_MIN_MS, Math.ceil(a / 20)))
        if (a <= b) expect(listenerPollGapMs(a)).toBeLessThanOrEqual(listenerPollGapMs(b))
      })
    )
  })

  it("costs a few tries a second for a service that takes seconds to start, where every 10 ms cost a hundred", () => {
    // a service listening 5 s after its start: 500 tries at the old fixed pace
    expect(listenerPollTries(5_000, undefined)).toBeLessThanOrEqual(90)
    expect(listenerPollTries(60_000, undefined)).toBeLessThanOrEqual(330)
    // and one that listens within the brisk start is tried as often as before
    expect(listenerPollTries(150, undefined)).toBe(16)
  })

  it("tries a service that listened before only once most of the time it took then has passed", () => {
    expect(firstListenerPollMs(undefined)).toBe(0)
    expect(firstListenerPollMs({ afterMs: 120, family: "v4" })).toBe(84)
    expect(firstListenerPollMs({ afterMs: 30_000, family: "v4" })).toBe(EXPECTED_MAX_MS)
    expect(EXPECTED_MAX_MS).toBe(250)
    // a warm start of a service that took 120 ms: a handful of tries rather than thirteen
    expect(listenerPollTries(120, { afterMs: 120, family: "v4" })).toBeLessThanOrEqual(5)
    expect(listenerPollTries(120, undefined)).toBe(13)
    fc.assert(
      fc.property(fc.nat(600_000), fc.constantFrom("v4" as const, "v6" as const), (afterMs, family) => {
        const first = firstListenerPollMs({ afterMs, family })
        // never later than the service listened then, nor than the most a sooner start may wait for nothing
        expect(first).toBeLessThanOrEqual(afterMs)
        expect(first).toBeLessThanOrEqual(EXPECTED_MAX_MS)
      })
    )
  })

  it("tries briskly again around when a service that listened before took to listen then", () => {
    const before = { afterMs: 2_000, family: "v4" as const }
    expect([1_000, 1_899, 1_900, 2_000, 2_400, 2_401, 5_000].map((w) => listenerPollGapMs(w, before))).toEqual([
      100, 190, 10, 10, 10, 120, 250
    ])
    // found within the briskest gap of when it listens, if it keeps its time, in fewer tries than the first start
    expect(listenerPollTries(2_050, before)).toBeLessThanOrEqual(35)
    expect(listenerPollTries(2_050, undefined)).toBe(69)
    fc.assert(
      fc.property(fc.nat(600_000), fc.nat(600_000), (waited, afterMs) => {
        const gap = listenerPollGapMs(waited, { afterMs, family: "v4" })
        expect(gap).toBeGreaterThanOrEqual(LISTENER_POLL_MIN_MS)
        // a service that comes sooner than it did is still seen within a tenth of the time waited
        expect(gap).toBeLessThanOrEqual(Math.max(LISTENER_POLL_MIN_MS, Math.ceil(waited / 10)))
      })
    )
  })

  it("forgets a service found on the first try of a late start, so that a service that got quicker is not held back", () => {
    const before = { afterMs: 5_000, family: "v4" as const }
    expect(listenedNow(before, { tries: 1, afterMs: 251, family: "v4" })).toBeUndefined()
    expect(listenedNow(before, { tries: 3, afterMs: 300, family: "v6" })).toEqual({ afterMs: 300, family: "v6" })
    // a service not seen before is remembered however soon it was found (its first try was at the start)
    expect(listenedNow(undefined, { tries: 1, afterMs: 2, family: "v4" })).toEqual({ afterMs: 2, family: "v4" })
    // one whose wait started at once anyway (it listened within a millisecond before) is remembered too
    expect(listenedNow({ afterMs: 1, family: "v4" }, { tries: 1, afterMs: 3, family: "v4" })).toEqual({
      afterMs: 3,
      family: "v4"
    })
    // a quicker start is waited on for nothing at most once: the next is tried from the beginning
    fc.assert(
      fc.property(fc.nat(600_000), fc.nat(600_000), (then, now) => {
        const first = firstListenerPollMs({ afterMs: then, family: "v4" })
        // tried first at `first` and found at once: the service listened at `now`, sooner than it did then
        if (now < first)
          expect(listenedNow({ afterMs: then, family: "v4" }, { tries: 1, afterMs: first, family: "v4" })).toBe(
            undefined
          )
      })
    )
  })

  it("asks both loopback addresses, or the one that answered before first and the other every third try", () => {
    expect(listenerPollFamilies(0, undefined)).toEqual(["v4", "v6"])
    const before = { afterMs: 100, family: "v6" as const }
    expect([0, 1, 2, 3, 4, 5].map((i) => listenerPollFamilies(i, before))).toEqual([
      ["v6"],
      ["v6"],
      ["v6", "v4"],
      ["v6"],
      ["v6"],
      ["v6", "v4"]
    ])
    fc.assert(
      fc.property(fc.nat(10_000), fc.constantFrom("v4" as const, "v6" as const), (i, family) => {
        const asked = listenerPollFamilies(i, { afterMs: 1, family })
        expect(asked[0]).toBe(family)
        // within any three tries in a row, both are asked
        const three = [i, i + 1, i + 2].flatMap((j) => listenerPollFamilies(j, { afterMs: 1, family }))
        expect(new Set(three).size).toBe(2)
      })
    )
  })
})
