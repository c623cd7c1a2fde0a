/**
 * One world against a model of it (fast-check's model runner): random sequences of up, down, reload, suspend (and the
 * resume that follows), a service crash, remove (and the up that makes the world again) and a daemon restart, run on the in-process engine (`test/actors/world.ts`:
 * the real Worlds, actors, Registry, Ports and Admission over fake processes, health and slices, under a TestClock).
 * After every step, once the world has settled, what every part of berth holds must agree with the model and with
 * each other: the state the world reports and the one the registry keeps, what is desired (the user's last ask), the
 * permit, the processes alive (one while it runs, none after a down), the port (kept across everything), and one
 * actor per engine however the world got there.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Runtime from "effect/Runtime"
import * as TestClock from "effect/TestClock"
import { CONFIRM_MS } from "../../src/actors/ServiceActor.js"
import { backoffDelay, defaultRestartLimits } from "../../src/domain/restart.js"
import { ALLOWED, awaitPending, type Engine, eventually, passTime, type WorldHarness, worldHarness } from "./world.js"

const MODEL = `[project]
name = "model"

[services.api]
cmd = "serve api"
url = "api"
health = { cmd = "check api" }
restart = "on-failure"
restart_backoff = "1s"
`
const BACKOFF_MS = 1_000
/** the backoff before the n-th restart in a row (from 0), as the restart policy spaces them */
const restartDelay = (n: number) => backoffDelay(n, { ...defaultRestartLimits, baseDelayMs: BACKOFF_MS })
const WORLD = "alpha"

interface Model {
  /** the world exists (a remove ends it; the next up makes it again) */
  exists: boolean
  running: boolean
  /** what the user last asked for */
  desired: "up" | "down"
  /** the world's port, once it has one: kept across every step */
  port: number | undefined
  /** restarts after a crash since berth last started the service (its backoff grows with them, up to a limit) */
  restarts: number
}

interface Real {
  readonly h: WorldHarness
  engine: Engine
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  /** the steps so far, for the failure's message */
  readonly steps: Array<string>
  /** worlds removed since this engine started: each later up makes one actor more */
  removals: number
}

/** the world's api processes alive now */
const alive = (r: Real) =>
  Effect.flatMap(r.h.processesOf(WORLD, "api"), (all) =>
    Effect.map(
      Effect.forEach(all, (p) => r.h.fakes.processes.current(p)),
      (now) => now.filter((p) => p.alive)
    )
  )

/** After every step: every part of berth agrees with the model and with each other. */
const agree = (m: Model, r: Real) =>
  Effect.gen(function* () {
    expect(yield* r.engine.worlds.actorsStarted, "one actor per engine (and world made)").toBeLessThanOrEqual(
      1 + r.removals
    )
    if (!m.exists) {
      expect(yield* r.h.status(WORLD), `no world after ${r.steps.join(", ")}`).toBeUndefined()
      expect((yield* alive(r)).length, "processes alive").toBe(0)
      expect(yield* r.engine.admission.running, "no permit").toBe(0)
      return
    }
    const id = yield* r.h.idOf(WORLD)
    const status = yield* r.h.status(WORLD)
    const row = yield* r.engine.registry.world(id)
    const state = m.running ? "running" : "stopped"
    expect(status?.state, `status after ${r.steps.join(", ")}`).toBe(state)
    expect(row?.observed, "the registry's observed state").toBe(state)
    expect(row?.desired, "desired: the user's last ask").toBe(m.desired)
    expect(r.engine.admission.holds(id), "the permit").toBe(m.running)
    expect((yield* alive(r)).length, "processes alive").toBe(m.running ? 1 : 0)
    const api = status?.services.find((s) => s.name === "api")
    if (m.running) {
      expect(api?.state).toBe("healthy")
      if (m.port === undefined) m.port = api?.port ?? undefined
      expect(api?.port, "the port is kept").toBe(m.port)
    }
  })

/** the world runs again once its (new) process passed its check and stayed up CONFIRM_MS */
const comesUp = (r: Real) =>
  Effect.gen(function* () {
    yield* passTime("api stays up after its check", CONFIRM_MS)
    yield* eventually(
      "the world runs",
      Effect.map(r.h.status(WORLD), (s) => s?.state === "running" && s.services.every((x) => x.state === "healthy"))
    )
  })

type Command = FastCheck.AsyncCommand<Model, Real>

const command = (
  name: string,
  check: (m: Readonly<Model>) => boolean,
  step: (m: Model, r: Real) => Effect.Effect<void, unknown>
): Command => ({
  check,
  run: async (m, r) => {
    r.steps.push(name)
    await r.run(Effect.zipRight(step(m, r), agree(m, r)))
  },
  toString: () => name
})

const up = command(
  "up",
  () => true,
  (m, r) =>
    Effect.gen(function* () {
      yield* r.engine.worlds.up(r.h.ref(WORLD), { services: [], groups: [] }, ALLOWED, false)
      if (!m.running) {
        yield* comesUp(r)
        m.restarts = 0
      }
      m.running = true
      m.desired = "up"
      m.exists = true
    })
)

