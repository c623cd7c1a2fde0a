/**
 * Service processes: each runs `sh -c CMD` as the leader of its own session and process group, with stdout and stderr
 * written straight into its log file, so it outlives the daemon that started it. A process is named by (pid, start
 * time), never by its pid alone, and stopped through its whole group (DESIGN §2 Processes, §5).
 *
 * Waits here use real timers rather than the Effect `Clock`: they wait on real processes, and `stop` must end in
 * bounded time even inside a finalizer (uninterruptible) and under a `TestClock` that nobody advances.
 */
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { MARK_VARIABLE, type MarkedProcess, parseMark } from "../domain/marks.js"
import { untilTick } from "../domain/wake-grid.js"
import { Platform, type ProcessEntry } from "./Platform.js"

export interface SpawnSpec {
  /** run by `/bin/sh -c`: the shell does the parsing, berth quotes what it puts into it */
  readonly command: string
  readonly cwd: string
  /** the COMPLETE environment of the child (nothing is inherited from the daemon): values are data, never parsed */
  readonly env: Readonly<Record<string, string>>
  /** appended to (O_APPEND), created with mode 0600 together with its folder */
  readonly logFile: string
}

/** What identifies a spawned service across daemon restarts: persist all three. */
export interface ProcessHandle {
  readonly pid: number
  /** equals pid: the child is a session and group leader */
  readonly pgid: number
  /** as the Platform reads it (on Linux field 22 of /proc/<pid>/stat): tells our process from a later one of its pid */
  readonly startTime: string
}

export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
}

/** How `stop` ended: the group left on SIGTERM within the grace, or something had to be SIGKILLed. */
export type StopOutcome = { readonly _tag: "Exited" } | { readonly _tag: "Killed" } | { readonly _tag: "Detached" }

export class SpawnFailed extends Data.TaggedError("SpawnFailed")<{
  readonly command: string
  readonly cwd: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot start \`${this.command}\` in ${this.cwd}: ${this.reason}`
  }
}

const POLL_MS = 50
/** after the final SIGKILL: how long to wait for the kernel to finish the group off before giving up */
const KILL_SETTLE_MS = 2_000
/**
 * awaitExit on a process this daemon did not spawn can only watch the Platform: one poller looks at every adopted process
 * together (after a daemon restart with dozens of worlds up, one fiber per process was most of the daemon's idle CPU),
 * each second, on the daemon's wake grid (wake-grid.ts): at 500 ms apart, 300 adopted services cost a replaced
 * daemon about as much CPU again as all its probes
 */
const ADOPTED_POLL_MS = 1_000
/**
 * Each round asks the kernel only whether each pid still exists (kill 0: one system call, no file read); every this
 * many rounds it reads each one's start time and state, so a reused pid or a zombie nobody reaps is seen gone too
 */
const ADOPTED_FULL_LOOK_EVERY = 10

/** Some process has this pid (kill 0 reaches it, or it is someone else's): maybe ours, maybe a zombie. */
const pidExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return errorCode(e) === "EPERM"
  }
}

/** A real-time sleep: independent of the Effect Clock, still interruptible where interruption is allowed. */
const sleepMs = (ms: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), Math.max(0, ms))
    return Effect.sync(() => clearTimeout(timer))
  })

const errorCode = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

const reasonOf = (e: unknown): string => {
  const code = errorCode(e)
  const text = e instanceof Error ? e.message : String(e)
  if (code === "ENOENT") return `no such file or folder (${text})`
  if (code === "EACCES" || code === "EPERM") return `permission denied (${text})`
  return text
}

/** Marks the one-off commands of a world in their environment, so a later daemon can find what a crash left running. */
export const ONESHOT_VARIABLE = "BERTH_ONESHOT"

/**
 * False only when no process at all is in the group (kill(-pgid, 0) finds none): then there is nothing to scan for.
 * True may still mean only zombies, or someone else's group; the caller scans to tell.
 */
