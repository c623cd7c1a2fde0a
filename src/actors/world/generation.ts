/**
 * A world's generation — one run of its processes — as a scoped resource. `start` acquires it: setup on a first
 * start, every port, every slice, then one supervised fiber per selected service, each after its dependencies are
 * ready, until all are (or it adds what a running generation lacks). Closing its scope is its one release, written
 * once (`newGeneration`): the services stop in reverse dependency order, a layer at a time. `stopRun` and `halt` are
 * how the actor ends whatever runs.
 */
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { coordinates, groupPorts, launch, redact } from "../../domain/coordinates.js"
import { StartFailed, StartInterrupted } from "../../domain/errors.js"
import { secretsOf } from "../../domain/redact.js"
import type { AdmissionService } from "../../services/Admission.js"
import type { FenceService } from "../../services/Fence.js"
import type { Health } from "../../services/Health.js"
import type { HomePaths } from "../../services/Home.js"
import type { Processes, ProcessesService, ProcessHandle } from "../../services/Processes.js"
import type { RouterService } from "../../services/proxy/Router.js"
import type { RegistryService } from "../../services/Registry.js"
import type { SlicesService } from "../../services/slices/Slices.js"
import { trace } from "../../services/trace.js"
import { serviceFolder, type WorktreeFilesService } from "../../services/worktree/WorktreeFiles.js"
import {
  makeRuntime,
  markStopped,
  markStopping,
  runService,
  ServiceFailed,
  type ServiceRuntime,
  type ServiceSnapshot
} from "../ServiceActor.js"
import * as Protocol from "../protocol.js"
import { type Generation, IDLE, type Life, type Post, type SetRun } from "./life.js"
import { identity, tokenContext } from "./plan.js"
import type { Prepare, Prepared } from "./prepare.js"
import type { makeStopOrphans } from "./recorded.js"
import type { Rows } from "./rows.js"

