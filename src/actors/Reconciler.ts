/**
 * The one fiber that drives what is true toward what is wanted: at daemon start (adopting the processes that
 * outlived the previous daemon) and then every few seconds (worktrees deleted outside berth, strays).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { Worlds } from "./Worlds.js"

export const RECONCILE_EVERY = Duration.seconds(3)

export const ReconcilerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const worlds = yield* Worlds
    yield* worlds.reconcile().pipe(
      Effect.catchAllCause((cause) => Effect.logError("reconcile pass failed", cause)),
      Effect.repeat(Schedule.spaced(RECONCILE_EVERY)),
      Effect.forkScoped
    )
  })
)
