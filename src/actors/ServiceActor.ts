/**
 * One service of one world, as a supervised fiber: setup → spawn → health → watch; on an exit it asks the pure
 * restart policy what to do (restart after a capped backoff, give up as `failed`, or stay down). Its process lives in
 * the scope of one "life": interrupting the fiber (down, reload, remove) stops the whole process group through that
 * scope's finalizer. Observed state changes only through `transition`, so a late event never undoes a stop.
 *
 * A check passing proves only that something answers, so a pass counts only while the service's group lives and, where
 * /proc tells, when the listener on its port is the group's: with EADDRINUSE another process's listener answers while
 * the service is dying. A first start is ready at its first pass, so a waiting `up` answers then; should the service
 * not stay up a moment longer (`confirmMs`), it is `failed` with its log (never `exited`): its start failed, which the
 * `up` could not know yet.
 */
import { randomBytes } from "node:crypto"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { readText } from "../domain/knobs.js"
import * as Exit from "effect/Exit"
import * as Random from "effect/Random"
import type * as Scope from "effect/Scope"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as Model from "../domain/config/model.js"
import { redact } from "../domain/coordinates.js"
import { formatMark, MARK_VARIABLE } from "../domain/marks.js"
import { elsewhereReason } from "../domain/proc.js"
import { decideRestart, exitDescription, type ExitStatus } from "../domain/restart.js"
import {
  livenessDelayMs,
  PROBE_SLOT_MS,
  probeDueMs,
  livenessStep,
  type ServiceEvent,
  type ServiceState,
  transition,
  UNHEALTHY_AFTER_MISSES
} from "../domain/service-state.js"
import { defaultCheck, Health, livenessAttemptMs } from "../services/Health.js"
import * as LogFiles from "../services/LogFiles.js"
import { trace } from "../services/trace.js"
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
  /** whose mark its processes carry (`domain/marks.ts`), so a process a crash left unrecorded is found again */
  readonly owner?: { readonly worldId: number; readonly home: string }
  /** waited on before each spawn (setup included): a world that runs anywhere starts nothing while its hold is stale */
  readonly fence?: Effect.Effect<void>
  /** each spawned group handed on for as long as it runs: a world that runs anywhere ties it to the daemon */
  readonly tie?: (pgid: number) => Effect.Effect<void, never, Scope.Scope>
  /**
   * Each change of its snapshot, recorded in the step that makes it and before the change is seen: whoever hears the
   * service is ready (an `up` answering, a daemon killed right after) finds its row saying so.
   */
  readonly record?: (snapshot: ServiceSnapshot) => Effect.Effect<void>
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
  /** held while the snapshot is read and changed: its service's fiber and its world's stops both change it */
  readonly changing: Effect.Semaphore
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
    ready: Deferred.make<void, ServiceFailed>(),
    changing: Effect.makeSemaphore(1)
  })

const TAIL_LINES = 20
/** How long a service without a health check must stay up to count as started: a crash at start comes sooner. */
export const SETTLE_MS = 500
/**
 * How long a service must stay up after its check first passed to count as started: a crash on the heels of its first
 * answer (a second bind, an init that throws) makes it `failed`, not a finished task. Waited beside the service, not
 * by the `up` (a warm `up` answers at the pass). Where /proc tells, a pass from another process's listener is refused
 * outright.
 */
export const CONFIRM_MS = 50
/** How often a ready service's check is repeated to notice it turning unhealthy. */
export const WATCH_INTERVAL_MS = 5_000

/** The waits of a service's life; tests shorten them. */
export interface ServiceTiming {
  readonly settleMs: number
  readonly confirmMs: number
  readonly watchIntervalMs: number
  /** one liveness probe's time; undefined: the check's `livenessAttemptMs` */
  readonly livenessAttemptMs: number | undefined
  /** the grid backed-off liveness probes fall due on (`probeDueMs`); 0: none */
  readonly probeSlotMs: number
}

export const defaultTiming: ServiceTiming = {
  settleMs: SETTLE_MS,
  confirmMs: CONFIRM_MS,
  watchIntervalMs: WATCH_INTERVAL_MS,
  livenessAttemptMs: undefined,
  probeSlotMs: PROBE_SLOT_MS
}

/** How one life of the process ended. */
interface Life {
  readonly exit: ExitStatus
  /** it passed its check, then was gone before `confirmMs`: a failed start, not a finished task */
  readonly diedAfterPass: boolean
  /** why a passing check did not count (the port's listener was another process's) */
  readonly rejected: string | undefined
}

