/**
 * Worlds that run anywhere (`berth up --anywhere <branch>`): the branch is pushed to a remote every machine can clone,
 * so the world can run on any machine of the cluster, and moves when that machine is gone.
 *
 * Entities live in memory, so what is wanted of such a world lives in the shared `berth_anywhere` table (store.ts),
 * with its `owner`: the machine the cluster's placer gave it. The placer is one cluster singleton (`anywherePlacer`):
 * every second it gives each world wanted up that has no live owner a machine with room (cluster-wide admission,
 * `placeAnywhere`), and asks each owner's `Anywhere` entity to make its part true. That entity's id names the owner's
 * slot, so it lives in that machine's own shard group: on that machine, and nowhere else. It clones the branch under
 * BERTH_HOME/anywhere (or uses the machine's own checkout of the repository) and runs it there as a world of its own;
 * when the entity stops there (the machine leaves, the daemon stops), the world stops there too and its owner is let
 * go, to be placed again. A machine whose heartbeat is old is given up only once its own watchdog has stopped its copy
 * (`GIVE_UP_AFTER_MS`, domain/fence.ts); a daemon never adopts such a world's processes after a restart
 * (`sweepLeftovers` stops them, and the world's actor lets it go): another machine may run it by then.
 */
import { existsSync } from "node:fs"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Singleton from "@effect/cluster/Singleton"
import * as Rpc from "@effect/rpc/Rpc"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Down, Remove } from "../actors/protocol.js"
import { Worlds } from "../actors/Worlds.js"
import { EnsureFailure, WorldStatus } from "../daemon/api.js"
import {
  ANYWHERE_GROUP,
  ANYWHERE_SETTING,
  anywhereClone,
  anywhereEntityId,
  anywhereIds,
  ENSURE_EVERY_MS,
  ensureStep,
  parseAnywhereEntityId,
  ownedPlacements,
  placeAnywhere,
  placerStep,
  shardGroupOf
} from "../domain/cluster.js"
import { InternalError, MachineCannotRun, WorldNotFound } from "../domain/errors.js"
import { Git } from "../services/Git.js"
import { Home } from "../services/Home.js"
import { Registry } from "../services/Registry.js"
import type { AnywhereRow, Machine, Store } from "./store.js"

export const Anywhere = Entity.make("Anywhere", [
  /**
   * Makes this machine's part true: the world runs here when it is wanted up and given to this machine, is stopped or
   * removed here otherwise. `asked`: a user's `up` (apply its selection and environment again), not the placer's
   * round. Answers the world as it is here, or null when it does not run here.
   */
  Rpc.make("Ensure", {
    payload: { asked: Schema.Boolean },
    success: Schema.NullOr(WorldStatus),
    error: EnsureFailure
  })
]).annotate(ClusterSchema.ShardGroup, shardGroupOf)

export interface AnywhereHost {
  /** the shared table, as far as a world's entity reads and writes it */
  readonly store: Pick<Store, "anywhere" | "note" | "letGo" | "toldMove">
  /** this machine's name in the cluster */
  readonly machine: string
  /** true once the daemon lets go of its worlds (it stops): nothing more starts here */
  readonly draining: Effect.Effect<boolean>
  /** the row as the entity read it (given to this machine): the fence's rule knows it at once, not at the next tick */
  readonly saw: (row: AnywhereRow) => Effect.Effect<void>
}

const internal = (e: { readonly message: string }) => new InternalError({ reason: e.message })

/** What a world's history says on the machine it moved to. */
export const movedMessage = (moved: { readonly from: string; readonly at: number; readonly why: string }, to: string) =>
  `moved to ${to} from ${moved.from} at ${new Date(moved.at).toISOString().slice(11, 19)} UTC: ${moved.why}`

/**
 * Marks (or unmarks) worlds of this machine as copies of worlds that run anywhere: what its fence stops when it is cut
 * off, and what it tidies once the world moved or was removed.
 */
export const markAnywhere = (registry: Registry["Type"], ids: ReadonlyArray<number>, on: boolean) =>
  // one transaction: an entity marking its world while the publishing loop tidies others loses neither change
  registry.updateSetting(ANYWHERE_SETTING, (value) => {
    const rest = anywhereIds(value).filter((id) => !ids.includes(id))
    return on ? [...rest, ...ids] : rest
  })

