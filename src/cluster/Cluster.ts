/**
 * The cluster as the daemon uses it: this machine's membership of a cluster of berth daemons (`berth cluster
 * init|join|leave|status`), the worlds of other machines, and the worlds that run anywhere. Its parts, each in a
 * module of its own: the view and its lookups (view.ts), the membership and its sessions (membership.ts, session.ts),
 * a session's rounds (publishing.ts) and what they tidy of this machine's copies (tidy.ts), commands to other
 * machines' worlds (remote.ts), and what users ask of worlds that run anywhere (anywhere-requests.ts). This module
 * wires them over one `ClusterState`.
 *
 * A session that fails is logged and started again with a growing delay; nothing of the machine's own worlds depends
 * on it — they keep running, and a daemon that is not a member works exactly as on one machine.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import type { FailureOf, ProjectError, WorldCommand } from "../actors/protocol.js"
import { Worlds } from "../actors/Worlds.js"
import type { EnvReply, LogLine, QueryFailure, WorldStatus } from "../daemon/api.js"
import { type AnywhereDesired, ANYWHERE_SETTING, anywhereIds } from "../domain/cluster.js"
import { gateClosed } from "../domain/admission.js"
import {
  ClusterRefused,
  type ClusterUnavailable,
  type DiskFull,
  type InternalError,
  type InvalidRequest,
  type InvalidWorldName,
  MachineUnreachable,
  type NoMachineAvailable,
  type NotOnOrigin,
  type WorldKeptHere
} from "../domain/errors.js"
import { Admission } from "../services/Admission.js"
import { Fence } from "../services/Fence.js"
import { Git } from "../services/Git.js"
import { Home } from "../services/Home.js"
import { Registry, type RegistryError } from "../services/Registry.js"
import { Router } from "../services/proxy/Router.js"
import { SliceLedger } from "../services/slices/SliceLedger.js"
import { type EnsureError, makeAnywhereRequests, notInACluster, type UpAnywhereRequest } from "./anywhere-requests.js"
import { type Hold, installRule } from "./fence.js"
import { type JoinRequest, makeMembership } from "./membership.js"
import { makeRemote } from "./remote.js"
import { makeSession } from "./session.js"
import type { AnywhereRow } from "./store.js"
import { makeTidy } from "./tidy.js"
import {
  anywhereNamed,
  type ClusterView,
  makeClusterState,
  ownsAnywhere,
  placeholder,
  remoteById,
  remoteNamed,
  type RemoteWorld,
  solo
} from "./view.js"

export type { UpAnywhereRequest } from "./anywhere-requests.js"
export { guessAddress, type JoinRequest } from "./membership.js"
export type { ClusterView, MemberState, RemoteWorld } from "./view.js"

/**
 * The cluster as the daemon uses it: this machine's membership, the worlds of other machines (found by name or by a
 * watcher's id, and asked through the cluster's sharding), and the worlds that run anywhere. `ClusterSolo` is a
 * machine in no cluster, for tests of what does not need one.
 */
export interface ClusterService {
  /** what this machine knows of the cluster now (no database round trip) */
  readonly view: Effect.Effect<ClusterView>
  readonly join: (
    request: JoinRequest
  ) => Effect.Effect<ClusterView, ClusterUnavailable | ClusterRefused | RegistryError, Registry>
  readonly leave: Effect.Effect<void, ClusterUnavailable | ClusterRefused | RegistryError>
  /** the world of another machine that `name` names in the project (its labels), by name or by slug */
  readonly remoteWorld: (project: ReadonlyArray<string>, name: string) => Effect.Effect<RemoteWorld | undefined>
  /** the world of another machine that a watcher knows by this id */
  readonly remoteById: (id: number) => Effect.Effect<RemoteWorld | undefined>
  /** one of the actor protocol's requests, to a world of another machine */
  readonly tell: <C extends WorldCommand>(
    remote: RemoteWorld,
    command: C
  ) => Effect.Effect<void, FailureOf<C> | MachineUnreachable>
  readonly statusOf: (
    remote: RemoteWorld
  ) => Effect.Effect<WorldStatus, typeof QueryFailure.status.Type | MachineUnreachable>
  readonly env: (
    remote: RemoteWorld
  ) => Effect.Effect<typeof EnvReply.Type, typeof QueryFailure.env.Type | MachineUnreachable>
  readonly logs: (
    remote: RemoteWorld,
    options: { service?: string | undefined; follow: boolean; lines: number }
  ) => Stream.Stream<typeof LogLine.Type, typeof QueryFailure.logs.Type | MachineUnreachable>
  /** the row of a world wanted anywhere that `name` names in the project `labels` */
  readonly anywhereOf: (labels: ReadonlyArray<string>, name: string) => Effect.Effect<AnywhereRow | undefined>
  /** `berth up --anywhere`: the world wanted up in the shared table, started by whichever machine it is given to */
  readonly upAnywhere: (
    request: UpAnywhereRequest
  ) => Effect.Effect<
    WorldStatus,
    EnsureError | AnywhereError | ProjectError | InvalidWorldName | InvalidRequest | InternalError
  >
  /** `down` or `remove` (or `up` again) of a world that runs anywhere, from any machine */
  readonly setAnywhere: (
    row: AnywhereRow,
    desired: AnywhereDesired
  ) => Effect.Effect<WorldStatus, EnsureError | AnywhereError | InternalError | DiskFull>
  /** what a world wanted anywhere looks like when no machine runs it */
  readonly placeholder: (row: AnywhereRow, state: string, reason: string | null) => WorldStatus
  /** before the daemon lets go of its processes: the worlds that run anywhere stop here, and nothing more starts */
  readonly drain: Effect.Effect<void>
}