/**
 * Runs the service until interrupted. `adopt` is a process that survived a daemon restart: it is watched, not
 * spawned again. `dependencies` completes when every dependency is healthy.
 */
export const runService = (
  rt: ServiceRuntime,
  options: {
    readonly adopt?: ProcessHandle | undefined
    readonly dependencies: Effect.Effect<void, ServiceFailed>
    readonly timing?: Partial<ServiceTiming> | undefined
    /**
     * When the service last answered a request through the proxy (epoch ms): a ready service's port answered since
     * the last liveness probe, so the next probe is not made (it counts as passed).
     */
    readonly answeredAt?: Effect.Effect<number | undefined> | undefined
  }
) =>
  Effect.gen(function* () {
    const processes = yield* Processes
    const health = yield* Health
    const { plan } = rt
    const name = plan.service.name
    const check = plan.service.health ?? defaultCheck(plan.port !== undefined)
    const timing: ServiceTiming = { ...defaultTiming, ...options.timing }

    const apply = (event: ServiceEvent, patch: Partial<ServiceSnapshot> = {}) => applyEvent(rt, event, patch)

    const tail = LogFiles.failureTail(plan.logFile, TAIL_LINES).pipe(
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

    /** the environment of one spawn: the plan's, marked with a life of its own */
    const lifeEnv = Effect.sync((): Readonly<Record<string, string>> => {
      const owner = plan.owner
      if (owner === undefined) return plan.env
      const life = randomBytes(6).toString("hex")
      return {
        ...plan.env,
        [MARK_VARIABLE]: formatMark({ life, world: owner.worldId, service: name, home: owner.home })
      }
    })

    const runSetup = (command: string) =>
      Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* processes.spawnScoped(
            { command, cwd: plan.cwd, env: yield* lifeEnv, logFile: plan.logFile },
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
      const adopted = adopt !== undefined
      // one life: the scope owns the process group, so leaving it any way at all stops the group
      const life: Life = yield* Effect.scoped(
        Effect.gen(function* () {
          if (adopt === undefined && plan.fence !== undefined) yield* plan.fence
          if (adopt === undefined) yield* LogFiles.markRun(plan.logFile, name)
          if (adopt === undefined && plan.setup !== undefined) {
            const setupExit = yield* runSetup(plan.setup)
            if (setupExit.code !== 0 || setupExit.signal !== null) {
              return yield* giveUp(`setup \`${plan.service.setup}\` failed (${exitDescription(setupExit)})`)
            }
          }
          yield* trace(`service ${name}: spawning`)
          const logOffset = yield* LogFiles.size(plan.logFile).pipe(Effect.orElseSucceed(() => 0))
          const handle =
            adopt ??
            (yield* processes
              .spawn({ command: plan.command, cwd: plan.cwd, env: yield* lifeEnv, logFile: plan.logFile })
              .pipe(Effect.catchTag("SpawnFailed", (e) => giveUp(e.reason))))
          yield* trace(`service ${name}: spawned`)
          // the chaos tests' way to stop the daemon in the one gap where a started process is recorded nowhere yet
          if (adopt === undefined && (yield* readText("BERTH_TEST_CRASH_AFTER_SPAWN")) === name)
            process.kill(process.pid, "SIGKILL")
          // tied before the stop is added: the group is let go of only once it is stopped
          if (plan.tie !== undefined) yield* plan.tie(handle.pgid)
          yield* Effect.addFinalizer(() => processes.stop(handle, plan.service.stopGraceMs))
          adopt = undefined
          yield* apply({ _tag: "Spawned" }, { handle })
          // the world's other services spawn before this one goes on (each fork waits for its child to exec, which gets
          // slower with every service already booting); yielding only now, once the scope owns the process and it is
          // recorded
          yield* Effect.yieldNow()
          const gone = yield* Effect.fork(awaitGone(handle))

          const alreadyReady = yield* Deferred.isDone(rt.ready)
          // an adopted process has long been up, and after a restart no `up` waits: only a first start is confirmed
          const confirming = !alreadyReady && !adopted
          /** true once the group stayed up `ms` longer; false as soon as it is gone */
          const staysUp = (ms: number) =>
            Effect.raceFirst(Effect.as(Effect.sleep(Duration.millis(ms)), true), Effect.as(gone.await, false))
          const becomeReady = Effect.zipRight(
            apply({ _tag: "Healthy" }, { reason: undefined }),
            Deferred.succeed(rt.ready, undefined)
          )
          let diedAfterPass = false
          let rejected: string | undefined

          if (check === undefined) {
            // no check: ready once it has stayed up a moment, so an instant crash is not taken for a start
            if (yield* staysUp(timing.settleMs)) yield* becomeReady
          } else {
            const ctx = { port: plan.port, cwd: plan.cwd, env: plan.env, logFile: plan.logFile, logOffset }
            const judge = plan.port === undefined ? undefined : yield* health.listenerJudge(plan.port, handle.startTime)
            // a pass counts when its port's listener is not provably someone else's and the group still lives (asked
            // last: a dying process's fds are gone before it is)
            const foreignHolder = (group: ReadonlyArray<number>) =>
              judge === undefined
                ? Effect.succeed(undefined)
                : Effect.map(judge(group), (verdict) =>
                    verdict._tag === "Foreign"
                      ? `port ${plan.port} is held by pid ${verdict.holder.pid} (${verdict.holder.command}), not by this service`
                      : undefined
                  )
            /** the leader's own family usually holds the listener: the whole group is read only when it does not */
            const listenerRejected = Effect.gen(function* () {
              if (judge === undefined) return undefined
              const near = yield* judge(yield* processes.family(handle), { partial: true })
              if (near._tag === "Ours") return undefined
              return yield* foreignHolder(yield* processes.groupMembers(handle.pgid))
            })
            const confirm = Effect.gen(function* () {
              yield* trace(`service ${name}: check passed`)
              rejected = yield* listenerRejected
              if (rejected !== undefined) return rejected
              return (yield* processes.isRunning(handle)) ? undefined : "its process is gone"
            })
            // healthy, or the process ends first, or the check times out
            const verdict = yield* Effect.raceFirst(
              health.waitHealthy(check, ctx, confirm).pipe(Effect.as("healthy" as const), Effect.either),
              Effect.map(gone.await, () => "exited" as const).pipe(Effect.either)
            )
            /** keeps probing a ready service: a few misses in a row (not one slow answer) make it unhealthy, a pass heals it */
            const watchLiveness = (initialMisses: number) =>
              Effect.gen(function* () {
                const probe = yield* health.prober(check, ctx, {
                  attemptMs: timing.livenessAttemptMs ?? livenessAttemptMs(check)
                })
                let misses = initialMisses
                // passes in a row: a service that answers steadily is probed less and less often (livenessDelayMs)
                let passes = 0
                // a backed-off wait ends on the probe grid, and its probe takes its turn in the probe line: an idle
                // swarm's probes share their wakes, and the services they ask are woken one at a time
                const wait = Effect.flatMap(Effect.zip(Random.next, Clock.currentTimeMillis), ([spread, now]) => {
                  const delay = livenessDelayMs(timing.watchIntervalMs, passes, spread)
                  const due = probeDueMs(now, delay, timing.watchIntervalMs, timing.probeSlotMs)
                  return Effect.as(Effect.sleep(Duration.millis(due)), delay > timing.watchIntervalMs)
                })
                // a port check is what the proxy's traffic shows already: an answer it passed on since the last look
                // is this look's pass, and the service is not asked again (nor does it take a turn in the line)
                const answeredAt = check.kind === "http" || check.kind === "tcp" ? options.answeredAt : undefined
                let lookedAt = yield* Clock.currentTimeMillis
                const answeredSince: Effect.Effect<boolean> =
                  answeredAt === undefined
                    ? Effect.succeed(false)
                    : Effect.map(Effect.zip(answeredAt, Clock.currentTimeMillis), ([answered, now]) => {
                        const since = lookedAt
                        lookedAt = now
                        return answered !== undefined && answered > since
                      })
                yield* wait.pipe(
                  Effect.flatMap((lined) =>
                    Effect.flatMap(answeredSince, (answered) =>
                      answered ? Effect.succeed(true) : lined && timing.probeSlotMs > 0 ? health.inLine(probe) : probe
                    )
                  ),
                  Effect.flatMap((ok) => {
                    passes = ok ? passes + 1 : 0
                    // a pass with no miss before it leaves a healthy service as it is: nothing to apply
                    if (ok && misses === 0) return Effect.void
                    const step = livenessStep(misses, ok)
                    misses = step.misses
                    const reason =
                      misses >= UNHEALTHY_AFTER_MISSES ? `its health check failed ${misses} times in a row` : undefined
                    return apply(step.event, { reason })
                  }),
                  Effect.forever,
                  Effect.forkScoped
                )
              })
            if (verdict._tag === "Left") {
              if (!alreadyReady) {
                // a service listening, but elsewhere, says where: the usual cause is a command that ignores PORT
                const elsewhere =
                  plan.port === undefined
                    ? undefined
                    : elsewhereReason(
                        plan.port,
                        yield* health.listeningPorts(yield* processes.groupMembers(handle.pgid))
                      )
                return yield* giveUp(
                  elsewhere === undefined ? verdict.left.message : `${verdict.left.message}; ${elsewhere}`
                )
              }
              // restarted after it was ready, and its check did not pass in time: unhealthy, but still watched, so a
              // late start heals it rather than leaving it out of the routes until it exits
              yield* apply(
                { _tag: "Unhealthy", misses: UNHEALTHY_AFTER_MISSES },
                { reason: `after its restart: ${verdict.left.message}` }
              )
              yield* watchLiveness(UNHEALTHY_AFTER_MISSES)
            } else if (verdict.right === "exited") {
              // it died before it was ready: if someone else holds its port, that is why (EADDRINUSE)
              rejected = yield* foreignHolder([])
            } else {
              // ready at the pass: a waiting `up` answers now; gone within confirmMs, it is still a failed start
              yield* becomeReady
              yield* trace(`service ${name}: ready`)
              yield* watchLiveness(0)
              if (confirming && !(yield* staysUp(timing.confirmMs))) diedAfterPass = true
            }
          }
          const result = yield* gone.await
          const exit = Exit.isSuccess(result) ? result.value : { code: null, signal: null }
          return { exit, diedAfterPass, rejected } satisfies Life
        })
      )
      const { exit } = life
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
        const logTail = yield* tail
        const exited = `exited (${exitDescription(exit)})`
        if (life.diedAfterPass) {
          // even a clean exit: it answered its check and was gone at once, which is no finished task
          const reason = `${exited} right after its health check passed`
          yield* apply({ _tag: "Fail", reason }, { handle: undefined, reason, logTail })
          yield* Deferred.fail(rt.ready, new ServiceFailed({ service: name, reason, logTail }))
          return yield* Effect.never
        }
        const reason = life.rejected === undefined ? exited : `${exited}; ${life.rejected}`
        yield* apply({ _tag: "Exited", ...exit }, { handle: undefined, logTail })
        const current = yield* SubscriptionRef.get(rt.snapshot)
        if (current.state === "failed") {
          // a crash with no restart policy: before it was ever ready, it fails the up
          yield* Deferred.fail(rt.ready, new ServiceFailed({ service: name, reason, logTail }))
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

const sameHandle = (a: ProcessHandle | undefined, b: ProcessHandle | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && a.pid === b.pid && a.pgid === b.pgid && a.startTime === b.startTime)

/** Nothing anyone would see differs: no write, no publish, no route rebuilt for it. */
export const sameSnapshot = (a: ServiceSnapshot, b: ServiceSnapshot): boolean =>
  a.state === b.state &&
  a.restarts === b.restarts &&
  a.reason === b.reason &&
  sameHandle(a.handle, b.handle) &&
  a.logTail.length === b.logTail.length &&
  a.logTail.every((line, i) => line === b.logTail[i])

/**
 * The one way a snapshot changes: an event the transition function accepts, plus what it brings along. An event that
 * changes nothing (a liveness probe passing again, every few seconds for every service) is no change at all: it is
 * neither stored nor published, so an idle world costs its probes and nothing after them.
 */
const applyEvent = (rt: ServiceRuntime, event: ServiceEvent, patch: Partial<ServiceSnapshot> = {}) =>
  rt.changing.withPermits(1)(
    Effect.flatMap(SubscriptionRef.get(rt.snapshot), (s) => {
      const state = transition(s.state, event)
      if (state === undefined) return Effect.void
      const next = { ...s, ...patch, state }
      if (sameSnapshot(s, next)) return Effect.void
      return Effect.zipRight(rt.plan.record?.(next) ?? Effect.void, SubscriptionRef.set(rt.snapshot, next))
    })
  )

/** Marks a service as stopping: its world is about to interrupt its fiber. */
export const markStopping = (rt: ServiceRuntime) => applyEvent(rt, { _tag: "Stop" })

/** Marks a service as stopped once its fiber (and so its process group) is gone. */
export const markStopped = (rt: ServiceRuntime) => applyEvent(rt, { _tag: "StopDone" }, { handle: undefined })
