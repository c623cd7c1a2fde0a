/**
 * What berth asks of the operating system about processes, sockets and memory: the one seam between the engine and
 * the platform it runs on. Linux answers from /proc (`procPlatform`, reads in `platformProc.ts`, the only module that
 * reads /proc); the same questions can be answered from `ps`, `lsof` and `sysctl` (`platformPs.ts`), the way macOS
 * must, and Linux can be asked that way too (`psPlatformLinux`) so the path is exercised where berth is tested.
 * `PlatformLive` picks /proc on Linux and the commands on macOS (`psPlatformDarwin`). Parsing lives in src/domain as
 * pure functions (`proc.ts` for /proc, `psText.ts` for the commands' output); the two read modules are plain Node, so
 * the fence's watchdog, which must stand alone, reads through them too.
 *
 * A start time is opaque: compare it for equality with one read by the same implementation, never across them (/proc
 * gives clock ticks since boot, `ps` the second it started).
 */
import * as os from "node:os"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { Listener } from "../domain/doctor.js"
import type { PortRange } from "../domain/ports.js"
import { isDefunct, type ListenerHolder, type ProcStat } from "../domain/proc.js"
import {
  type ProcessCost,
  type ProcessEnviron,
  procChildren,
  procCost,
  procEnviron,
  procEphemeralPorts,
  procListeners,
  procListeningPorts,
  procListensOn,
  procMemory,
  procPids,
  procPortListeners,
  procSocketHolder,
  procStat
} from "./platformProc.js"
import {
  darwinEphemeralPorts,
  darwinMemory,
  linuxEphemeralPorts,
  psCosts,
  psDescendants,
  psEnvirons,
  psListeners,
  psListeningPorts,
  psListensOn,
  psPortListeners,
  psProcess,
  psSocketHolder,
  psTable
} from "./platformPs.js"

export type { ProcessCost, ProcessEnviron } from "./platformProc.js"

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

