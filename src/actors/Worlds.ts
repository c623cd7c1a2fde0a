/**
 * The supervisor of every world: it resolves which world a request means (a worktree of a project), keeps one
 * WorldActor per world (a FiberMap of their mailbox loops) and answers the daemon's API. This is also what a
 * program embeds: everything the CLI does goes through these methods.
 */
import { existsSync, readdirSync } from "node:fs"
import { basename, dirname, join } from "node:path"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as FiberId from "effect/FiberId"
import * as FiberMap from "effect/FiberMap"
import * as PubSub from "effect/PubSub"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import type { ServiceStatus, WorldStatus } from "../daemon/api.js"
import { coordinates, groupPorts, portRequests, redact, routeUrl, worldVariables } from "../domain/coordinates.js"
import * as Model from "../domain/config/model.js"
import {
  type DiskFull,
  InternalError,
  InvalidWorldName,
  NotARepository,
  UnknownLog,
  WorldExists,
  WorldNotFound,
  WorldNotReady
} from "../domain/errors.js"
import { HISTORY_LOG } from "../domain/log-names.js"
import { projectLabel } from "../domain/names.js"
import { hidePassword, secretsOf } from "../domain/redact.js"
import { ANYWHERE_SETTING, runsAnywhere } from "../domain/cluster.js"
import { decide } from "../domain/world-state.js"
import { ConfigFiles, type LoadedConfig } from "../services/ConfigFiles.js"
import { Git } from "../services/Git.js"
import type { Health } from "../services/Health.js"
import { Home } from "../services/Home.js"
import { trace } from "../services/trace.js"
import * as LogFiles from "../services/LogFiles.js"
import { Ports } from "../services/Ports.js"
import { Processes } from "../services/Processes.js"
import {
  type EventRow,
  type LeaseRow,
  type ProjectRow,
  Registry,
  type RegistryError,
  type ServiceRow,
  type SliceRow,
  type WorldRow
} from "../services/Registry.js"
import type { WorktreeFiles } from "../services/worktree/WorktreeFiles.js"
import { Router } from "../services/proxy/Router.js"
import { Slices, type SlicesService } from "../services/slices/Slices.js"
import type { Fence } from "../services/Fence.js"
import { Admission } from "../services/Admission.js"
import { describeWait } from "../domain/admission.js"
import * as Protocol from "./protocol.js"
import {
  makeWorldActor,
  recordedProcesses,
  SETUP_LOG,
  type Selection,
  type WorldActor,
  type WorldChange,
  worktreesFolder
} from "./WorldActor.js"

export interface WorldRef {
  readonly cwd: string
  readonly world?: string | undefined
}

/** how many of its latest events a world's status carries */
const STATUS_EVENTS = 10

const internal = (e: { readonly message: string }) => new InternalError({ reason: e.message })

/** The services (and one-off commands) with a log in a world's log folder: `<name>.log`, rotated copies aside. */
const logNames = (folder: string) =>
  Effect.sync(() => {
    try {
      return readdirSync(folder).flatMap((f) => (f.endsWith(".log") ? [f.slice(0, -".log".length)] : []))
    } catch {
      return []
    }
  })

/**
 * What each command can fail with: naming the world, then what its actor answers (`Protocol.CommandFailure`, one union
 * per command, held by the compiler to the code below).
 */
export type CommandError<K extends keyof typeof Protocol.CommandFailure> = Protocol.CommandError<K>

/** What naming a world can fail with: its repository, its config, its name. */
export type ResolveError = Protocol.ResolveError

/** What reading a project's worlds can fail with. */
export type ProjectError = Protocol.ProjectError

/** A world as a watcher acts on it: its status, its id, its project's main checkout and its last selection. */
export interface WorldView {
  readonly id: number
  readonly mainRoot: string
  readonly selection: Selection
  readonly status: WorldStatus
}

/**
 * The engine's public shape: everything the CLI can do to worlds, a program can do through this (see
 * `src/layers/index.ts` for the layers that provide it). Written out, so a change to it is a change seen here.
 */
