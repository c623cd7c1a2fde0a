/**
 * A member's round, every `timings.publishMs`: its heartbeat (with its room for one more world), what is wanted
 * anywhere, then its own worlds published — those whose status changed at once after any change, all of them every
 * few seconds — and every other machine's worlds read back, with the routes to them handed to the proxy. A round
 * that fails ends the session (membership.ts starts another).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import type { WorldsService } from "../actors/Worlds.js"
import type { WorldStatus } from "../daemon/api.js"
import { currentCopies, type Room, remoteTargets } from "../domain/cluster.js"
import type { RouteTarget } from "../domain/routes.js"
import { ClusterRefused } from "../domain/errors.js"
import { fencedReason } from "../domain/fence.js"
import { isAtRest } from "../domain/world-state.js"
import type { AnywhereRow, Store } from "./store.js"
import { type ClusterState, updateView } from "./view.js"

/** A member publishes all of its worlds at least this often, even when none changed state (ports, restarts, pids). */
export const FULL_PUBLISH_MS = 5_000

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

/** The proxy's door for the cluster's machines, as a round uses it. */
export interface Door {
  /** the port other machines reach this one's URLs on, when it listens */
  readonly port: Effect.Effect<number | null>
  /** lets exactly these addresses in (tried again each round while it does not listen) */
  readonly admit: (peers: ReadonlyArray<string>) => Effect.Effect<void>
  /** the routes of worlds other machines run */
  readonly route: (targets: ReadonlyArray<RouteTarget>) => Effect.Effect<void>
}

export interface RoundsOptions {
  readonly store: Pick<Store, "heartbeat" | "anywhere" | "publish" | "machines" | "worlds">
  readonly machine: { readonly name: string; readonly machineId: string }
  readonly worlds: Pick<WorldsService, "status" | "changes">
  readonly state: ClusterState
  /** this machine's room for one more world, as the placer reads it */
  readonly room: Effect.Effect<Room>
  /**
   * What is wanted anywhere was read afresh, at a round that began at `startedAt`: the hold renews, the copies the
   * watchdog fenced are counted, the stale ones tidied (tidy.ts)
   */
  readonly sawAnywhere: (anywhere: ReadonlyArray<AnywhereRow>, startedAt: number) => Effect.Effect<void>
  readonly door: Door
}

/**
 * The session's round, and what marks the worlds changed (run it for the session's life: any change of this
 * machine's worlds publishes them at the next round rather than within `FULL_PUBLISH_MS`).
 */
export const makeRounds = (options: RoundsOptions) =>
  Effect.gen(function* () {
    const { store, machine, worlds, state, door } = options
    const dirty = yield* Ref.make(true)
    const lastFull = yield* Ref.make(Number.NEGATIVE_INFINITY)
    /** each world's status as last published, by project/slug */
    const published = new Map<string, string>()
    const peersSaid = yield* Ref.make<string | undefined>(undefined)
    const routesSaid = yield* Ref.make<string | undefined>(undefined)

    const watchChanges = Stream.runForEach(worlds.changes, () => Ref.set(dirty, true))

    const publish = Effect.gen(function* () {
      const view = yield* state.view.get
      const anywhereKeys = new Set(view.anywhere.map((r) => `${r.project}/${r.slug}`))
      const statuses = (yield* worlds.status(undefined)).worlds.map(publishable(anywhereKeys))
      const changed = statuses.filter((s) => published.get(`${s.project}/${s.slug}`) !== JSON.stringify(s))
      yield* store.publish(machine.name, changed, statuses)
      published.clear()
      for (const s of statuses) published.set(`${s.project}/${s.slug}`, JSON.stringify(s))
      yield* updateView(state, (v) => ({ ...v, own: statuses.length }))
    })

    const round = Effect.gen(function* () {
      const startedAt = yield* Clock.currentTimeMillis
      const alive = yield* store.heartbeat(machine.name, machine.machineId, yield* door.port, yield* options.room)
      if (!alive) {
        return yield* new ClusterRefused({
          reason: `another machine took over the name ${machine.name} in the cluster`,
          hint: "run `berth cluster join` again with another --name"
        })
      }
      // what is wanted anywhere first: what is published next says which of this machine's worlds those are
      const anywhere = yield* store.anywhere()
      yield* updateView(state, (v) => ({ ...v, anywhere }))
      yield* options.sawAnywhere(anywhere, startedAt)
      const now = yield* Clock.currentTimeMillis
      if ((yield* Ref.getAndSet(dirty, false)) || now - (yield* Ref.get(lastFull)) >= FULL_PUBLISH_MS) {
        yield* Ref.set(lastFull, now)
        yield* publish
      }
      const [machines, others] = yield* Effect.all([store.machines, store.worlds(machine.name)])
      yield* updateView(state, (v) => ({ ...v, machines, worlds: others }))
      // who may knock (every other machine, as its connections come from) and where its worlds are
      const peers = machines.filter((m) => m.name !== machine.name).map((m) => m.address)
      const peersText = JSON.stringify(peers)
      if (peersText !== (yield* Ref.get(peersSaid)) || (yield* door.port) === null) {
        yield* Ref.set(peersSaid, peersText)
        yield* door.admit(peers)
      }
      // a world that runs anywhere is routed to its owner only (a machine given up and back has a stale copy)
      const routes = remoteTargets(currentCopies(others, anywhere), machines)
      const routesText = JSON.stringify(routes)
      if (routesText !== (yield* Ref.get(routesSaid))) {
        yield* Ref.set(routesSaid, routesText)
        yield* door.route(routes)
      }
    })

    return { round, watchChanges }
  })