export const makeGeneration = (deps: {
  readonly worldId: number
  /** the world's name as its actor started with it: what a cancelled start's `up` is told */
  readonly worldName: string
  readonly registry: RegistryService
  readonly slices: SlicesService
  readonly home: HomePaths
  readonly processes: ProcessesService
  readonly admission: AdmissionService
  readonly fence: FenceService
  readonly router: RouterService
  readonly worktreeFiles: WorktreeFilesService
  /** what the service fibers run with */
  readonly context: Context.Context<Processes | Health>
  /** the world's life as the actor holds it now */
  readonly life: Effect.Effect<Life>
  readonly setRun: SetRun
  readonly post: Post
  readonly rows: Pick<Rows, "saveRow" | "keepFinal">
  readonly prepare: Pick<Prepare, "runSetup" | "allocatePorts" | "provisionSlices">
  /** stops the processes recorded for the world that no generation owns */
  readonly stopOrphans: ReturnType<typeof makeStopOrphans>
}) => {
  const { worldId, worldName, registry, slices, home, processes, admission, fence, router, worktreeFiles } = deps
  const { context, life, setRun, post, stopOrphans } = deps
  const { saveRow, keepFinal } = deps.rows
  const { runSetup, allocatePorts, provisionSlices } = deps.prepare

  /**
   * A new generation for a start of `ready`'s config: its scope holds the release, written once here. Closing it
   * stops the services in reverse dependency order, a layer at a time, ends their fibers, keeps what their rows last
   * said, and takes back the env_files of a start that never completed.
   */
  const newGeneration = (ready: Prepared) =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const fibers = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const g: Generation = {
        scope,
        fibers,
        config: ready.config,
        source: { root: ready.loaded.root, digest: ready.loaded.digest },
        layers: ready.config.graph.layers,
        services: new Map(),
        envBefore: new Map()
      }
      // added last, so it runs first: the services stop before their fibers' scope closes
      yield* Scope.addFinalizer(scope, releaseGeneration(g))
      return g
    })

  const releaseGeneration = (g: Generation) =>
    Effect.gen(function* () {
      const all = [...g.services]
      // a daemon letting go leaves processes and their rows as they are, exactly as a crash would; but its
      // supervisors go now, not with the process: one left running would restart a service that exits meanwhile,
      // beside the copy the next daemon starts (stopping a process is a no-op once detached; no row is written)
      if (yield* processes.detached) {
        yield* Fiber.interruptAll(all.map(([, s]) => s.fiber))
        return yield* Scope.close(g.fibers, Exit.void)
      }
      yield* stopServices(
        g,
        all.map(([name]) => name)
      )
      yield* Scope.close(g.fibers, Exit.void)
      for (const [name, s] of all)
        yield* Effect.flatMap(SubscriptionRef.get(s.rt.snapshot), (snap) => keepFinal(name, snap))
      // a start that never completed leaves the env_files as they were before it
      yield* worktreeFiles.restoreEnv(g.envBefore)
    })

  /** Stops services (dependents first, a layer at a time) and takes them out of the generation. */
  const stopServices = (g: Generation, order: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      for (const layer of [...g.layers].reverse()) {
        const going = layer.flatMap((name) => {
          const s = order.includes(name) ? g.services.get(name) : undefined
          return s === undefined ? [] : [s]
        })
        for (const name of layer) if (order.includes(name)) g.services.delete(name)
        yield* Effect.forEach(going, (s) => markStopping(s.rt), { discard: true })
        yield* Fiber.interruptAll(going.map((s) => s.fiber))
        yield* Effect.forEach(going, (s) => markStopped(s.rt), { discard: true })
      }
    })

  /** A start that will not run: what it started is released and its permit goes back. */
  const dropLaunch = (g: Generation) =>
    Effect.gen(function* () {
      yield* setRun(IDLE)
      yield* Scope.close(g.scope, Exit.void)
      yield* admission.release(worldId)
    })

  /**
   * Whatever runs or is on its way stops: a start is cancelled (its permit given back, its waiting `up` told), a
   * generation is released. The world's permit stays with a running world (a reload is the same world again).
   */
  const stopRun = Effect.gen(function* () {
    const { run, outcome } = yield* life
    if (run._tag === "Idle") return
    if (run._tag === "Running") {
      yield* setRun(IDLE)
      return yield* Scope.close(run.generation.scope, Exit.void)
    }
    if (run.fiber !== undefined) yield* Fiber.interrupt(run.fiber)
    yield* dropLaunch(run.generation)
    if (outcome !== undefined) yield* Deferred.fail(outcome, new StartInterrupted({ world: worldName }))
  })

  /** Everything of the world stops and its permit goes back: down, suspend, remove. */
  const halt = Effect.gen(function* () {
    yield* stopRun
    yield* stopOrphans
    yield* admission.release(worldId)
  })

  /**
   * Acquires generation `g` — ports, slices, then every selected service in dependency order, waiting for all to be
   * ready — or, `adding` to a generation that runs, starts the selected services it lacks beside the running ones.
   * It moves no state: whoever runs it does (the actor, from what the start fiber posts). What it started stays in
   * `g`, released when `g`'s scope closes.
   */
  const start = (
    g: Generation,
    adding: boolean,
    ready: Prepared,
    adopt: ReadonlyMap<string, ProcessHandle> = new Map(),
    died: ReadonlySet<string> = new Set()
  ) =>
    Effect.gen(function* () {
      const { w, config, dotenv, names, routing, userEnv, lookup } = ready
      if (!w.setupDone && config.project.setup !== undefined && adopt.size === 0 && !adding) {
        const portsSoFar = groupPorts(yield* registry.leases(worldId))
        const setupCoords = coordinates(config, portsSoFar, yield* slices.addresses(worldId), routing)
        yield* runSetup(w, config.project.setup, userEnv, tokenContext(w, setupCoords, lookup))
      }
      // every port of the world is leased before anything starts (all services, so they stay stable)
      const leased =
        adopt.size > 0 || adding
          ? (yield* registry.leases(worldId)).map((l) => ({ service: l.service, name: l.name, port: l.port }))
          : yield* allocatePorts(w, config)
      const portMap = groupPorts(leased)
      yield* trace("actor: ports leased")
      const coords = yield* provisionSlices(w, config, userEnv, lookup, (urls) =>
        coordinates(config, portMap, urls, routing)
      )
      yield* trace("actor: slices ready")
      const runtimes = new Map<string, ServiceRuntime>()
      const commands = new Map<string, string>()
      /** services not started this time whose rows stay (ended while the daemon was down) */
      const kept: Array<string> = []
      for (const name of config.graph.order) {
        if (!names.includes(name) || g.services.has(name)) continue
        const service = config.services.find((s) => s.name === name)
        if (service === undefined || service._tag !== "Process") continue
        if (died.has(name) && service.restart === "no") {
          // it ended while no daemon watched, and its policy does not restart it
          yield* saveRow({
            worldId,
            name,
            observed: "exited",
            pid: null,
            pgid: null,
            startTime: null,
            restarts: 0,
            reason: 'ended while the daemon was down (restart = "no")',
            logTail: null,
            command: null
          })
          kept.push(name)
          continue
        }
        const cwd = yield* serviceFolder(w, service)
        const l = launch(service, identity(w), coords, userEnv, dotenv, yield* worktreeFiles.packageScripts(cwd))
        // the service's own variables (its `env`, resolved, and PORT), for tools that read `.env` themselves
        yield* worktreeFiles.writeEnv(
          w,
          service,
          Object.fromEntries(
            [...Object.keys(service.env), "PORT"].flatMap((k) => (l.env[k] === undefined ? [] : [[k, l.env[k]!]]))
          ),
          g.envBefore
        )
        // status shows what was started (the command berth gave a dev server's flags to, say), secrets masked
        const shown = redact(l.command, [...l.secrets, ...secretsOf(userEnv)])
        commands.set(name, shown)
        if (l.framework !== undefined) {
          yield* registry.addEvent({
            worldId,
            service: name,
            kind: "dev_server",
            message: `${l.framework}: started as \`${shown}\` (inject = false in berth.toml starts cmd as written)`
          })
        }
        // entering or leaving `failed` moves the world (degraded ⇄ running): told to its own mailbox
        let wasFailed = false
        const record = (s: ServiceSnapshot) =>
          Effect.zipRight(
            saveRow({
              worldId,
              name,
              observed: s.state,
              pid: s.handle?.pid ?? null,
              pgid: s.handle?.pgid ?? null,
              startTime: s.handle?.startTime ?? null,
              restarts: s.restarts,
              reason: s.reason ?? null,
              logTail: s.logTail.length === 0 ? null : JSON.stringify(s.logTail),
              command: commands.get(name) ?? null
            }),
            Effect.suspend(() => {
              const failed = s.state === "failed"
              if (failed === wasFailed) return Effect.void
              wasFailed = failed
              return post(new Protocol.ServicesChanged())
            })
          )
        const rt = yield* makeRuntime({
          world: w.name,
          service,
          command: l.command,
          setup: l.setup,
          cwd,
          env: l.env,
          port: portMap.get(name)?.main,
          logFile: home.serviceLog(worldId, name),
          secrets: [...l.secrets, ...secretsOf(userEnv)],
          owner: { worldId, home: home.root },
          fence: fence.hold(worldId),
          tie: (pgid) => fence.tie(worldId, pgid),
          record
        })
        // its row exists (pending) before anything of it starts
        yield* record(yield* SubscriptionRef.get(rt.snapshot))
        runtimes.set(name, rt)
      }
      for (const [name, rt] of runtimes) {
        const deps = (config.graph.dependencies.get(name) ?? []).flatMap((d) => {
          const dep = runtimes.get(d) ?? g.services.get(d)?.rt
          return dep === undefined ? [] : [Deferred.await(dep.ready)]
        })
        const label = rt.plan.service.url
        const fiber = yield* runService(rt, {
          adopt: adopt.get(name),
          dependencies: Effect.all(deps, { discard: true }),
          answeredAt: label === undefined ? undefined : router.lastAnswer(worldId, label)
        }).pipe(Effect.provide(context), Effect.forkIn(g.fibers))
        g.services.set(name, { rt, fiber })
      }
      yield* trace("actor: services forked")
      if (!adding) yield* registry.dropServicesExcept(worldId, [...runtimes.keys(), ...kept])
      // ready when every selected service is healthy; the first failure fails the up
      // a service fiber that ends before its service is ready (a defect, say) fails the start: nothing waits forever
      const readiness = yield* Effect.all(
        [...runtimes].map(([name, rt]) => {
          const fiber = g.services.get(name)?.fiber
          return fiber === undefined
            ? Deferred.await(rt.ready)
            : Effect.raceFirst(
                Deferred.await(rt.ready),
                Effect.flatMap(Fiber.await(fiber), () =>
                  Effect.fail(
                    new ServiceFailed({ service: name, reason: "its supervisor ended unexpectedly", logTail: [] })
                  )
                )
              )
        }),
        { concurrency: "unbounded", discard: true }
      ).pipe(Effect.either)
      if (readiness._tag === "Left") {
        // a service added to a running world failed: it goes, the rest keeps running (a new generation's failure
        // releases all of it, through its scope)
        if (adding) yield* stopServices(g, [...runtimes.keys()])
        const failure = readiness.left
        return yield* new StartFailed({
          world: w.name,
          service: failure.service,
          reason: failure.reason,
          // already redacted by the service actor
          logTail: failure.logTail
        })
      }
      yield* trace("actor: started")
    })

  return { newGeneration, stopServices, dropLaunch, stopRun, halt, start }
}

export type Generations = ReturnType<typeof makeGeneration>
