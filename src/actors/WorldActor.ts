/**
 * One world's life: a fiber with a mailbox, so commands on one world run one at a time while different worlds run
 * in parallel. It owns the world's current "generation" — a scoped resource: its service fibers (and so their process
 * groups) live in its scope, and closing the scope is its one release. Ports are leased for the world's whole life
 * (they survive `down`); processes for one generation.
 *
 * Its life (observed state, what runs, its last start's outcome) is one value with one writer, the actor's fiber:
 * `apply` moves the state only along `domain/world-state.ts`'s `transition` (an illegal event is ignored) and announces
 * every move to whoever watches (`Worlds.changes`). A start runs on a fiber of its own, which writes nothing: it posts
 * `Admitted` and `Settled` to the mailbox.
 */
import { existsSync, rmSync } from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import * as Deferred from "effect/Deferred"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Model from "../domain/config/model.js"
import {
  coordinates,
  groupPorts,
  identityVariables,
  launch,
  portRequests,
  type WorldIdentity,
  withLocalBins,
  worldVariables
} from "../domain/coordinates.js"
import { resolveTemplate, type ServiceCoordinates, type TokenContext, unresolvedIn } from "../domain/tokens.js"
import { redact } from "../domain/coordinates.js"
import { secretsOf, urlSecrets } from "../domain/redact.js"
import {
  InternalError,
  InvalidRequest,
  StartFailed,
  StartInterrupted,
  UnknownGroup,
  UnknownService,
  UnknownSlice,
  UnsetVariable,
  WorldNotFound,
  WorldNotRunning,
  WorktreeDirty
} from "../domain/errors.js"
import { definedEnv } from "../domain/environment.js"
import { dependentsClosure } from "../domain/graph.js"
import { covers, selectedServices, widen } from "../domain/selection.js"
import { ANYWHERE_SETTING, runsAnywhere } from "../domain/cluster.js"
import { decide, finishesRemoval, step, WorldEvent, type WorldState } from "../domain/world-state.js"
import { ConfigFiles, type LoadedConfig } from "../services/ConfigFiles.js"
import { requireConsent } from "../services/Consent.js"
import { checkPaths, serviceFolder, WorktreeFiles } from "../services/worktree/WorktreeFiles.js"
import { Git } from "../services/Git.js"
import { Home } from "../services/Home.js"
import { trace } from "../services/trace.js"
import * as LogFiles from "../services/LogFiles.js"
import { Ports } from "../services/Ports.js"
import { ONESHOT_VARIABLE, Processes, type ProcessHandle } from "../services/Processes.js"
import { Registry, type ServiceRow, type WorldRow } from "../services/Registry.js"
import { Router } from "../services/proxy/Router.js"
import { type SliceInit, Slices } from "../services/slices/Slices.js"
import { Fence } from "../services/Fence.js"
import { Admission } from "../services/Admission.js"
import { describeWait } from "../domain/admission.js"
import {
  makeRuntime,
  ServiceFailed,
  markStopped,
  markStopping,
  runService,
  type ServiceRuntime,
  type ServiceSnapshot
} from "./ServiceActor.js"
import type { Health } from "../services/Health.js"
import * as Protocol from "./protocol.js"

export type Selection = Protocol.Selection
export type WorldCommand = Protocol.WorldCommand
export type WorldError = Protocol.WorldError

/** One move of a world's observed state, as `Worlds.changes` tells it. */
export type WorldChange = Protocol.WorldChange

/**
 * What the world's mailbox holds: a command (someone may wait for its answer), or what the world's own start fiber
 * tells it. That fiber never writes the world's state: it posts, and the actor, on its one fiber, moves the state.
 */
type Message =
  | { readonly _tag: "Command"; readonly command: WorldCommand; readonly reply: Deferred.Deferred<void, WorldError> }
  /** the start `token` got its permit after waiting in line */
  | { readonly _tag: "Admitted"; readonly token: number; readonly resuming: boolean }
  /** the start `token` ended: its generation runs whole, or it failed */
  | { readonly _tag: "Settled"; readonly token: number; readonly exit: Exit.Exit<void, WorldError> }

/**
 * One run of the world's processes: a scoped resource. Closing `scope` is its release, written once (in
 * `newGeneration`): services stop in reverse dependency order, a layer at a time, then what they left is written, and
 * a start that never completed takes back the `env_file`s it wrote.
 */
interface Generation {
  readonly scope: Scope.CloseableScope
  /** where the service fibers (and their row writers) live: closed after the services were stopped, layer by layer */
  readonly fibers: Scope.CloseableScope
  readonly config: Model.Config
  /** the berth.toml it started from: its folder and digest, to tell an edit made since */
  readonly source: { readonly root: string; readonly digest: string }
  readonly layers: ReadonlyArray<ReadonlyArray<string>>
  readonly services: Map<string, { readonly rt: ServiceRuntime; readonly fiber: Fiber.RuntimeFiber<never, unknown> }>
  /** env_files as they were before this generation first wrote them (undefined: the file did not exist) */
  readonly envBefore: Map<string, string | undefined>
}

/**
 * What runs of a world besides its observed state: nothing; a start on its way (in line for a permit, or starting),
 * as a fiber the actor can interrupt; or a generation that started whole.
 */
export type Run =
  | { readonly _tag: "Idle" }
  | {
      readonly _tag: "Launching"
      /** tells this start's messages from those of a start cancelled since */
      readonly token: number
      readonly generation: Generation
      /** the start's own fiber; undefined while the actor runs it itself (adopting what outlived a daemon) */
      readonly fiber: Fiber.RuntimeFiber<void, never> | undefined
      /**
       * what an `up` asked for while this start was on its way, beyond what it starts: started beside it once it runs.
       * Only what was asked: a service the start leaves out on purpose (one that ended while no daemon watched, whose
       * policy does not restart it) stays out.
       */
      readonly asked?: Selection
    }
  | { readonly _tag: "Running"; readonly generation: Generation }

/**
 * A world's life, in one value with one writer (the actor's fiber): its observed state and why, what runs, and the
 * outcome of its last start (what a waiting `up` hears).
 */
export interface Life {
  readonly state: WorldState
  readonly reason: string | null
  readonly run: Run
  readonly outcome: Deferred.Deferred<void, WorldError> | undefined
}