const groupMayLive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (e) {
    return errorCode(e) !== "ESRCH"
  }
}

/** True when the pid currently names the very process that was recorded, and it still runs code. */
const isSame = (entry: ProcessEntry | undefined, pid: number, startTime: string): boolean =>
  entry !== undefined && entry.pid === pid && entry.startTime === startTime && !entry.defunct

/** Signals that never fail: ESRCH means it is already gone; anything else (EPERM) is logged, not raised. */
const signal = (target: number, sig: NodeJS.Signals): Effect.Effect<void> =>
  Effect.suspend(() => {
    try {
      process.kill(target, sig)
      return Effect.void
    } catch (e) {
      if (errorCode(e) === "ESRCH") return Effect.void
      return Effect.logWarning(`kill(${target}, ${sig}) failed: ${reasonOf(e)}`)
    }
  })

interface Spawned {
  readonly startTime: string
  readonly exit: Deferred.Deferred<ExitStatus>
}

export interface ProcessesService {
  /**
   * From now on `stop` leaves every process running (and so do the finalizers that call it): for a daemon that shuts
   * down or is replaced, never for an explicit `down`. There is no way back: the daemon is ending.
   */
  readonly detach: Effect.Effect<void>
  /** `detach` has happened */
  readonly detached: Effect.Effect<boolean>
  /** Starts `sh -c command` as the leader of its own session and group, its output appended to its log file. */
  readonly spawn: (spec: SpawnSpec) => Effect.Effect<ProcessHandle, SpawnFailed>
  /** A process that lives exactly as long as the scope: stopped with `graceMs` when it closes. */
  readonly spawnScoped: (spec: SpawnSpec, graceMs: number) => Effect.Effect<ProcessHandle, SpawnFailed, Scope.Scope>
  /** Kills the groups of one-off commands marked `BERTH_ONESHOT=<marker>`; answers how many groups. */
  readonly sweepOneShots: (marker: string) => Effect.Effect<number>
  /** Every live process whose environment carries a service mark (`domain/marks.ts`), with its group. */
  readonly marked: Effect.Effect<ReadonlyArray<MarkedProcess>>
  /**
   * SIGTERM to each group, up to `graceMs` for them to empty, then SIGKILL to what is left: for groups no handle names
   * (what a crashed daemon left). Never fails, bounded in time.
   */
  readonly stopGroups: (pgids: ReadonlyArray<number>, graceMs: number) => Effect.Effect<void>
  /** The recorded process itself still runs: same pid, same start time, not a zombie. */
  readonly isAlive: (handle: ProcessHandle) => Effect.Effect<boolean>
  /** Its leader or anything left in its group still runs (never someone else's group of the same number). */
  readonly isRunning: (handle: ProcessHandle) => Effect.Effect<boolean>
  /** Pids of the live processes of a group. */
  readonly groupMembers: (pgid: number) => Effect.Effect<ReadonlyArray<number>>
  /**
   * The live leader and its descendants still in its group, found from the leader down through its children
   * lists: part of the group (a member whose parent left is missed), read in a few files where `groupMembers` reads
   * every process's. Empty once the leader is gone.
   */
  readonly family: (handle: ProcessHandle) => Effect.Effect<ReadonlyArray<number>>
  /** SIGTERM to the group, `graceMs`, then SIGKILL to the group and its strays; never fails, bounded in time. */
  readonly stop: (handle: ProcessHandle, graceMs: number) => Effect.Effect<StopOutcome>
  /** How the process ended; nulls for one adopted after a daemon restart (only its parent hears its status). */
  readonly awaitExit: (handle: ProcessHandle) => Effect.Effect<ExitStatus>
  /** the same as `awaitExit` */
  readonly exits: (handle: ProcessHandle) => Effect.Effect<ExitStatus>
  /** The exit of a child of this daemon if it has already happened; none while it runs or when it is not ours. */
  readonly exitStatus: (handle: ProcessHandle) => Effect.Effect<Option.Option<ExitStatus>>
}

