/**
 * The membership's sessions (cluster/membership.ts) under the test clock, with sessions of the test's own: one that
 * fails is tried again later and later and said in the view; a refused one is not tried again; leaving stops them, and
 * a daemon started again resumes them from what it remembers. No database, no root.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/TestClock"
import { makeMembership, type Session, type Settings, sessions } from "../../src/cluster/membership.js"
import { makeClusterState, updateView } from "../../src/cluster/view.js"
import { ClusterRefused, ClusterUnavailable } from "../../src/domain/errors.js"

const settings: Settings = {
  url: "postgres://berth:secret@db.example/berth",
  name: "m1",
  address: "10.0.0.1",
  runnerPort: 7450,
  machineId: "m1-id"
}

/** A session that fails `failures` times (as the database being away), then takes its place and runs. */
const flaky = (
  failures: number,
  starts: Ref.Ref<Array<number>>,
  state: Effect.Effect.Success<typeof makeClusterState>
) =>
  ((_settings, ready) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const count = (yield* Ref.updateAndGet(starts, (s) => [...s, now])).length
      if (count <= failures) {
        return yield* new ClusterUnavailable({ url: "postgres://db.example/berth", reason: `refused (${count})` })
      }
      yield* updateView(state, (v) => ({ ...v, state: "member", error: undefined }))
      yield* Deferred.succeed(ready, undefined)
      return yield* Effect.never
    })) satisfies Session

describe("the membership's sessions", () => {
  it.effect("try a failed session again after 0.5 s, then later and later, saying why in the view meanwhile", () =>
    Effect.gen(function* () {
      const state = yield* makeClusterState
      const starts = yield* Ref.make<Array<number>>([])
      const ready = yield* Deferred.make<void, ClusterUnavailable | ClusterRefused>()
      const fiber = yield* Effect.fork(sessions(flaky(3, starts, state), settings, ready, state))
      yield* Effect.yieldNow()
      // the first session's failure is what a join is told
      const first = yield* Effect.flip(Deferred.await(ready))
      expect(first.message).toContain("refused (1)")
      const view = yield* state.view.get
      expect(view.state).toBe("retrying")
      expect(view.error).toContain("refused (1)")
      for (let i = 0; i < 20; i++) yield* TestClock.adjust(250)
      expect(yield* Ref.get(starts)).toEqual([0, 500, 1_500, 3_500])
      expect((yield* state.view.get).state).toBe("member")
      yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("never try a refused session again (another machine took the name): the view says refused", () =>
    Effect.gen(function* () {
      const state = yield* makeClusterState
      const starts = yield* Ref.make(0)
      const refused: Session = () =>
        Effect.zipRight(
          Ref.update(starts, (n) => n + 1),
          Effect.fail(new ClusterRefused({ reason: "another machine took over the name m1", hint: "--name" }))
        )
      const ready = yield* Deferred.make<void, ClusterUnavailable | ClusterRefused>()
      yield* sessions(refused, settings, ready, state)
      yield* TestClock.adjust(60_000)
      expect(yield* Ref.get(starts)).toBe(1)
      const view = yield* state.view.get
      expect([view.state, view.error]).toEqual(["refused", "another machine took over the name m1\n  hint: --name"])
    })
  )

  it.effect("resume with the daemon from what it remembers, and end with leave's stop, the view solo again", () =>
    Effect.gen(function* () {
      const state = yield* makeClusterState
      const starts = yield* Ref.make<Array<number>>([])
      const remembered = new Map<string, unknown>([["cluster", settings]])
      const registry = {
        getSetting: (key: string) => Effect.sync(() => remembered.get(key)),
        setSetting: (key: string, value: unknown) => Effect.sync(() => void remembered.set(key, value))
      }
      const membership = yield* makeMembership({
        registry,
        state,
        session: flaky(0, starts, state),
        daemonScope: yield* Effect.scope
      })
      yield* membership.resume
      yield* Effect.yieldNow()
      const view = yield* state.view.get
      // the password is never shown
      expect([view.state, view.name, view.url]).toEqual(["member", "m1", "postgres://berth:***@db.example/berth"])
      expect(yield* Ref.get(starts)).toHaveLength(1)
      yield* membership.stop
      expect((yield* state.view.get).state).toBe("solo")
      // a join elsewhere while a member is refused before anything is touched; the same join answers the view
      yield* membership.resume
      yield* Effect.yieldNow()
      const again = yield* Effect.flip(
        membership.join({ url: "postgres://other/berth", name: "m1", address: "10.0.0.1", init: false, replace: false })
      )
      expect(again.message).toContain("already in the cluster")
      const same = yield* membership.join({
        url: settings.url,
        name: "m1",
        address: "10.0.0.1",
        init: false,
        replace: false
      })
      expect(same.state).toBe("member")
      yield* membership.stop
    }).pipe(Effect.scoped)
  )
})
