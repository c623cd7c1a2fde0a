/**
 * The one fiber that drives what is true toward what is wanted: at daemon start (adopting the processes that
 * outlived the previous daemon) and then whenever anything changed (worktrees deleted outside berth, strays). Beside it,
 * the log budget: services write their logs directly, so the daemon rotates them by copy-then-truncate and drops the
 * oldest copies when a world's or the home's logs take more than their share of the disk; and the slice sweep (the
 * same as `berth gc`), now and then.
 */
import { existsSync, readdirSync, rmSync, statSync, truncateSync } from "node:fs"
import { join } from "node:path"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { ANYWHERE_SETTING, runsAnywhere } from "../domain/cluster.js"
import { LOG_CHECK_MIN_MS, type LogFileFacts, logBudget, logTrim, nextLogCheckMs } from "../domain/log-budget.js"
import { forgottenLine } from "../domain/gc.js"
import { strayGroups } from "../domain/marks.js"
import { passDue, RECONCILE_TICK_MS } from "../domain/reconcile-pace.js"
import { diskBytesAt } from "../services/disk.js"
import { Home } from "../services/Home.js"
import * as LogFiles from "../services/LogFiles.js"
import { numberKnob } from "../domain/knobs.js"
import { Processes } from "../services/Processes.js"
import { Registry } from "../services/Registry.js"
import { sleepOnGrid, sleepToTick } from "../services/tick.js"
import { monitorPressure, PressureTargetsLive } from "./PressureMonitor.js"
import { Worlds } from "./Worlds.js"

/** the slice sweep: rare, since a slice is only left behind by a crash or a server that was down at `remove` */
const gcEvery = Effect.map(
  Effect.orElseSucceed(numberKnob("BERTH_GC_INTERVAL_MS", Duration.toMillis(Duration.minutes(10)), 1), () =>
    Duration.toMillis(Duration.minutes(10))
  ),
  Duration.millis
)

/** Every log file under BERTH_HOME/logs (live and rotated), as the budget reads them. */
const logFiles = (root: string): ReadonlyArray<LogFileFacts> => {
  const out: Array<LogFileFacts> = []
  const list = (dir: string) => {
    try {
      return readdirSync(dir)
    } catch {
      return []
    }
  }
  for (const world of list(root)) {
    for (const name of list(join(root, world))) {
      const live = name.endsWith(".log")
      if (!live && !/\.log\.\d+$/.test(name)) continue
      const path = join(root, world, name)
      const stat = statSync(path, { throwIfNoEntry: false })
      if (stat?.isFile() === true) out.push({ path, world, live, bytes: stat.size, modifiedMs: stat.mtimeMs })
    }
  }
  return out
}

/**
 * Keeps the services' logs within the budget of BERTH_HOME's disk (`domain/log-budget.ts`): a live log past its size
 * is rotated (two older copies kept), then the oldest copies go, and a live log is emptied only when that is not
 * enough — a service that writes without pause never fills the disk its world's state lives on.
 */
/** Answers how long until the next look: as late as the room left allows (`nextLogCheckMs`). */
const rotateLogs = Effect.gen(function* () {
  const home = yield* Home
  const budget = logBudget(yield* Effect.sync(() => diskBytesAt(home.logs)))
  const before = logFiles(home.logs)
  // rotateIfLarger reads the size again itself: only a log past its size is worth the call
  const rotated = yield* Effect.forEach(
    before.filter((f) => f.live && f.bytes > budget.rotateAtBytes),
    (f) => LogFiles.rotateIfLarger(f.path, budget.rotateAtBytes, 2).pipe(Effect.orElseSucceed(() => false))
  )
  const files = rotated.some((r) => r) ? logFiles(home.logs) : before
  const trim = logTrim(files, budget)
  if (trim.drop.length === 0 && trim.truncate.length === 0) return nextLogCheckMs(files, budget)
  yield* Effect.sync(() => {
    for (const file of trim.drop) rmSync(file, { force: true })
    for (const file of trim.truncate) {
      try {
        truncateSync(file, 0)
      } catch {
        // gone meanwhile
      }
    }
  })
  if (trim.truncate.length > 0) {
    yield* Effect.logWarning(
      `logs over their budget (${budget.perWorldBytes} bytes a world, ${budget.perHomeBytes} in all): emptied ${trim.truncate.join(", ")}`
    )
  }
  // it was over: look again soon
  return LOG_CHECK_MIN_MS
})

