import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import {
  BEAT_HOLD_MS,
  fencedMessage,
  fencedReason,
  formatFenced,
  newlyFenced,
  parseFenced,
  holdUntil,
  FENCE_MARGIN_MS,
  type FenceLease,
  formatLease,
  leaseUntil,
  parseLease,
  recordedSince,
  watchStep
} from "../../src/domain/fence.js"

const serves = { daemon: 4242, session: "a1b2" }
const lease = (patch: Partial<FenceLease> = {}): FenceLease => ({
  daemon: 4242,
  session: "a1b2",
  until: 10_000,
  worlds: [3, 7],
  home: "/home/u/.berth",
  done: false,
  ...patch
})

describe("the fence", () => {
  it("ends a hold before the lock can be taken: the margin before the expiry, counted from the refresh's start", () => {
    expect(leaseUntil(1_000, 6_000)).toBe(1_000 + 6_000 - FENCE_MARGIN_MS)
    FastCheck.assert(
      FastCheck.property(FastCheck.nat(1e12), FastCheck.integer({ min: 2_000, max: 60_000 }), (at, expiry) => {
        expect(leaseUntil(at, expiry)).toBeLessThan(at + expiry)
      })
    )
  })

  it("holds until the earlier of what the last lock refresh and the last heartbeat allow; nothing before both", () => {
    expect(holdUntil({ refreshedAt: 10_000, beatAt: 11_000 }, 6_000)).toBe(Math.min(15_000, 11_000 + BEAT_HOLD_MS))
    expect(holdUntil({ refreshedAt: 10_000, beatAt: 20_000 }, 6_000)).toBe(15_000)
    expect(holdUntil({ refreshedAt: undefined, beatAt: 20_000 }, 6_000)).toBe(0)
    expect(holdUntil({ refreshedAt: 10_000, beatAt: undefined }, 6_000)).toBe(0)
  })

  it("reads back the lease it writes, and nothing else is taken for one", () => {
    expect(parseLease(formatLease(lease()))).toEqual(lease())
    expect(parseLease("")).toBeUndefined()
    expect(parseLease('{"daemon":1,"session":"x","until":5,"worlds":[1],"home":"/h"')).toBeUndefined()
    expect(parseLease(JSON.stringify({ ...lease(), worlds: ["3"] }))).toBeUndefined()
    expect(parseLease(JSON.stringify({ ...lease(), until: 1.5 }))).toBeUndefined()
    expect(parseLease("null")).toBeUndefined()
  })

  it("fences the worlds once the lease has run out, and keeps watching a daemon that may thaw", () => {
    expect(watchStep({ lease: lease(), serves, daemonAlive: true, now: 9_999 })._tag).toBe("Wait")
    expect(watchStep({ lease: lease(), serves, daemonAlive: true, now: 10_000 })).toEqual({
      _tag: "Fence",
      worlds: [3, 7],
      home: "/home/u/.berth",
      thenExit: false
    })
  })

  it("fences a dead daemon's worlds when their lease runs out, not before, and then leaves", () => {
    expect(watchStep({ lease: lease(), serves, daemonAlive: false, now: 5_000 })._tag).toBe("Wait")
    expect(watchStep({ lease: lease(), serves, daemonAlive: false, now: 10_001 })).toMatchObject({
      _tag: "Fence",
      thenExit: true
    })
  })

  it("leaves when the daemon let go itself, when another daemon or session writes the lease, or nothing is left", () => {
    const stale = 1e9
    expect(watchStep({ lease: lease({ done: true }), serves, daemonAlive: true, now: stale })._tag).toBe("Exit")
    expect(watchStep({ lease: lease({ daemon: 1 }), serves, daemonAlive: true, now: stale })._tag).toBe("Exit")
    expect(watchStep({ lease: lease({ session: "other" }), serves, daemonAlive: true, now: stale })._tag).toBe("Exit")
    expect(watchStep({ lease: lease({ worlds: [] }), serves, daemonAlive: false, now: stale })._tag).toBe("Exit")
    expect(watchStep({ lease: undefined, serves, daemonAlive: false, now: stale })._tag).toBe("Exit")
    // a lease not yet written, or one with nothing that runs anywhere: nothing to do yet
    expect(watchStep({ lease: undefined, serves, daemonAlive: true, now: stale })._tag).toBe("Wait")
    expect(watchStep({ lease: lease({ worlds: [] }), serves, daemonAlive: true, now: stale })._tag).toBe("Wait")
  })

  it("never fences a world while its lease is good, whatever else holds", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.nat(1e9),
        FastCheck.nat(1e9),
        FastCheck.boolean(),
        FastCheck.boolean(),
        (until, now, alive, done) => {
          const step = watchStep({ lease: lease({ until, done }), serves, daemonAlive: alive, now })
          if (now < until) expect(step._tag).not.toBe("Fence")
          if (done) expect(step._tag).toBe("Exit")
        }
      )
    )
  })

  it("reads back what the watchdog fenced, and nothing that is not a record", () => {
    const record = { daemon: 4242, session: "a1b2", at: 1_700_000_000_000, worlds: [3, 7] }
    expect(parseFenced(formatFenced(record))).toEqual(record)
    for (const text of [
      "",
      "{",
      "null",
      JSON.stringify({ ...record, worlds: ["3"] }),
      JSON.stringify({ ...record, at: 1.5 })
    ]) {
      expect(parseFenced(text)).toBeUndefined()
    }
  })

  it("counts a fenced record once, and only for the daemon it was made for", () => {
    const record = { daemon: 4242, session: "a1b2", at: 5_000, worlds: [3, 7] }
    expect(newlyFenced(record, 4242, 0)).toEqual([3, 7])
    // handled already (a later session of the same daemon reads it again)
    expect(newlyFenced(record, 4242, 5_000)).toEqual([])
    // a daemon before this one was fenced: its copies were never this daemon's
    expect(newlyFenced(record, 4243, 0)).toEqual([])
    expect(newlyFenced(undefined, 4242, 0)).toEqual([])
  })

  it("knows a fence recorded since the hold ran out, so that the same fence is not counted twice", () => {
    const record = { ...serves, at: 5_000, worlds: [3] }
    // the holder recorded it as the machine woke: the watchdog, a moment later, adds nothing
    expect(recordedSince(record, serves, 4_000)).toBe(true)
    expect(recordedSince(record, serves, 5_000)).toBe(true)
    // a fence of an earlier lapse, another session's or daemon's, or none
    expect(recordedSince(record, serves, 6_000)).toBe(false)
    expect(recordedSince(record, { ...serves, session: "c3d4" }, 4_000)).toBe(false)
    expect(recordedSince(record, { ...serves, daemon: 4243 }, 4_000)).toBe(false)
    expect(recordedSince(undefined, serves, 4_000)).toBe(false)
  })

  it("says a stopped copy was fenced while the fence's event is its latest but the stop", () => {
    const fenced = { kind: "fenced", message: fencedMessage(0) }
    const stopped = { kind: "stopped", message: "stopped api" }
    expect(fencedReason({ events: [stopped, fenced] }, true)).toBe(fenced.message)
    expect(fenced.message).toContain("fenced at 00:00:00 UTC")
    // running again, or started since: no longer the fenced copy
    expect(fencedReason({ events: [stopped, fenced] }, false)).toBeNull()
    expect(fencedReason({ events: [stopped, { kind: "restarted", message: "" }, fenced] }, true)).toBeNull()
    expect(fencedReason({ events: [] }, true)).toBeNull()
  })
})