/** The sockets listening on a port, as one implementation names them (compare only within it). */
export interface PortListeners {
  /** every socket listening on the port this user can see; undefined when the platform cannot tell */
  readonly listening: ReadonlyArray<string> | undefined
  /** sockets the group's processes hold: at least those of `listening` they hold (/proc lists all they have open) */
  readonly groupSockets: ReadonlyArray<string>
  /** a member's sockets could not be read (a setuid program): it may hold the listener */
  readonly groupUnreadable: boolean
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
  /**
   * Whether one of `pids` listens on `port`. Cheap (it may be `Effect.runSync`ed): it can prove a listener ours, never
   * someone else's.
   */
  readonly listensOn: (pids: ReadonlyArray<number>, port: number) => Effect.Effect<boolean>
  /** The sockets listening on `port` and which of them `group` holds: what `judgeListener` weighs. */
  readonly portListeners: (port: number, group: ReadonlyArray<number>) => Effect.Effect<PortListeners>
  /**
   * A process outside `group` holding one of `sockets` (named as `portListeners` names them), with its start time and
   * command line; undefined when none this user can see does. Costly: it looks through every process.
   */
  readonly socketHolder: (
    sockets: ReadonlyArray<string>,
    group: ReadonlyArray<number>
  ) => Effect.Effect<ListenerHolder | undefined>
  /** Every listening TCP socket, with its holder where this user may see it (`berth doctor`). */
  readonly listeners: Effect.Effect<ReadonlyArray<Listener>>
  /**
   * The live processes whose environment carries any of `names` (only this user's processes tell), with the values
   * of those found. Variables set at the process's start: a process that changed its own environment is not seen to.
   */
  readonly environs: (names: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<ProcessEnviron>>
  /** What every process costs now: CPU used so far and resident memory (a world's dashboard sums its groups). */
  readonly costs: Effect.Effect<ReadonlyArray<ProcessCost>>
  /** The kernel's range of local ports for outgoing connections; undefined where it cannot be read. */
  readonly ephemeralPorts: Effect.Effect<PortRange | undefined>
  /** The machine's memory now; undefined where it cannot be read. */
  readonly memory: Effect.Effect<MemoryReading | undefined>
  /** The longest path a unix socket can be bound to, in bytes with the final NUL (`sun_path`): 108 Linux, 104 macOS. */
  readonly socketPathLimit: number
}

export class Platform extends Context.Tag("berth/Platform")<Platform, PlatformService>() {}

// Linux, from /proc (platformProc.ts)

const toEntry = (stat: ProcStat): ProcessEntry => ({
  pid: stat.pid,
  ppid: stat.ppid,
  pgid: stat.pgrp,
  startTime: stat.startTime,
  defunct: isDefunct(stat)
})

const readStatSync = (pid: number): ProcessEntry | undefined => {
  const stat = procStat(pid)
  return stat === undefined ? undefined : toEntry(stat)
}

/** how many /proc entries one synchronous stretch of a scan reads before it lets other fibers run */
const SCAN_BATCH = 256

/**
 * `read` of every pid in /proc, what it answers for those it does; a process that vanishes between listing and
 * reading is skipped. Read synchronously, in batches: through the thread pool each /proc file costs four round trips
 * and a 64 KiB buffer (its size reads as 0), about ten times the CPU of reading it at once, and stopping a world scans
 * several times. A batch stalls the event loop for a few milliseconds at most.
 */
const scanProc = <A>(read: (pid: number) => A | undefined): Effect.Effect<ReadonlyArray<A>> =>
  Effect.suspend(() => {
    const pids = procPids()
    const found: Array<A> = []
    const from = (start: number): Effect.Effect<ReadonlyArray<A>> => {
      for (const pid of pids.slice(start, start + SCAN_BATCH)) {
        const one = read(pid)
        if (one !== undefined) found.push(one)
      }
      return start + SCAN_BATCH >= pids.length
        ? Effect.succeed(found)
        : Effect.zipRight(
            Effect.yieldNow(),
            Effect.suspend(() => from(start + SCAN_BATCH))
          )
    }
    return from(0)
  })

const allStats = scanProc(readStatSync)

const sameLive = (entry: ProcessEntry | undefined, pid: number, startTime: string): boolean =>
  entry !== undefined && entry.pid === pid && entry.startTime === startTime && !entry.defunct

/** Linux's answers, read from /proc: each a handful of small files read at once (the kernel answers immediately). */
export const procPlatform: PlatformService = {
  name: "linux /proc",
  process: (pid) => Effect.sync(() => readStatSync(pid)),
  processes: allStats,
  startTime: (pid) => Effect.sync(() => readStatSync(pid)?.startTime),
  isAlive: (pid, startTime) => Effect.sync(() => sameLive(readStatSync(pid), pid, startTime)),
  groupMembers: (pgid) =>
    Effect.map(allStats, (all) => all.filter((e) => e.pgid === pgid && !e.defunct).map((e) => e.pid)),
  descendants: (pid, options) =>
    Effect.sync(() => {
      const limit = options?.limit ?? Number.POSITIVE_INFINITY
      const found: Array<number> = []
      const pending = [...procChildren(pid)]
      for (let next = pending.pop(); next !== undefined && found.length < limit; next = pending.pop()) {
        const entry = readStatSync(next)
        if (entry === undefined || entry.defunct || found.includes(next) || next === pid) continue
        if (options?.within !== undefined && entry.pgid !== options.within) continue
        found.push(next)
        pending.push(...procChildren(next))
      }
      return found
    }),
  listeningPorts: (pids) => Effect.sync(() => procListeningPorts(pids)),
  listensOn: (pids, port) => Effect.sync(() => procListensOn(pids, port)),
  portListeners: (port, group) => Effect.promise(() => procPortListeners(port, group)),
  socketHolder: (sockets, group) => Effect.promise(() => procSocketHolder(sockets, group)),
  listeners: Effect.sync(procListeners),
  environs: (names) => scanProc((pid) => procEnviron(pid, names)),
  costs: scanProc(procCost),
  ephemeralPorts: Effect.sync(procEphemeralPorts),
  memory: Effect.sync(procMemory),
  socketPathLimit: 108
}

/**
 * The Platform from `ps` and `lsof` (platformPs.ts), with `memory` and the local port range read as the platform can
 * (`sysctl` and `vm_stat` on macOS) and the unix socket path limit of the platform.
 */
export const makePsPlatform = (options: {
  readonly name: string
  readonly memory: Effect.Effect<MemoryReading | undefined>
  readonly ephemeralPorts: Effect.Effect<PortRange | undefined>
  readonly socketPathLimit: number
}): PlatformService => ({
  name: options.name,
  process: (pid) => Effect.sync(() => psProcess(pid)),
  processes: Effect.sync(psTable),
  startTime: (pid) => Effect.sync(() => psProcess(pid)?.startTime),
  isAlive: (pid, startTime) => Effect.sync(() => sameLive(psProcess(pid), pid, startTime)),
  groupMembers: (pgid) =>
    Effect.sync(() =>
      psTable()
        .filter((e) => e.pgid === pgid && !e.defunct)
        .map((e) => e.pid)
    ),
  descendants: (pid, options) => Effect.sync(() => psDescendants(pid, options)),
  listeningPorts: (pids) => Effect.sync(() => psListeningPorts(pids)),
  listensOn: (pids, port) => Effect.sync(() => psListensOn(pids, port)),
  portListeners: (port, group) => Effect.sync(() => psPortListeners(port, group)),
  socketHolder: (sockets, group) => Effect.sync(() => psSocketHolder(sockets, group)),
  listeners: Effect.sync(psListeners),
  environs: (names) => Effect.sync(() => psEnvirons(names)),
  costs: Effect.sync(psCosts),
  ephemeralPorts: options.ephemeralPorts,
  memory: options.memory,
  socketPathLimit: options.socketPathLimit
})

/** Where the platform cannot read memory: what Node tells (free pages only, so it reads low on macOS). */
const fallbackMemory: Effect.Effect<MemoryReading> = Effect.sync(() => ({
  total: os.totalmem(),
  available: os.freemem()
}))

export const PlatformProcLive: Layer.Layer<Platform> = Layer.succeed(Platform, procPlatform)

/** Linux answered by `ps`, `lsof` and `sysctl` with the flags macOS takes; memory still from /proc/meminfo. */
export const psPlatformLinux: PlatformService = makePsPlatform({
  name: "linux ps/lsof",
  memory: procPlatform.memory,
  ephemeralPorts: Effect.sync(linuxEphemeralPorts),
  socketPathLimit: 108
})

/**
 * macOS, answered by `ps`, `lsof`, `sysctl` and `vm_stat` (it has no /proc). Its parsers are tested against recordings
 * of those commands on Macs; the whole has not been run on one.
 */
export const psPlatformDarwin: PlatformService = makePsPlatform({
  name: "macos ps/lsof",
  memory: Effect.sync(darwinMemory),
  ephemeralPorts: Effect.sync(darwinEphemeralPorts),
  socketPathLimit: 104
})

/** The implementation for the platform berth runs on, for code outside the layers (the daemon's lock). */
export const platformHere: PlatformService = process.platform === "darwin" ? psPlatformDarwin : procPlatform

/** The platform berth runs on. */
export const PlatformLive: Layer.Layer<Platform> = Layer.succeed(Platform, platformHere)

/** Memory as the platform reads it, or what Node tells where it cannot. */
export const memoryOrFallback = (platform: PlatformService): Effect.Effect<MemoryReading> =>
  Effect.flatMap(platform.memory, (m) => (m === undefined ? fallbackMemory : Effect.succeed(m)))