/** how long a process a crash left unrecorded gets to end on SIGTERM before it is killed */
const STRAY_GRACE_MS = 3_000

/**
 * What a previous daemon of this home left running that nothing records: one-off commands (a migrate or setup would
 * run beside the retry), and service processes spawned in the moment before their record was written (a second copy
 * would be started beside them). Run before this process starts anything of its own — in the daemon, before it
 * listens — since a spawn of its own is unrecorded for a moment too.
 */
export const sweepLeftovers = Effect.gen(function* () {
  const home = yield* Home
  const processes = yield* Processes
  const registry = yield* Registry
  const swept = yield* processes.sweepOneShots(home.root)
  if (swept > 0) yield* Effect.logInfo(`stopped ${swept} one-off command(s) a previous daemon left running`)
  // what runs can only be told from the records: without them nothing is stopped
  const rows = yield* Effect.all([registry.services(), registry.worlds(), registry.getSetting(ANYWHERE_SETTING)]).pipe(
    Effect.option
  )
  if (rows._tag === "None") return yield* Effect.logWarning("the state database cannot be read: no leftovers swept")
  const [services, worldRows, listed] = rows.value
  // a world that runs anywhere is never adopted: another machine of the cluster may run it by now. Its processes are
  // stopped with the strays; its actor lets it go (wanted down) until the cluster starts it again wherever it lands
  const anywhere = worldRows.filter((w) => runsAnywhere(listed, home.root, w))
  const notAdopted = new Set(anywhere.map((w) => w.id))
  const recorded = new Set<number>()
  for (const s of services) {
    if (notAdopted.has(s.worldId)) continue
    if (s.pid === null || s.pgid === null || s.startTime === null) continue
    if (yield* processes.isRunning({ pid: s.pid, pgid: s.pgid, startTime: s.startTime })) recorded.add(s.pgid)
  }
  const marked = yield* processes.marked
  const stray = strayGroups(marked, home.root, recorded)
  if (stray.length === 0) return
  const named = [
    ...new Set(marked.filter((p) => stray.includes(p.pgid)).map((p) => `world ${p.mark.world} ${p.mark.service}`))
  ]
  yield* Effect.logWarning(
    `stopping ${stray.length} process group(s) a previous daemon started but never recorded: ${named.join(", ")}`
  )
  yield* processes.stopGroups(stray, STRAY_GRACE_MS)
})

/** What the paced reconcile loop reads and runs: the engine's, or a test's. */
export interface ReconcileSteps {
  /** writes what actors could not write when it happened: on every look */
  readonly flush: Effect.Effect<void>
  /** the pass over every world */
  readonly reconcile: Effect.Effect<void>
  /** the registry's change counter */
  readonly changes: Effect.Effect<number>
  /** every world's worktree folder (empty: none yet) */
  readonly worktrees: Effect.Effect<ReadonlyArray<string>>
  /** whether a folder exists */
  readonly exists: (path: string) => boolean
}

/**
 * The reconcile pass, paced (`domain/reconcile-pace.ts`): every few seconds a look — what actors could not write is
 * written, the registry's change counter read, every worktree seen at the last pass stat'ed — and the pass over every
 * world only when one of those says something changed, or, while nothing does, less and less often (30 s at most).
 * An idle swarm of a hundred worlds reads no rows between passes; a worktree deleted outside berth is still seen
 * within a look. Runs until interrupted.
 */
