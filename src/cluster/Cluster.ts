/**
 * This daemon's membership of a cluster of berth daemons (`berth cluster init|join|leave|status`).
 *
 * A member keeps one session with the cluster's PostgreSQL: it holds its machine's row (its slot, the address peers
 * dial), runs this machine as an `@effect/cluster` runner with the `World` entity registered (so a command for one of
 * its worlds can come from any machine), and every second writes its heartbeat and whatever changed of its worlds, and
 * reads every other machine's. A session that fails (the database went away, the address cannot be bound) is logged
 * and started again with a growing delay; nothing of the machine's own worlds depends on it — they keep running, and
 * a daemon that is not a member works exactly as on one machine.
 */
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import { networkInterfaces, hostname } from "node:os"
import type * as Sharding from "@effect/cluster/Sharding"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import type * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { Down, Remove, type WorldCommand, type WorldError } from "../actors/protocol.js"
import type { AlreadyProcessingMessage, MailboxFull, PersistenceError } from "@effect/cluster/ClusterError"
import { WorldEntity, WorldEntityLive } from "../actors/WorldEntity.js"
import { Worlds } from "../actors/Worlds.js"
import type { WorldStatus } from "../daemon/api.js"
import {
  ANYWHERE_SETTING,
  addressProblem,
  type AnywhereDesired,
  anywhereEntityId,
  currentCopies,
  moveWaiting,
  ownedPlacements,
  anywhereIds,
  clusterOwner,
  clusterUrlProblem,
  DEFAULT_RUNNER_PORT,
  machineNameProblem,
  machineState,
  remoteTargets,
  remoteWorldId,
  clusterProxyPort,
  timings,
  worldEntityId
} from "../domain/cluster.js"
import {
  ClusterRefused,
  ClusterUnavailable,
  InternalError,
  InvalidRequest,
  InvalidWorldName,
  MachineUnreachable
} from "../domain/errors.js"
import { fencedMessage, fencedReason, newlyFenced, parseFenced } from "../domain/fence.js"
import { hidePassword } from "../domain/redact.js"
import { isAtRest } from "../domain/world-state.js"
import { slugify } from "../domain/names.js"
import { Git } from "../services/Git.js"
import { Home } from "../services/Home.js"
import { Fence } from "../services/Fence.js"
import { canBindOn } from "../services/Ports.js"
import { SliceLedger } from "../services/slices/SliceLedger.js"
import { Admission } from "../services/Admission.js"
import { gateClosed } from "../domain/admission.js"
import { Registry } from "../services/Registry.js"
import { Router } from "../services/proxy/Router.js"
import { version } from "../version.js"
import { Anywhere, anywhereLayer, anywherePlacer, markAnywhere, settle } from "./anywhere.js"
import { WorldQuery, WorldQueryLive } from "./queries.js"
import { runnerLayer } from "./runner.js"
import { type Hold, installRule, keepLease } from "./fence.js"
import { sharedSlicesOf, sliceOrphansOf } from "./slices.js"
import { type AnywhereRow, type Machine, makeStore, SCHEMA_VERSION, type SharedWorld, type Store } from "./store.js"

const SETTINGS_KEY = "cluster"

/** What a member remembers in its state database (owner-only: the address may carry a password). */
const Settings = Schema.Struct({
  url: Schema.String,
  name: Schema.String,
  address: Schema.String,
  runnerPort: Schema.Number,
  /** tells this machine's row from another machine's of the same name */
  machineId: Schema.String
})
type Settings = typeof Settings.Type

export type MemberState = "solo" | "connecting" | "member" | "retrying" | "refused"

export interface ClusterView {
  readonly state: MemberState
  /** the database's address, password hidden */
  readonly url: string | undefined
  readonly name: string | undefined
  readonly address: string | undefined
  readonly runnerPort: number | undefined
  readonly slot: number | undefined
  /** why the last session ended, while it is being tried again */
  readonly error: string | undefined
  readonly machines: ReadonlyArray<Machine>
  /** every other machine's worlds, as they last published them */
  readonly worlds: ReadonlyArray<SharedWorld>
  /** how many worlds this machine last published */
  readonly own: number
  /** the worlds wanted anywhere, as the shared table said at the last round */
  readonly anywhere: ReadonlyArray<AnywhereRow>
}

export interface JoinRequest {
  readonly url: string
  readonly name?: string | undefined
  readonly address?: string | undefined
  readonly runnerPort?: number | undefined
  /** make berth's tables in the database first (`cluster init`) */
  readonly init: boolean
  /** take over the name of a machine that is gone */
  readonly replace: boolean
}

/** A world of another machine, found by name: where to send its commands. */
export interface RemoteWorld {
  readonly machine: Machine
  readonly status: WorldStatus
}

const solo: ClusterView = {
  state: "solo",
  url: undefined,
  name: undefined,
  address: undefined,
  runnerPort: undefined,
  slot: undefined,
  error: undefined,
  machines: [],
  worlds: [],
  own: 0,
  anywhere: []
}

