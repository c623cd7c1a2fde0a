/**
 * A world's start through the gate: in line for a permit, then the generation's acquisition, on a fiber of its own so
 * that the mailbox stays free for a `down` while it waits or starts. That fiber moves no state: it posts `Admitted`
 * and `Settled` to the mailbox, and the actor moves the state there (`admitted`, `settled`, below, with the writers
 * the actor lends them).
 */
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { describeWait } from "../../domain/admission.js"
import { InternalError } from "../../domain/errors.js"
import { WorldEvent } from "../../domain/world-state.js"
import type { AdmissionService } from "../../services/Admission.js"
import type { ProcessHandle } from "../../services/Processes.js"
import type { RegistryService } from "../../services/Registry.js"
import type * as Protocol from "../protocol.js"
import type { Generations } from "./generation.js"
import type { Apply, Life, Post, ReadRow, SetRun } from "./life.js"
import { failureReason } from "./plan.js"
import type { Prepared } from "./prepare.js"
import type { Services } from "./services.js"

export const makeLaunch = (deps: {
  readonly worldId: number
  readonly row: ReadRow
  readonly registry: RegistryService
  readonly admission: AdmissionService
  /** the world's life as the actor holds it now */
  readonly life: Effect.Effect<Life>
  readonly apply: Apply
  readonly setRun: SetRun
  /** the outcome of the world's current start, which a waiting `up` hears, replaced (the actor's own) */
  readonly setOutcome: (outcome: Deferred.Deferred<void, Protocol.StartError>) => Effect.Effect<void>
  readonly post: Post
  readonly generations: Pick<Generations, "newGeneration" | "start" | "stopRun" | "dropLaunch">
  readonly services: Pick<Services, "addServices" | "followServices">
}) => {
  const { worldId, row, registry, admission, life, apply, setRun, post } = deps
  const { newGeneration, start, stopRun, dropLaunch } = deps.generations
  const { addServices, followServices } = deps.services

  /** numbers each start, so that what a cancelled one posts late is told from the current one's */
  let tokens = 0

  /**
   * Starts the world through the gate: in line for a permit (state `queued`, or `suspended` for a world coming back),
   * then the start itself, on a fiber of its own so that the mailbox stays free for a `down` while it waits or
   * starts. That fiber moves no state: it posts `Admitted` and `Settled` to the mailbox, where `admitted` and
   * `settled` move it. `down`, `suspend`, `remove` (and a reload) cancel it through `stopRun`.
   */
  const launchStart = (
    ready: Prepared,
    options: {
      readonly since: number
      readonly resuming: boolean
      readonly adopt?: ReadonlyMap<string, ProcessHandle>
      readonly died?: ReadonlySet<string>
      /**
       * run on the actor's own fiber, to its end, before the next message: adopting what outlived a daemon, so no
       * command acts on the world before it is watched again
       */
      readonly here?: boolean
    }
  ) =>
    Effect.gen(function* () {
      yield* stopRun
      const outcome = yield* Deferred.make<void, Protocol.StartError>()
      yield* deps.setOutcome(outcome)
      const w = yield* row
      if (w.wakesOnRequest) yield* registry.setWakesOnRequest(worldId, false)
      // the place in line is taken (and the state moved) before the command is answered, so a caller that does not
      // wait already sees `queued` or `starting`
      const granted = admission.holds(worldId) ? undefined : yield* admission.enter(worldId, options.since, w.path)
      const waits = granted !== undefined && !(yield* Deferred.isDone(granted))
      if (waits) {
        const wait = admission.entry(worldId)
        const why = wait?.reason === undefined ? "a permit" : describeWait(wait.reason)
        // a suspended world waits in line as `suspended`
        if (!options.resuming) yield* apply(WorldEvent.Queue(), `waiting for ${why}`)
        yield* registry.addEvent({
          worldId,
          service: null,
          kind: "queued",
          message: `${options.resuming ? "suspended, waiting to resume" : "queued"}: waiting for ${why}`
        })
      } else {
        yield* apply(WorldEvent.Start())
      }
      const token = ++tokens
      const g = yield* newGeneration(ready)
      const defectAsError = Effect.catchAllDefect((d) =>
        Effect.fail(new InternalError({ reason: `world ${w.name}: ${d instanceof Error ? d.message : String(d)}` }))
      )
      if (options.here === true) {
        yield* setRun({ _tag: "Launching", token, generation: g, fiber: undefined })
        const exit = yield* Effect.exit(defectAsError(start(g, false, ready, options.adopt, options.died)))
        return yield* settled(token, exit)
      }
      const run = Effect.gen(function* () {
        if (granted !== undefined && waits) {
          yield* Deferred.await(granted)
          yield* post({ _tag: "Admitted", token, resuming: options.resuming })
        }
        yield* start(g, false, ready, options.adopt, options.died)
      }).pipe(
        // the start itself may be interrupted (by `stopRun`, which tells its waiting `up`); telling how it ended
        // may not
        Effect.interruptible,
        defectAsError,
        Effect.exit,
        Effect.flatMap((exit) => (Exit.isInterrupted(exit) ? Effect.void : post({ _tag: "Settled", token, exit })))
      )
      const fiber = yield* Effect.uninterruptible(Effect.forkDaemon(run))
      // set before the mailbox takes its next message: what the fiber posts is read against it
      yield* setRun({ _tag: "Launching", token, generation: g, fiber })
    })

  /** The start `token` has its permit: it moves from the line to starting (a suspended world resumes). */
  const admitted = (token: number, resuming: boolean) =>
    Effect.gen(function* () {
      const { run } = yield* life
      if (run._tag !== "Launching" || run.token !== token) return
      yield* apply(resuming ? WorldEvent.Start() : WorldEvent.Admit())
      yield* registry.addEvent({
        worldId,
        service: null,
        kind: resuming ? "resumed" : "admitted",
        message: resuming ? "memory is back: resuming" : "admitted"
      })
      if (resuming) yield* admission.resumed
    })

  /**
   * The start `token` ended. Whole: its generation runs, and the world with it. Failed: what it started is
   * released, its permit goes back, and the world is `failed` with the first line of why. Either way its waiting
   * `up` hears it only now, with the state already moved. A start cancelled since is no longer the world's: ignored.
   */
  const settled = (token: number, exit: Exit.Exit<void, Protocol.StartError>) =>
    Effect.gen(function* () {
      const { run, outcome } = yield* life
      if (run._tag !== "Launching" || run.token !== token) return
      const g = run.generation
      if (Exit.isSuccess(exit)) {
        // it started whole: its env_files are the world's now
        g.envBefore.clear()
        yield* apply(WorldEvent.Started(), null, { _tag: "Running", generation: g })
        // what an up asked for while this start was on its way starts now, beside it (one that fails shows failed)
        if (run.asked !== undefined) yield* Effect.ignore(addServices(g, run.asked))
        // a service may have failed while the world was still starting: the world's state follows it now
        yield* followServices
      } else {
        const error = Option.getOrElse(
          Cause.failureOption(exit.cause),
          () => new InternalError({ reason: `world ${worldId}: ${Cause.pretty(exit.cause)}` })
        )
        yield* dropLaunch(g)
        const reason = failureReason(error)
        yield* apply(WorldEvent.Fail({ reason }), reason)
      }
      if (outcome !== undefined) yield* Deferred.done(outcome, exit)
    })

  return { launchStart, admitted, settled }
}

export type Launch = ReturnType<typeof makeLaunch>
