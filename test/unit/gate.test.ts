import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import {
  decideGate,
  defaultGateSettings,
  describeWait,
  type GateSettings,
  gateClosed,
  type Readings,
  suspendNow
} from "../../src/domain/admission.js"

const GiB = 1024 ** 3
const settings: GateSettings = { maxParallel: 2, ramReservePercent: 10, diskReserveBytes: 5 * GiB, resumeFactor: 1.5 }
const readings = (freePercent: number, diskGiB = 100): Readings => ({
  memTotalBytes: 100 * GiB,
  memAvailableBytes: freePercent * GiB,
  disks: [{ path: "/home", freeBytes: diskGiB * GiB }]
})

describe("the gate", () => {
  it("admits in arrival order up to max_parallel, and says what the rest wait for", () => {
    const d = decideGate(
      [
        { id: "c", since: 3 },
        { id: "a", since: 1 },
        { id: "b", since: 2 }
      ],
      0,
      readings(50),
      settings,
      false
    )
    expect(d.admit).toEqual(["a", "b"])
    expect(d.waiting).toEqual([{ id: "c", position: 1, reason: { _tag: "Slot", running: 2, maxParallel: 2 } }])
    expect(describeWait(d.waiting[0]!.reason)).toBe("a slot (2 of 2 worlds run)")
  })

  it("near the memory reserve lets one world in per reading; with room to spare, as many as max_parallel", () => {
    const line = [
      { id: "a", since: 1 },
      { id: "b", since: 2 }
    ]
    expect(decideGate(line, 0, readings(12), settings, false).admit).toEqual(["a"])
    const next = decideGate(line.slice(1), 1, readings(12), settings, false, 1)
    expect(next.admit).toEqual([])
    expect(next.waiting[0]?.reason._tag).toBe("Ram")
    expect(decideGate(line, 0, readings(40), settings, false).admit).toEqual(["a", "b"])
    // recovering from pressure counts as near the reserve, whatever the reading
    expect(decideGate(line, 0, readings(40), settings, true).admit).toEqual(["a"])
  })

  it("holds the whole line while memory or disk is short: no later world overtakes", () => {
    const low = decideGate([{ id: "a", since: 1 }], 0, readings(5), settings, false)
    expect(low.admit).toEqual([])
    expect(low.waiting[0]?.reason._tag).toBe("Ram")
    const disk = decideGate([{ id: "a", since: 1 }], 0, readings(50, 1), settings, false)
    expect(disk.waiting[0]?.reason).toMatchObject({ _tag: "Disk", path: "/home" })
  })

  it("asks for the reserve times the resume factor while recovering from pressure (hysteresis)", () => {
    expect(gateClosed(0, readings(12), settings, false)).toBeUndefined()
    expect(gateClosed(0, readings(12), settings, true)).toMatchObject({ _tag: "Ram", reservePercent: 15 })
    expect(gateClosed(0, readings(16), settings, true)).toBeUndefined()
  })

  it("never lets a later arrival start before an earlier one (1,000 random schedules)", () => {
    const schedule = FastCheck.array(
      FastCheck.record({
        arrive: FastCheck.integer({ min: 0, max: 50 }),
        runFor: FastCheck.integer({ min: 1, max: 20 }),
        free: FastCheck.integer({ min: 0, max: 100 })
      }),
      { minLength: 1, maxLength: 25 }
    )
    FastCheck.assert(
      FastCheck.property(schedule, FastCheck.integer({ min: 1, max: 4 }), (worlds, max) => {
        const s = { ...settings, maxParallel: max }
        const started: Array<number> = []
        const running = new Map<number, number>()
        // every world eventually starts once memory is back (t ≥ 60): nobody starves
        for (let t = 0; t <= 60 + worlds.length * 25; t++) {
          for (const [id, until] of running) if (until <= t) running.delete(id)
          const waiting = worlds
            .map((w, id) => ({ id: String(id), since: w.arrive * 100 + id, w }))
            .filter((x) => x.w.arrive <= t && !started.includes(Number(x.id)))
          const free = t < 60 ? (worlds[t % worlds.length]?.free ?? 50) : 50
          const d = decideGate(waiting, running.size, readings(free), s, false)
          for (const id of d.admit) {
            started.push(Number(id))
            running.set(Number(id), t + worlds[Number(id)]!.runFor)
          }
        }
        expect(started).toHaveLength(worlds.length)
        const arrival = (id: number) => worlds[id]!.arrive * 100 + id
        for (let i = 1; i < started.length; i++) expect(arrival(started[i - 1]!)).toBeLessThan(arrival(started[i]!))
      }),
      { numRuns: 1000 }
    )
  })
})

describe("suspension under pressure", () => {
  const running = [
    { id: "old", startedAt: 1, since: 1 },
    { id: "new", startedAt: 50, since: 50 },
    { id: "mid", startedAt: 20, since: 20 }
  ]
  const base = { settings, running, now: 1_000, lastSuspendAt: undefined, settleMs: 10, dwellMs: 100 }

  it("suspends the newest running world when memory is below the reserve", () => {
    expect(suspendNow({ ...base, readings: readings(5) })?.id).toBe("new")
    expect(suspendNow({ ...base, readings: readings(50) })).toBeUndefined()
  })

  it("one at a time: waits for the last suspension to settle", () => {
    expect(suspendNow({ ...base, readings: readings(5), lastSuspendAt: 995 })).toBeUndefined()
    expect(suspendNow({ ...base, readings: readings(5), lastSuspendAt: 900 })?.id).toBe("new")
  })

  it("leaves a world that started or resumed within the dwell time (no flapping)", () => {
    const fresh = [...running, { id: "resumed", startedAt: 60, since: 950 }]
    expect(suspendNow({ ...base, running: fresh, readings: readings(5) })?.id).toBe("new")
  })

  it("has defaults that suit a laptop", () => {
    expect(defaultGateSettings.maxParallel).toBeGreaterThan(1)
    expect(defaultGateSettings.ramReservePercent).toBeGreaterThan(0)
  })
})
