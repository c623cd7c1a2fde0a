import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import {
  FASTEST_WRITE_BYTES_PER_S,
  LOG_CHECK_MAX_MS,
  LOG_CHECK_MIN_MS,
  type LogFileFacts,
  logBudget,
  logTrim,
  nextLogCheckMs
} from "../../src/domain/log-budget.js"

const MiB = 1024 * 1024
const file = (path: string, world: string, bytes: number, modifiedMs: number, live = false): LogFileFacts => ({
  path,
  world,
  live,
  bytes,
  modifiedMs
})

describe("logBudget", () => {
  it("keeps what a large disk kept before, and a small disk's logs to a quarter of it", () => {
    expect(logBudget(500 * 1024 * MiB)).toEqual({
      perHomeBytes: 1024 * MiB,
      perWorldBytes: 256 * MiB,
      rotateAtBytes: 10 * MiB
    })
    expect(logBudget(0)).toEqual(logBudget(500 * 1024 * MiB))
    expect(logBudget(8 * MiB)).toEqual({ perHomeBytes: 2 * MiB, perWorldBytes: MiB, rotateAtBytes: MiB / 4 })
  })
})

describe("logTrim", () => {
  const budget = { rotateAtBytes: MiB, perWorldBytes: 4 * MiB, perHomeBytes: 6 * MiB }

  it("drops nothing within the budget", () => {
    expect(logTrim([file("1/web.log", "1", 3 * MiB, 5, true), file("1/web.log.1", "1", MiB, 1)], budget)).toEqual({
      drop: [],
      truncate: []
    })
  })

  it("drops a world's oldest rotated copies first", () => {
    const files = [
      file("1/web.log", "1", 2 * MiB, 10, true),
      file("1/web.log.1", "1", 2 * MiB, 8),
      file("1/web.log.2", "1", 2 * MiB, 3),
      file("1/api.log.1", "1", MiB, 5)
    ]
    expect(logTrim(files, budget)).toEqual({ drop: ["1/web.log.2", "1/api.log.1"], truncate: [] })
  })

  it("empties the largest live log only once no rotated copy is left", () => {
    const files = [
      file("1/web.log", "1", 4 * MiB, 10, true),
      file("1/api.log", "1", MiB, 10, true),
      file("1/web.log.1", "1", MiB, 1)
    ]
    expect(logTrim(files, budget)).toEqual({ drop: ["1/web.log.1"], truncate: ["1/web.log"] })
  })

  it("keeps every world within its share and all of them within the home's, oldest copies first across worlds", () => {
    const files = [
      file("1/web.log", "1", 3 * MiB, 10, true),
      file("2/web.log", "2", 3 * MiB, 10, true),
      file("2/web.log.1", "2", MiB, 2),
      file("1/web.log.1", "1", MiB, 4)
    ]
    expect(logTrim(files, budget)).toEqual({ drop: ["2/web.log.1", "1/web.log.1"], truncate: [] })
  })

  it("always leaves every world and the home within budget, and empties a live log only when nothing rotated is left", () => {
    const arbitraryFile = FastCheck.record({
      world: FastCheck.constantFrom("1", "2", "3"),
      name: FastCheck.constantFrom("web.log", "web.log.1", "web.log.2", "api.log", "api.log.1"),
      bytes: FastCheck.integer({ min: 0, max: 5 * MiB }),
      modifiedMs: FastCheck.integer({ min: 0, max: 1000 })
    })
    FastCheck.assert(
      FastCheck.property(FastCheck.uniqueArray(arbitraryFile, { selector: (f) => `${f.world}/${f.name}` }), (raw) => {
        const files = raw.map((f) =>
          file(`${f.world}/${f.name}`, f.world, f.bytes, f.modifiedMs, f.name.endsWith(".log"))
        )
        const trim = logTrim(files, budget)
        const gone = new Set([...trim.drop, ...trim.truncate])
        const left = files.filter((f) => !gone.has(f.path))
        const sum = (fs: ReadonlyArray<LogFileFacts>) => fs.reduce((s, f) => s + f.bytes, 0)
        expect(sum(left)).toBeLessThanOrEqual(budget.perHomeBytes)
        for (const w of ["1", "2", "3"])
          expect(sum(left.filter((f) => f.world === w))).toBeLessThanOrEqual(budget.perWorldBytes)
        // within a world whose live log was emptied, no rotated copy was kept
        for (const f of files.filter((f) => trim.truncate.includes(f.path))) {
          expect(left.filter((o) => o.world === f.world && !o.live && o.bytes > 0)).toEqual([])
        }
      })
    )
  })
})

describe("nextLogCheckMs", () => {
  const live = (world: string, bytes: number) => file(`/l/${world}/a.log`, world, bytes, 0, true)

  it("looks again in 30 s with room to spare, every 2 s on a small disk or near the budget", () => {
    const roomy = logBudget(100 * 1024 * MiB)
    expect(nextLogCheckMs([live("1", MiB)], roomy)).toBe(LOG_CHECK_MAX_MS)
    const small = logBudget(8 * MiB)
    expect(nextLogCheckMs([], small)).toBe(LOG_CHECK_MIN_MS)
    // a world near its share: as soon as the fastest writer could reach it
    expect(nextLogCheckMs([live("1", roomy.perWorldBytes - 40 * MiB)], roomy)).toBe(5_000)
    expect(nextLogCheckMs([live("1", roomy.perWorldBytes + MiB)], roomy)).toBe(LOG_CHECK_MIN_MS)
  })

  it("is never sooner than 2 s nor later than 30 s, and never later than the fastest writer needs to fill the room", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.integer({ min: MiB, max: 2 ** 40 }),
        FastCheck.array(FastCheck.tuple(FastCheck.constantFrom("1", "2", "3"), FastCheck.nat(2 ** 30)), {
          maxLength: 20
        }),
        (disk, sizes) => {
          const budget = logBudget(disk)
          const files = sizes.map(([w, b]) => live(w, b))
          const ms = nextLogCheckMs(files, budget)
          expect(ms).toBeGreaterThanOrEqual(LOG_CHECK_MIN_MS)
          expect(ms).toBeLessThanOrEqual(LOG_CHECK_MAX_MS)
          const total = files.reduce((a, f) => a + f.bytes, 0)
          const room = budget.perHomeBytes - total
          if (ms > LOG_CHECK_MIN_MS) expect((ms / 1000) * FASTEST_WRITE_BYTES_PER_S).toBeLessThanOrEqual(room + 4096)
        }
      )
    )
  })
})
