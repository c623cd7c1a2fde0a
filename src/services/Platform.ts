/**
 * What berth asks of the operating system about processes, sockets and memory: the one seam between the engine and
 * the platform it runs on. Linux answers from /proc (`PlatformProcLive`, the default there); the same questions can be
 * answered from `ps` and `lsof` (`platformPs.ts`), the way macOS must, and Linux can be asked that way too
 * (`psPlatformLinux`) so the path is exercised where berth is tested. `PlatformLive` picks /proc on Linux and the
 * commands on macOS (`psPlatformDarwin`). Parsing lives in src/domain as pure functions
 * (`proc.ts` for /proc, `psText.ts` for the commands' output); this module only reads.
 *
 * A start time is opaque: compare it for equality with one read by the same implementation, never across them (/proc
 * gives clock ticks since boot, `ps` the second it started).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { darwinMemory, makePsPlatform } from "./platformPs.js"
import { isDefunct, listeningSockets, type ProcStat, parseMeminfo, parseStat, socketInode } from "../domain/proc.js"

/** One process as the platform sees it now. */
export interface ProcessEntry {
  readonly pid: number
  readonly ppid: number
  /** its process group */
  readonly pgid: number
  /** with the pid, names one process across time: a pid is reused, a (pid, startTime) pair is not */
  readonly startTime: string
  /** a zombie (or dead) entry: it runs no code and only waits to be reaped */
  readonly defunct: boolean
}

/** The machine's memory, in bytes: `available` is what can be had without swapping (not only free pages). */
export interface MemoryReading {
  readonly total: number
  readonly available: number
}

export interface PlatformService {
  /** which implementation answers, for messages and tests */
  readonly name: string
  /**
   * One process as it is now; undefined when the pid names none or it cannot be read. Runs synchronously (it may be
   * `Effect.runSync`ed): a just-spawned child is read in the tick it was born, before it can be reaped.
   */
  readonly process: (pid: number) => Effect.Effect<ProcessEntry | undefined>
  /** Every process on the machine; one that vanishes while they are read is left out. */
  readonly processes: Effect.Effect<ReadonlyArray<ProcessEntry>>
  /** The start time of `pid`, undefined when there is no such process. */
  readonly startTime: (pid: number) => Effect.Effect<string | undefined>
  /** The process (pid, startTime) still runs code: same pid, same start time, not a zombie. */
  readonly isAlive: (pid: number, startTime: string) => Effect.Effect<boolean>
  /** The pids of the live processes of group `pgid`. */
  readonly groupMembers: (pgid: number) => Effect.Effect<ReadonlyArray<number>>
  /**
   * The live descendants of `pid` (children, their children, …), not `pid` itself. With `within`, only through members
   * of that group (a descendant whose parent left the group is missed); at most `limit` of them.
   */
  readonly descendants: (
    pid: number,
    options?: { readonly within?: number; readonly limit?: number }
  ) => Effect.Effect<ReadonlyArray<number>>
  /** The TCP ports any of `pids` listens on (none where the platform cannot tell), each once. */
  readonly listeningPorts: (pids: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<number>>
  /** The machine's memory now; undefined where it cannot be read. */
  readonly memory: Effect.Effect<MemoryReading | undefined>
  /** The longest path a unix socket can be bound to, in bytes with the final NUL (`sun_path`): 108 Linux, 104 macOS. */
  readonly socketPathLimit: number
}

export class Platform extends Context.Tag("berth/Platform")<Platform, PlatformService>() {}

// Linux, from /proc

const toEntry = (stat: ProcStat): ProcessEntry => ({
  pid: stat.pid,
  ppid: stat.ppid,
  pgid: stat.pgrp,
  startTime: stat.startTime,
  defunct: isDefunct(stat)
})

const readStatSync = (pid: number): ProcessEntry | undefined => {
  try {
    const stat = parseStat(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
    return stat === undefined ? undefined : toEntry(stat)
  } catch {
    return undefined
  }
}

/** how many /proc entries one synchronous stretch of `scanProc` reads before it lets other fibers run */
const SCAN_BATCH = 256

/**
 * Every process in /proc; a process that vanishes between listing and reading is skipped. Read synchronously, in
 * batches: through the thread pool each /proc file costs four round trips and a 64 KiB buffer (its size reads as 0),
 * about ten times the CPU of reading it at once, and stopping a world scans several times. A batch stalls the event
 * loop for a few milliseconds at most.
 */
const scanProc: Effect.Effect<ReadonlyArray<ProcessEntry>> = Effect.suspend(() => {
  let names: ReadonlyArray<string>
  try {
    names = fs.readdirSync("/proc")
  } catch {
    names = []
  }
  const pids = names.filter((n) => /^\d+$/.test(n)).map(Number)
  const entries: Array<ProcessEntry> = []
  const from = (start: number): Effect.Effect<ReadonlyArray<ProcessEntry>> => {
    for (const pid of pids.slice(start, start + SCAN_BATCH)) {
      const entry = readStatSync(pid)
      if (entry !== undefined) entries.push(entry)
    }
    return start + SCAN_BATCH >= pids.length
      ? Effect.succeed(entries)
      : Effect.zipRight(
          Effect.yieldNow(),
          Effect.suspend(() => from(start + SCAN_BATCH))
        )
  }
  return from(0)
})

/** The children of `pid` its main thread forked (a service's shell and what it starts); none if unreadable. */
const childrenOf = (pid: number): ReadonlyArray<number> => {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .split(" ")
      .flatMap((n) => (/^\d+$/.test(n) ? [Number(n)] : []))
  } catch {
    return []
  }
}

/** The socket inodes `pid` holds open; none when it is gone or its fds are not ours to read. */
const socketsOfSync = (pid: number): ReadonlyArray<string> => {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
      try {
        return socketInode(fs.readlinkSync(`/proc/${pid}/fd/${fd}`)) ?? []
      } catch {
        return []
      }
    })
  } catch {
    return []
  }
}

