import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { onTick, untilTick, WAKE_TICK_MS } from "../domain/wake-grid.js"

/** Sleeps until the next multiple of `periodMs` on the Clock (`wake-grid.ts`): a periodic loop's wait. */
export const sleepToTick = (periodMs: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Duration.millis(untilTick(now, periodMs))))

/** Sleeps at least `ms`, to the next whole tick of the grid after it: a loop that chooses each wait itself. */
export const sleepOnGrid = (ms: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Duration.millis(onTick(now, ms, WAKE_TICK_MS))))