export interface WorldsService {
  /** Brings a world up; unless `wait` is false, waits until it runs (or its start fails). */
  readonly up: (
    ref: WorldRef,
    selection: Selection,
    env: Readonly<Record<string, string>>,
    wait?: boolean,
    options?: {
      readonly from?: string | undefined
      /**
       * Runs once the world exists, before it is told to start: the cluster marks a world that runs anywhere there,
       * so that its fence and its holder know it before its first process starts
       */
      readonly before?: ((worldId: number) => Effect.Effect<void, CommandError<"up">>) | undefined
    }
  ) => Effect.Effect<WorldStatus, CommandError<"up">>
  /**
   * Waits until the world runs and answers its status; fails with the start's own error when it failed, and with
   * WorldNotReady when the world ended otherwise (stopped, or removed, first).
   */
  readonly waitReady: (ref: WorldRef) => Effect.Effect<WorldStatus, CommandError<"waitReady">>
  /** Every move of every world's observed state from now on. */
  readonly changes: Stream.Stream<WorldChange>
  /** One of the actor protocol's requests, to the world of this id as it is (what the cluster's entity hands on). */
  readonly tell: <C extends Protocol.WorldCommand>(
    worldId: number,
    command: C
  ) => Effect.Effect<void, Protocol.FailureOf<C>>
  readonly idOf: (project: string, slug: string) => Effect.Effect<number | undefined, RegistryError>
  readonly refOf: (project: string, slug: string) => Effect.Effect<WorldRef | undefined, RegistryError>
  /** A line in the world's history (an MCP tool's note). */
  readonly recordEvent: (ref: WorldRef, kind: string, message: string) => Effect.Effect<void, ResolveError>
  readonly reset: (
    ref: WorldRef,
    slices: ReadonlyArray<string>,
    env: Readonly<Record<string, string>>
  ) => Effect.Effect<WorldStatus, CommandError<"reset">>
  readonly stopServices: (
    ref: WorldRef,
    services: ReadonlyArray<string>
  ) => Effect.Effect<WorldStatus, CommandError<"stopServices">>
  readonly restartServices: (
    ref: WorldRef,
    services: ReadonlyArray<string>,
    groups?: ReadonlyArray<string>
  ) => Effect.Effect<WorldStatus, CommandError<"restartServices">>
  /** The world down (or, with `all`, every world of the project `ref.cwd` is in, or of the machine). */
  readonly down: (ref: WorldRef, all: boolean) => Effect.Effect<ReadonlyArray<WorldStatus>, CommandError<"down">>
  readonly reload: (
    ref: WorldRef,
    env: Readonly<Record<string, string>>,
    wait?: boolean
  ) => Effect.Effect<WorldStatus, CommandError<"reload">>
  readonly remove: (
    ref: WorldRef,
    force: boolean
  ) => Effect.Effect<{ readonly project: string; readonly name: string; readonly path: string }, CommandError<"remove">>
  /** Every world (of the project `cwd` is in, when given). */
  readonly status: (
    cwd: string | undefined
  ) => Effect.Effect<{ readonly worlds: ReadonlyArray<WorldStatus> }, ProjectError>
  readonly views: (cwd: string | undefined) => Effect.Effect<ReadonlyArray<WorldView>, ProjectError>
  /** The world's coordinates (ports leased now if it never ran) and the commands its processes last started with. */
  readonly env: (ref: WorldRef) => Effect.Effect<
    {
      readonly world: string
      readonly vars: Readonly<Record<string, string>>
      readonly commands: Readonly<Record<string, string>>
    },
    CommandError<"env">
  >
  readonly logs: (
    ref: WorldRef,
    options: { readonly service?: string | undefined; readonly follow: boolean; readonly lines: number }
  ) => Stream.Stream<{ readonly service: string; readonly line: string }, CommandError<"logs">>
  /** One pass of the reconciler: every world that needs an actor gets one. */
  readonly reconcile: () => Effect.Effect<void, WorldNotFound | RegistryError>
  /** What any actor could not write when it happened (a full disk), written now that it may fit. */
  readonly flush: () => Effect.Effect<void>
  /** how many world actors this engine has started: one per world, however many ask at once */
  readonly actorsStarted: Effect.Effect<number>
  readonly rebuildGolden: (
    ref: WorldRef,
    service: string,
    env: Readonly<Record<string, string>>
  ) => Effect.Effect<WorldStatus, CommandError<"rebuildGolden">>
  /** What a crash or a vanished world left behind, dropped (or listed, with `dryRun`): the slices' own `gc`. */
  readonly gc: SlicesService["gc"]
  /** Memory is short: the world's processes stop, everything else stays, and it queues to come back. */
  readonly suspend: (
    worldId: number,
    reason: string,
    requeue?: boolean
  ) => Effect.Effect<void, Protocol.FailureOf<Protocol.Suspend>>
  /** A request reached a suspended world: queue its resume now. */
  readonly wake: (worldId: number) => Effect.Effect<void, Protocol.FailureOf<Protocol.Wake>>
  /** What berth calls the project `cwd` is in (registering it), and the other repositories of the same name. */
  readonly projectInfo: (
    cwd: string
  ) => Effect.Effect<
    { readonly name: string; readonly label: string; readonly others: ReadonlyArray<string> },
    ProjectError
  >
}