/** What a command for a world that runs anywhere adds on the machine it was asked on (`AnywhereFailures` in the API). */
type AnywhereError = ClusterRefused | ClusterUnavailable | NotOnOrigin | WorldKeptHere | NoMachineAvailable

export class Cluster extends Effect.Service<Cluster>()("berth/Cluster", {
  scoped: Effect.gen(function* () {
    const registry = yield* Registry
    const worlds = yield* Worlds
    const router = yield* Router
    const git = yield* Git
    const home = yield* Home
    const admission = yield* Admission
    const ledger = yield* SliceLedger
    const daemonScope = yield* Effect.scope
    const state = yield* makeClusterState

    /** the fence (fence.ts): this machine's hold on what it runs, and the rule that keeps a stale one from starting */
    const hold: Hold = { refreshedAt: undefined, beatAt: undefined }
    const holder = yield* installRule(hold, {
      member: Effect.map(state.view.get, (v) => v.state !== "solo"),
      owns: (project, slug) => Effect.map(state.view.get, (v) => ownsAnywhere(v, project, slug))
    }).pipe(
      Effect.provideService(Fence, yield* Fence),
      Effect.provideService(Registry, registry),
      Effect.provideService(Home, home)
    )

    /** this machine's room for one more world, as the placer reads it (cluster-wide admission) */
    const room = Effect.gen(function* () {
      const [queue, running, readings, settings, recovering, draining] = yield* Effect.all([
        admission.queue,
        admission.running,
        admission.readings,
        admission.settings,
        admission.recovering,
        Ref.get(state.draining)
      ])
      const admits =
        !draining && queue.length === 0 && gateClosed(running, readings, settings, recovering) === undefined
      const marked = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING).pipe(Effect.orElseSucceed(() => [])))
      const anywhere = marked.filter((id) => admission.holds(id) || admission.entry(id) !== undefined).length
      return { admits, running, waiting: queue.length, anywhere, draining }
    })

    const tidy = yield* makeTidy({
      registry,
      worlds,
      admission,
      state,
      fencedFile: home.fencedFile,
      daemon: process.pid
    })
    const session = makeSession({ state, hold, holder, registry, worlds, git, home, router, ledger, room, tidy })
    const membership = yield* makeMembership({ registry, state, session, daemonScope })
    const remote = makeRemote(state)
    const requests = makeAnywhereRequests({ state, worlds, git, room, daemonScope })

    // a member stays one across daemon restarts
    yield* membership.resume
    yield* Effect.addFinalizer(() => membership.stop)

    const viewWith = <A>(f: (view: ClusterView) => A) => Effect.map(state.view.get, f)
    return {
      view: state.view.get,
      join: membership.join,
      leave: membership.leave,
      remoteWorld: (project: ReadonlyArray<string>, name: string) => viewWith((v) => remoteNamed(v, project, name)),
      remoteById: (id: number) => viewWith((v) => remoteById(v, id)),
      tell: remote.tell,
      statusOf: remote.statusOf,
      env: remote.env,
      logs: remote.logs,
      anywhereOf: (labels: ReadonlyArray<string>, name: string) => viewWith((v) => anywhereNamed(v, labels, name)),
      upAnywhere: requests.upAnywhere,
      setAnywhere: requests.setAnywhere,
      placeholder,
      drain: requests.drain
    } satisfies ClusterService
  })
}) {}

/**
 * A machine in no cluster, and that cannot join one: the daemon's handlers (or an embedder) without the cluster's
 * machinery — no session, no database, nothing started. Worlds of other machines are never found; a world cannot be
 * run anywhere.
 */
export const ClusterSolo: Layer.Layer<Cluster> = Layer.sync(Cluster, () => {
  const refused = new ClusterRefused({
    reason: "this machine is not in a cluster, and this engine cannot join one",
    hint: "the daemon's engine (WorldsLive, EmbedClusterLive) can"
  })
  const unreachable = (remote: RemoteWorld) =>
    new MachineUnreachable({ world: remote.status.name, machine: remote.machine.name, lastSeenSeconds: 0 })
  return Cluster.make({
    view: Effect.succeed(solo),
    join: () => Effect.fail(refused),
    leave: Effect.fail(refused),
    remoteWorld: () => Effect.succeed(undefined),
    remoteById: () => Effect.succeed(undefined),
    tell: (remote) => Effect.fail(unreachable(remote)),
    statusOf: (remote) => Effect.fail(unreachable(remote)),
    env: (remote) => Effect.fail(unreachable(remote)),
    logs: (remote) => Stream.fail(unreachable(remote)),
    anywhereOf: () => Effect.succeed(undefined),
    upAnywhere: () => Effect.fail(notInACluster),
    setAnywhere: () => Effect.fail(notInACluster),
    placeholder,
    drain: Effect.void
  } satisfies ClusterService)
})