const IDLE: Run = { _tag: "Idle" }

/** The generation that runs or is starting, if any. */
const generationOf = (run: Run): Generation | undefined => (run._tag === "Idle" ? undefined : run.generation)

export interface WorldActor {
  readonly worldId: number
  /** the world's life: its observed state and why (as `apply` last moved it), what runs, its last start's outcome */
  readonly state: SubscriptionRef.SubscriptionRef<Life>
  readonly send: (command: WorldCommand) => Effect.Effect<void, WorldError>
  /** the outcome of the world's current start (queue, then ports, slices, services, ready); void when none runs */
  readonly started: Effect.Effect<void, WorldError>
  /** the world's live service snapshots (empty when nothing runs) */
  readonly snapshots: Effect.Effect<ReadonlyMap<string, ServiceSnapshot>>
  /** completes when the actor has ended (its world was removed) */
  readonly done: Effect.Effect<void>
  /** set while the world runs a berth.toml that was edited since: what to do about it */
  readonly configNote: Effect.Effect<string | undefined>
  /** writes what could not be written when it happened (a full disk): the reconciler's pass asks every actor */
  readonly flush: Effect.Effect<void>
}

/** The pseudo-service whose log holds the project's `setup` output (`berth logs -s setup`). */
export const SETUP_LOG = "setup"

/** service states berth passes through on its own way somewhere: after a crash, a row in one of these is unfinished */
const IN_FLIGHT: ReadonlySet<string> = new Set(["starting", "stopping", "restarting", "pending"])

const daemonEnv = () => definedEnv(process.env)

/**
 * The recorded processes of a world: those still alive (pid and start time match) and those that died. Only a service
 * that was up and ended unwatched "died" (its restart policy decides); one berth itself was stopping or starting when
 * the daemon went (a reload, say) is simply started again.
 */
export const recordedProcesses = (worldId: number) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const processes = yield* Processes
    const handles = new Map<string, ProcessHandle>()
    const died = new Set<string>()
    /** live, but a daemon was stopping them when it died (a down, a reload, a restart): leaving at berth's request */
    const leaving = new Set<string>()
    for (const s of yield* registry.services(worldId)) {
      if (s.pid === null || s.pgid === null || s.startTime === null) continue
      const handle = { pid: s.pid, pgid: s.pgid, startTime: s.startTime }
      if (yield* processes.isRunning(handle)) {
        handles.set(s.name, handle)
        if (s.observed === "stopping") leaving.add(s.name)
      } else if (!IN_FLIGHT.has(s.observed)) died.add(s.name)
    }
    return { handles, died, leaving }
  })

/** Default worktrees folder: beside the main checkout, `<repo>.worktrees`. */
export const worktreesFolder = (mainRoot: string, configured: string | undefined): string =>
  configured === undefined ? join(dirname(mainRoot), `${basename(mainRoot)}.worktrees`) : resolve(mainRoot, configured)

