/**
 * What the machine has room for: available memory and the free space of the filesystems worlds live on. Read from
 * Linux's /proc/meminfo and statfs; elsewhere memory comes from `os` (macOS can follow with its own reading). Tests
 * and benchmarks point `BERTH_READINGS_FILE` at a JSON file of readings instead, so pressure can be staged without
 * filling a real machine.
 */
import { readFileSync, statfsSync } from "node:fs"
import * as os from "node:os"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Readings } from "../domain/admission.js"

/** `{ "memTotalBytes", "memAvailableBytes" }` or `{ "memAvailablePercent" }`, and optionally `"diskFreeBytes"`. */
interface StagedReadings {
  readonly memTotalBytes?: number
  readonly memAvailableBytes?: number
  readonly memAvailablePercent?: number
  readonly diskFreeBytes?: number
}

/** MemTotal and MemAvailable from /proc/meminfo (kB), or undefined where there is none. */
export const parseMeminfo = (text: string): { total: number; available: number } | undefined => {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, "m").exec(text)
    return m?.[1] === undefined ? undefined : Number(m[1]) * 1024
  }
  const total = field("MemTotal")
  const available = field("MemAvailable")
  return total === undefined || available === undefined ? undefined : { total, available }
}

const memory = (): { total: number; available: number } => {
  try {
    const parsed = parseMeminfo(readFileSync("/proc/meminfo", "utf8"))
    if (parsed !== undefined) return parsed
  } catch {
    // not Linux
  }
  return { total: os.totalmem(), available: os.freemem() }
}

const freeBytes = (path: string): number | undefined => {
  try {
    const s = statfsSync(path)
    return Number(s.bavail) * Number(s.bsize)
  } catch {
    return undefined
  }
}

export interface MachineService {
  /** The readings now, for the filesystems holding `paths` (one entry per distinct filesystem). */
  readonly read: (paths: ReadonlyArray<string>) => Effect.Effect<Readings>
}

export class Machine extends Context.Tag("berth/Machine")<Machine, MachineService>() {}

export const MachineLive: Layer.Layer<Machine> = Layer.succeed(Machine, {
  read: (paths: ReadonlyArray<string>): Effect.Effect<Readings> =>
    Effect.sync(() => {
      const staged = process.env.BERTH_READINGS_FILE
      if (staged !== undefined && staged !== "") {
        try {
          const r = JSON.parse(readFileSync(staged, "utf8")) as StagedReadings
          const total = r.memTotalBytes ?? 16 * 1024 ** 3
          const available =
            r.memAvailableBytes ?? (r.memAvailablePercent === undefined ? total : (total * r.memAvailablePercent) / 100)
          const disk = r.diskFreeBytes
          return {
            memTotalBytes: total,
            memAvailableBytes: available,
            disks: disk === undefined ? [] : paths.slice(0, 1).map((path) => ({ path, freeBytes: disk }))
          }
        } catch {
          // a file being rewritten: read the machine this once
        }
      }
      const mem = memory()
      const seen = new Set<number>()
      const disks: Array<{ path: string; freeBytes: number }> = []
      for (const path of paths) {
        const free = freeBytes(path)
        // paths on one filesystem report the same free space: list each filesystem once
        if (free === undefined || seen.has(free)) continue
        seen.add(free)
        disks.push({ path, freeBytes: free })
      }
      return { memTotalBytes: mem.total, memAvailableBytes: mem.available, disks }
    })
})