const readTextSync = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const sameLive = (entry: ProcessEntry | undefined, pid: number, startTime: string): boolean =>
  entry !== undefined && entry.pid === pid && entry.startTime === startTime && !entry.defunct

/** Linux's answers, read from /proc: each a handful of small files read at once (the kernel answers immediately). */
export const procPlatform: PlatformService = {
  name: "linux /proc",
  process: (pid) => Effect.sync(() => readStatSync(pid)),
  processes: scanProc,
  startTime: (pid) => Effect.sync(() => readStatSync(pid)?.startTime),
  isAlive: (pid, startTime) => Effect.sync(() => sameLive(readStatSync(pid), pid, startTime)),
  groupMembers: (pgid) =>
    Effect.map(scanProc, (all) => all.filter((e) => e.pgid === pgid && !e.defunct).map((e) => e.pid)),
  descendants: (pid, options) =>
    Effect.sync(() => {
      const limit = options?.limit ?? Number.POSITIVE_INFINITY
      const found: Array<number> = []
      const pending = [...childrenOf(pid)]
      for (let next = pending.pop(); next !== undefined && found.length < limit; next = pending.pop()) {
        const entry = readStatSync(next)
        if (entry === undefined || entry.defunct || found.includes(next) || next === pid) continue
        if (options?.within !== undefined && entry.pgid !== options.within) continue
        found.push(next)
        pending.push(...childrenOf(next))
      }
      return found
    }),
  listeningPorts: (pids) =>
    Effect.sync(() => {
      const owned = new Set(pids.flatMap(socketsOfSync))
      if (owned.size === 0) return []
      const sockets = ["/proc/net/tcp", "/proc/net/tcp6"].flatMap((t) => listeningSockets(readTextSync(t) ?? ""))
      return [...new Set(sockets.filter((s) => owned.has(s.inode)).map((s) => s.port))]
    }),
  memory: Effect.sync(() => {
    const text = readTextSync("/proc/meminfo")
    return text === undefined ? undefined : parseMeminfo(text)
  }),
  socketPathLimit: 108
}

/** Where the platform cannot read memory: what Node tells (free pages only, so it reads low on macOS). */
const fallbackMemory: Effect.Effect<MemoryReading> = Effect.sync(() => ({
  total: os.totalmem(),
  available: os.freemem()
}))

export const PlatformProcLive: Layer.Layer<Platform> = Layer.succeed(Platform, procPlatform)

/** Linux answered by `ps` and `lsof` with the flags macOS takes; memory still from /proc/meminfo. */
export const psPlatformLinux: PlatformService = makePsPlatform({
  name: "linux ps/lsof",
  memory: procPlatform.memory,
  socketPathLimit: 108
})

/**
 * macOS, answered by `ps`, `lsof`, `sysctl` and `vm_stat` (it has no /proc). Its parsers are tested against recordings
 * of those commands on Macs; the whole has not been run on one.
 */
export const psPlatformDarwin: PlatformService = makePsPlatform({
  name: "macos ps/lsof",
  memory: darwinMemory,
  socketPathLimit: 104
})

/** The implementation for the platform berth runs on, for code outside the layers (the daemon's lock). */
export const platformHere: PlatformService = process.platform === "darwin" ? psPlatformDarwin : procPlatform

/** The platform berth runs on. */
export const PlatformLive: Layer.Layer<Platform> = Layer.succeed(Platform, platformHere)

/** Memory as the platform reads it, or what Node tells where it cannot. */
export const memoryOrFallback = (platform: PlatformService): Effect.Effect<MemoryReading> =>
  Effect.flatMap(platform.memory, (m) => (m === undefined ? fallbackMemory : Effect.succeed(m)))
