import * as fc from "effect/FastCheck"
import { describe, expect, it } from "vitest"
import { TouchJournal } from "../../src/domain/touched.js"

describe("the registry's journal of touched worlds", () => {
  it("tells the worlds written after a version, and nothing once caught up", () => {
    const j = new TouchJournal()
    expect(j.record([1])).toBe(1)
    expect(j.record([2, 3])).toBe(2)
    expect(j.record([1])).toBe(3)
    expect(j.since(0)).toEqual({ version: 3, worlds: new Set([1, 2, 3]) })
    expect(j.since(1)).toEqual({ version: 3, worlds: new Set([1, 2, 3]) })
    expect(j.since(2)).toEqual({ version: 3, worlds: new Set([1]) })
    expect(j.since(3)).toEqual({ version: 3, worlds: new Set() })
  })

  it("says all to a reader from before a write that may change every route, not to one after it", () => {
    const j = new TouchJournal()
    j.record([1])
    j.record("all")
    j.record([2])
    expect(j.since(0).worlds).toBe("all")
    expect(j.since(1).worlds).toBe("all")
    expect(j.since(2)).toEqual({ version: 3, worlds: new Set([2]) })
  })

  it("says all to a reader from before what it no longer remembers, and to one from a version it never gave", () => {
    const j = new TouchJournal(3)
    j.record([1, 2])
    const caughtUp = j.version
    j.record([3, 4])
    expect(j.since(caughtUp).worlds).toBe("all")
    expect(j.since(j.version).worlds).toEqual(new Set())
    j.record([5])
    expect(j.since(j.version - 1)).toEqual({ version: j.version, worlds: new Set([5]) })
    expect(j.since(j.version + 1).worlds).toBe("all")
  })

  it("never leaves out a world written after the reader's version (property)", () => {
    const write = fc.oneof(fc.constant<"all">("all"), fc.array(fc.nat(20), { maxLength: 4 }))
    fc.assert(
      fc.property(fc.array(write, { maxLength: 40 }), fc.integer({ min: 1, max: 30 }), (writes, limit) => {
        const j = new TouchJournal(limit)
        for (const w of writes) j.record(w)
        for (let v = 0; v <= writes.length; v++) {
          const { version, worlds } = j.since(v)
          expect(version).toBe(writes.length)
          if (worlds === "all") continue
          const after = writes.slice(v)
          expect(after).not.toContain("all")
          expect(worlds).toEqual(new Set(after.flatMap((w) => (w === "all" ? [] : w))))
        }
      })
    )
  })
})