const down = command(
  "down",
  (m) => m.exists,
  (m, r) =>
    Effect.gen(function* () {
      yield* r.engine.worlds.down(r.h.ref(WORLD), false)
      m.running = false
      m.desired = "down"
    })
)

const reload = command(
  "reload",
  (m) => m.running,
  (m, r) =>
    Effect.gen(function* () {
      yield* r.engine.worlds.reload(r.h.ref(WORLD), ALLOWED, false)
      yield* comesUp(r)
      m.restarts = 0
    })
)

/** suspended while memory is plentiful: back in line at once, admitted, and started again */
const suspend = command(
  "suspend",
  (m) => m.running,
  (m, r) =>
    Effect.gen(function* () {
      yield* r.engine.worlds.suspend(yield* r.h.idOf(WORLD), "memory is short", true)
      yield* comesUp(r)
      m.restarts = 0
    })
)

/** below the restart policy's limit: one crash more would fail the service (a step of its own model) */
const crash = command(
  "crash",
  (m) => m.running && m.restarts < defaultRestartLimits.maxRestarts,
  (m, r) =>
    Effect.gen(function* () {
      const [api] = yield* alive(r)
      const before = (yield* r.h.processesOf(WORLD, "api")).length
      yield* r.h.fakes.processes.exit(api!, { code: 1, signal: null })
      // the backoff grows with each restart (1 s, then 2 s, …): the clock moves to the restart, however far it is
      yield* eventually(
        "api's restart backoff",
        Effect.map(r.h.status(WORLD), (s) => s?.services.some((x) => x.state === "restarting") === true)
      )
      yield* awaitPending("api's restart backoff", restartDelay(m.restarts))
      yield* TestClock.adjust(restartDelay(m.restarts))
      m.restarts++
      yield* eventually(
        "api restarted and healthy",
        Effect.gen(function* () {
          const all = yield* r.h.processesOf(WORLD, "api")
          const s = yield* r.h.status(WORLD)
          return all.length === before + 1 && s?.services.every((x) => x.state === "healthy") === true
        })
      )
    })
)

/** the world and everything of it goes; the next up makes it again, with ports of its own */
const remove = command(
  "remove",
  (m) => m.exists,
  (m, r) =>
    Effect.gen(function* () {
      yield* r.engine.worlds.remove(r.h.ref(WORLD), false)
      r.removals++
      m.exists = false
      m.running = false
      m.desired = "down"
      m.port = undefined
      m.restarts = 0
    })
)

/** `daemon stop` and a new daemon over the same home: a running world is adopted, a stopped one stays stopped */
const restartDaemon = command(
  "daemon restart",
  () => true,
  (m, r) =>
    Effect.gen(function* () {
      const moves = (yield* r.h.moves(WORLD)).length
      r.engine = yield* r.h.restartDaemon
      r.removals = 0
      yield* r.engine.worlds.reconcile()
      // adoption checks the services again: running>starting, starting>running
      if (m.running) {
        yield* r.h.awaitMoves(WORLD, moves + 2)
        yield* r.h.awaitState(WORLD, "running")
      }
      m.restarts = 0
    })
)

describe("one world against its model", () => {
  it.scoped(
    "agrees with the model after every step of random up, down, reload, suspend, crash, remove and daemon restart",
    () =>
      Effect.gen(function* () {
        const runtime = yield* Effect.runtime<never>()
        yield* Effect.promise(() =>
          FastCheck.assert(
            FastCheck.asyncProperty(
              FastCheck.commands(
                [up, down, reload, suspend, crash, remove, restartDaemon].map((c) => FastCheck.constant(c)),
                {
                  maxCommands: 10
                }
              ),
              async (commands) => {
                // a repository and an engine of its own for each sequence, gone with it
                await Runtime.runPromise(runtime)(
                  Effect.scoped(
                    Effect.gen(function* () {
                      const h = yield* worldHarness(MODEL)
                      yield* h.fakes.health.setDefault(true)
                      const inner = yield* Effect.runtime<never>()
                      const real: Real = {
                        h,
                        engine: h.engine,
                        run: (effect) => Runtime.runPromise(inner)(effect),
                        steps: [],
                        removals: 0
                      }
                      const model: Model = {
                        exists: true,
                        running: false,
                        desired: "down",
                        port: undefined,
                        restarts: 0
                      }
                      // the world exists before the first step: made by an up, then taken down
                      yield* Effect.promise(() => up.run(model, real))
                      yield* Effect.promise(() => down.run(model, real))
                      yield* Effect.promise(() => FastCheck.asyncModelRun(() => ({ model, real }), commands))
                    })
                  )
                )
              }
            ),
            { numRuns: 20 }
          )
        )
      }),
    120_000
  )
})
