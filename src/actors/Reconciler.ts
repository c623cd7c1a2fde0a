/**
 * The one fiber that drives what is true toward what is wanted: at daemon start (adopting the processes that
 * outlived the previous daemon) and then every few seconds (worktrees deleted outside berth, strays). Beside it,
 * log rotation: services write their logs directly, so the daemon trims them by copy-then-truncate; and the slice
 * sweep (the same as `berth gc`), now and then.
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { Home } from "../services/Home.js"
import * as LogFiles from "../services/LogFiles.js"
import { Processes } from "../services/Processes.js"
import { monitorPressure, PressureTargetsLive } from "./PressureMonitor.js"
import { Worlds } from "./Worlds.js"

export const RECONCILE_EVERY = Duration.seconds(3)
export const ROTATE_EVERY = Duration.seconds(30)
/** the slice sweep: rare, since a slice is only left behind by a crash or a server that was down at `remove` */
const gcEvery = (): Duration.Duration => {
  const ms = Number(process.env.BERTH_GC_INTERVAL_MS)
  return Number.isFinite(ms) && ms > 0 ? Duration.millis(ms) : Duration.minutes(10)
}

/** a service's log is rotated past this size, keeping two older copies */
export const LOG_MAX_BYTES = 10 * 1024 * 1024

const rotateLogs = Effect.gen(function* () {
  const home = yield* Home
  const files = (() => {
    try {
      return readdirSync(home.logs).flatMap((world) =>
        readdirSync(join(home.logs, world))
          .filter((f) => f.endsWith(".log"))
          .map((f) => join(home.logs, world, f))
      )
    } catch {
      return []
    }
  })()
  yield* Effect.forEach(files, (file) => LogFiles.rotateIfLarger(file, LOG_MAX_BYTES, 2).pipe(Effect.ignore), {
    discard: true
  })
})

export const ReconcilerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const worlds = yield* Worlds
    const home = yield* Home
    // a migrate or setup that outlived a crashed daemon would run beside the retry the first pass may start
    const processes = yield* Processes
    const swept = yield* processes.sweepOneShots(home.root)
    if (swept > 0) yield* Effect.logInfo(`stopped ${swept} one-off command(s) a previous daemon left running`)
    yield* worlds.reconcile().pipe(
      Effect.catchAllCause((cause) => Effect.logError("reconcile pass failed", cause)),
      Effect.repeat(Schedule.spaced(RECONCILE_EVERY)),
      Effect.forkScoped
    )
    yield* rotateLogs.pipe(Effect.repeat(Schedule.spaced(ROTATE_EVERY)), Effect.forkScoped)
    yield* monitorPressure
    const every = gcEvery()
    const sweep = worlds.gc(false, {}, true).pipe(
      Effect.tap((report) =>
        Effect.forEach(report.entries, (e) => Effect.logInfo(`gc: ${e.outcome} ${e.adapter} ${e.name} (${e.reason})`), {
          discard: true
        })
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
).pipe(Layer.provide(PressureTargetsLive))