export class Worlds extends Effect.Service<Worlds>()("berth/Worlds", {
  scoped: Effect.gen(function* () {
    const registry = yield* Registry
    const git = yield* Git
    const configs = yield* ConfigFiles
    const ports = yield* Ports
    const slices = yield* Slices
    const router = yield* Router
    const context = yield* Effect.context<
      | Registry
      | ConfigFiles
      | Git
      | Ports
      | Home
      | Processes
      | Health
      | Slices
      | Router
      | Admission
      | Fence
      | WorktreeFiles
    >()
    const admission = yield* Admission
    /** the actors that run, for what needs one now without waiting (status, the reconciler's facts) */
    const actors = new Map<number, WorldActor>()
    /**
     * Every actor, or the promise of one being made: set before anything yields, so two callers at once (a user's
     * `up` and the reconciler's pass, say) never make two actors for one world.
     */
    const making = new Map<number, Deferred.Deferred<WorldActor, WorldNotFound | InternalError | DiskFull>>()
    let started = 0
    const loops = yield* FiberMap.make<number>()
    // every observed move of every world; a watcher slower than 4,096 moves loses the oldest, never stalls a world
    const moves = yield* PubSub.sliding<WorldChange>(4096)

    /** Makes the world's actor and starts its loop; its end (the world removed) forgets it. */
    const makeActor = (
      worldId: number,
      made: Deferred.Deferred<WorldActor, WorldNotFound | InternalError | DiskFull>
    ) =>
      Effect.gen(function* () {
        // a world removed meanwhile gets no new actor: the caller hears it is gone
        if ((yield* registry.world(worldId)) === undefined) {
          return yield* new WorldNotFound({ project: "", name: `#${worldId}`, known: [] })
        }
        const { actor, loop } = yield* makeWorldActor(
          worldId,
          Effect.sync(() => {
            actors.delete(worldId)
            if (making.get(worldId) === made) making.delete(worldId)
          }),
          (change) => PubSub.publish(moves, change)
        ).pipe(Effect.provide(context))
        actors.set(worldId, actor)
        started++
        yield* FiberMap.run(loops, worldId, loop)
        return actor
      })

    /** The world's one actor: the one that runs, the one being made, or a new one (get and create in one step). */
    const actorFor = (worldId: number): Effect.Effect<WorldActor, WorldNotFound | InternalError | DiskFull> =>
      Effect.suspend(() => {
        const known = making.get(worldId)
        if (known !== undefined) return Deferred.await(known)
        const made = Deferred.unsafeMake<WorldActor, WorldNotFound | InternalError | DiskFull>(FiberId.none)
        making.set(worldId, made)
        // made whole or not at all, whoever waits: a caller that gives up does not leave the promise unkept
        return makeActor(worldId, made).pipe(
          Effect.tapError(() =>
            Effect.sync(() => {
              if (making.get(worldId) === made) making.delete(worldId)
            })
          ),
          Effect.exit,
          Effect.flatMap((exit) => Deferred.done(made, exit)),
          Effect.uninterruptible,
          Effect.zipRight(Deferred.await(made))
        )
      })

    /** A command to a world's actor; the routes reflect its outcome before the caller hears of it. */
    const send = <C extends Protocol.WorldCommand>(worldId: number, command: C) =>
      Effect.flatMap(actorFor(worldId), (actor) => actor.send(command)).pipe(
        Effect.ensuring(router.refresh.pipe(Effect.ignore))
      )

    const projects = new Map<string, ProjectRow>()
    /** Which repository a folder is in: git's answer, kept by `Git` while its files say it still holds. */
    const repoOf = (cwd: string) =>
      git.repo(cwd).pipe(
        Effect.catchTags({
          NotARepository: () => new NotARepository({ path: cwd }),
          GitFailed: internal
        })
      )

    /** The project `cwd` is in, registered on first sight. */
    const project = Effect.fn("Worlds.project")(function* (cwd: string) {
      const repo = yield* repoOf(cwd)
      const loaded = yield* configs.load(repo.root)
      const config = loaded.parsed.config
      const name = config.project.name ?? projectLabel(basename(repo.mainRoot))
      const known = projects.get(repo.commonDir)
      const row =
        known !== undefined && known.name === name && known.mainRoot === repo.mainRoot
          ? known
          : yield* registry.upsertProject({ name, commonDir: repo.commonDir, mainRoot: repo.mainRoot })
      projects.set(repo.commonDir, row)
      return { repo, row, config }
    })

    /** The world a request names (or the worktree `cwd` is in), created on first `up` when `create`. */
    const resolve = Effect.fn("Worlds.resolve")(function* (ref: WorldRef, create: boolean) {
      const { repo, row, config } = yield* project(ref.cwd)
      const name = ref.world ?? repo.branch ?? basename(repo.root)
      const existing = yield* registry.findWorld(row.id, name)
      if (existing !== undefined) return existing
      if (!create) {
        const known = (yield* registry.worlds(row.id)).map((w) => w.name)
        return yield* new WorldNotFound({ project: row.label, name, known })
      }
      if (ref.world !== undefined) {
        yield* git.validateBranch(ref.world).pipe(
          Effect.catchTags({
            InvalidBranchName: (e) => new InvalidWorldName({ name: e.name, reason: e.reason })
          })
        )
      }
      // the branch may already be checked out somewhere: that worktree is the world
      // read from git's files (a process less on every new world), or asked of git when they are mid-change
      const trees =
        (yield* git.checkouts(repo)) ?? (yield* git.worktrees(repo.mainRoot).pipe(Effect.mapError(internal)))
      const checkedOut = ref.world === undefined ? repo.root : trees.find((t) => t.branch === name)?.path
      const folder = worktreesFolder(repo.mainRoot, config.project.worktrees)
      const created = yield* registry.createWorld({
        projectId: row.id,
        name,
        path: checkedOut ?? "",
        branch: ref.world === undefined ? (repo.branch ?? null) : name,
        isMain: checkedOut === repo.mainRoot
      })
      if (checkedOut !== undefined) return created
      // a new worktree is named after the world's slug, which is unique in the project
      const path = join(folder, created.slug)
      yield* registry.setPath(created.id, path)
      return { ...created, path }
    })

    /** What a world's status is made of, as read from the registry: one world's, or every world's at once. */
    interface WorldFacts {
      readonly leases: ReadonlyArray<LeaseRow>
      readonly services: ReadonlyArray<ServiceRow>
      readonly slices: ReadonlyArray<SliceRow>
      readonly events: ReadonlyArray<EventRow>
    }
    const factsOf = (worldId: number) =>
      Effect.map(
        Effect.all([
          registry.leases(worldId),
          registry.services(worldId),
          registry.slices(worldId),
          registry.events(worldId, STATUS_EVENTS)
        ]),
        ([leases, services, slices, events]): WorldFacts => ({ leases, services, slices, events })
      )
    /**
     * Every world's facts in four reads, however many worlds there are: a status of all worlds (agents ask in loops)
     * no longer costs four queries per world.
     */
    const allFacts = Effect.gen(function* () {
      const [leases, services, slices, events] = yield* Effect.all([
        registry.leases(),
        registry.services(),
        registry.slices(),
        registry.recentEvents(STATUS_EVENTS)
      ])
      const by = <T>(rows: ReadonlyArray<T>, id: (row: T) => number | null) => {
        const out = new Map<number, Array<T>>()
        for (const row of rows) {
          const key = id(row)
          if (key === null) continue
          const list = out.get(key)
          if (list === undefined) out.set(key, [row])
          else list.push(row)
        }
        return out
      }
      const leasesBy = by(leases, (l) => l.worldId)
      const servicesBy = by(services, (s) => s.worldId)
      const slicesBy = by(slices, (s) => s.worldId)
      const eventsBy = by(events, (e) => e.worldId)
      return (worldId: number): WorldFacts => ({
        leases: leasesBy.get(worldId) ?? [],
        services: servicesBy.get(worldId) ?? [],
        slices: slicesBy.get(worldId) ?? [],
        events: (eventsBy.get(worldId) ?? []).map(({ worldId: _, ...e }) => e)
      })
    })

    /** `loaded`: the world's berth.toml as it is now (none when it cannot be read) */
    const serviceStatus = (w: WorldRow, facts: WorldFacts, loaded: Option.Option<LoadedConfig>) =>
      Effect.gen(function* () {
        const leases = facts.leases
        const rows = facts.services
        const sliceRows = facts.slices.map(
          (s): ServiceStatus => ({
            name: s.service,
            kind: "slice",
            state: s.state,
            pid: null,
            port: null,
            ports: {},
            url: s.url === null ? null : hidePassword(s.url),
            restarts: 0,
            reason: null,
            logTail: [],
            command: null
          })
        )
        // a routed service is shown at its route (the config says which are); the rest at 127.0.0.1
        const config = loaded._tag === "Some" ? Model.forWorld(loaded.value.parsed.config, w.name) : undefined
        const routing = config === undefined ? undefined : router.routing(config, w.projectName, w.slug)
        const labels = new Map(
          config === undefined
            ? []
            : Model.processes(config).flatMap((s) => (s.url === undefined ? [] : [[s.name, s.url]]))
        )
        return [
          ...sliceRows,
          ...processRows(rows, leases).map((s) => {
            const label = labels.get(s.name)
            return routing === undefined || label === undefined || s.port === null
              ? s
              : { ...s, url: routeUrl(label, routing) }
          })
        ]
      })

    const processRows = (
      rows: ReadonlyArray<ServiceRow>,
      leases: ReadonlyArray<{ readonly service: string; readonly name: string; readonly port: number }>
    ) =>
      rows.map((s): ServiceStatus => {
        const mine = leases.filter((l) => l.service === s.name)
        const main = mine.find((l) => l.name === "")?.port ?? null
        return {
          name: s.name,
          kind: "process",
          state: s.observed,
          pid: s.pid,
          port: main,
          ports: Object.fromEntries(mine.filter((l) => l.name !== "").map((l) => [l.name, l.port])),
          url: main === null ? null : `http://127.0.0.1:${main}`,
          restarts: s.restarts,
          reason: s.reason,
          logTail: s.logTail === null ? [] : (JSON.parse(s.logTail) as Array<string>),
          command: s.command
        }
      })

    /** When another repository declares the same project name: what this one's worlds are called instead, and why. */
    const projectNote = (w: WorldRow): Effect.Effect<string | undefined, RegistryError> =>
      w.projectName === projectLabel(w.declaredName)
        ? Effect.succeed(undefined)
        : Effect.gen(function* () {
            const others = (yield* registry.projectsNamed(w.declaredName)).filter((p) => p.mainRoot !== w.mainRoot)
            const where = others.length === 0 ? "another repository" : others.map((p) => p.mainRoot).join(", ")
            return `project ${w.declaredName} is also the name of ${where}: this repository's worlds are ${w.projectName} (hosts *.${w.projectName}.localhost); set [project] name in berth.toml to choose another`
          })

    /** Where a waiting world stands in line, and what it waits for. */
    const queueOf = (worldId: number) => {
      const e = admission.entry(worldId)
      return e === undefined
        ? {}
        : { queue: { position: e.position, waitingFor: e.reason === undefined ? "a permit" : describeWait(e.reason) } }
    }

    const home = yield* Home

    /** While the project's setup runs for a starting world, the last line it printed (secrets masked), for `up`. */
    const setupTail = (w: WorldRow, events: ReadonlyArray<EventRow>) => {
      const last = events.find((e) => e.kind === "setup_start" || e.kind === "setup_done")
      if (w.observed !== "starting" || last?.kind !== "setup_start") return Effect.succeed({})
      return LogFiles.tail(home.serviceLog(w.id, SETUP_LOG), 1).pipe(
        Effect.map((lines) => {
          const line = lines[lines.length - 1]?.trim()
          return line === undefined || line === ""
            ? {}
            : { setupTail: redact(line, secretsOf(w.env ?? {})).slice(0, 200) }
        }),
        Effect.orElseSucceed(() => ({}))
      )
    }

    /**
     * One generator per world, its steps in line: `status` of a hundred worlds runs this a hundred times, and each
     * combinator between the steps cost the daemon's answer more than the step itself.
     */
    const worldStatus = (w: WorldRow, given?: WorldFacts) =>
      Effect.gen(function* () {
        const facts = given ?? (yield* factsOf(w.id))
        const folder = w.path !== "" && existsSync(w.path) ? w.path : w.mainRoot
        const loaded = yield* configs.load(folder).pipe(Effect.option)
        const services = yield* serviceStatus(w, facts, loaded)
        const note = yield* projectNote(w)
        const configNote = yield* actors.get(w.id)?.configNote(Option.getOrUndefined(loaded)) ??
          Effect.succeed(undefined)
        const tail = yield* setupTail(w, facts.events)
        const queued = queueOf(w.id)
        return {
          ...(note === undefined ? {} : { projectNote: note }),
          ...(configNote === undefined ? {} : { configNote }),
          ...queued,
          ...tail,
          project: w.projectName,
          name: w.name,
          slug: w.slug,
          path: w.path,
          branch: w.branch,
          main: w.isMain,
          desired: w.desired,
          state: w.observed,
          // in line, it waits for what the gate says now (a slot, then disk, say), not what it waited for when it
          // queued
          reason: queued.queue === undefined ? w.reason : `waiting for ${queued.queue.waitingFor}`,
          services,
          events: facts.events
        } satisfies WorldStatus
      })

    const statusOf = (worldId: number) =>
      Effect.flatMap(registry.world(worldId), (w) =>
        w === undefined ? Effect.fail(new InternalError({ reason: `world ${worldId} vanished` })) : worldStatus(w)
      )

    /**
     * Waits for the world's current start to end: it runs, or fails with the start's own error (StartFailed with its
     * log tail). A caller that gives up while the world is still in line (Ctrl-C) takes it out.
     */
    const settle = (id: number) =>
      Effect.flatMap(actorFor(id), (actor) => actor.started).pipe(
        Effect.onInterrupt(() => send(id, new Protocol.Withdraw()).pipe(Effect.ignore)),
        Effect.ensuring(router.refresh.pipe(Effect.ignore))
      )

    /**
     * Brings a world up and, unless `wait` is false, waits until it runs (or its start fails): in line for a permit
     * first when the machine is full. A caller that gives up while the world is still in line (Ctrl-C) takes it out.
     */
    const up = Effect.fn("Worlds.up")(function* (
      ref: WorldRef,
      selection: Selection,
      env: Readonly<Record<string, string>>,
      wait = true,
      /**
       * `from`: a new world whose slices are copies of that world's, as they are now (`berth up <new> --from <world>`);
       * `before`: see WorldsService
       */
      options: {
        readonly from?: string | undefined
        readonly before?: ((worldId: number) => Effect.Effect<void, CommandError<"up">>) | undefined
      } = {}
    ) {
      yield* trace("daemon: up received")
      const w = options.from === undefined ? yield* resolve(ref, true) : yield* copiedFrom(ref, options.from, env)
      yield* trace("daemon: world resolved")
      const upOnce = (id: number) =>
        Effect.zipRight(
          Effect.zipRight(options.before?.(id) ?? Effect.void, send(id, new Protocol.Up({ selection, env }))),
          wait ? settle(id) : Effect.void
        ).pipe(
          Effect.tapError(() =>
            // an up refused before its worktree ever existed (git could not make it) leaves no world behind
            Effect.gen(function* () {
              const now = yield* registry.world(id)
              if (now === undefined || now.worktreeReady || now.isMain || (now.path !== "" && existsSync(now.path)))
                return
              yield* send(id, new Protocol.Vanished())
            }).pipe(Effect.ignore)
          ),
          Effect.as(id)
        )
      // the world found may be going: a removal a crash cut short, which the daemon finishes before any command (or
      // one asked for just before). This up comes after it, so it brings up a new world of that name.
      const id = yield* upOnce(w.id).pipe(
        Effect.catchIf(
          (e) => e._tag === "WorldNotFound",
          (e) =>
            Effect.gen(function* () {
              if ((yield* registry.world(w.id)) !== undefined) return yield* e
              return yield* upOnce((yield* resolve(ref, true)).id)
            })
        )
      )
      const status = yield* statusOf(id)
      yield* trace("daemon: replying")
      return status
    })

    /**
     * The new world `ref`, its slices copies of world `from`'s (made by `from`'s actor, which stops its processes around
     * the copy). Only a new world: one that exists already has slices of its own.
     */
    const copiedFrom = (ref: WorldRef, from: string, env: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        const source = yield* resolve({ cwd: ref.cwd, world: from }, false)
        const { repo, row } = yield* project(ref.cwd)
        const name = ref.world ?? repo.branch ?? basename(repo.root)
        if (name === source.name || (yield* registry.findWorld(row.id, name)) !== undefined) {
          return yield* new WorldExists({ world: name, from })
        }
        const w = yield* resolve(ref, true)
        const to = { id: w.id, name: w.name, slug: w.slug, path: w.path }
        // a copy that fails leaves no world behind: it never had a worktree
        yield* send(source.id, new Protocol.CopySlices({ to, env })).pipe(
          Effect.tapError(() => Effect.ignore(send(w.id, new Protocol.Vanished())))
        )
        return w
      })

    /**
     * Waits until the world runs and answers its status; fails with the start's own error when it failed, or says so
     * when it was stopped or removed first. A world in line (queued, or suspended waiting to resume) is waited for.
     */
    const waitReady = Effect.fn("Worlds.waitReady")(function* (ref: WorldRef) {
      const w = yield* resolve(ref, false)
      const actor = yield* actorFor(w.id)
      const last = yield* actor.state.changes.pipe(
        Stream.filter(
          (s) => s.state === "running" || s.state === "failed" || s.state === "stopped" || s.state === "removed"
        ),
        Stream.runHead
      )
      if (last._tag === "Some" && last.value.state === "running") return yield* statusOf(w.id)
      // the start's own failure (StartFailed with its log tail) when that is what ended it
      yield* actor.started
      const state = last._tag === "Some" ? last.value : { state: "removed", reason: null }
      return yield* new WorldNotReady({ world: w.name, state: state.state, reason: state.reason })
    })

    const down = Effect.fn("Worlds.down")(function* (ref: WorldRef, all: boolean) {
      const targets = all
        ? yield* project(ref.cwd).pipe(
            Effect.flatMap(({ row }) => registry.worlds(row.id)),
            Effect.catchTag("ConfigNotFound", () => registry.worlds()),
            Effect.catchTag("NotARepository", () => registry.worlds())
          )
        : [yield* resolve(ref, false)]
      yield* Effect.forEach(targets, (w) => send(w.id, new Protocol.Down()), {
        concurrency: "unbounded",
        discard: true
      })
      return yield* Effect.forEach(targets, (w) => statusOf(w.id))
    })

    /** Stops a world and starts it again; unless `wait` is false, answers once it runs (or fails), as `up` does. */
    const reload = Effect.fn("Worlds.reload")(function* (
      ref: WorldRef,
      env: Readonly<Record<string, string>>,
      wait = true
    ) {
      const w = yield* resolve(ref, false)
      yield* send(w.id, new Protocol.Reload({ env }))
      if (wait) yield* settle(w.id)
      return yield* statusOf(w.id)
    })

    const remove = Effect.fn("Worlds.remove")(function* (ref: WorldRef, force: boolean) {
      const w = yield* resolve(ref, false)
      yield* send(w.id, new Protocol.Remove({ force }))
      return { project: w.projectName, name: w.name, path: w.path }
    })

    const status = Effect.fn("Worlds.status")(function* (cwd: string | undefined) {
      const rows =
        cwd === undefined
          ? yield* registry.worlds()
          : yield* Effect.flatMap(project(cwd), ({ row }) => registry.worlds(row.id))
      const facts = yield* allFacts
      return { worlds: yield* Effect.forEach(rows, (w) => worldStatus(w, facts(w.id))) }
    })

    /**
     * Every world (of the project `cwd` is in, when given) as `status` answers it, with what a watcher needs to act on
     * it: its id, its project's main checkout and the services its last `up` selected. The state stream reads this.
     */
    const views = Effect.fn("Worlds.views")(function* (cwd: string | undefined) {
      const rows =
        cwd === undefined
          ? yield* registry.worlds()
          : yield* Effect.flatMap(project(cwd), ({ row }) => registry.worlds(row.id))
      const facts = yield* allFacts
      return yield* Effect.forEach(rows, (w) =>
        Effect.map(worldStatus(w, facts(w.id)), (status) => ({
          id: w.id,
          mainRoot: w.mainRoot,
          selection: w.selection,
          status
        }))
      )
    })

    /** The world's coordinates; ports are leased now if the world never ran (they are chosen before anything starts). */
    const env = Effect.fn("Worlds.env")(function* (ref: WorldRef) {
      const w = yield* resolve(ref, false)
      const loaded = yield* configs.load(existsSync(w.path) ? w.path : w.mainRoot)
      const config = Model.forWorld(loaded.parsed.config, w.name)
      let leases = yield* registry.leases(w.id)
      if (leases.length === 0 && portRequests(config).length > 0) {
        leases = (yield* ports.allocate(
          { id: w.id, project: w.projectName, name: w.name },
          portRequests(config)
        )).assigned.map((a) => ({ ...a, worldId: w.id }))
      }
      const coords = coordinates(
        config,
        groupPorts(leases),
        yield* slices.addresses(w.id),
        router.routing(config, w.projectName, w.slug)
      )
      // the commands the world's processes were last started with, as status shows them
      const commands = Object.fromEntries(
        (yield* registry.services(w.id)).flatMap((s) => (s.command === null ? [] : [[s.name, s.command]]))
      )
      return { world: w.name, vars: { ...worldVariables(config, coords) }, commands }
    })

    /** A world's events as log lines of the pseudo-service `berth`, oldest first; following polls for new ones. */
    const history = (worldId: number, options: { follow: boolean; lines: number }) => {
      const line = (e: EventRow) => ({
        service: HISTORY_LOG,
        line: `${new Date(e.at).toISOString()} ${e.service === null ? "" : `${e.service} `}${e.kind}: ${e.message}`
      })
      return Stream.unwrap(
        Effect.gen(function* () {
          const past = [...(yield* registry.events(worldId, options.lines))].reverse()
          if (!options.follow) return Stream.fromIterable(past.map(line))
          let seen = past.at(-1)?.id ?? (yield* registry.events(worldId, 1))[0]?.id ?? 0
          // suspended: each poll asks for what came after the last line it printed, not after the first
          const next = Effect.map(
            Effect.suspend(() => registry.events(worldId, 1000, seen)),
            (rows) => {
              const fresh = [...rows].reverse()
              seen = fresh.at(-1)?.id ?? seen
              return fresh.map(line)
            }
          )
          const polled = Stream.repeatEffectWithSchedule(next, Schedule.spaced("1 second")).pipe(
            Stream.flattenIterables
          )
          return Stream.concat(Stream.fromIterable(past.map(line)), polled)
        })
      )
    }

    const logs = (ref: WorldRef, options: { service?: string | undefined; follow: boolean; lines: number }) =>
      Stream.unwrap(
        Effect.gen(function* () {
          const w = yield* resolve(ref, false)
          // slices have logs too: their migrate and seed output, and berth's notes about them; so has the project's
          // setup, once it ran
          // and so has a slice whose migrate failed, which took the slice (and its row) with it: any log of the world
          const all = [
            ...new Set([
              ...(yield* registry.slices(w.id)).map((s) => s.service),
              ...(yield* registry.services(w.id)).map((s) => s.name),
              ...(yield* logNames(dirname(home.serviceLog(w.id, SETUP_LOG))))
            ])
          ]
          // `-s berth`: the world's history (berth's own events, agents' tool calls), unless a service has that name
          const hasHistory = !all.includes(HISTORY_LOG)
          if (options.service === HISTORY_LOG && hasHistory) return history(w.id, options)
          const names = all.filter((n) => options.service === undefined || n === options.service)
          if (options.service !== undefined && names.length === 0) {
            // every name `-s` reads (the error says each as what it is)
            return yield* new UnknownLog({ world: w.name, name: options.service, known: all, history: hasHistory })
          }
          const streams = names.map((service) => {
            const file = home.serviceLog(w.id, service)
            const past = Stream.fromIterableEffect(
              LogFiles.tail(file, options.lines).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
            )
            const future = options.follow
              ? Stream.unwrap(
                  Effect.map(LogFiles.size(file).pipe(Effect.orElseSucceed(() => 0)), (offset) =>
                    LogFiles.follow(file, offset).pipe(Stream.orElse(() => Stream.empty))
                  )
                )
              : Stream.empty
            return Stream.concat(past, future).pipe(Stream.map((line) => ({ service, line })))
          })
          return Stream.mergeAll(streams, { concurrency: "unbounded" })
        })
      )

    const processes = yield* Processes
    const noneRecorded = { handles: new Map(), died: new Set() }

    /** What any actor could not write when it happened (a full disk), written now that it may fit. */
    const flush = Effect.fn("Worlds.flush")(function* () {
      // asked on every look of the reconciler: only the worlds with something left to write cost an effect
      for (const actor of [...actors.values()].filter((a) => a.unwrittenLeft())) {
        yield* Effect.catchAllCause(actor.flush, (cause) =>
          Effect.logWarning(`world ${actor.worldId}: writing its state`, cause)
        )
      }
    })

    /**
     * One pass of reconciliation over every world: the decision is `decide` in `domain/world-state.ts`; acting on it is
     * a command to the world's actor, so it is serialised with whatever the user asks of that world.
     */
    const reconcile = Effect.fn("Worlds.reconcile")(function* () {
      // what an actor could not write when it happened is written first
      yield* flush()
      const listed = yield* registry.getSetting(ANYWHERE_SETTING)
      for (const w of yield* registry.worlds()) {
        const pathExists = w.path !== "" && existsSync(w.path)
        const hasActor = actors.has(w.id)
        // scanning /proc is the costly fact: only a world no actor looks after needs it
        const { handles, died } =
          hasActor && pathExists
            ? noneRecorded
            : yield* recordedProcesses(w.id).pipe(
                Effect.provideService(Registry, registry),
                Effect.provideService(Processes, processes)
              )
        // the same decision the world's actor makes first when it starts (domain/world-state.ts)
        const action = decide({
          desired: w.desired,
          observed: w.observed,
          isMain: w.isMain,
          pathExists,
          worktreeReady: w.worktreeReady,
          hasActor,
          liveProcesses: handles.size,
          recorded: handles.size > 0 || died.size > 0,
          wakesOnRequest: w.wakesOnRequest,
          runsAnywhere: runsAnywhere(listed, home.root, w)
        })
        if (action === "none") continue
        if (action !== "teardown") {
          // an actor's first act is to settle its world — adopt what runs, stop strays, finish a removal — before
          // any command: starting one is all these need
          yield* actorFor(w.id)
          continue
        }
        const command = new Protocol.Vanished()
        // adoption can take a while (health checks): the pass does not wait for it
        yield* Effect.forkDaemon(
          send(w.id, command).pipe(
            Effect.catchAll((e) => Effect.logWarning(`reconcile ${action} of world ${w.name}: ${e.message}`))
          )
        )
      }
    })

    const rebuildGolden = Effect.fn("Worlds.rebuildGolden")(function* (
      ref: WorldRef,
      service: string,
      env: Readonly<Record<string, string>>
    ) {
      const w = yield* resolve(ref, false)
      yield* send(w.id, new Protocol.RebuildGolden({ service, env }))
      return yield* statusOf(w.id)
    })

    const gc = (dryRun: boolean, env: Readonly<Record<string, string>> = {}, automatic = false, goldens = false) =>
      slices.gc(dryRun, env, automatic, goldens)

    /** What berth calls the project `cwd` is in (registering it), and the other repositories of the same name. */
    const projectInfo = Effect.fn("Worlds.projectInfo")(function* (cwd: string) {
      const { row } = yield* project(cwd)
      const others = (yield* registry.projectsNamed(row.name)).filter((p) => p.id !== row.id).map((p) => p.mainRoot)
      return { name: row.name, label: row.label, others }
    })

    /** Memory is short: the world's processes stop, everything else stays, and it queues to come back. */
    const suspend = (worldId: number, reason: string, requeue = true) =>
      send(worldId, new Protocol.Suspend({ reason, requeue }))

    /** A request reached a suspended world: queue its resume now (no-op when it is not suspended). */
    const wake = (worldId: number) => send(worldId, new Protocol.Wake())

    // a request through the proxy to a suspended world queues its resume (never more than one wake in flight)
    const waking = new Set<number>()
    const runtime = yield* Effect.runtime<never>()
    yield* router.onWake((worldId) => {
      if (waking.has(worldId)) return
      waking.add(worldId)
      Runtime.runFork(runtime)(
        wake(worldId).pipe(Effect.ignore, Effect.ensuring(Effect.sync(() => waking.delete(worldId))))
      )
    })

    /** Slices back to their golden (or a fresh migrate + seed), the world's processes stopped and started around it. */
    const reset = Effect.fn("Worlds.reset")(function* (
      ref: WorldRef,
      slices: ReadonlyArray<string>,
      env: Readonly<Record<string, string>>
    ) {
      const w = yield* resolve(ref, false)
      yield* send(w.id, new Protocol.Reset({ slices, env }))
      yield* Effect.flatMap(actorFor(w.id), (actor) => actor.started)
      return yield* statusOf(w.id)
    })

    /** Stops services of a running world, and everything that depends on them. */
    const stopServices = Effect.fn("Worlds.stopServices")(function* (ref: WorldRef, services: ReadonlyArray<string>) {
      const w = yield* resolve(ref, false)
      yield* send(w.id, new Protocol.StopServices({ services }))
      return yield* statusOf(w.id)
    })

    /**
     * Restarts services of a running world (those named, and those of the groups named), and everything that depends
     * on them; answers once they are ready.
     */
    const restartServices = Effect.fn("Worlds.restartServices")(function* (
      ref: WorldRef,
      services: ReadonlyArray<string>,
      groups: ReadonlyArray<string> = []
    ) {
      const w = yield* resolve(ref, false)
      yield* send(w.id, new Protocol.RestartServices({ services, groups }))
      return yield* statusOf(w.id)
    })

    /** A note in a world's history (an agent's tool call, say); the world must exist, nothing is created. */
    const recordEvent = Effect.fn("Worlds.recordEvent")(function* (ref: WorldRef, kind: string, message: string) {
      const w = yield* resolve(ref, false)
      yield* registry.addEvent({ worldId: w.id, service: null, kind, message })
    })

    /** The id of this machine's world `slug` of the project labelled `project`: how a cluster's entity id finds it. */
    const idOf = (project: string, slug: string) =>
      Effect.map(registry.worlds(), (rows) => rows.find((w) => w.projectName === project && w.slug === slug)?.id)

    /** How this machine's world `slug` of the project labelled `project` is named in a request: by its name, in its repository. */
    const refOf = (project: string, slug: string) =>
      Effect.map(registry.worlds(), (rows): WorldRef | undefined => {
        const w = rows.find((row) => row.projectName === project && row.slug === slug)
        return w === undefined ? undefined : { cwd: w.mainRoot, world: w.name }
      })

    /** Every move of every world's observed state from now on (process-compose's state stream, for embedders). */
    const changes: Stream.Stream<WorldChange> = Stream.fromPubSub(moves)

    const service: WorldsService = {
      up,
      waitReady,
      changes,
      /**
       * One of the actor protocol's requests, to the world of this id as it is (no selection resolved, no waiting):
       * what the `World` entity (`WorldEntity.ts`) hands on
       */
      tell: send,
      idOf,
      refOf,
      recordEvent,
      reset,
      stopServices,
      restartServices,
      down,
      reload,
      remove,
      status,
      views,
      env,
      logs,
      reconcile,
      flush,
      /** how many world actors this engine has started: one per world, however many ask at once */
      actorsStarted: Effect.sync(() => started),
      rebuildGolden,
      gc,
      suspend,
      wake,
      projectInfo
    }
    return service
  })
}) {}
