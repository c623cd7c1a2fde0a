/**
 * A world after a daemon restart: its actor's first act, before any command, settles it from the registry as the
 * reconciler's own `decide` says — what still runs is adopted (watched again, the dead restarted by their policy, a
 * stop a crash cut short finished), the strays of a world wanted down are stopped, a state a crash left half-way
 * settles, a removal a crash interrupted is finished. What is recorded of the world's processes is `recorded.ts`.
 */
import { existsSync } from "node:fs"
import * as Effect from "effect/Effect"
import * as Model from "../../domain/config/model.js"
import { ANYWHERE_SETTING, runsAnywhere } from "../../domain/cluster.js"
import { decide, finishesRemoval, WorldEvent } from "../../domain/world-state.js"
import type { AdmissionService } from "../../services/Admission.js"
import type { HomePaths } from "../../services/Home.js"
import { Processes, type ProcessesService } from "../../services/Processes.js"
import { Registry, type RegistryService } from "../../services/Registry.js"
import type * as Protocol from "../protocol.js"
import type { Launch } from "./launch.js"
import { type makeStopOrphans, recordedProcesses } from "./recorded.js"
import type { Apply, Run } from "./life.js"
import type { Prepare } from "./prepare.js"
import type { Removal } from "./removal.js"

export const makeRecovery = (deps: {
  readonly worldId: number
  readonly registry: RegistryService
  readonly processes: ProcessesService
  readonly admission: AdmissionService
  readonly home: HomePaths
  /** what runs of the world now */
  readonly currentRun: Effect.Effect<Run>
  /** what the world's last `up` asked for, and its environment */
  readonly selection: () => Protocol.Selection
  readonly lastEnv: () => Readonly<Record<string, string>>
  readonly apply: Apply
  readonly prepare: Prepare["prepare"]
  readonly launchStart: Launch["launchStart"]
  readonly forget: Removal["forget"]
  readonly stopOrphans: ReturnType<typeof makeStopOrphans>
}) => {
  const { worldId, registry, processes, admission, home, currentRun, apply, prepare, launchStart, forget } = deps

  const recorded = recordedProcesses(worldId).pipe(
    Effect.provideService(Registry, registry),
    Effect.provideService(Processes, processes)
  )

  const adopt = Effect.gen(function* () {
    // a command queued before this one may have started the world already
    if ((yield* currentRun)._tag !== "Idle") return
    const { handles, died, leaving } = yield* recorded
    // what the start needs is checked before anything is touched: if the world's config or environment cannot be
    // used now, its processes keep running unwatched and the world says why; the user's next `up` tries again
    const ready = yield* prepare(deps.selection(), deps.lastEnv()).pipe(
      Effect.tapError((e) =>
        handles.size === 0
          ? Effect.void
          : Effect.gen(function* () {
              const why = `not adopted: ${e.message.split("\n")[0] ?? ""}`
              yield* apply(WorldEvent.Unwatched({ reason: why }), why)
              yield* registry.addEvent({ worldId, service: null, kind: "adopt_failed", message: e.message })
            }).pipe(Effect.ignore)
      )
    )
    // a stop a crash cut short is finished, not adopted: that process is leaving because berth asked it to, and
    // its exit is no crash. The start below starts the service again, as the reload or restart would have. All at
    // once: each may take its whole grace
    yield* Effect.forEach(
      leaving,
      (name) =>
        Effect.gen(function* () {
          const handle = handles.get(name)
          if (handle === undefined) return
          const service = ready.config.services.find((s) => s.name === name)
          yield* processes.stop(handle, service?._tag === "Process" ? service.stopGraceMs : Model.defaults.stopGraceMs)
          handles.delete(name)
        }),
      { concurrency: "unbounded", discard: true }
    )
    if (handles.size === 0) {
      // nothing survived: it comes back through the gate like any start
      return yield* launchStart(ready, { since: Date.now(), resuming: true, adopt: handles, died })
    }
    // it runs: it keeps its place; the live ones are watched, those that died are restarted by their policy
    yield* admission.claim(worldId)
    yield* launchStart(ready, { since: Date.now(), resuming: false, adopt: handles, died, here: true })
  })

  /**
   * The first thing an actor does, before any command: a new daemon takes over what the registry says runs, so no
   * command ever acts on a world that has not been adopted (an `up` racing the first pass would start second copies).
   * A world left mid-way by a crash settles: one wanted up is adopted, one wanted down has its strays stopped and is
   * `stopped`, one being removed is removed. Answers whether the world is gone.
   */
  const settle = Effect.gen(function* () {
    const w = yield* registry.world(worldId)
    if (w === undefined) return false
    const { handles, died } = yield* recorded
    const facts = {
      desired: w.desired,
      observed: w.observed,
      isMain: w.isMain,
      pathExists: w.path !== "" && existsSync(w.path),
      worktreeReady: w.worktreeReady,
      hasActor: false,
      liveProcesses: handles.size,
      recorded: handles.size > 0 || died.size > 0,
      wakesOnRequest: w.wakesOnRequest,
      runsAnywhere: runsAnywhere(yield* registry.getSetting(ANYWHERE_SETTING), home.root, w)
    }
    const action = decide(facts)
    switch (action) {
      case "none":
        return false
      case "teardown":
        yield* forget(false, true)
        return true
      case "adopt":
        // what a crash cut short is no longer in flight; the start begins from there
        yield* apply(WorldEvent.Recover())
        yield* adopt
        return false
      case "release":
      case "settle":
      case "stop-strays":
        if (finishesRemoval(facts)) {
          yield* forget(facts.pathExists, true)
          return true
        }
        // the one write of `desired` a daemon makes on its own: a world that runs anywhere is the cluster's to
        // start again, wherever it lands
        if (action === "release") yield* registry.setDesired(worldId, "down")
        yield* deps.stopOrphans
        yield* apply(WorldEvent.Recover())
        // a world wanted down that a crash left running (or suspended) is stopped; a failed one stays failed
        if (w.observed === "running" || w.observed === "degraded" || w.observed === "suspended") {
          yield* apply(WorldEvent.Stop())
          yield* apply(WorldEvent.Stopped())
        }
        return false
    }
  })

  return { settle }
}