export const pacedReconcile = (steps: ReconcileSteps): Effect.Effect<never> =>
  Effect.suspend(() => {
    /** the change counter as the last pass saw it: none yet, so the first look passes */
    let seen: number | undefined
    let quietPasses = 0
    let lastPassMs = 0
    /** the worktrees that existed at the last pass */
    let worktrees: ReadonlyArray<string> = []
    const look = Effect.gen(function* () {
      yield* steps.flush
      const changes = yield* steps.changes
      const now = yield* Clock.currentTimeMillis
      const vanished = worktrees.some((path) => !steps.exists(path))
      const changed = changes !== seen
      if (!passDue({ changed, vanished, sinceLastPassMs: now - lastPassMs, quietPasses })) return
      yield* steps.reconcile
      quietPasses = changed || vanished ? 0 : quietPasses + 1
      seen = changes
      lastPassMs = now
      worktrees = (yield* steps.worktrees).filter((path) => path !== "" && steps.exists(path))
    })
    return look.pipe(
      Effect.catchAllCause((cause) => Effect.logError("reconcile pass failed", cause)),
      Effect.zipRight(sleepToTick(RECONCILE_TICK_MS)),
      Effect.forever
    )
  })

const reconcileLoop = Effect.gen(function* () {
  const worlds = yield* Worlds
  const registry = yield* Registry
  yield* pacedReconcile({
    flush: worlds.flush(),
    reconcile: worlds.reconcile().pipe(Effect.orDie),
    changes: SubscriptionRef.get(registry.changes),
    worktrees: Effect.map(registry.worlds().pipe(Effect.orDie), (rows) => rows.map((w) => w.path)),
    exists: existsSync
  }).pipe(Effect.forkScoped)
})

/** The reconcile loop, log rotation, the pressure monitor and the slice sweep, all forked into the layer's scope. */
const loops = Effect.gen(function* () {
  const worlds = yield* Worlds
  yield* reconcileLoop
  // each look says when the next is due: every 2 s while the logs are near their budget, up to 30 s with room to spare
  yield* rotateLogs.pipe(
    Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("log budget", cause), LOG_CHECK_MIN_MS)),
    Effect.flatMap(sleepOnGrid),
    Effect.forever,
    Effect.forkScoped
  )
  yield* monitorPressure
  const every = yield* gcEvery
  const sweep = worlds.gc(false, {}, true).pipe(
    Effect.tap((report) =>
      Effect.forEach(
        [
          ...report.entries.map((e) => `gc: ${e.outcome} ${e.adapter} ${e.name} (${e.reason})`),
          // a record of an adapter nothing serves is forgotten here as by `berth gc`, and said as it says it
          ...report.forgotten.map((f) => `gc: ${forgottenLine(f)}`)
        ],
        (line) => Effect.logInfo(line),
        { discard: true }
      )
    ),
    Effect.catchAllCause((cause) => Effect.logError("slice sweep failed", cause))
  )
  // once soon after start — what a crash left half-made (a copy cut off mid-way) goes then, not ten minutes later;
  // the first reconcile pass has started every world's adoption by then, and what it provisions is marked busy —
  // then every `every`
  yield* sweep.pipe(
    Effect.delay(Duration.min(Duration.seconds(2), every)),
    Effect.zipRight(sweep.pipe(Effect.delay(every), Effect.forever)),
    Effect.forkScoped
  )
})

/** The daemon's: it sweeps what a previous daemon left before it listens (`runDaemon`), so not here. */
export const ReconcileLoopLive = Layer.scopedDiscard(loops).pipe(Layer.provide(PressureTargetsLive))

/** berth embedded: what a previous run left is swept first, then the loops start. */
export const ReconcilerLive = Layer.scopedDiscard(Effect.zipRight(sweepLeftovers, loops)).pipe(
  Layer.provide(PressureTargetsLive)
)
