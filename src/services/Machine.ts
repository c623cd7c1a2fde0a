/**
 * What the machine has room for: available memory and the free space of the filesystems worlds live on. Read from
 * the Platform (on Linux /proc/meminfo; `os` where it cannot tell) and statfs. Tests
 * and benchmarks point `BERTH_READINGS_FILE` at a JSON file of readings instead, so pressure can be staged without
 * filling a real machine.
 */
import { readFileSync, statfsSync, statSync } from "node:fs"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { readText } from "../domain/knobs.js"
import * as Layer from "effect/Layer"
import type { Readings } from "../domain/admission.js"
import { type MemoryReading, memoryOrFallback, Platform } from "./Platform.js"

/** `{ "memTotalBytes", "memAvailableBytes" }` or `{ "memAvailablePercent" }`, and optionally `"diskFreeBytes"`. */
interface StagedReadings {
  readonly memTotalBytes?: number
  readonly memAvailableBytes?: number
  readonly memAvailablePercent?: number
  readonly diskFreeBytes?: number
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

/**
 * Which filesystem holds each path, learned once: the gate reads the machine every two seconds, and one statfs per
 * filesystem (rather than per world's worktree, a hundred on one disk) keeps an idle swarm's cost flat. A path that
 * is gone (a removed world's worktree) is looked at again only once a minute.
 */
const GONE_RETRY_MS = 60_000

type DeviceEntry = { readonly dev: number } | { readonly goneAt: number }

/** One Machine's knowledge of which filesystem holds each path it was asked about. */
const deviceCache = () => {
  const devices = new Map<string, DeviceEntry>()
  return {
    of: (path: string, now: number): number | undefined => {
      const known = devices.get(path)
      if (known !== undefined) {
        if ("dev" in known) return known.dev
        if (now - known.goneAt < GONE_RETRY_MS) return undefined
      }
      // bounded: worktrees come and go over a daemon's life
      if (devices.size > 10_000) devices.clear()
      try {
        const dev = statSync(path).dev
        devices.set(path, { dev })
        return dev
      } catch {
        devices.set(path, { goneAt: now })
        return undefined
      }
    },
    gone: (path: string, now: number) => {
      devices.set(path, { goneAt: now })
    }
  }
}
type DeviceCache = ReturnType<typeof deviceCache>

/** The machine's readings, its memory from the Platform it is given (see layers/index.ts). */
export const MachineLive: Layer.Layer<Machine, never, Platform> = Layer.effect(
  Machine,
  Effect.map(Platform, (platform): MachineService => {
    const devices = deviceCache()
    return {
      read: (paths: ReadonlyArray<string>): Effect.Effect<Readings> =>
        Effect.flatMap(readText("BERTH_READINGS_FILE"), (staged) => {
          // readings staged in a file (the end-to-end tests' way to make memory or disk short), read each time
          if (staged !== undefined) {
            try {
              const r = JSON.parse(readFileSync(staged, "utf8")) as StagedReadings
              const total = r.memTotalBytes ?? 16 * 1024 ** 3
              const available =
                r.memAvailableBytes ??
                (r.memAvailablePercent === undefined ? total : (total * r.memAvailablePercent) / 100)
              const disk = r.diskFreeBytes
              return Effect.succeed({
                memTotalBytes: total,
                memAvailableBytes: available,
                disks: disk === undefined ? [] : paths.slice(0, 1).map((path) => ({ path, freeBytes: disk }))
              })
            } catch {
              // a file being rewritten: read the machine this once
            }
          }
          return Effect.map(memoryOrFallback(platform), (mem) => readDisks(devices, paths, mem))
        })
    }
  })
)

const readDisks = (devices: DeviceCache, paths: ReadonlyArray<string>, mem: MemoryReading): Readings => {
  const now = Date.now()
  const seen = new Set<number>()
  const disks: Array<{ path: string; freeBytes: number }> = []
  for (const path of paths) {
    // paths on one filesystem report the same free space: each filesystem is read, and listed, once
    const dev = devices.of(path, now)
    if (dev === undefined || seen.has(dev)) continue
    const free = freeBytes(path)
    if (free === undefined) {
      devices.gone(path, now)
      continue
    }
    seen.add(dev)
    disks.push({ path, freeBytes: free })
  }
  return { memTotalBytes: mem.total, memAvailableBytes: mem.available, disks }
}