export class Processes extends Context.Tag("berth/Processes")<Processes, ProcessesService>() {}

const make = Effect.gen(function* () {
  const platform = yield* Platform
  /** one process, read at once: in `spawn`, in the very tick the child is born (every implementation can) */
  const readStatSync = (pid: number): ProcessEntry | undefined => Effect.runSync(platform.process(pid))
  const readStat = platform.process
  const scanProc = () => platform.processes
  /** exits of the children this daemon spawned, by pid; a later spawn reusing the pid replaces the entry */
  const spawned = new Map<number, Spawned>()
  /** never signal our own group, nor init's (nor kill(-1): everything): a bad handle must not take the machine down */
  const ownGroup = (yield* readStat(process.pid))?.pgid ?? process.pid
  const signalable = (pgid: number) => Number.isSafeInteger(pgid) && pgid > 1 && pgid !== ownGroup
  /** set once the daemon is letting go: from then on no process is stopped, whatever scope closes */
  let detached = false

  const openLog = (file: string): number => {
    fs.mkdirSync(nodePath.dirname(file), { recursive: true, mode: 0o700 })
    const fd = fs.openSync(file, "a", 0o600)
    try {
      fs.fchmodSync(fd, 0o600)
    } catch {
      // a log file owned by someone else keeps its mode; appending is what matters
    }
    return fd
  }

  /**
   * Starts `sh -c command` detached (setsid: its own session and group, no controlling terminal), stdout and stderr
   * on the log file's O_APPEND descriptor, so copy-then-truncate rotation works and the service outlives the daemon.
   */
  const spawn = Effect.fn("Processes.spawn")(function* (spec: SpawnSpec) {
    const fail = (reason: string) => new SpawnFailed({ command: spec.command, cwd: spec.cwd, reason })
    // a daemon that let go of its processes is leaving: it starts nothing more (the next daemon will), and waits to be
    // interrupted rather than fail, which would mark the service failed on its way out
    if (detached) return yield* Effect.never
    // one stat, read at once: a trip through the thread pool costs more than the call, and a world's services are
    // spawned one after the other on the daemon's thread
    const cwdStat = yield* Effect.sync(() => {
      try {
        return fs.statSync(spec.cwd)
      } catch (e) {
        return reasonOf(e)
      }
    })
    if (typeof cwdStat === "string") return yield* fail(`working folder: ${cwdStat}`)
    if (!cwdStat.isDirectory()) return yield* fail("working folder: not a folder")

    const exit = Deferred.unsafeMake<ExitStatus>(yield* Effect.fiberId)
    const { child, stat, failure } = yield* Effect.try({
      try: () => {
        const fd = openLog(spec.logFile)
        try {
          const child = childProcess.spawn("/bin/sh", ["-c", spec.command], {
            cwd: spec.cwd,
            env: { ...spec.env },
            detached: true,
            stdio: ["ignore", fd, fd]
          })
          // listen before anything can yield: an unheard "error" would crash the daemon, a missed "exit" hang awaitExit
          const failure = new Promise<string>((resolve) => child.once("error", (e) => resolve(reasonOf(e))))
          child.once("exit", (code, sig) => Deferred.unsafeDone(exit, Exit.succeed({ code, signal: sig })))
          // read at once, in this same tick: the child cannot have been reaped yet, so the pid is still ours
          const stat = child.pid === undefined ? undefined : readStatSync(child.pid)
          return { child, stat, failure }
        } finally {
          fs.closeSync(fd)
        }
      },
      catch: (e) => fail(`log file ${spec.logFile}: ${reasonOf(e)}`)
    })

    if (child.pid === undefined || stat === undefined) {
      // node reports a failed spawn through an "error" event on the next tick
      const timeout = new Promise<string>((resolve) => setTimeout(() => resolve("it vanished at once"), 1_000).unref())
      return yield* fail(yield* Effect.promise(() => Promise.race([failure, timeout])))
    }

    // the daemon may exit while the service lives on
    child.unref()
    spawned.set(child.pid, { startTime: stat.startTime, exit })
    yield* Effect.annotateCurrentSpan({ pid: child.pid, command: spec.command })
    return { pid: child.pid, pgid: child.pid, startTime: stat.startTime } satisfies ProcessHandle
  })

  /** The recorded process itself still runs: same pid, same start time, not a zombie. */
  const isAlive = Effect.fn("Processes.isAlive")(function* (handle: ProcessHandle) {
    return isSame(yield* readStat(handle.pid), handle.pid, handle.startTime)
  })

  const isLiveMember = (pgid: number) => (s: ProcessEntry) => s.pgid === pgid && !s.defunct

  /** Pids of the live processes of a group: what still runs after the leader forked and exited. */
  const groupMembers = Effect.fn("Processes.groupMembers")(function* (pgid: number) {
    return yield* platform.groupMembers(pgid)
  })

  /** The leader, if it is still the recorded process, and its descendants still in its group. */
  const family = (handle: ProcessHandle): Effect.Effect<ReadonlyArray<number>> =>
    Effect.flatMap(readStat(handle.pid), (leader) =>
      isSame(leader, handle.pid, handle.startTime)
        ? Effect.map(
            // bounded: a service that forks a crowd is left to `groupMembers`
            platform.descendants(handle.pid, { within: handle.pgid, limit: 63 }),
            (below) => [handle.pid, ...below]
          )
        : Effect.succeed([])
    )

  /**
   * The group number names our group unless a different process now leads a group of that number. While any
   * member lives the kernel keeps the number taken, so a leaderless group with members is still ours.
   */
  const groupIsOurs = (handle: ProcessHandle, members: ReadonlyArray<ProcessEntry>) =>
    signalable(handle.pgid) &&
    members.every((s) => s.pid !== handle.pgid || (s.pid === handle.pid && s.startTime === handle.startTime))

  /** The service still has something running: its leader, or anything left in its group (never someone else's). */
  const isRunning = Effect.fn("Processes.isRunning")(function* (handle: ProcessHandle) {
    if (yield* isAlive(handle)) return true
    // a group the kernel knows empty needs no scan of every process (what a service that ended is asked, each time)
    if (!groupMayLive(handle.pgid)) return false
    const members = (yield* scanProc()).filter(isLiveMember(handle.pgid))
    return members.length > 0 && groupIsOurs(handle, members)
  })

  /**
   * SIGTERM to the group, wait up to `graceMs` for it to empty, then SIGKILL to the group — always, since
   * grandchildren may have left the tree — and to every process that was in the group, or descended from it, at
   * the start and still lives (it may have moved to a group or session of its own). Never fails and never relies on
   * interruption: every wait has its own deadline, so it is safe in a finalizer.
   */
  const stop = Effect.fn("Processes.stop")(function* (handle: ProcessHandle, graceMs: number) {
    // a daemon that stops or is replaced lets go of its processes exactly as a crash would: the next one adopts them
    if (detached) return { _tag: "Detached" } satisfies StopOutcome
    if (!signalable(handle.pgid) || !signalable(handle.pid) || handle.pid === process.pid) {
      yield* Effect.logWarning(`refusing to stop pid ${handle.pid} / group ${handle.pgid}: not a service process`)
      return { _tag: "Exited" } satisfies StopOutcome
    }
    const inGroup = isLiveMember(handle.pgid)
    const all = yield* scanProc()
    const ours = groupIsOurs(handle, all.filter(inGroup))
    const roots = all.filter(
      (s) => (ours && inGroup(s)) || (s.pid === handle.pid && isSame(s, handle.pid, handle.startTime))
    )
    // descendants by parent pid: a child that called setsid is out of the group but not out of the tree
    const children = new Map<number, Array<ProcessEntry>>()
    for (const s of all) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s])
    const tracked = new Map<number, ProcessEntry>()
    const pending = [...roots]
    for (let s = pending.pop(); s !== undefined; s = pending.pop()) {
      if (tracked.has(s.pid) || s.defunct) continue
      tracked.set(s.pid, s)
      pending.push(...(children.get(s.pid) ?? []))
    }
    // identified by (pid, start time), so a pid reused meanwhile is never signalled
    // a group the kernel knows empty needs no scan; those that left it are read one by one
    const survivors = Effect.gen(function* () {
      const members = ours && groupMayLive(handle.pgid) ? (yield* scanProc()).filter(inGroup) : []
      const strays = [...tracked.values()].flatMap((t) => {
        const s = readStatSync(t.pid)
        return s !== undefined && !inGroup(s) && isSame(s, t.pid, t.startTime) ? [s] : []
      })
      return { members, strays, count: members.length + strays.length }
    })

    if (ours) yield* signal(-handle.pgid, "SIGTERM")
    for (const s of tracked.values()) if (!ours || !inGroup(s)) yield* signal(s.pid, "SIGTERM")

    const deadline = Date.now() + Math.max(0, graceMs)
    // what was signalled this instant has not ended yet: with a grace to wait, the first look comes a poll later
    // rather than read every process now to find them all still there
    const signalled = ours || tracked.size > 0
    let looked = signalled && graceMs > 0 ? undefined : yield* survivors
    while ((looked === undefined || looked.count > 0) && Date.now() < deadline) {
      yield* sleepMs(Math.min(POLL_MS, deadline - Date.now()))
      looked = yield* survivors
    }
    let left = looked ?? (yield* survivors)
    const outcome: StopOutcome = left.count > 0 ? { _tag: "Killed" } : { _tag: "Exited" }

    const settle = Date.now() + KILL_SETTLE_MS
    for (;;) {
      if (ours) yield* signal(-handle.pgid, "SIGKILL")
      for (const s of left.strays) yield* signal(s.pid, "SIGKILL")
      left = yield* survivors
      if (left.count === 0) break
      if (Date.now() >= settle) {
        const pids = [...left.members, ...left.strays].map((s) => s.pid)
        yield* Effect.logWarning(`processes of group ${handle.pgid} survive SIGKILL: ${pids.join(", ")}`)
        break
      }
      yield* sleepMs(POLL_MS)
    }
    return outcome
  })

  /**
   * How the recorded process ended. For a child of this daemon that is its exit code or signal; for one adopted
   * after a restart the kernel tells nobody but its parent, so this waits for it to be gone and reports nulls.
   */
  const awaitExit = Effect.fn("Processes.awaitExit")(function* (handle: ProcessHandle) {
    const known = spawned.get(handle.pid)
    if (known !== undefined && known.startTime === handle.startTime) return yield* Deferred.await(known.exit)
    const key = `${handle.pid}:${handle.startTime}`
    let gone = adopted.get(key)
    if (gone === undefined) {
      gone = { handle, exit: yield* Deferred.make<void>() }
      adopted.set(key, gone)
      if (!polling) {
        polling = true
        yield* Effect.forkDaemon(pollAdopted)
      }
    }
    yield* Deferred.await(gone.exit)
    return { code: null, signal: null } satisfies ExitStatus
  })

  /** processes this daemon adopted and someone awaits the end of, by pid and start time */
  const adopted = new Map<string, { readonly handle: ProcessHandle; readonly exit: Deferred.Deferred<void> }>()
  let polling = false
  const pollAdopted: Effect.Effect<void> = Effect.gen(function* () {
    let round = 0
    while (adopted.size > 0) {
      yield* sleepMs(untilTick(Date.now(), ADOPTED_POLL_MS))
      const full = ++round % ADOPTED_FULL_LOOK_EVERY === 0
      for (const [key, w] of adopted) {
        const exists = pidExists(w.handle.pid)
        if (exists && !full) continue
        if (exists && isSame(yield* readStat(w.handle.pid), w.handle.pid, w.handle.startTime)) continue
        adopted.delete(key)
        yield* Deferred.succeed(w.exit, undefined)
      }
    }
  }).pipe(
    // one that joined while the poller was leaving is not left unwatched
    Effect.ensuring(
      Effect.suspend(() => {
        polling = adopted.size > 0
        return polling ? Effect.asVoid(Effect.forkDaemon(pollAdopted)) : Effect.void
      })
    )
  )

  /** The exit of a child of this daemon if it has already happened; none while it runs or when it is not ours. */
  const exitStatus = Effect.fn("Processes.exitStatus")(function* (handle: ProcessHandle) {
    const known = spawned.get(handle.pid)
    if (known === undefined || known.startTime !== handle.startTime) return Option.none<ExitStatus>()
    return yield* Deferred.poll(known.exit).pipe(
      Effect.flatMap(Option.match({ onNone: () => Effect.succeedNone, onSome: Effect.asSome }))
    )
  })

  /** A process that lives exactly as long as the scope: stopped with `graceMs` when it closes. */
  const spawnScoped = (spec: SpawnSpec, graceMs: number): Effect.Effect<ProcessHandle, SpawnFailed, Scope.Scope> =>
    Effect.acquireRelease(spawn(spec), (handle) => stop(handle, graceMs))

  /**
   * The live processes that could be a service's (not a zombie, not in our own group) carrying a one-off command's
   * marker or a service's mark, with those variables, as the Platform reads environments.
   */
  const environs = Effect.map(platform.environs([ONESHOT_VARIABLE, MARK_VARIABLE]), (all) =>
    all.filter((p) => signalable(p.pgid))
  )

  /**
   * Kills the process groups of one-off commands (setup, migrate, seed) that a previous daemon of this home started
   * and did not live to stop: they carry `BERTH_ONESHOT=<marker>` in their environment. Run at daemon start, before
   * this daemon starts any of its own.
   */
  const sweepOneShots = Effect.fn("Processes.sweepOneShots")(function* (marker: string) {
    const groups = new Set(
      (yield* environs).filter((p) => p.values.get(ONESHOT_VARIABLE) === marker).map((p) => p.pgid)
    )
    for (const pgid of groups) yield* signal(-pgid, "SIGKILL")
    return groups.size
  })

  const marked = Effect.map(environs, (all) =>
    all.flatMap(({ pid, pgid, values }) => {
      const value = values.get(MARK_VARIABLE)
      const mark = value === undefined ? undefined : parseMark(value)
      return mark === undefined ? [] : [{ pid, pgid, mark }]
    })
  )

  const stopGroups = Effect.fn("Processes.stopGroups")(function* (pgids: ReadonlyArray<number>, graceMs: number) {
    const targets = pgids.filter(signalable)
    if (targets.length === 0) return
    for (const pgid of targets) yield* signal(-pgid, "SIGTERM")
    const alive = Effect.suspend(() =>
      targets.some(groupMayLive)
        ? Effect.map(scanProc(), (now) => now.some((s) => !s.defunct && targets.includes(s.pgid)))
        : Effect.succeed(false)
    )
    const deadline = Date.now() + Math.max(0, graceMs)
    while (Date.now() < deadline && (yield* alive)) yield* sleepMs(POLL_MS)
    for (const pgid of targets) yield* signal(-pgid, "SIGKILL")
  })

  const service: ProcessesService = {
    detach: Effect.sync(() => {
      detached = true
    }),
    detached: Effect.sync(() => detached),
    spawn,
    spawnScoped,
    sweepOneShots,
    marked,
    stopGroups,
    isAlive,
    isRunning,
    groupMembers,
    family,
    stop,
    awaitExit,
    /** the same as `awaitExit` */
    exits: awaitExit,
    exitStatus
  }
  return service
})

/** Processes on the Platform it is given (see layers/index.ts). */
export const ProcessesLive: Layer.Layer<Processes, never, Platform> = Layer.effect(Processes, make)