export const anywhereLayer = (host: AnywhereHost) =>
  Anywhere.toLayer(
    Effect.gen(function* () {
      const worlds = yield* Worlds
      const git = yield* Git
      const home = yield* Home
      const registry = yield* Registry
      const { entityId } = yield* Entity.CurrentAddress
      const address = parseAnywhereEntityId(entityId)
      let started = false

      /**
       * Stops (or removes) this machine's copy, and says the world no longer runs here (`why`: it is still wanted up,
       * and runs elsewhere next: a move its next machine tells of).
       */
      const stopHere = (remove: boolean, why?: string) =>
        Effect.gen(function* () {
          if (address === undefined) return
          const id = yield* worlds.idOf(address.project, address.slug)
          if (id !== undefined) {
            // by id: its checkout may be gone already
            if (remove) {
              // a worktree with changes of its own is kept: berth never throws away what someone wrote
              yield* worlds
                .tell(id, new Remove({ force: false }))
                .pipe(Effect.catchTag("WorldNotFound", () => Effect.void))
              yield* markAnywhere(registry, [id], false)
            } else {
              yield* worlds.tell(id, new Down()).pipe(Effect.catchTag("WorldNotFound", () => Effect.void))
            }
          }
          started = false
          yield* host.store.letGo(address.project, address.slug, host.machine, why).pipe(Effect.mapError(internal))
        })

      // the entity stops here (its shard moved, the daemon stops, the machine leaves): so does its world
      yield* Effect.addFinalizer(() =>
        stopHere(
          false,
          `${host.machine} handed it over (its daemon stopped, it left the cluster, or the cluster moved its shard)`
        ).pipe(Effect.catchAllCause((cause) => Effect.logWarning(`berth cluster: stopping ${entityId} here`, cause)))
      )

      /**
       * Where this machine runs the world: a worktree of its checkout of the same repository (the project of that
       * label, whose origin is the world's remote) — the user's own, or else berth's clone under BERTH_HOME, made
       * once. A project of that label from another repository would give the world other URLs: refused.
       */
      const place = (row: AnywhereRow) =>
        Effect.gen(function* () {
          const cannot = (why: string) =>
            new MachineCannotRun({
              world: row.name,
              machine: host.machine,
              reason: why,
              hint: "give one of the two repositories another [project] name in its berth.toml"
            })
          const checkoutFailed = (e: { readonly message: string }) =>
            new MachineCannotRun({
              world: row.name,
              machine: host.machine,
              reason: `cannot check out ${row.branch} from ${row.remote}: ${e.message}`
            })
          const own = yield* registry.projectLabelled(row.project)
          const checkout =
            own !== undefined && existsSync(own.mainRoot) ? own.mainRoot : anywhereClone(home.root, row.project)
          if (checkout === own?.mainRoot) {
            const origin = yield* git.remoteUrl(checkout, "origin").pipe(Effect.orElseSucceed(() => undefined))
            if (origin !== row.remote) {
              return yield* cannot(`its project ${row.project} there is ${checkout}, another repository`)
            }
          } else {
            yield* git.cloneOnce(row.remote, checkout, row.branch).pipe(Effect.mapError(checkoutFailed))
            const info = yield* worlds.projectInfo(checkout)
            if (info.label !== row.project) {
              return yield* cannot(`another repository there is already called ${row.project}`)
            }
          }
          yield* git.fetchBranch(checkout, row.remote, row.branch).pipe(Effect.mapError(checkoutFailed))
          return { cwd: checkout, world: row.name }
        })

      /** The world's history says it moved here, when and from where (once: the row forgets it then). */
      const tellMove = (id: number, row: AnywhereRow) =>
        Effect.gen(function* () {
          const moved = row.moved
          if (moved === null || moved === undefined || moved.from === host.machine) return
          yield* registry.addEvent({
            worldId: id,
            service: null,
            kind: "moved",
            message: movedMessage(moved, host.machine)
          })
          yield* host.store.toldMove(row.project, row.slug, moved.from)
        }).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`berth cluster: telling of ${entityId}'s move`, cause))
        )

      const start = (row: AnywhereRow) =>
        Effect.gen(function* () {
          if (yield* host.draining) {
            // given to this machine as it stops: it goes back to the placer
            yield* host.store
              .letGo(row.project, row.slug, host.machine, `${host.machine} was stopping`)
              .pipe(Effect.mapError(internal))
            return yield* new MachineCannotRun({
              world: row.name,
              machine: host.machine,
              reason: "it is stopping; the world runs on another machine shortly"
            })
          }
          yield* host.saw(row)
          const status = yield* Effect.gen(function* () {
            const ref = yield* place(row)
            started = true
            // marked as soon as it exists, before it is told to start (it may wait in line first): the fence (its
            // first process waits for this machine's hold, and is held) and the move of a waiting world (Cluster's
            // tick) know it from then on
            const first = yield* worlds.up(ref, row.selection, row.env, false, {
              before: (id) => markAnywhere(registry, [id], true)
            })
            const id = yield* worlds.idOf(first.project, first.slug)
            if (id !== undefined) yield* tellMove(id, row)
            return yield* worlds.waitReady(ref)
          }).pipe(
            Effect.tapError((e) =>
              host.store
                .note(row.project, row.slug, `on ${host.machine}: ${e.message.split("\n")[0] ?? ""}`)
                .pipe(Effect.ignore)
            )
          )
          if (row.reason !== null) yield* host.store.note(row.project, row.slug, null).pipe(Effect.ignore)
          return { ...status, machine: host.machine }
        })

      const ensure = (asked: boolean) =>
        Effect.gen(function* () {
          // an id that is no world's address names no world
          if (address === undefined) return yield* new WorldNotFound({ project: "", name: entityId, known: [] })
          const [row] = yield* host.store.anywhere(address).pipe(Effect.mapError(internal))
          const owned = row?.owner === host.machine
          const ref = yield* worlds.refOf(address.project, address.slug)
          const here =
            ref === undefined ? undefined : (yield* worlds.status(ref.cwd)).worlds.find((x) => x.slug === address.slug)
          // started by this entity and still wanted up here: a copy stopped meanwhile (this machine was given up
          // while frozen or cut off, and stopped it when it came back) is started again once it is given back
          const runs = started && here !== undefined && here.desired === "up"
          switch (ensureStep({ desired: row?.desired, owned, started: runs, asked })) {
            case "remove":
              yield* stopHere(true)
              return null
            case "stop":
              yield* stopHere(false)
              return null
            case "report":
              return here === undefined ? null : { ...here, machine: host.machine }
            case "start":
              return row === undefined ? null : yield* start(row)
          }
        })

      return Anywhere.of({ Ensure: ({ payload }) => ensure(payload.asked) })
    }),
    // one command at a time; never reaped for idleness (its world would stop)
    { concurrency: 1, maxIdleTime: Duration.infinity }
  )

