/**
 * The reconcile loop's pace under a TestClock: a pass at start, within a look of any change or of a worktree deleted
 * outside berth, and less and less often while nothing changes; what actors could not write is written on every look.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import { pacedReconcile } from "../../src/actors/Reconciler.js"

/** A fake engine: a change counter, folders that exist, and the times (in s) of each pass and each flush. */
const engine = () => {
  const state = { changes: 0, folders: new Set(["/w/a", "/w/b"]), passes: [] as Array<number>, flushes: 0 }
  const now = Effect.map(TestClock.currentTimeMillis, (ms) => ms / 1000)
  const loop = pacedReconcile({
    flush: Effect.sync(() => {
      state.flushes++
    }),
    reconcile: Effect.flatMap(now, (s) => Effect.sync(() => state.passes.push(s))),
    changes: Effect.sync(() => state.changes),
    worktrees: Effect.sync(() => ["/w/a", "/w/b", ""]),
    exists: (path) => state.folders.has(path)
  })
  return { state, loop }
}

/** Moves the clock on `seconds`, a second at a time, so that every look due meanwhile runs. */
const pass = (seconds: number) =>
  Effect.forEach(Array.from({ length: seconds }), () => TestClock.adjust("1 second"), { discard: true })

describe("the reconcile loop's pace", () => {
  it.effect("passes at start, then 3, 6, 12, 24 and 30 s apart while nothing changes, looking every 3 s", () =>
    Effect.gen(function* () {
      const { state, loop } = engine()
      const fiber = yield* Effect.fork(loop)
      yield* pass(130)
      expect(state.passes).toEqual([0, 3, 9, 21, 45, 75, 105])
      // every look flushes, passing or not
      expect(state.flushes).toBe(44)
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("passes within a look of a change, and paces from there again", () =>
    Effect.gen(function* () {
      const { state, loop } = engine()
      const fiber = yield* Effect.fork(loop)
      yield* pass(50)
      expect(state.passes).toEqual([0, 3, 9, 21, 45])
      state.changes++
      yield* pass(30)
      // the look at 51 s sees the change; then quiet again: 3, 6, 12 s after
      expect(state.passes).toEqual([0, 3, 9, 21, 45, 51, 54, 60, 72])
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("passes within a look of a worktree deleted outside berth", () =>
    Effect.gen(function* () {
      const { state, loop } = engine()
      const fiber = yield* Effect.fork(loop)
      yield* pass(50)
      state.folders.delete("/w/b")
      yield* pass(2)
      expect(state.passes).toEqual([0, 3, 9, 21, 45, 51])
      // gone, it is no longer watched: the next pass comes at the quiet pace
      yield* pass(8)
      expect(state.passes).toEqual([0, 3, 9, 21, 45, 51, 54, 60])
      yield* Fiber.interrupt(fiber)
    })
  )
})
