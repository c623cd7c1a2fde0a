/**
 * One service of one world, as a supervised fiber: setup → spawn → health → watch; on an exit it asks the pure
 * restart policy what to do (restart after a capped backoff, give up as `failed`, or stay down). Its process lives in
 * the scope of one "life": interrupting the fiber (down, reload, remove) stops the whole process group through that
 * scope's finalizer. Observed state changes only through `transition`, so a late event never undoes a stop.
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as Model from "../domain/config/model.js"
import { redact } from "../domain/coordinates.js"
import { decideRestart, exitDescription, type ExitStatus } from "../domain/restart.js"
import { type ServiceEvent, type ServiceState, transition } from "../domain/service-state.js"
import { defaultCheck, Health } from "../services/Health.js"
import * as LogFiles from "../services/LogFiles.js"
import { type ProcessHandle, Processes } from "../services/Processes.js"

export interface ServicePlan {
  readonly world: string
  readonly service: Model.ProcessService
  readonly command: string
  readonly setup: string | undefined
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly port: number | undefined
  readonly logFile: string
  readonly secrets: ReadonlyArray<string>
}

export interface ServiceSnapshot {
  readonly state: ServiceState
  readonly handle: ProcessHandle | undefined
  readonly restarts: number
  readonly reason: string | undefined
  readonly logTail: ReadonlyArray<string>
}

/** Why a service did not become ready during `up`. */
export class ServiceFailed extends Data.TaggedError("ServiceFailed")<{
  readonly service: string
  readonly reason: string
  readonly logTail: ReadonlyArray<string>
}> {}

export interface ServiceRuntime {
  readonly plan: ServicePlan
  readonly snapshot: SubscriptionRef.SubscriptionRef<ServiceSnapshot>
  /** resolved the first time the service is healthy; failed if it gives up before */
  readonly ready: Deferred.Deferred<void, ServiceFailed>
}

export const initialSnapshot: ServiceSnapshot = {
  state: "pending",
  handle: undefined,
  restarts: 0,
  reason: undefined,
  logTail: []
}

export const makeRuntime = (plan: ServicePlan, initial: ServiceSnapshot = initialSnapshot) =>
  Effect.all({
    plan: Effect.succeed(plan),
    snapshot: SubscriptionRef.make(initial),
    ready: Deferred.make<void, ServiceFailed>()
  })

const TAIL_LINES = 20
/** how long a service without a health check must stay up to count as started */
const SETTLE_MS = 300
/** how often a healthy service's check is repeated to notice it turning unhealthy */
const WATCH_INTERVAL_MS = 5_000

/**
 * Runs the service until interrupted. `adopt` is a process that survived a daemon restart: it is watched, not
 * spawned again. `dependencies` completes when every dependency is healthy.
 */
