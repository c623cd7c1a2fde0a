/**
 * What this machine knows of its cluster: the view the daemon answers from without a database round trip, held in one
 * `SubscriptionRef` (`ClusterState`), and the pure lookups over it (a world of another machine by name or by a
 * watcher's id, the row of a world that runs anywhere).
 */
import * as Effect from "effect/Effect"
import type * as Context from "effect/Context"
import type * as Sharding from "@effect/cluster/Sharding"
import * as Ref from "effect/Ref"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { WorldStatus } from "../daemon/api.js"
import { remoteWorldId } from "../domain/cluster.js"
import type { AnywhereRow, Machine, SharedWorld, Store } from "./store.js"

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

export const solo: ClusterView = {
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

/** A world of another machine, found by name: where to send its commands. */
export interface RemoteWorld {
  readonly machine: Machine
  readonly status: WorldStatus
}

const sameWorld = (row: { readonly project: string; readonly slug: string }, project: string, slug: string) =>
  row.project === project && row.slug === slug

/** The world of another machine that a watcher knows by this id (`remoteWorldId`). */
export const remoteById = (view: ClusterView, id: number): RemoteWorld | undefined => {
  const found = view.worlds.find((w) => remoteWorldId(w.machine, w.status.project, w.status.slug) === id)
  const machine = found === undefined ? undefined : view.machines.find((m) => m.name === found.machine)
  return found === undefined || machine === undefined ? undefined : { machine, status: found.status }
}

/** The world of another machine that `name` names in the project (any of its labels), by name or by slug. */
export const remoteNamed = (
  view: ClusterView,
  project: ReadonlyArray<string>,
  name: string
): RemoteWorld | undefined => {
  const found = view.worlds.find(
    (w) => project.includes(w.status.project) && (w.status.name === name || w.status.slug === name)
  )
  if (found === undefined) return undefined
  const machine = view.machines.find((m) => m.name === found.machine)
  return machine === undefined ? undefined : { machine, status: found.status }
}

/** The row of a world wanted anywhere that `name` names in the project `labels` (its label and declared name). */
export const anywhereNamed = (
  view: ClusterView,
  labels: ReadonlyArray<string>,
  name: string
): AnywhereRow | undefined =>
  view.anywhere.find((r) => labels.includes(r.project) && (r.name === name || r.slug === name))

/** Whether the cluster, as last read, gives this world that runs anywhere to this machine. */
export const ownsAnywhere = (view: ClusterView, project: string, slug: string): boolean =>
  view.anywhere.some((r) => sameWorld(r, project, slug) && r.owner === view.name)

/** The view with `row` in place of what it knew of that world. */
export const withAnywhereRow = (view: ClusterView, row: AnywhereRow): ClusterView => ({
  ...view,
  anywhere: [...view.anywhere.filter((r) => !sameWorld(r, row.project, row.slug)), row]
})

/** What a world wanted anywhere looks like when no machine runs it: wanted, waiting for a machine, or stopped. */
export const placeholder = (row: AnywhereRow, state: string, reason: string | null): WorldStatus => ({
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

/** A running session's handles: its sharding, for commands to other machines' worlds, and its store. */
export interface Connected {
  readonly sharding: Context.Context<Sharding.Sharding>
  readonly store: Store
  /** this machine's name in the cluster */
  readonly machine: string
}

/**
 * The cluster's state on this machine, each part in one ref: the view (what commands and watchers read), the running
 * session's handles (none between sessions), and whether the daemon is letting go of its worlds (it stops).
 */
export interface ClusterState {
  readonly view: SubscriptionRef.SubscriptionRef<ClusterView>
  readonly connected: Ref.Ref<Connected | undefined>
  readonly draining: Ref.Ref<boolean>
}

export const makeClusterState: Effect.Effect<ClusterState> = Effect.all({
  view: SubscriptionRef.make(solo),
  connected: Ref.make<Connected | undefined>(undefined),
  draining: Ref.make(false)
})

/** Changes the view (one atomic update: rounds, sessions and requests never lose one another's writes). */
export const updateView = (state: ClusterState, f: (view: ClusterView) => ClusterView): Effect.Effect<void> =>
  SubscriptionRef.update(state.view, f)