/** How long a command for a world of another machine may wait for that machine before berth says it is unreachable. */
const REMOTE_TIMEOUT = Duration.seconds(10)
/** How long `cluster join` waits for this machine's runner to take its place. */
const JOIN_TIMEOUT = Duration.seconds(20)
/** A member publishes all of its worlds at least this often, even when none changed state (ports, restarts, pids). */
const FULL_PUBLISH_MS = 5_000

/** What went wrong, in words: an SqlError's own message is only "Failed to execute statement"; its cause says why. */
const message = (e: unknown): string => {
  const text = (x: unknown): string | undefined =>
    typeof x === "object" && x !== null && "message" in x && typeof x.message === "string" ? x.message : undefined
  const cause = typeof e === "object" && e !== null && "cause" in e ? text(e.cause) : undefined
  const own = text(e) ?? String(e)
  return cause === undefined || cause === own ? own : `${own}: ${cause}`
}

/** The first address of this machine that another machine could dial (IPv4, not loopback). */
export const guessAddress = (): string | undefined => {
  for (const entries of Object.values(networkInterfaces())) {
    for (const entry of entries ?? []) {
      if (entry.family === "IPv4" && !entry.internal) return entry.address
    }
  }
  return undefined
}

const pgLayer = (url: string) =>
  PgClient.layer({
    url: Redacted.make(url),
    applicationName: "berth",
    maxConnections: 8,
    connectTimeout: Duration.seconds(5)
  })

type TransportError = MailboxFull | AlreadyProcessingMessage | PersistenceError

/** The engine's own failures of a request: each means the machine never took it. */
const isTransportError = (e: unknown): e is TransportError =>
  typeof e === "object" &&
  e !== null &&
  "_tag" in e &&
  (e._tag === "MailboxFull" || e._tag === "AlreadyProcessingMessage" || e._tag === "PersistenceError")

/** What berth publishes of a world: its status without the log lines (they are the owner's, and may carry secrets). */
const publishable =
  (anywhere: ReadonlySet<string>) =>
  (status: WorldStatus): WorldStatus => ({
    ...status,
    services: status.services.map((s) => ({ ...s, logTail: [] })),
    ...(anywhere.has(`${status.project}/${status.slug}`)
      ? { placement: "anywhere" as const, reason: status.reason ?? fencedReason(status, isAtRest(status.state)) }
      : {})
  })