/**
 * Makes one row true, from the machines as they are now: a world wanted up with no live owner is given the machine
 * with the most room (cluster-wide admission, `placeAnywhere`; `reassign` lets only one of two deciders win), a
 * removed world nobody holds is forgotten, an owner that is gone is let go, and the owner's entity is asked (`ask`) to
 * make its part true. Answers what `ask` answered, or undefined when no machine was asked.
 */
export const settle = <A, E, R>(
  store: Pick<Store, "forget" | "reassign" | "note">,
  machines: ReadonlyArray<Machine>,
  row: AnywhereRow,
  ask: (row: AnywhereRow, owner: Machine) => Effect.Effect<A, E, R>,
  /** the worlds that run anywhere each machine is given (`ownedPlacements`); a placement here adds to it */
  owned: Map<string, number> = new Map()
) =>
  Effect.gen(function* () {
    const owner = machines.find((m) => m.name === row.owner)
    switch (placerStep(row, owner)) {
      case "nothing":
        return undefined
      case "forget":
        yield* store.forget(row.project, row.slug)
        return undefined
      case "release":
        yield* store.reassign(row.project, row.slug, row.owner, null)
        return undefined
      case "ensure":
        return owner === undefined ? undefined : yield* ask(row, owner)
      case "place": {
        const others = machines
          .filter((m) => m.name !== row.owner)
          .map((m) => ({ ...m, owned: owned.get(m.name) ?? 0 }))
        const to = others.find((m) => m.name === placeAnywhere(others, row.owner))
        if (to === undefined) {
          yield* store.note(row.project, row.slug, "no machine of the cluster can take it now")
          return undefined
        }
        // from a machine given up (not from none): a move the next machine tells of
        const why = row.owner === null ? undefined : `${row.owner} stopped answering the cluster`
        if (!(yield* store.reassign(row.project, row.slug, row.owner, to.name, why))) return undefined
        owned.set(to.name, (owned.get(to.name) ?? 0) + 1)
        return yield* ask({ ...row, owner: to.name }, to)
      }
    }
  })

/**
 * The cluster's one placer for worlds that run anywhere (a singleton: on one machine at a time, moved with its shard):
 * every second it settles every row. A world whose entity is busy (starting) is not asked again until it answers.
 */
export const anywherePlacer = (store: Store) =>
  Singleton.make(
    "berth-anywhere",
    Effect.gen(function* () {
      const client = yield* Anywhere.client
      const inFlight = new Set<string>()
      const ask = (row: AnywhereRow, owner: Machine) => {
        const id = anywhereEntityId(owner.slot, row.project, row.slug)
        if (inFlight.has(id)) return Effect.void
        inFlight.add(id)
        return client(id)
          .Ensure({ asked: false })
          .pipe(
            Effect.timeout(Duration.minutes(10)),
            Effect.catchAllCause((cause) => Effect.logDebug(`berth cluster: ensuring ${id}`, cause)),
            Effect.ensuring(Effect.sync(() => inFlight.delete(id))),
            Effect.forkScoped,
            Effect.asVoid
          )
      }
      const round = Effect.gen(function* () {
        const machines = yield* store.machines
        const rows = yield* store.anywhere()
        const owned = ownedPlacements(rows)
        for (const row of rows) yield* settle(store, machines, row, ask, owned)
      })
      yield* round.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: the anywhere round failed", cause)),
        Effect.repeat(Schedule.spaced(Duration.millis(ENSURE_EVERY_MS)))
      )
    }),
    { shardGroup: ANYWHERE_GROUP }
  )
