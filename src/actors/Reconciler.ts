/**
 * The one fiber that drives what is true toward what is wanted: at daemon start (adopting the processes that
 * outlived the previous daemon) and then every few seconds (worktrees deleted outside berth, strays). Beside it,
 * log rotation: services write their logs directly, so the daemon trims them by copy-then-truncate.
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { Home } from "../services/Home.js"
import * as LogFiles from "../services/LogFiles.js"
import { Worlds } from "./Worlds.js"

export const RECONCILE_EVERY = Duration.seconds(3)
export const ROTATE_EVERY = Duration.seconds(30)
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
    yield* worlds.reconcile().pipe(
      Effect.catchAllCause((cause) => Effect.logError("reconcile pass failed", cause)),
      Effect.repeat(Schedule.spaced(RECONCILE_EVERY)),
      Effect.forkScoped
    )
    yield* rotateLogs.pipe(Effect.repeat(Schedule.spaced(ROTATE_EVERY)), Effect.forkScoped)
  })
)
