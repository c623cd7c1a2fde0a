import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { MachineReading, Pressure } from "../../src/domain/admission.js"
import { admissionOrder, pressure, victim } from "../../src/domain/admission.js"

const RUNS = { numRuns: 500 }

const GiB = 1024 ** 3
const limits = { minMemBytes: 2 * GiB, minDiskBytes: 10 * GiB }
const hysteresis = { resumeFactor: 1.25 }
const reading = (memGiB: number, diskGiB: number): MachineReading => ({
  memAvailableBytes: memGiB * GiB,
  diskFreeBytes: diskGiB * GiB
})

describe("admissionOrder", () => {
  it("is FIFO, ties broken by id", () => {
    expect(
      admissionOrder([
        { id: "c", queuedAt: 30 },
        { id: "b", queuedAt: 10 },
        { id: "z", queuedAt: 20 },
        { id: "a", queuedAt: 20 }
      ])
    ).toEqual(["b", "a", "z", "c"])
    expect(admissionOrder([])).toEqual([])
  })

  it("is a permutation sorted by (queuedAt, id) that ignores the input order", () => {
    const worlds = FastCheck.uniqueArray(
      FastCheck.record({ id: FastCheck.string({ maxLength: 4 }), queuedAt: FastCheck.integer({ min: 0, max: 5 }) }),
      { selector: (w) => w.id, maxLength: 20 }
    )
    FastCheck.assert(
      FastCheck.property(worlds, (ws) => {
        const order = admissionOrder(ws)
        expect([...order].sort()).toEqual(ws.map((w) => w.id).sort())
        const at = new Map(ws.map((w) => [w.id, w.queuedAt]))
        for (let i = 1; i < order.length; i++) {
          const [prev, next] = [order[i - 1]!, order[i]!]
          expect(at.get(prev)! < at.get(next)! || (at.get(prev) === at.get(next) && prev < next)).toBe(true)
        }
        expect(admissionOrder([...ws].reverse())).toEqual(order)
      }),
      RUNS
    )
  })
})

describe("pressure", () => {
  it.each([
    ["plenty of both", reading(8, 100), "ok", "ok"],
    ["memory below the minimum", reading(1.9, 100), "ok", "pressure"],
    ["disk below the minimum", reading(8, 9), "ok", "pressure"],
    ["exactly the minimum is not below it", reading(2, 10), "ok", "ok"],
    ["between minimum and resume level stays ok", reading(2.4, 12), "ok", "ok"],
    ["between minimum and resume level stays under pressure", reading(2.4, 12), "pressure", "pressure"],
    ["exactly the resume level is not above it", reading(2.5, 12.5), "pressure", "pressure"],
    ["memory recovered but disk not yet", reading(3, 12), "pressure", "pressure"],
    ["both above the resume level", reading(2.6, 12.6), "pressure", "ok"],
    ["still below", reading(1, 5), "pressure", "pressure"]
  ] as const)("%s", (_, r, current, next) => {
    expect(pressure(r, limits, hysteresis, current)).toBe(next)
  })

  it("a resume factor below 1 cannot invert the hysteresis", () => {
    expect(pressure(reading(2.1, 11), limits, { resumeFactor: 0.5 }, "pressure")).toBe("ok")
    expect(pressure(reading(1.9, 11), limits, { resumeFactor: 0.5 }, "pressure")).toBe("pressure")
  })

  const factor = FastCheck.double({ min: 1, max: 3, noNaN: true })
  const bytes = FastCheck.integer({ min: 1, max: 64 * GiB })
  const current = FastCheck.constantFrom<Pressure>("ok", "pressure")

  it("never flaps: readings oscillating between the minimum and the resume level keep the state", () => {
    FastCheck.assert(
      FastCheck.property(
        bytes,
        bytes,
        factor,
        current,
        FastCheck.array(FastCheck.tuple(FastCheck.double({ min: 0, max: 1 }), FastCheck.double({ min: 0, max: 1 })), {
          minLength: 1,
          maxLength: 50
        }),
        (minMem, minDisk, resumeFactor, start, fractions) => {
          const l = { minMemBytes: minMem, minDiskBytes: minDisk }
          // each reading lies in [min, min × factor], the band where neither entering nor leaving may happen
          const within = (min: number, f: number) => Math.min(min * resumeFactor, min + (min * resumeFactor - min) * f)
          const readings = fractions.map(([m, d]) => ({
            memAvailableBytes: within(minMem, m),
            diskFreeBytes: within(minDisk, d)
          }))
          let state = start
          for (const r of readings) {
            state = pressure(r, l, { resumeFactor }, state)
            expect(state).toBe(start)
          }
        }
      ),
      RUNS
    )
  })

  it("enters only below a minimum and leaves only above both resume levels", () => {
    FastCheck.assert(
      FastCheck.property(bytes, bytes, factor, current, bytes, bytes, (minMem, minDisk, resumeFactor, c, mem, disk) => {
        const l = { minMemBytes: minMem, minDiskBytes: minDisk }
        const next = pressure({ memAvailableBytes: mem, diskFreeBytes: disk }, l, { resumeFactor }, c)
        if (c === "ok" && next === "pressure") expect(mem < minMem || disk < minDisk).toBe(true)
        if (c === "pressure" && next === "ok") {
          expect(mem > minMem * resumeFactor && disk > minDisk * resumeFactor).toBe(true)
        }
        if (mem < minMem || disk < minDisk) expect(next).toBe("pressure")
      }),
      RUNS
    )
  })
})

describe("victim", () => {
  it("picks the newest running world, ties to the greatest id", () => {
    expect(
      victim([
        { id: "old", startedAt: 1 },
        { id: "new", startedAt: 9 },
        { id: "mid", startedAt: 5 }
      ])
    ).toBe("new")
    expect(
      victim([
        { id: "a", startedAt: 9 },
        { id: "b", startedAt: 9 }
      ])
    ).toBe("b")
    expect(victim([])).toBeUndefined()
  })

  it("is the last world in the order worlds were started, whatever the input order", () => {
    const running = FastCheck.uniqueArray(
      FastCheck.record({ id: FastCheck.string({ maxLength: 4 }), startedAt: FastCheck.integer({ min: 0, max: 5 }) }),
      { selector: (w) => w.id, minLength: 1, maxLength: 20 }
    )
    FastCheck.assert(
      FastCheck.property(running, (ws) => {
        const oldestFirst = admissionOrder(ws.map((w) => ({ id: w.id, queuedAt: w.startedAt })))
        expect(victim(ws)).toBe(oldestFirst[oldestFirst.length - 1])
        expect(victim([...ws].reverse())).toBe(victim(ws))
      }),
      RUNS
    )
  })
})