export class Cluster extends Effect.Service<Cluster>()("berth/Cluster", {
  scoped: Effect.gen(function* () {
    const registry = yield* Registry
    const worlds = yield* Worlds
    const router = yield* Router
    const git = yield* Git
    const home = yield* Home
    const daemonScope = yield* Effect.scope

    let view: ClusterView = solo
    /** the running session's sharding, for commands to other machines' worlds */
    let sharding: Context.Context<Sharding.Sharding> | undefined
    /** the running session's store, for what users ask of worlds that run anywhere */
    let shared: { readonly store: Store; readonly machine: string } | undefined
    /** set when the daemon stops: worlds that run anywhere are stopped here and start nowhere here any more */
    let draining = false
    let member: { readonly fiber: Fiber.RuntimeFiber<void>; readonly settings: Settings } | undefined
    /** the fence (fence.ts): this machine's hold on what it runs, and the rule that keeps a stale one from starting */
    const hold: Hold = { refreshedAt: undefined, beatAt: undefined }
    const fence = yield* Fence
    const ledger = yield* SliceLedger
    yield* installRule(hold, {
      member: () => view.state !== "solo",
      owns: (project, slug) =>
        view.anywhere.some((r) => r.project === project && r.slug === slug && r.owner === view.name)
    }).pipe(Effect.provideService(Fence, fence), Effect.provideService(Registry, registry))
    const admission = yield* Admission
    /** this machine's room for one more world, as the placer reads it (cluster-wide admission) */
    const room = Effect.gen(function* () {
      const [queue, running, readings, settings, recovering] = yield* Effect.all([
        admission.queue,
        admission.running,
        admission.readings,
        admission.settings,
        admission.recovering
      ])
      const admits =
        !draining && queue.length === 0 && gateClosed(running, readings, settings, recovering) === undefined
      const marked = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING).pipe(Effect.orElseSucceed(() => [])))
      const anywhere = marked.filter((id) => admission.holds(id) || admission.entry(id) !== undefined).length
      return { admits, running, waiting: queue.length, anywhere, draining }
    })

    const unavailable = (url: string) => (e: unknown) =>
      new ClusterUnavailable({ url: hidePassword(url), reason: message(e) })

    /** A short connection to the database, for what join and leave do before and after a session. */
    const withStore = <A, E>(url: string, use: (store: Store) => Effect.Effect<A, E>) =>
      Effect.scoped(
        Effect.gen(function* () {
          const context = yield* Layer.build(pgLayer(url)).pipe(Effect.mapError(unavailable(url)))
          const store = yield* makeStore.pipe(Effect.provide(context))
          return yield* use(store)
        })
      )

    /**
     * One session: the machine's row, the runner, then the heartbeat and publishing loop until something fails.
     * `ready` is completed once the runner has its place (or the session failed before that).
     */
    const session = (settings: Settings, ready: Deferred.Deferred<void, ClusterUnavailable | ClusterRefused>) =>
      Effect.scoped(
        Effect.gen(function* () {
          const sql = yield* Layer.build(pgLayer(settings.url))
          const store = yield* makeStore.pipe(Effect.provide(sql))
          const slot = yield* store.claim({
            name: settings.name,
            machineId: settings.machineId,
            address: settings.address,
            runnerPort: settings.runnerPort,
            proxyPort: null,
            version,
            replace: false
          })
          yield* store.createAnywhere
          // the slices of worlds that run anywhere are the cluster's while this session lasts (cluster/slices.ts)
          const clusterMark = clusterOwner(yield* store.clusterId)
          yield* Effect.acquireRelease(
            ledger.install(
              sharedSlicesOf(store, settings.name, clusterMark, (project, slug) =>
                Effect.gen(function* () {
                  const row = view.anywhere.find((r) => r.project === project && r.slug === slug)
                  if (row !== undefined) return row
                  // ran here anywhere, and removed meanwhile: still the cluster's slices, never this machine's own.
                  // One settings read for a pinned world (no mark at all is the rule), the world list only if marked
                  const marked = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))
                  if (marked.length === 0) return undefined
                  const id = yield* worlds.idOf(project, slug)
                  return id !== undefined && marked.includes(id) ? ("gone" as const) : undefined
                }).pipe(Effect.orElseSucceed(() => undefined))
              ),
              sliceOrphansOf(store, clusterMark)
            ),
            () => ledger.install(() => Effect.succeedNone)
          )
          // before the runner: its scope closes after the runner's, once the engine has stopped this session's worlds.
          // The hold outlives a session: a session that starts again right away has lost nothing of it
          yield* keepLease(hold).pipe(Effect.provideService(Home, home), Effect.provideService(Registry, registry))
          const anywhereHost = {
            store,
            machine: settings.name,
            draining: () => draining,
            saw: (row: AnywhereRow) => {
              const others = view.anywhere.filter((r) => r.project !== row.project || r.slug !== row.slug)
              view = { ...view, anywhere: [...others, row] }
            }
          }
          const runner = yield* Layer.build(
            Layer.mergeAll(WorldEntityLive, WorldQueryLive, anywhereLayer(anywhereHost), anywherePlacer(store)).pipe(
              Layer.provideMerge(runnerLayer({ address: settings.address, port: settings.runnerPort, slot }, hold)),
              Layer.provide(Layer.succeedContext(sql)),
              Layer.provide(
                Layer.mergeAll(Layer.succeed(Worlds, worlds), Layer.succeed(Git, git), Layer.succeed(Home, home))
              )
            )
          )
          sharding = runner
          shared = { store, machine: settings.name }
          yield* Effect.addFinalizer(() =>
            Effect.sync(() => {
              sharding = undefined
              shared = undefined
            })
          )
          view = { ...view, state: "member", slot, error: undefined }
          yield* Effect.logInfo(`berth cluster: this machine is ${settings.name} (slot ${slot}) at ${settings.address}`)

          // the proxy's door for peers: on the cluster address only, open to the cluster's machines only
          let listening: number | null = null
          let listenError: string | undefined
          let peersText = ""
          let routesText = ""
          const listen = (peers: ReadonlyArray<string>) =>
            router
              .setClusterListener({ host: settings.address, port: clusterProxyPort(settings.runnerPort), peers })
              .pipe(
                Effect.tap((info) =>
                  Effect.sync(() => {
                    listening = info?.port ?? null
                    listenError = undefined
                    peersText = JSON.stringify(peers)
                  })
                ),
                // tried again each round; said once
                Effect.catchAll((e) =>
                  Effect.gen(function* () {
                    listening = null
                    if (listenError === e.message) return
                    listenError = e.message
                    yield* Effect.logWarning(`berth cluster: other machines cannot reach this one's URLs: ${e.message}`)
                  })
                )
              )
          yield* listen([])
          yield* Effect.addFinalizer(() =>
            Effect.zipRight(router.setRemoteTargets([]), router.setClusterListener(undefined)).pipe(Effect.ignore)
          )

          // publishing: at once after a world moves, and in full every few seconds
          let dirty = true
          let lastFull = 0
          const published = new Map<string, string>()
          yield* Stream.runForEach(worlds.changes, () => Effect.sync(() => (dirty = true))).pipe(Effect.forkScoped)
          const tick = Effect.gen(function* () {
            const startedAt = Date.now()
            const alive = yield* store.heartbeat(settings.name, settings.machineId, listening, yield* room)
            if (!alive) {
              return yield* new ClusterRefused({
                reason: `another machine took over the name ${settings.name} in the cluster`,
                hint: "run `berth cluster join` again with another --name"
              })
            }
            // what is wanted anywhere first: what is published next says which of this machine's worlds those are
            const anywhere = yield* store.anywhere()
            view = { ...view, anywhere }
            // the hold renews only now that what this machine owns is known afresh (the fence's rule reads it)
            hold.beatAt = startedAt
            yield* countFenced
            yield* tidy(anywhere, settings.name, store)
            const now = Date.now()
            if (dirty || now - lastFull >= FULL_PUBLISH_MS) {
              dirty = false
              lastFull = now
              const anywhereKeys = new Set(view.anywhere.map((r) => `${r.project}/${r.slug}`))
              const statuses = (yield* worlds.status(undefined)).worlds.map(publishable(anywhereKeys))
              const changed = statuses.filter((s) => published.get(`${s.project}/${s.slug}`) !== JSON.stringify(s))
              yield* store.publish(settings.name, changed, statuses)
              published.clear()
              for (const s of statuses) published.set(`${s.project}/${s.slug}`, JSON.stringify(s))
              view = { ...view, own: statuses.length }
            }
            const [machines, others] = yield* Effect.all([store.machines, store.worlds(settings.name)])
            view = { ...view, machines, worlds: others }
            // who may knock (every other machine, as its connections come from) and where its worlds are
            const peers = machines.filter((m) => m.name !== settings.name).map((m) => m.address)
            if (JSON.stringify(peers) !== peersText || listening === null) yield* listen(peers)
            // a world that runs anywhere is routed to its owner only (a machine given up and back has a stale copy)
            const routes = remoteTargets(currentCopies(others, anywhere), machines)
            const text = JSON.stringify(routes)
            if (text !== routesText) {
              routesText = text
              yield* router.setRemoteTargets(routes).pipe(Effect.ignore)
            }
          })
          // the first round is done before a join returns, so its answer lists the machines
          yield* tick
          yield* Deferred.succeed(ready, undefined)
          yield* tick.pipe(Effect.repeat(Schedule.spaced(Duration.millis(timings.publishMs))))
        })
      )

    /** when the last fenced record this daemon counted was made (`domain/fence.ts`) */
    let fencedSince = 0

    /**
     * The copies the watchdog fenced while this daemon was frozen or cut off are stopped, whatever their actors saw
     * (a service killed from outside may be listed failed, or wait to restart; a start the fence cut short leaves the
     * world failed, still wanted up): each is taken down here, with an event
     * that says why, so that the world's entity starts it again once this machine holds it again, or the cluster runs
     * it elsewhere. A copy left listed as running would never be started again.
     */
    const countFenced = Effect.gen(function* () {
      const text = yield* Effect.sync(() => {
        try {
          return readFileSync(home.fencedFile, "utf8")
        } catch {
          return ""
        }
      })
      const record = parseFenced(text)
      const ids = newlyFenced(record, process.pid, fencedSince)
      if (record === undefined || ids.length === 0) return
      fencedSince = record.at
      for (const id of ids) {
        const w = yield* registry.world(id)
        // a copy already stopped and wanted down is counted; one that failed (its start was fenced) is wanted up
        // still, and would be left failed for good
        if (w === undefined || (w.desired !== "up" && isAtRest(w.observed))) continue
        yield* registry.addEvent({ worldId: id, service: null, kind: "fenced", message: fencedMessage(record.at) })
        yield* worlds.tell(id, new Down()).pipe(Effect.ignore)
        yield* Effect.logWarning(
          `berth cluster: world ${w.name} was fenced here while this daemon was frozen or cut off: it is stopped, and starts again once the cluster gives it back`
        )
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: counting fenced copies", cause)))

    /**
     * This machine's copies of worlds that run anywhere which it no longer runs and nobody wants here: the world was
     * removed, or another machine took it over while this daemon was away (its copy was stopped, never adopted). They
     * go, worktree and all, unless it holds changes of its own (then they stay, stopped). berth's clone of the project
     * stays: the next world of it starts from there.
     */
    const tidy = (anywhere: ReadonlyArray<AnywhereRow>, machine: string, store: Store) =>
      Effect.gen(function* () {
        const ids = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))
        if (ids.length === 0) return
        // only what went is unmarked, never the list as read: an entity may mark a world while this runs
        const gone: Array<number> = []
        for (const id of ids) {
          const w = yield* registry.world(id)
          if (w === undefined) {
            gone.push(id)
            continue
          }
          const row = anywhere.find((r) => r.project === w.projectName && r.slug === w.slug)
          const waiting = w.observed === "queued" ? admission.entry(id) : undefined
          if (row?.owner === machine && waiting !== undefined) {
            if (moveWaiting(Date.now() - waiting.since, view.machines, machine)) {
              // another machine would start it now: it leaves this machine's line, and the placer gives it that one
              yield* worlds.tell(id, new Down()).pipe(Effect.ignore)
              yield* store.letGo(row.project, row.slug, machine, `it waited in line on ${machine}`)
              yield* Effect.logInfo(`berth cluster: world ${w.name} waited here; another machine has room for it`)
            }
            continue
          }
          const stale = row === undefined || row.desired === "removed" || (row.owner !== null && row.owner !== machine)
          if (stale && row !== undefined && row.owner !== machine && !isAtRest(w.observed)) {
            // given to another machine while this one was frozen or cut off: this copy must not run beside that one
            yield* worlds.tell(id, new Down()).pipe(Effect.ignore)
          }
          if (!stale || !isAtRest(w.observed)) continue
          const removed = yield* worlds.tell(id, new Remove({ force: false })).pipe(Effect.either)
          if (removed._tag === "Right" || removed.left._tag === "WorldNotFound") gone.push(id)
        }
        if (gone.length > 0) yield* markAnywhere(registry, gone, false)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: tidying worlds that moved", cause)))

    /** Runs sessions until the membership ends: a failed one is logged and tried again, later and later. */
    const membership = (settings: Settings, ready: Deferred.Deferred<void, ClusterUnavailable | ClusterRefused>) =>
      session(settings, ready).pipe(
        Effect.mapError((e) =>
          e instanceof ClusterRefused || e instanceof ClusterUnavailable ? e : unavailable(settings.url)(e)
        ),
        Effect.tapErrorCause((cause) =>
          Effect.gen(function* () {
            const failure = Cause.failureOption(cause)
            const refused = Option.isSome(failure) && failure.value instanceof ClusterRefused
            const reason = Option.match(failure, { onNone: () => Cause.pretty(cause), onSome: message })
            view = { ...view, state: refused ? "refused" : "retrying", error: reason }
            yield* Deferred.failCause(ready, cause)
            yield* Effect.logWarning(`berth cluster: the session with the cluster ended: ${reason}`)
          })
        ),
        Effect.retry({
          while: (e) => !(e instanceof ClusterRefused),
          schedule: Schedule.exponential(Duration.millis(500)).pipe(Schedule.union(Schedule.spaced("10 seconds")))
        }),
        Effect.ignore
      )

    const start = (settings: Settings) =>
      Effect.gen(function* () {
        const ready = yield* Deferred.make<void, ClusterUnavailable | ClusterRefused>()
        view = {
          ...solo,
          state: "connecting",
          url: hidePassword(settings.url),
          name: settings.name,
          address: settings.address,
          runnerPort: settings.runnerPort
        }
        const fiber = yield* membership(settings, ready).pipe(Effect.forkIn(daemonScope))
        member = { fiber, settings }
        return ready
      })

    const stop = Effect.gen(function* () {
      if (member === undefined) return
      yield* Fiber.interrupt(member.fiber)
      member = undefined
      view = solo
    })

    // a member stays one across daemon restarts
    const stored = Schema.decodeUnknownOption(Settings)(yield* registry.getSetting(SETTINGS_KEY))
    if (Option.isSome(stored)) yield* start(stored.value)

    const join = (request: JoinRequest) =>
      Effect.gen(function* () {
        const problem = clusterUrlProblem(request.url)
        if (problem !== undefined)
          return yield* new ClusterRefused({ reason: problem, hint: "see `berth cluster --help`" })
        const name = request.name ?? hostname().toLowerCase()
        const nameProblem = machineNameProblem(name)
        if (nameProblem !== undefined) {
          return yield* new ClusterRefused({ reason: `${JSON.stringify(name)}: ${nameProblem}`, hint: "pass --name" })
        }
        const address = request.address ?? guessAddress()
        if (address === undefined) {
          return yield* new ClusterRefused({
            reason: "this machine has no network address another machine could reach",
            hint: "pass --address with the address of this machine on the network its peers share"
          })
        }
        const addressTrouble = addressProblem(address)
        if (addressTrouble !== undefined)
          return yield* new ClusterRefused({ reason: addressTrouble, hint: "pass --address" })
        const runnerPort = request.runnerPort ?? DEFAULT_RUNNER_PORT
        // the runner listens on its port and the cluster's URLs on the next: a port another program holds would fail
        // only once the session starts, told as the database being unusable
        if (member === undefined) {
          for (const [port, what] of [
            [runnerPort, "the runner port"],
            [clusterProxyPort(runnerPort), "the port after the runner port (the cluster's URLs)"]
          ] as const) {
            if (!(yield* canBindOn(port, address))) {
              return yield* new ClusterRefused({
                reason: `port ${port} on ${address}, ${what}, is taken by another program`,
                hint: `pass --runner-port with a port whose next port is free too (the default is ${DEFAULT_RUNNER_PORT}), or stop what holds ${port}`
              })
            }
          }
        }
        if (member !== undefined) {
          if (member.settings.url === request.url && member.settings.name === name) return view
          return yield* new ClusterRefused({
            reason: `this machine is already in the cluster at ${hidePassword(member.settings.url)} as ${member.settings.name}`,
            hint: "run `berth cluster leave` first"
          })
        }
        const previous = Schema.decodeUnknownOption(Settings)(yield* registry.getSetting(SETTINGS_KEY))
        const settings: Settings = {
          url: request.url,
          name,
          address,
          runnerPort,
          machineId: Option.match(previous, { onNone: () => randomUUID(), onSome: (p) => p.machineId })
        }
        yield* withStore(request.url, (store) =>
          Effect.gen(function* () {
            if (request.init) yield* store.migrate
            const schema = yield* store.schemaVersion
            if (schema === undefined) {
              return yield* new ClusterRefused({
                reason: `the database ${hidePassword(request.url)} holds no berth cluster`,
                hint: `make one there with \`berth cluster init ${hidePassword(request.url)}\``
              })
            }
            if (schema > SCHEMA_VERSION) {
              return yield* new ClusterRefused({
                reason: `the cluster was made by a newer berth (its tables are at version ${schema}, this berth knows ${SCHEMA_VERSION})`,
                hint: "update berth on this machine"
              })
            }
            yield* store.claim({
              ...settings,
              proxyPort: null,
              version,
              replace: request.replace
            })
          }).pipe(Effect.mapError((e) => (e._tag === "SqlError" ? unavailable(request.url)(e) : e)))
        )
        yield* registry.setSetting(SETTINGS_KEY, settings)
        const ready = yield* start(settings)
        const joined = yield* Deferred.await(ready).pipe(
          Effect.timeoutFail({
            duration: JOIN_TIMEOUT,
            onTimeout: () => unavailable(request.url)(`this machine's runner did not take its place within 20 s`)
          }),
          Effect.exit
        )
        if (Exit.isFailure(joined)) {
          // a machine that cannot take its place is not left half a member
          yield* stop
          yield* registry.setSetting(SETTINGS_KEY, null)
          yield* withStore(request.url, (store) => store.remove(settings.name, settings.machineId)).pipe(Effect.ignore)
          return yield* Effect.failCause(joined.cause)
        }
        return view
      })

    /** Leaves: the runner hands over and unregisters, the machine's rows go; its worlds keep running here. */
    const leave = Effect.gen(function* () {
      if (member === undefined) {
        return yield* new ClusterRefused({
          reason: "this machine is not in a cluster",
          hint: "`berth cluster join <postgres url>` makes it one"
        })
      }
      const { settings } = member
      yield* stop
      yield* registry.setSetting(SETTINGS_KEY, null)
      yield* withStore(settings.url, (store) => store.remove(settings.name, settings.machineId)).pipe(
        Effect.mapError((e) => (e._tag === "SqlError" ? unavailable(settings.url)(e) : e))
      )
    })

    /** The world of another machine that a watcher knows by this id (`remoteWorldId`). */
    const remoteById = (id: number): RemoteWorld | undefined => {
      const found = view.worlds.find((w) => remoteWorldId(w.machine, w.status.project, w.status.slug) === id)
      const machine = found === undefined ? undefined : view.machines.find((m) => m.name === found.machine)
      return found === undefined || machine === undefined ? undefined : { machine, status: found.status }
    }

    /** The world of another machine that `name` names in project `project` (by name or by slug). */
    const remoteWorld = (project: ReadonlyArray<string>, name: string): RemoteWorld | undefined => {
      const found = view.worlds.find(
        (w) => project.includes(w.status.project) && (w.status.name === name || w.status.slug === name)
      )
      if (found === undefined) return undefined
      const machine = view.machines.find((m) => m.name === found.machine)
      return machine === undefined ? undefined : { machine, status: found.status }
    }

    /** The runner's sharding, when `remote`'s machine can be reached through it; else why not. */
    const reach = (remote: RemoteWorld) => {
      const unreachable = new MachineUnreachable({
        world: remote.status.name,
        machine: remote.machine.name,
        lastSeenSeconds: Math.round(remote.machine.heartbeatAgeMs / 1000)
      })
      const context = sharding
      return context === undefined || machineState(remote.machine.heartbeatAgeMs) === "unreachable"
        ? Effect.fail(unreachable)
        : Effect.succeed({
            context,
            unreachable,
            id: worldEntityId(remote.machine.slot, remote.status.project, remote.status.slug)
          })
    }

    /** What the cluster's client adds to a request's failures: all of them mean the machine did not take it. */
    const transport = <A, E, R>(
      effect: Effect.Effect<A, E | MailboxFull | AlreadyProcessingMessage | PersistenceError, R>,
      unreachable: MachineUnreachable
    ): Effect.Effect<
      A,
      Exclude<E, MailboxFull | AlreadyProcessingMessage | PersistenceError> | MachineUnreachable,
      R
    > =>
      effect.pipe(
        Effect.timeoutFail({ duration: REMOTE_TIMEOUT, onTimeout: () => unreachable }),
        Effect.catchIf(isTransportError, () => Effect.fail(unreachable))
      ) as Effect.Effect<
        A,
        Exclude<E, MailboxFull | AlreadyProcessingMessage | PersistenceError> | MachineUnreachable,
        R
      >

    /** One of the actor protocol's requests, to a world of another machine, through the cluster's sharding. */
    const tell = (remote: RemoteWorld, command: WorldCommand) =>
      Effect.gen(function* () {
        const { context, id, unreachable } = yield* reach(remote)
        const client = yield* WorldEntity.client.pipe(Effect.provide(context))
        // every request of the protocol answers void with the world's failures; the client's methods are keyed by tag
        const send = client(id)[command._tag] as unknown as (
          request: WorldCommand
        ) => Effect.Effect<void, WorldError | MailboxFull | AlreadyProcessingMessage | PersistenceError>
        yield* transport(send(command), unreachable)
      })

    /** A world of another machine as that machine sees it now. */
    const statusOf = (remote: RemoteWorld) =>
      Effect.gen(function* () {
        const { context, id, unreachable } = yield* reach(remote)
        const client = yield* WorldQuery.client.pipe(Effect.provide(context))
        return yield* transport(client(id).Status(), unreachable)
      })

    /** The environment of a world of another machine, as that machine computes it. */
    const env = (remote: RemoteWorld) =>
      Effect.gen(function* () {
        const { context, id, unreachable } = yield* reach(remote)
        const client = yield* WorldQuery.client.pipe(Effect.provide(context))
        return yield* transport(client(id).Env(), unreachable)
      })

    /** The logs of a world of another machine, read (and followed) there. */
    const logs = (remote: RemoteWorld, options: { service?: string | undefined; follow: boolean; lines: number }) =>
      Stream.unwrap(
        Effect.gen(function* () {
          const { context, id, unreachable } = yield* reach(remote)
          const client = yield* WorldQuery.client.pipe(Effect.provide(context))
          return client(id)
            .Logs(options)
            .pipe(Stream.catchAll((e) => (isTransportError(e) ? Stream.fail(unreachable) : Stream.fail(e))))
        })
      )

    /** The session's store and sharding, or why a world cannot run anywhere now. */
    const sharedNow = Effect.suspend(() => {
      const context = sharding
      const s = shared
      if (context !== undefined && s !== undefined) return Effect.succeed({ ...s, context })
      return Effect.fail(
        new InvalidRequest({
          reason:
            member === undefined
              ? "a world runs anywhere only in a cluster, and this machine is not in one\n  hint: `berth cluster join <postgres url>` makes it a member (`berth cluster init` makes the cluster)"
              : `this machine is not connected to its cluster now${view.error === undefined ? "" : `: ${view.error}`}\n  hint: \`berth cluster status\` shows the connection; berth keeps trying`
        })
      )
    })

    /** The row of a world wanted anywhere that `name` names in the project `labels` (its label and declared name). */
    const anywhereOf = (labels: ReadonlyArray<string>, name: string): AnywhereRow | undefined =>
      view.anywhere.find((r) => labels.includes(r.project) && (r.name === name || r.slug === name))

    /** What a world wanted anywhere looks like when no machine runs it: wanted, waiting for a machine, or stopped. */
    const placeholder = (row: AnywhereRow, state: string, reason: string | null): WorldStatus => ({
      project: row.project,
      name: row.name,
      slug: row.slug,
      path: "",
      branch: row.branch,
      main: false,
      desired: row.desired === "up" ? "up" : "down",
      state,
      reason,
      services: [],
      events: [],
      placement: "anywhere"
    })

    /**
     * Settles the world's row now, as the placer would (placed on the machine with the most room if no live machine
     * holds it), and waits for its owner's entity to answer: the world as it runs there, or null.
     */
    const ensure = (row: AnywhereRow, asked: boolean) =>
      Effect.gen(function* () {
        const { context, store } = yield* sharedNow
        const client = yield* Anywhere.client.pipe(Effect.provide(context))
        const ask = (r: AnywhereRow, owner: Machine) =>
          client(anywhereEntityId(owner.slot, r.project, r.slug))
            .Ensure({ asked })
            .pipe(
              Effect.catchIf(isTransportError, (e) =>
                Effect.fail(new InternalError({ reason: `the cluster did not take the request: ${e._tag}` }))
              )
            )
        const internal = (e: { readonly message: string }) => new InternalError({ reason: e.message })
        // a few times: the placer may give the world a machine between this read and this placement, and a world
        // that waits in one machine's line moves to another with room (the answer there is the one wanted)
        for (let attempt = 0; attempt < 4; attempt++) {
          const rows = yield* store.anywhere().pipe(Effect.mapError(internal))
          const current = rows.find((r) => r.project === row.project && r.slug === row.slug)
          if (current === undefined) return null
          const machines = yield* store.machines.pipe(Effect.mapError(internal))
          const owned = ownedPlacements(rows)
          let askedOwner: string | undefined
          const answer = yield* settle(
            store,
            machines,
            current,
            (r, owner) => {
              askedOwner = owner.name
              return ask(r, owner)
            },
            owned
          ).pipe(
            Effect.catchTag("SqlError", (e) => Effect.fail(internal(e))),
            Effect.either
          )
          if (answer._tag === "Right" && answer.right !== undefined) return answer.right
          if (answer._tag === "Left") {
            const [now] = yield* store.anywhere(row).pipe(Effect.mapError(internal))
            const moved = now !== undefined && now.desired === "up" && now.owner !== askedOwner
            if (!moved) return yield* answer.left
            continue
          }
          if (current.desired !== "up") return null
        }
        const [now] = yield* store.anywhere(row).pipe(Effect.mapError(internal))
        return yield* new InvalidRequest({
          reason: `world ${row.name}: no machine of the cluster can run it now${now?.reason === null || now?.reason === undefined ? "" : ` (${now.reason})`}\n  hint: \`berth cluster status\` shows which machines are up; it starts as soon as one can take it`
        })
      })

    /**
     * `berth up --anywhere <branch>`: the branch must be on the repository's `origin`, where every machine clones it
     * from; the world is wanted up in the shared table and its entity, wherever it lives, starts it.
     */
    const upAnywhere = (request: {
      readonly cwd: string
      readonly world: string | undefined
      readonly selection: AnywhereRow["selection"]
      readonly env: Readonly<Record<string, string>>
      readonly wait: boolean
    }) =>
      Effect.gen(function* () {
        const { store } = yield* sharedNow
        const gitFailed = (e: { readonly message: string }) => new InternalError({ reason: e.message })
        const repo = yield* git.repo(request.cwd).pipe(Effect.catchTag("GitFailed", (e) => Effect.fail(gitFailed(e))))
        const branch = request.world ?? repo.branch
        if (branch === undefined) {
          return yield* new InvalidRequest({
            reason: "berth up --anywhere needs a branch: name it, or run it in a worktree that has one checked out"
          })
        }
        yield* git
          .validateBranch(branch)
          .pipe(Effect.mapError((e) => new InvalidWorldName({ name: e.name, reason: e.reason })))
        const info = yield* worlds.projectInfo(request.cwd)
        const slug = slugify(branch)
        const local = yield* worlds.status(request.cwd)
        const already = anywhereOf([info.label], branch) !== undefined
        if (!already && local.worlds.some((w) => w.name === branch || w.slug === slug)) {
          return yield* new InvalidRequest({
            reason: `world ${branch} already exists on this machine, which keeps it: a world runs anywhere only if it was made so\n  hint: take it off this machine first (berth remove ${branch}), then berth up --anywhere ${branch}`
          })
        }
        const remote = yield* git.remoteUrl(repo.mainRoot, "origin").pipe(Effect.mapError(gitFailed))
        if (remote === undefined) {
          return yield* new InvalidRequest({
            reason: `${repo.mainRoot} has no remote "origin": a world that runs anywhere is cloned from it by the machine that runs it\n  hint: add one every machine of the cluster can reach: git remote add origin <url>`
          })
        }
        if (!(yield* git.remoteHasBranch(remote, branch).pipe(Effect.mapError(gitFailed)))) {
          return yield* new InvalidRequest({
            reason: `branch ${branch} is not on origin (${remote}): the machine that runs the world clones it from there\n  hint: push it first: git push -u origin ${branch}`
          })
        }
        const row: AnywhereRow = {
          project: info.label,
          slug,
          name: branch,
          branch,
          remote,
          selection: request.selection,
          env: request.env,
          desired: "up",
          generation: 0,
          owner: null,
          reason: null
        }
        yield* store.want({ ...row, desired: "up" }).pipe(Effect.mapError(gitFailed))
        view = {
          ...view,
          anywhere: [...view.anywhere.filter((r) => r.project !== row.project || r.slug !== slug), row]
        }
        if (!request.wait) {
          yield* ensure(row, true).pipe(Effect.ignore, Effect.forkIn(daemonScope))
          return placeholder(row, "starting", "a machine of the cluster is starting it")
        }
        const answer = yield* ensure(row, true)
        return answer ?? placeholder(row, "stopped", "it was taken down meanwhile")
      })

    /** `down` or `remove` of a world that runs anywhere, from any machine: the shared table first, then its entity. */
    const setAnywhere = (row: AnywhereRow, desired: AnywhereDesired) =>
      Effect.gen(function* () {
        const { store } = yield* sharedNow
        yield* store
          .setDesired(row.project, row.slug, desired)
          .pipe(Effect.mapError((e) => new InternalError({ reason: e.message })))
        view = { ...view, anywhere: view.anywhere.map((r) => (r === row ? { ...r, desired } : r)) }
        const answer = yield* ensure({ ...row, desired }, true)
        if (desired === "up") return answer ?? placeholder({ ...row, desired }, "starting", null)
        return placeholder({ ...row, desired }, desired === "removed" ? "removed" : "stopped", null)
      })

    /**
     * Before the daemon lets go of its processes (it stops, or a new build replaces it): the worlds that run anywhere
     * stop here, since another machine starts them as soon as this one's shards are free, and nothing more starts here.
     */
    const drain = Effect.gen(function* () {
      draining = true
      if (shared === undefined) return
      const { machine, store } = shared
      // said at once, so that the placer gives this machine nothing more while it stops
      yield* room.pipe(
        Effect.flatMap((r) => store.setRoom(machine, r)),
        Effect.ignore
      )
      yield* Effect.forEach(
        view.anywhere,
        (row) =>
          Effect.gen(function* () {
            const ref = yield* worlds.refOf(row.project, row.slug)
            if (ref === undefined) return
            yield* worlds.down(ref, false)
            yield* store.letGo(
              row.project,
              row.slug,
              machine,
              row.desired === "up" ? `${machine}'s daemon stopped` : undefined
            )
          }).pipe(Effect.ignore),
        { concurrency: "unbounded", discard: true }
      )
    })

    yield* Effect.addFinalizer(() => stop)

    return {
      /** what this machine knows of the cluster now (no database round trip) */
      view: Effect.sync(() => view),
      join,
      leave,
      remoteWorld: (project: ReadonlyArray<string>, name: string) => Effect.sync(() => remoteWorld(project, name)),
      remoteById: (id: number) => Effect.sync(() => remoteById(id)),
      tell,
      statusOf,
      env,
      logs,
      anywhereOf: (labels: ReadonlyArray<string>, name: string) => Effect.sync(() => anywhereOf(labels, name)),
      upAnywhere,
      setAnywhere,
      placeholder,
      drain
    } as const
  })
}) {}