export const makeWorldActor = (
  worldId: number,
  onEnd: Effect.Effect<void>,
  onChange: (change: WorldChange) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const configs = yield* ConfigFiles
    const git = yield* Git
    const ports = yield* Ports
    const slices = yield* Slices
    const router = yield* Router
    const home = yield* Home
    const processes = yield* Processes
    const admission = yield* Admission
    const fence = yield* Fence
    const worktreeFiles = yield* WorktreeFiles
    const context = yield* Effect.context<Processes | Health>()
    const mailbox = yield* Queue.unbounded<Message>()
    const done = yield* Deferred.make<void>()
    // what the last `up` asked for; after a daemon restart, the persisted selection and the daemon's own environment
    // (inherited from the CLI that started it) stand in
    const initial = yield* registry.world(worldId)
    let selection: Selection = initial?.selection ?? { services: [], groups: [] }
    // every later action on the world — adoption, restarts, removal — uses the environment of the command that
    // brought it up, never the daemon's own (which came from whichever shell started it); only a world of an older
    // berth, which kept none, falls back to the daemon's
    let lastEnv: Readonly<Record<string, string>> = initial?.env ?? daemonEnv()
    /** the world has an environment of its own: kept from an `up` (or `reload`) */
    let hasOwnEnv = initial?.env !== null && initial?.env !== undefined
    /** what a world's later commands (reset, golden rebuild) run with: its own environment, the caller's until it has one */
    const envFor = (caller: Readonly<Record<string, string>>) => (hasOwnEnv ? lastEnv : caller)

    const row = Effect.flatMap(registry.world(worldId), (w) =>
      w === undefined
        ? Effect.fail(new InvalidRequest({ reason: `world ${worldId} no longer exists` }))
        : Effect.succeed(w)
    )

    const life = yield* SubscriptionRef.make<Life>({
      state: initial?.observed ?? "stopped",
      reason: initial?.reason ?? null,
      run: IDLE,
      outcome: undefined
    })
    const currentRun = Effect.map(SubscriptionRef.get(life), (l) => l.run)
    const currentGeneration = Effect.map(currentRun, generationOf)
    /** What runs changes (on the actor's fiber only), the state staying where it is. */
    const setRun = (run: Run) => SubscriptionRef.update(life, (l) => ({ ...l, run }))

    /**
     * What could not be written when it happened (the disk was full): the world's observed state (its latest is always
     * in `observed`) and each service's latest row. `flush`, on every reconciler pass, writes them once it can.
     */
    const unwritten = { world: false, services: new Map<string, ServiceRow>() }
    /**
     * The one writer of the world's service rows (each service's snapshot as it changes, and what the actor settles
     * of a service no generation runs): saves the row now, or keeps it for `flush` when it cannot be written.
     */
    const saveRow = (row: ServiceRow) =>
      Effect.flatMap(Effect.exit(registry.saveService(row)), (written) =>
        Effect.sync(() => {
          // whatever went wrong (a driver that threw, too): the row waits, and the service's record goes on
          if (Exit.isFailure(written)) unwritten.services.set(row.name, row)
          else unwritten.services.delete(row.name)
        })
      )
    /** A service's final snapshot replaces a row still waiting to be written: the row shows how it ended. */
    const keepFinal = (name: string, snap: ServiceSnapshot) =>
      Effect.sync(() => {
        const row = unwritten.services.get(name)
        if (row === undefined) return
        unwritten.services.set(name, {
          ...row,
          observed: snap.state,
          pid: snap.handle?.pid ?? null,
          pgid: snap.handle?.pgid ?? null,
          startTime: snap.handle?.startTime ?? null,
          restarts: snap.restarts,
          reason: snap.reason ?? null
        })
      })
    const flush = Effect.gen(function* () {
      if (unwritten.world) {
        const now = yield* SubscriptionRef.get(life)
        const written = yield* Effect.exit(registry.setObserved(worldId, now.state, now.reason))
        if (Exit.isSuccess(written)) unwritten.world = false
      }
      for (const row of [...unwritten.services.values()]) {
        const written = yield* Effect.exit(registry.saveService(row))
        if (Exit.isSuccess(written) && unwritten.services.get(row.name) === row) unwritten.services.delete(row.name)
      }
    })

    /**
     * The only writer of the world's observed state: the event moves it as `transition` allows, or is ignored (so a
     * late verdict never undoes what a user asked for). What changes is `step`'s (pure, `domain/world-state.ts`); its
     * effects — the row written, the move told — are carried out here, in the same step as the change (nothing reads
     * the state between them), and what runs (`run`, when given) changes with it. Answers whether it moved.
     */
    const apply = (event: WorldEvent, reason: string | null = null, run?: Run) =>
      Effect.gen(function* () {
        // an event that moves nothing writes and publishes nothing (what runs may still change): every writer is on
        // this fiber, so nothing moves the state between this look and the step below
        const looked = step(yield* SubscriptionRef.get(life), event, reason, run)
        if (looked.effects.length === 0) {
          if (run !== undefined) yield* setRun(run)
          return false
        }
        const moves = yield* SubscriptionRef.modifyEffect(life, (now) => {
          const next = step(now, event, reason, run)
          return Effect.as(
            Effect.forEach(next.effects, (effect) =>
              effect._tag === "Record"
                ? // the world moves whether or not its row can be written now (a full disk): the row follows at the
                  // next `flush`, so that a command cut short never leaves the world where it was, with nothing to
                  // move it on
                  Effect.map(Effect.exit(registry.setObserved(worldId, effect.state, effect.reason)), (written) => {
                    unwritten.world = Exit.isFailure(written)
                  })
                : Effect.void
            ),
            [next.effects.flatMap((e) => (e._tag === "Announce" ? [e] : [])), next.life] as const
          )
        })
        for (const move of moves) {
          yield* onChange({
            worldId,
            project: initial?.projectName ?? "",
            world: initial?.name ?? `#${worldId}`,
            from: move.from,
            to: move.to,
            event: event._tag,
            reason,
            at: Date.now()
          })
        }
        return moves.length > 0
      })

    const identity = (w: WorldRow): WorldIdentity => ({
      project: w.projectName,
      name: w.name,
      slug: w.slug,
      path: w.path
    })

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
      const { run, outcome } = yield* SubscriptionRef.get(life)
      if (run._tag === "Idle") return
      if (run._tag === "Running") {
        yield* setRun(IDLE)
        return yield* Scope.close(run.generation.scope, Exit.void)
      }
      if (run.fiber !== undefined) yield* Fiber.interrupt(run.fiber)
      yield* dropLaunch(run.generation)
      if (outcome !== undefined)
        yield* Deferred.fail(outcome, new StartInterrupted({ world: initial?.name ?? `#${worldId}` }))
    })

    /** Everything of the world stops and its permit goes back: down, suspend, remove. */
    const halt = Effect.gen(function* () {
      yield* stopRun
      yield* stopOrphans
      yield* admission.release(worldId)
    })

    /**
     * What `env_file` wrote, taken back where the files stay (the main checkout): a file berth made goes. Only files
     * that land inside the worktree: one a link leads out to is not berth's to touch.
     */
    const retractEnvFiles = (w: WorldRow) =>
      Effect.flatMap(Effect.either(loadConfig(w)), (loaded) =>
        loaded._tag === "Left" ? Effect.void : worktreeFiles.retractEnv(w, loaded.right.config)
      )

    /**
     * A new worktree first gets what `[project] copy` and `link` bring from the main checkout (its gitignored `.env`,
     * say), before any `setup`. Marked ready once that is done, so it is done once.
     */
    const bringFiles = (w: WorldRow, project: Model.ProjectConfig) =>
      Effect.gen(function* () {
        if (w.worktreeReady) return
        if (!w.isMain && project.copy.length + project.link.length > 0) {
          const brought = yield* worktreeFiles.bring(w, project)
          const said = [
            brought.copied.length === 0 ? [] : [`copied ${brought.copied.join(", ")}`],
            brought.linked.length === 0 ? [] : [`linked ${brought.linked.join(", ")}`]
          ].flat()
          if (said.length > 0) {
            yield* registry.addEvent({
              worldId,
              service: null,
              kind: "worktree_files",
              message: `${said.join("; ")} from the main checkout`
            })
          }
        }
        yield* registry.markWorktreeReady(worldId)
      })

    /** The world's worktree, made when it is missing (and the world's history says what it branched from). */
    const ensureWorktreeFolder = (w: WorldRow) =>
      Effect.gen(function* () {
        const { madeBranch } = yield* worktreeFiles.ensure(w)
        // what a new world holds, said once: the main checkout's last commit, not what is uncommitted there
        if (madeBranch !== undefined) {
          yield* registry.addEvent({
            worldId: w.id,
            service: null,
            kind: "worktree_created",
            message: `branch ${madeBranch} made from the last commit of the main checkout (${w.mainRoot}); what is not committed there is not carried`
          })
        }
      })

    /**
     * The world's config, and its `.env`: the main checkout's overlaid by the worktree's own, since a gitignored `.env`
     * never reaches a new worktree.
     */
    const loadConfig = (w: WorldRow) =>
      Effect.gen(function* () {
        const loaded = yield* configs.load(w.path)
        const config = Model.forWorld(loaded.parsed.config, w.name)
        if (w.isMain || w.mainRoot === loaded.root) return { loaded, config, dotenv: loaded.dotenv }
        const main = yield* configs.dotenv(w.mainRoot)
        return { loaded, config, dotenv: new Map([...main, ...loaded.dotenv]) as ReadonlyMap<string, string> }
      })

    /** The services an `up` starts: the selection and everything it depends on, or all of them. */
    const selected = (config: Model.Config, sel: Selection) => selectedServices(config, sel)

    /**
     * Runs a one-off command of the world (setup, migrate, seed) to its end; its output goes to `<label>.log`. What a
     * failure quotes of that log has every known secret masked.
     */
    const runOnce = (
      w: WorldRow,
      label: string,
      command: string,
      env: Readonly<Record<string, string>>,
      secrets: ReadonlyArray<string>
    ) =>
      Effect.gen(function* () {
        const logFile = home.serviceLog(worldId, label)
        yield* LogFiles.markRun(logFile, label)
        const exit = yield* Effect.scoped(
          Effect.gen(function* () {
            const handle = yield* processes.spawnScoped(
              {
                command,
                cwd: w.path,
                env: { ...env, PATH: withLocalBins(env.PATH, w.path), [ONESHOT_VARIABLE]: home.root },
                logFile
              },
              10_000
            )
            return yield* processes.awaitExit(handle)
          })
        ).pipe(Effect.catchTag("SpawnFailed", (e) => Effect.succeed({ code: null, signal: e.reason })))
        if (exit.code === 0) return
        const logTail = (yield* LogFiles.failureTail(logFile, 20).pipe(Effect.orElseSucceed(() => []))).map((line) =>
          redact(line, secrets)
        )
        return yield* new StartFailed({
          world: w.name,
          service: label,
          reason: redact(
            `\`${command}\` failed (${exit.code === null ? `${exit.signal}` : `exit code ${exit.code}`})`,
            secrets
          ),
          logTail
        })
      })

    /** What a world's commands may name: its services, its environment, the world and the project. */
    const tokenContext = (
      w: WorldRow,
      coords: ReadonlyMap<string, ServiceCoordinates>,
      lookup: (name: string) => string | undefined,
      self?: string
    ): TokenContext => ({
      ...(self === undefined ? {} : { self }),
      services: coords,
      env: lookup,
      world: { name: w.name, slug: w.slug, path: w.path },
      project: { name: w.projectName }
    })

    /**
     * The project's `setup`, once per worktree, its tokens resolved as a service's are, and told whose it is as a
     * service is (BERTH_WORLD, BERTH_PROJECT).
     */
    const runSetup = (w: WorldRow, command: string, given: Readonly<Record<string, string>>, ctx: TokenContext) =>
      Effect.gen(function* () {
        const env = { ...given, ...identityVariables(identity(w)) }
        const resolved = resolveTemplate(command, ctx, { shell: true })
        // a waiting `up` tells that setup runs (and the last line of its output) while these two bracket it
        yield* registry.addEvent({ worldId, service: SETUP_LOG, kind: "setup_start", message: "running setup" })
        const began = Date.now()
        yield* runOnce(w, SETUP_LOG, resolved.value, env, [...resolved.secrets, ...secretsOf(env)]).pipe(
          // suspended: the time is read when setup has ended, not when this effect is built
          Effect.ensuring(
            Effect.suspend(() =>
              registry.addEvent({
                worldId,
                service: SETUP_LOG,
                kind: "setup_done",
                message: `setup ended after ${((Date.now() - began) / 1000).toFixed(1)} s`
              })
            ).pipe(Effect.ignore)
          )
        )
        yield* registry.markSetupDone(worldId)
      })

    const sliceWorld = (w: WorldRow) => ({
      id: worldId,
      project: w.projectName,
      name: w.name,
      slug: w.slug,
      path: w.path
    })

    /** `migrate` then `seed` of a slice service, run in the world's environment with the slices at `urls`. */
    const sliceInit =
      (
        w: WorldRow,
        config: Model.Config,
        userEnv: Readonly<Record<string, string>>,
        lookup: (name: string) => string | undefined,
        coordsWith: (urls: ReadonlyMap<string, string>) => ReadonlyMap<string, ServiceCoordinates>
      ): SliceInit =>
      (s, urls) =>
        Effect.gen(function* () {
          const coords = coordsWith(urls)
          const env = { ...userEnv, ...worldVariables(config, coords) }
          // `${self.url}` in a migrate or seed is the slice being filled
          const ctx = tokenContext(w, coords, lookup, s.name)
          for (const command of [s.migrate, s.seed]) {
            if (command === undefined) continue
            const resolved = resolveTemplate(command, ctx, { shell: true })
            yield* runOnce(w, s.name, resolved.value, env, [
              ...resolved.secrets,
              ...secretsOf(env),
              ...urlSecrets(urls)
            ])
          }
        })

    /**
     * Every slice of the world, before any process starts. A slice made just now is filled — a copy of its golden,
     * or its `migrate` then `seed` — in the world's environment; if that fails, the slice is dropped again.
     */
    const provisionSlices = (
      w: WorldRow,
      config: Model.Config,
      userEnv: Readonly<Record<string, string>>,
      lookup: (name: string) => string | undefined,
      coordsWith: (urls: ReadonlyMap<string, string>) => ReadonlyMap<string, ServiceCoordinates>
    ) =>
      Effect.map(
        slices.provision(
          sliceWorld(w),
          Model.slices(config),
          lookup,
          sliceInit(w, config, userEnv, lookup, coordsWith)
        ),
        coordsWith
      )

    /**
     * What a start needs before anything is touched: the worktree, the config (and `.env`), the selected services, the
     * world's environment. Failing here changes nothing, so `reload` checks it before it stops what runs.
     */
    /** The config's commands may run: its content was allowed (or the command's environment allows it). */
    const mayRun = (loaded: LoadedConfig, env: Readonly<Record<string, string>>) =>
      requireConsent(home.consentFile, { file: loaded.file, digest: loaded.digest, config: loaded.parsed.config }, env)

    const prepare = (sel: Selection, givenEnv: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        const w = yield* row
        yield* ensureWorktreeFolder(w)
        yield* trace("actor: worktree ready")
        const { loaded, config, dotenv } = yield* loadConfig(w)
        // nothing of a config runs before the user allowed its content (a freshly cloned repository, say)
        yield* mayRun(loaded, givenEnv)
        yield* bringFiles(w, config.project)
        const names = yield* selected(config, sel)
        yield* checkPaths(w, config, names)
        const routing = router.routing(config, w.projectName, w.slug)
        const userEnv = router.processEnv(givenEnv, routing)
        const lookup = (name: string) => userEnv[name] ?? dotenv.get(name)
        // an admin_url whose variables are not set would make berth act on the wrong server (or a literal
        // `${env.…}`): the world's command fails, naming the variable, before anything changes
        for (const s of Model.slices(config)) {
          if (s.adminUrl === undefined) continue
          const missing = unresolvedIn(resolveTemplate(s.adminUrl, { services: new Map(), env: lookup }))
          if (missing.length > 0) {
            return yield* new UnsetVariable({ world: w.name, slice: s.name, variables: missing, file: config.file })
          }
        }
        return { w, loaded, config, dotenv, names, routing, userEnv, lookup }
      })

    type Prepared = Effect.Effect.Success<ReturnType<typeof prepare>>

    /** Every port of the world leased; a lease something outside berth took moved, and the world's history says so. */
    const allocatePorts = (w: WorldRow, config: Model.Config) =>
      Effect.gen(function* () {
        const { assigned, replaced } = yield* ports.allocate(
          { id: worldId, project: w.projectName, name: w.name },
          portRequests(config)
        )
        for (const r of replaced) {
          const now = assigned.find((a) => a.service === r.service && a.name === r.name)?.port
          const which = r.name === "" ? r.service : `${r.service}'s ${r.name}`
          yield* registry.addEvent({
            worldId,
            service: r.service,
            kind: "port_moved",
            message: `port ${r.port} is taken by ${r.holder ?? "a process outside berth"}; ${which} moved to port ${now}`
          })
        }
        return assigned
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
          const fiber = yield* runService(rt, {
            adopt: adopt.get(name),
            dependencies: Effect.all(deps, { discard: true })
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

    /** The first line of why a start failed, as the world's reason says it. */
    const failureReason = (e: WorldError): string =>
      e instanceof StartFailed ? `${e.service}: ${e.reason}` : (e.message.split("\n")[0] ?? "")

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
        const outcome = yield* Deferred.make<void, WorldError>()
        yield* SubscriptionRef.update(life, (l) => ({ ...l, outcome }))
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
        const run = yield* currentRun
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
    const settled = (token: number, exit: Exit.Exit<void, WorldError>) =>
      Effect.gen(function* () {
        const { run, outcome } = yield* SubscriptionRef.get(life)
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

    const up = (sel: Selection, env: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        const run = yield* currentRun
        if (run._tag === "Launching") {
          // asked again while on its way up: the same start answers; what this up names beyond it (checked now: an
          // unknown name is still an error) starts once the world runs (`settled`)
          if (covers(selection, sel)) return
          yield* selected(run.generation.config, sel)
          selection = widen(selection, sel)
          yield* setRun({ ...run, asked: run.asked === undefined ? sel : widen(run.asked, sel) })
          return yield* registry.setSelection(worldId, selection)
        }
        if (run._tag === "Running") {
          // a running world: an unknown name is still an error, and a selection starts only what is missing
          const g = run.generation
          const w = yield* row
          const { loaded, config } = yield* loadConfig(w)
          const names = yield* selected(config, sel)
          yield* registry.setDesired(worldId, "up")
          // a service that failed after the start is started again, as one that is missing
          const failed = yield* failedAmong(g, names)
          const missing = names.some((n) => !g.services.has(n) && Model.processes(config).some((s) => s.name === n))
          // what starts now runs the config as it is: only once its content is allowed
          if (failed.length > 0 || missing) yield* mayRun(loaded, env)
          if (failed.length > 0) {
            yield* stopServices(g, failed)
            yield* registry.addEvent({
              worldId,
              service: null,
              kind: "restarted",
              message: `starting failed ${failed.join(", ")} again`
            })
          }
          if (names.every((n) => g.services.has(n) || !Model.processes(config).some((s) => s.name === n))) return
          selection = widen(selection, sel)
          yield* registry.setSelection(worldId, selection)
          return yield* addServices(g, sel)
        }
        // checked before anything is recorded: an up that cannot resolve its tokens changes nothing
        yield* trace("actor: up")
        const ready = yield* prepare(sel, env)
        yield* registry.setDesired(worldId, "up")
        selection = sel
        lastEnv = env
        hasOwnEnv = true
        yield* registry.setSelection(worldId, sel)
        yield* registry.setEnv(worldId, env)
        yield* launchStart(ready, { since: Date.now(), resuming: false })
      })

    /**
     * Services a running generation lacks, started beside the others on the actor's own fiber (the world stays
     * `running`); one that fails to start goes again, and the rest keeps running.
     */
    const addServices = (g: Generation, sel: Selection) =>
      Effect.gen(function* () {
        const ready = yield* prepare(sel, lastEnv)
        yield* start(g, true, ready)
        g.envBefore.clear()
      }).pipe(Effect.ensuring(Effect.ignore(followServices)))

    const down = Effect.gen(function* () {
      yield* registry.setDesired(worldId, "down")
      yield* apply(WorldEvent.Stop())
      yield* halt
      yield* apply(WorldEvent.Stopped())
    })

    /** Memory is short: the processes stop as in `down`; ports, slices, files and routes stay; it queues to resume. */
    const suspend = (reason: string, requeue: boolean) =>
      Effect.gen(function* () {
        const w = yield* row
        if (w.desired !== "up" || (yield* currentRun)._tag === "Idle") return
        if (!(yield* apply(WorldEvent.Suspend(), reason))) return
        yield* halt
        if (requeue) yield* admission.suspended
        // asleep for idleness: it stays so (a new daemon too) until a request or an `up` wakes it
        else yield* registry.setWakesOnRequest(worldId, true)
        yield* apply(WorldEvent.Suspended(), reason)
        yield* registry.addEvent({ worldId, service: null, kind: "suspended", message: reason })
        // suspended for memory: back in line at once; suspended for idleness: back on its next request
        if (requeue) yield* resume(Date.now())
      })

    /** Queues a suspended (or crash-stopped) world to come back, in the one fair line, at its suspension time. */
    const resume = (since: number) =>
      Effect.gen(function* () {
        const ready = yield* prepare(selection, lastEnv)
        yield* launchStart(ready, { since, resuming: true })
      })

    /**
     * The world follows its services: `degraded` (with the failed ones as its reason) while one of the running
     * generation is failed, `running` again once none is. Runs on the mailbox, so the state keeps one writer.
     */
    const followServices = Effect.gen(function* () {
      const g = yield* currentGeneration
      if (g === undefined) return
      const failed: Array<string> = []
      for (const [name, s] of g.services) {
        const snap = yield* SubscriptionRef.get(s.rt.snapshot)
        if (snap.state === "failed") failed.push(`${name}: ${snap.reason ?? "failed"}`)
      }
      const now = (yield* SubscriptionRef.get(life)).state
      if (failed.length > 0 && now === "running") {
        const why = failed.join("; ")
        yield* apply(WorldEvent.Degrade({ reason: why }), why)
        yield* registry.addEvent({ worldId, service: null, kind: "degraded", message: why })
      } else if (failed.length === 0 && now === "degraded") {
        yield* apply(WorldEvent.Restore())
      }
    })

    /** The services of the running generation among `names` that are failed: what an `up` starts again. */
    const failedAmong = (g: Generation, names: ReadonlyArray<string>) =>
      Effect.filter(names, (name) => {
        const s = g.services.get(name)
        return s === undefined
          ? Effect.succeed(false)
          : Effect.map(SubscriptionRef.get(s.rt.snapshot), (snap) => snap.state === "failed")
      })

    /** Processes recorded for this world that no generation owns (e.g. after a failed adoption). */
    const stopOrphans = Effect.gen(function* () {
      for (const s of yield* registry.services(worldId)) {
        if (s.pid !== null && s.pgid !== null && s.startTime !== null) {
          const handle = { pid: s.pid, pgid: s.pgid, startTime: s.startTime }
          if (yield* processes.isRunning(handle)) yield* processes.stop(handle, 10_000)
        } else if (!IN_FLIGHT.has(s.observed)) continue
        // a row a crash left mid-way (`stopping`, `starting`, …) settles too: nothing of it runs now
        yield* saveRow({ ...s, observed: "stopped", pid: null, pgid: null, startTime: null })
      }
    })

    const forget = (removeFiles: boolean, force: boolean) =>
      Effect.gen(function* () {
        const w = yield* row
        // a removal a crash cuts short is finished by the next daemon, whatever started it
        yield* registry.setDesired(worldId, "removed")
        yield* apply(WorldEvent.Remove())
        yield* halt
        yield* ports.release(worldId)
        // slices are dropped as the registry recorded them; one whose server is down now stays recorded for gc when the
        // world goes anyway (forced, or its worktree vanished)
        const left = yield* slices.teardown(sliceWorld(w), { keepOnFailure: force })
        if (left.length > 0) {
          yield* registry.addEvent({
            worldId: null,
            service: null,
            kind: "slices_left",
            message: `world ${w.name}: slices ${left.join(", ")} could not be dropped now; \`berth gc\` will`
          })
        }
        if (removeFiles && !w.isMain) {
          const removed = yield* worktreeFiles.remove(w, force)
          if (!removed && existsSync(w.path)) {
            // a folder that is no worktree of this repository stood at the world's path: not berth's to delete
            yield* registry.addEvent({
              worldId: null,
              service: null,
              kind: "folder_kept",
              message: `world ${w.name}: ${w.path} is not a worktree of ${w.mainRoot}; it was left as it is`
            })
          }
        } else if (!w.isMain && w.path !== "" && !existsSync(w.path)) {
          // its folder was deleted outside berth: git's record of it goes too (only a prune: nothing is there)
          yield* worktreeFiles.remove(w, true).pipe(Effect.ignore)
        }
        yield* apply(WorldEvent.Removed())
        yield* registry.deleteWorld(worldId)
        // its logs go with it: nothing of a removed world is shown again, nor kept on disk
        yield* Effect.sync(() => rmSync(dirname(home.serviceLog(worldId, SETUP_LOG)), { recursive: true, force: true }))
      })

    const remove = (force: boolean) =>
      Effect.gen(function* () {
        const w = yield* row
        // a folder that is no worktree of this repository has no changes of the world's: remove leaves it (`forget`)
        if (!force && existsSync(w.path) && !w.isMain && (yield* git.isWorktreeOf(w.mainRoot, w.path))) {
          const loaded = yield* Effect.either(loadConfig(w))
          const changes = yield* worktreeFiles.userChanges(w, loaded._tag === "Left" ? undefined : loaded.right.config)
          if (changes.length > 0) return yield* new WorktreeDirty({ world: w.name, path: w.path, files: changes })
        }
        yield* registry.setDesired(worldId, "removed")
        // the main checkout's files stay: only what env_file wrote into them is taken back. A worktree's are taken
        // back too, so that git finds it as clean as the check above did
        if (w.isMain || !force) yield* retractEnvFiles(w)
        yield* forget(true, force)
      })

    /**
     * Slices back to their golden (or a fresh migrate + seed): the world's processes stop first and start again
     * after, on the same ports; a world that is down gets its slices refilled now, so `env` shows them at once.
     */
    const reset = (names: ReadonlyArray<string>, callerEnv: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        const w = yield* row
        // the world's own environment (from its up), as for everything done to it later; the caller's only when it
        // never had one
        const env = envFor(callerEnv)
        const { config } = yield* loadConfig(w)
        const all = Model.slices(config).map((s) => s.name)
        const unknown = names.filter((n) => !all.includes(n))
        if (all.length === 0 || unknown.length > 0) {
          return yield* new UnknownSlice({ world: w.name, names: unknown, file: config.file, known: all })
        }
        const chosen = names.length === 0 ? all : [...new Set(names)]
        const wasUp = (yield* currentRun)._tag !== "Idle"
        // what the new start needs is checked first: a reset that could not start again stops nothing
        const ready = yield* prepare(selection, env)
        yield* stopRun
        yield* slices.teardown(sliceWorld(w), { only: new Set(chosen) })
        yield* registry.addEvent({ worldId, service: null, kind: "reset", message: `reset ${chosen.join(", ")}` })
        if (wasUp) {
          // it keeps its permit: the same world, started again
          return yield* launchStart(ready, { since: Date.now(), resuming: false })
        }
        const portMap = groupPorts(yield* registry.leases(worldId))
        yield* provisionSlices(ready.w, ready.config, ready.userEnv, ready.lookup, (urls) =>
          coordinates(ready.config, portMap, urls, ready.routing)
        )
      })

    /**
     * `berth up <to> --from <this>`: this world's slices, data included, copied into the new world `to`. Its processes
     * stop first (PostgreSQL copies a database only while nobody is connected to it; elsewhere the copy is then
     * consistent) and start again after, whether the copy worked or not; the world's events say so.
     */
    const copySlices = (
      to: { readonly id: number; readonly name: string; readonly slug: string; readonly path: string },
      callerEnv: Readonly<Record<string, string>>
    ) =>
      Effect.gen(function* () {
        const w = yield* row
        const env = envFor(callerEnv)
        const wasUp = (yield* currentRun)._tag !== "Idle"
        // a copy that cannot be made, or after which the world could not start again, stops nothing
        yield* slices.canCopy(sliceWorld(w), to.name, env.PATH)
        const ready = wasUp ? yield* prepare(selection, env) : undefined
        if (ready !== undefined) yield* stopRun
        const copied = yield* Effect.either(
          slices.copyWorld(sliceWorld(w), { ...to, project: w.projectName }, env.PATH)
        )
        yield* registry.addEvent({
          worldId,
          service: null,
          kind: "slices_copied",
          message:
            ready === undefined
              ? `its slices were ${copied._tag === "Right" ? "copied" : "not copied"} into world ${to.name}`
              : `stopped its services while its slices were ${copied._tag === "Right" ? "copied" : "being copied (the copy failed)"} into world ${to.name}, and started them again`
        })
        if (ready !== undefined) {
          // it keeps its permit: the same world, started again
          yield* launchStart(ready, { since: Date.now(), resuming: false })
        }
        if (copied._tag === "Left") return yield* copied.left
      })

    /**
     * The named services of a running world — and the processes of the named groups — and everything depending on
     * them, in dependency order.
     */
    const withDependents = (names: ReadonlyArray<string>, groups: ReadonlyArray<string> = []) =>
      Effect.gen(function* () {
        const run = yield* currentRun
        const w = yield* row
        if (run._tag !== "Running") return yield* new WorldNotRunning({ world: w.name })
        const g = run.generation
        const processes = Model.processes(g.config)
        const known = processes.map((s) => s.name)
        const unknown = names.filter((n) => !known.includes(n))
        if (unknown.length > 0 || names.length + groups.length === 0) {
          return yield* new UnknownService({ world: w.name, names: unknown, file: g.config.file, known })
        }
        const inGroups = processes.filter((s) => s.groups.some((x) => groups.includes(x))).map((s) => s.name)
        const empty = groups.filter((x) => !processes.some((s) => s.groups.includes(x)))
        if (empty.length > 0) {
          const all = [...new Set(processes.flatMap((s) => s.groups))].sort()
          return yield* new UnknownGroup({ world: w.name, names: empty, file: g.config.file, known: all })
        }
        const affected = new Set(dependentsClosure(g.config.graph, [...names, ...inGroups]))
        return { g, w, order: g.config.graph.order.filter((n) => affected.has(n)) }
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

    /** `stop -s`: those services and their dependents stop, and stay out of the world's selection until an `up -s`. */
    const stopSome = (names: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const { g, order } = yield* withDependents(names)
        yield* stopServices(g, order)
        const left = g.config.graph.order.filter((n) => g.services.has(n))
        selection = { services: left, groups: [] }
        yield* registry.setSelection(worldId, selection)
        yield* registry.addEvent({ worldId, service: null, kind: "stopped", message: `stopped ${order.join(", ")}` })
        yield* followServices
      })

    /** `restart -s`/`-g`: those services and their dependents stop, then start again beside the rest. */
    const restartSome = (names: ReadonlyArray<string>, groups: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const { g, order } = yield* withDependents(names, groups)
        yield* stopServices(g, order)
        yield* registry.addEvent({
          worldId,
          service: null,
          kind: "restarted",
          message: `restarted ${order.join(", ")}`
        })
        yield* addServices(g, { services: order, groups: [] })
      })

    const rebuildGolden = (name: string, callerEnv: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        const w = yield* row
        const userEnv = envFor(callerEnv)
        const { loaded, config, dotenv } = yield* loadConfig(w)
        // a golden's migrate and seed are the config's commands too
        yield* mayRun(loaded, { ...userEnv, ...callerEnv })
        const service = Model.slices(config).find((s) => s.name === name)
        if (service === undefined || service.cloneFrom !== "golden") {
          const goldens = Model.slices(config)
            .filter((s) => s.cloneFrom === "golden")
            .map((s) => s.name)
          return yield* new UnknownSlice({
            world: w.name,
            names: [name],
            file: config.file,
            known: goldens,
            golden: true
          })
        }
        const portMap = groupPorts(yield* registry.leases(worldId))
        const lookup = (key: string) => userEnv[key] ?? dotenv.get(key)
        yield* slices.rebuildGolden(
          sliceWorld(w),
          service,
          lookup,
          sliceInit(w, config, userEnv, lookup, (urls) =>
            coordinates(config, portMap, urls, router.routing(config, w.projectName, w.slug))
          )
        )
      })

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
      const ready = yield* prepare(selection, lastEnv).pipe(
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
            yield* processes.stop(
              handle,
              service?._tag === "Process" ? service.stopGraceMs : Model.defaults.stopGraceMs
            )
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
     * `stopped`, one being removed is removed.
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
          yield* stopOrphans
          yield* apply(WorldEvent.Recover())
          // a world wanted down that a crash left running (or suspended) is stopped; a failed one stays failed
          if (w.observed === "running" || w.observed === "degraded" || w.observed === "suspended") {
            yield* apply(WorldEvent.Stop())
            yield* apply(WorldEvent.Stopped())
          }
          return false
      }
    })

    const handle = (command: WorldCommand): Effect.Effect<void, WorldError> => {
      switch (command._tag) {
        case "Up":
          return up(command.selection, command.env)
        case "Down":
          return down
        case "Reload":
          return Effect.gen(function* () {
            // what the new start needs is checked first: a reload that cannot start leaves the world running; it keeps
            // its permit (the same world, started again)
            yield* prepare(selection, command.env)
            yield* stopRun
            yield* up(selection, command.env)
          })
        case "Remove":
          return remove(command.force)
        case "Vanished":
          return forget(false, true)
        case "RebuildGolden":
          return rebuildGolden(command.service, command.env)
        case "Suspend":
          return suspend(command.reason, command.requeue)
        case "Wake":
          return Effect.gen(function* () {
            const w = yield* row
            const launching = (yield* currentRun)._tag === "Launching"
            if (w.desired === "up" && w.observed === "suspended" && !launching) yield* resume(Date.now())
          })
        case "Reset":
          return reset(command.slices, command.env)
        case "CopySlices":
          return copySlices(command.to, command.env)
        case "StopServices":
          return stopSome(command.services)
        case "RestartServices":
          return restartSome(command.services, command.groups ?? [])
        case "ServicesChanged":
          return followServices
        case "Withdraw":
          return Effect.gen(function* () {
            // only a world still in line: one already starting keeps starting
            if ((yield* currentRun)._tag !== "Launching" || admission.holds(worldId)) return
            const w = yield* row
            if (w.observed !== "queued") return
            yield* down
          })
      }
    }

    /** A failure while moving the state on a start fiber's word: a defect of berth's, logged; the actor goes on. */
    const logInternal = (what: string) => (cause: Cause.Cause<unknown>) =>
      Effect.logError(`world ${worldId}: ${what}`, cause)

    const ended = (command: WorldCommand) => command._tag === "Remove" || command._tag === "Vanished"

    /** set once the loop has ended: later commands are answered at once, never queued to no one */
    let closed = false
    /** Tells the world's own mailbox something (no one waits for the answer); nothing once the actor has ended. */
    function post(message: WorldCommand | Exclude<Message, { readonly _tag: "Command" }>) {
      return Effect.flatMap(Deferred.make<void, WorldError>(), (reply) =>
        Effect.sync(() => {
          if (closed) return
          mailbox.unsafeOffer(
            message._tag === "Admitted" || message._tag === "Settled"
              ? message
              : { _tag: "Command", command: message, reply }
          )
        })
      )
    }
    const gone = Effect.suspend(() =>
      Effect.flatMap(registry.world(worldId), (w) =>
        Effect.fail(
          // the row is gone by now: the names the actor started with say which world it was
          new WorldNotFound({
            project: w?.projectName ?? initial?.projectName ?? "",
            name: w?.name ?? initial?.name ?? `#${worldId}`,
            known: []
          })
        )
      )
    )
    const end = Effect.gen(function* () {
      // no offer succeeds once `closed` is set, so what is in the mailbox now is all there will ever be
      yield* Effect.sync(() => {
        closed = true
      })
      const rest = yield* Queue.takeAll(mailbox)
      yield* Effect.forEach(rest, (m) => (m._tag === "Command" ? Deferred.completeWith(m.reply, gone) : Effect.void), {
        discard: true
      })
    })

    const loop = Effect.gen(function* () {
      const removed = yield* settle.pipe(
        Effect.catchAllCause((cause) => Effect.as(Effect.logWarning(`world ${worldId}: settling`, cause), false))
      )
      if (removed) {
        yield* end
        yield* onEnd
        return
      }
      for (;;) {
        const envelope = yield* Queue.take(mailbox)
        // what the world's start fiber tells: only the actor moves the state
        if (envelope._tag === "Admitted") {
          yield* admitted(envelope.token, envelope.resuming).pipe(Effect.catchAllCause(logInternal("admitting")))
          continue
        }
        if (envelope._tag === "Settled") {
          yield* settled(envelope.token, envelope.exit).pipe(Effect.catchAllCause(logInternal("settling its start")))
          continue
        }
        const exit = yield* Effect.exit(
          handle(envelope.command).pipe(
            Effect.catchAllDefect((d) =>
              Effect.fail(
                new InternalError({ reason: `world ${worldId}: ${d instanceof Error ? d.message : String(d)}` })
              )
            )
          )
        )
        if (Exit.isSuccess(exit) && ended(envelope.command)) {
          // commands queued behind a remove are answered (there is no such world any more), never left waiting
          yield* end
          yield* onEnd
          yield* Deferred.complete(envelope.reply, exit)
          return
        }
        yield* Deferred.complete(envelope.reply, exit)
      }
    }).pipe(
      Effect.ensuring(
        Effect.all([
          // a detached daemon's release writes nothing and stops no process (`releaseGeneration`)
          stopRun,
          Effect.ignore(end),
          Deferred.succeed(done, undefined)
        ])
      ),
      Effect.catchAllCause((cause) => Effect.logError("world actor ended", cause))
    )

    const actor: WorldActor = {
      worldId,
      state: life,
      send: (command) =>
        Effect.gen(function* () {
          const reply = yield* Deferred.make<void, WorldError>()
          // checked and queued in one step: the loop's end drains the mailbox in one step too, so nothing slips between
          const queued = yield* Effect.sync(() => !closed && mailbox.unsafeOffer({ _tag: "Command", command, reply }))
          if (!queued) return yield* gone
          return yield* Deferred.await(reply)
        }),
      started: Effect.flatMap(SubscriptionRef.get(life), ({ outcome }) =>
        outcome === undefined ? Effect.void : Deferred.await(outcome)
      ),
      snapshots: Effect.flatMap(currentGeneration, (g) => {
        if (g === undefined) return Effect.succeed(new Map<string, ServiceSnapshot>())
        return Effect.map(
          Effect.forEach([...g.services], ([name, s]) =>
            Effect.map(SubscriptionRef.get(s.rt.snapshot), (snap) => [name, snap] as const)
          ),
          (entries) => new Map(entries)
        )
      }),
      done: Deferred.await(done),
      flush,
      configNote: Effect.flatMap(currentGeneration, (g) => {
        if (g === undefined) return Effect.succeed(undefined)
        const name = initial?.name ?? `#${worldId}`
        return configs.load(g.source.root).pipe(
          Effect.map((now) =>
            now.digest === g.source.digest
              ? undefined
              : `${now.file} changed since world ${name} started: berth reload ${name} applies it`
          ),
          Effect.orElseSucceed(() => undefined)
        )
      })
    }
    return { actor, loop }
  })