export const runService = (
  rt: ServiceRuntime,
  options: {
    readonly adopt?: ProcessHandle | undefined
    readonly dependencies: Effect.Effect<void, ServiceFailed>
  }
) =>
  Effect.gen(function* () {
    const processes = yield* Processes
    const health = yield* Health
    const { plan } = rt
    const name = plan.service.name
    const check = plan.service.health ?? defaultCheck(plan.port !== undefined)

    const apply = (event: ServiceEvent, patch: Partial<ServiceSnapshot> = {}) => applyEvent(rt, event, patch)

    const tail = LogFiles.tail(plan.logFile, TAIL_LINES).pipe(
      Effect.map((lines) => lines.map((l) => redact(l, plan.secrets))),
      Effect.orElseSucceed((): ReadonlyArray<string> => [])
    )

    const giveUp = (reason: string) =>
      Effect.gen(function* () {
        const logTail = yield* tail
        yield* apply({ _tag: "Fail", reason }, { reason, logTail, handle: undefined })
        yield* Deferred.fail(rt.ready, new ServiceFailed({ service: name, reason, logTail }))
        return yield* Effect.never
      })

    /** The leader's exit, once nothing of its group is left (a command may fork and exit 0). */
    const awaitGone = (handle: ProcessHandle) =>
      Effect.gen(function* () {
        const exit = yield* processes.awaitExit(handle)
        while (yield* processes.isRunning(handle)) yield* Effect.sleep(Duration.millis(250))
        return exit
      })

    const runSetup = (command: string) =>
      Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* processes.spawnScoped(
            { command, cwd: plan.cwd, env: plan.env, logFile: plan.logFile },
            plan.service.stopGraceMs
          )
          return yield* awaitGone(handle)
        })
      )

    yield* options.dependencies
    const restartTimes: Array<number> = []
    let adopt = options.adopt

    for (;;) {
      yield* apply({ _tag: "Start" }, { reason: undefined })
      // one life: the scope owns the process group, so leaving it any way at all stops the group
      const exit: ExitStatus = yield* Effect.scoped(
        Effect.gen(function* () {
          if (adopt === undefined && plan.setup !== undefined) {
            const setupExit = yield* runSetup(plan.setup)
            if (setupExit.code !== 0 || setupExit.signal !== null) {
              return yield* giveUp(`setup \`${plan.service.setup}\` failed (${exitDescription(setupExit)})`)
            }
          }
          const logOffset = yield* LogFiles.size(plan.logFile).pipe(Effect.orElseSucceed(() => 0))
          const handle =
            adopt ??
            (yield* processes
              .spawn({ command: plan.command, cwd: plan.cwd, env: plan.env, logFile: plan.logFile })
              .pipe(Effect.catchTag("SpawnFailed", (e) => giveUp(e.reason))))
          yield* Effect.addFinalizer(() => processes.stop(handle, plan.service.stopGraceMs))
          adopt = undefined
          yield* apply({ _tag: "Spawned" }, { handle })
          const gone = yield* Effect.fork(awaitGone(handle))

          const alreadyReady = yield* Deferred.isDone(rt.ready)
          if (check === undefined) {
            // no check: ready once it has stayed up a moment, so an instant crash is not taken for a start
            const settled = yield* Effect.raceFirst(
              Effect.as(Effect.sleep(Duration.millis(SETTLE_MS)), true),
              Effect.as(gone.await, false)
            )
            if (settled) {
              yield* apply({ _tag: "Healthy" })
              yield* Deferred.succeed(rt.ready, undefined)
            }
          } else {
            const ctx = { port: plan.port, cwd: plan.cwd, env: plan.env, logFile: plan.logFile, logOffset }
            // healthy, or the process ends first, or the check times out
            const verdict = yield* Effect.raceFirst(
              health.waitHealthy(check, ctx).pipe(Effect.as("healthy" as const), Effect.either),
              Effect.map(gone.await, () => "exited" as const).pipe(Effect.either)
            )
            if (verdict._tag === "Left") {
              if (!alreadyReady) return yield* giveUp(verdict.left.message)
              yield* apply({ _tag: "Unhealthy" })
            } else if (verdict.right === "healthy") {
              yield* apply({ _tag: "Healthy" })
              yield* Deferred.succeed(rt.ready, undefined)
              // keep watching: healthy ⇄ unhealthy, for status
              const probe = yield* health.prober(check, ctx)
              yield* probe.pipe(
                Effect.flatMap((ok) => apply(ok ? { _tag: "Healthy" } : { _tag: "Unhealthy" })),
                Effect.delay(Duration.millis(WATCH_INTERVAL_MS)),
                Effect.forever,
                Effect.forkScoped
              )
            }
          }
          const result = yield* gone.await
          return Exit.isSuccess(result) ? result.value : { code: null, signal: null }
        })
      )
      const now = yield* Clock.currentTimeMillis
      const decision = decideRestart({
        policy: plan.service.restart,
        exit,
        stoppedByUs: false,
        recentRestarts: restartTimes,
        now,
        limits: { maxRestarts: plan.service.maxRestarts, baseDelayMs: plan.service.restartBackoffMs }
      })
      if (decision._tag === "Done") {
        yield* apply({ _tag: "Exited", ...exit }, { handle: undefined, logTail: yield* tail })
        const current = yield* SubscriptionRef.get(rt.snapshot)
        if (current.state === "failed") {
          // a crash with no restart policy: before it was ever ready, it fails the up
          yield* Deferred.fail(
            rt.ready,
            new ServiceFailed({ service: name, reason: `exited (${exitDescription(exit)})`, logTail: current.logTail })
          )
        } else {
          // a one-shot task that finished cleanly counts as ready
          yield* Deferred.succeed(rt.ready, undefined)
        }
        return yield* Effect.never
      }
      if (decision._tag === "GiveUp") return yield* giveUp(decision.reason)
      restartTimes.push(now)
      yield* apply(
        { _tag: "Restart" },
        {
          handle: undefined,
          restarts: (yield* SubscriptionRef.get(rt.snapshot)).restarts + 1,
          reason: `restarting after ${exitDescription(exit)} (attempt ${decision.attempt}, in ${decision.delayMs}ms)`
        }
      )
      yield* Effect.sleep(Duration.millis(decision.delayMs))
    }
  })

/** The one way a snapshot changes: an event the transition function accepts, plus what it brings along. */
const applyEvent = (rt: ServiceRuntime, event: ServiceEvent, patch: Partial<ServiceSnapshot> = {}) =>
  SubscriptionRef.update(rt.snapshot, (s) => {
    const next = transition(s.state, event)
    return next === undefined ? s : { ...s, ...patch, state: next }
  })

/** Marks a service as stopping: its world is about to interrupt its fiber. */
export const markStopping = (rt: ServiceRuntime) => applyEvent(rt, { _tag: "Stop" })

/** Marks a service as stopped once its fiber (and so its process group) is gone. */
export const markStopped = (rt: ServiceRuntime) => applyEvent(rt, { _tag: "StopDone" }, { handle: undefined })
