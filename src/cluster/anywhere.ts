/**
 * Worlds that run anywhere (`berth up --anywhere <branch>`): the branch is pushed to a remote every machine can clone,
 * so the world runs on whichever machine holds its `Anywhere` entity (the shared shard group) and moves when that
 * machine is gone.
 *
 * Entities live in memory, so what is wanted of such a world lives in the shared `berth_anywhere` table (store.ts),
 * and a cluster singleton makes sure of every row every few seconds (keep-alive alone does not reliably bring a moved
 * entity back; ../shared/cluster.md §3.2). The entity's machine clones the branch under BERTH_HOME/anywhere and runs
 * it there as a world of its own; when the entity stops on that machine (its shard moved, the daemon stops), the world
 * stops there too. `generation` counts the starts: a machine that takes a world over makes a new one, and a daemon
 * never adopts such a world's processes after a restart (`sweepLeftovers`): another machine may run it by then.
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
import { WorldError, WorldStatus } from "../daemon/api.js"
import {
  ANYWHERE_GROUP,
  anywhereClone,
  anywhereEntityId,
  ENSURE_EVERY_MS,
  ANYWHERE_SETTING,
  anywhereIds,
  ensureStep,
  parseAnywhereEntityId
} from "../domain/cluster.js"
import { InternalError, InvalidRequest } from "../domain/errors.js"
import { Git } from "../services/Git.js"
import { Home } from "../services/Home.js"
import { Registry } from "../services/Registry.js"
import type { AnywhereRow, Store } from "./store.js"

export const Anywhere = Entity.make("Anywhere", [
  /**
   * Makes this machine's part true: the world runs here when it is wanted up, is stopped or removed here otherwise.
   * `asked`: a user's `up` (apply its selection and environment again), not the reconciler's round. Answers the world
   * as it is here, or null when it does not run here.
   */
  Rpc.make("Ensure", {
    payload: { asked: Schema.Boolean },
    success: Schema.NullOr(WorldStatus),
    error: WorldError
  })
]).annotate(ClusterSchema.ShardGroup, () => ANYWHERE_GROUP)

export interface AnywhereHost {
  readonly store: Store
  /** this machine's name in the cluster */
  readonly machine: string
  /** true once the daemon lets go of its worlds (it stops): nothing more starts here */
  readonly draining: () => boolean
}

const internal = (e: { readonly message: string }) => new InternalError({ reason: e.message })

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

      const mark = (worldId: number, on: boolean) =>
        Effect.gen(function* () {
          const ids = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING)).filter((id) => id !== worldId)
          yield* registry.setSetting(ANYWHERE_SETTING, on ? [...ids, worldId] : ids)
        })

      /** Stops (or removes) this machine's copy, and says the world no longer runs here. */
      const stopHere = (remove: boolean) =>
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
              yield* mark(id, false)
            } else {
              yield* worlds.tell(id, new Down()).pipe(Effect.catchTag("WorldNotFound", () => Effect.void))
            }
          }
          started = false
          yield* host.store.letGo(address.project, address.slug, host.machine).pipe(Effect.mapError(internal))
        })

      // the entity stops here (its shard moved, the daemon stops, the machine leaves): so does its world
      yield* Effect.addFinalizer(() =>
        stopHere(false).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning(`berth cluster: stopping ${entityId} here`, cause))
        )
      )

      /**
       * Where this machine runs the world: a worktree of its checkout of the same repository (the project of that
       * label, whose origin is the world's remote) — the user's own, or else berth's clone under BERTH_HOME, made
       * once. A project of that label from another repository would give the world other URLs: refused.
       */
      const place = (row: AnywhereRow) =>
        Effect.gen(function* () {
          const cannot = (why: string) =>
            new InvalidRequest({
              reason: `world ${row.name} cannot run on ${host.machine}: ${why}\n  hint: give one of the two repositories another [project] name in its berth.toml`
            })
          const checkoutFailed = (e: { readonly message: string }) =>
            new InvalidRequest({
              reason: `world ${row.name}: cannot check out ${row.branch} from ${row.remote} on ${host.machine}: ${e.message}`
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

      const start = (row: AnywhereRow) =>
        Effect.gen(function* () {
          if (host.draining()) {
            return yield* new InvalidRequest({
              reason: `machine ${host.machine} is stopping: world ${row.name} runs on another machine shortly`
            })
          }
          const generation = yield* host.store
            .takeOver(row.project, row.slug, host.machine)
            .pipe(Effect.mapError(internal))
          // a down or a removal came first
          if (generation === undefined) return null
          const status = yield* Effect.gen(function* () {
            const ref = yield* place(row)
            started = true
            return yield* worlds.up(ref, row.selection, row.env, true)
          }).pipe(
            Effect.tapError((e) =>
              host.store
                .note(row.project, row.slug, `on ${host.machine}: ${e.message.split("\n")[0] ?? ""}`)
                .pipe(Effect.ignore)
            )
          )
          if (row.reason !== null) yield* host.store.note(row.project, row.slug, null).pipe(Effect.ignore)
          const id = yield* worlds.idOf(status.project, status.slug)
          if (id !== undefined) yield* mark(id, true)
          return { ...status, machine: host.machine }
        })

      const ensure = (asked: boolean) =>
        Effect.gen(function* () {
          if (address === undefined) {
            return yield* new InvalidRequest({ reason: `no world has the entity id ${JSON.stringify(entityId)}` })
          }
          const [row] = yield* host.store.anywhere(address).pipe(Effect.mapError(internal))
          switch (ensureStep({ desired: row?.desired, started, asked })) {
            case "remove":
              yield* stopHere(true)
              return null
            case "stop":
              yield* stopHere(false)
              return null
            case "report": {
              const ref = yield* worlds.refOf(address.project, address.slug)
              if (ref === undefined) return null
              const { worlds: here } = yield* worlds.status(ref.cwd)
              const w = here.find((x) => x.slug === address.slug)
              return w === undefined ? null : { ...w, machine: host.machine }
            }
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
 * The cluster's one reconciler for worlds that run anywhere (a singleton: on one machine at a time, moved with its
 * shard): every few seconds each row is made sure of by its entity, wherever that lives now. A world whose entity is
 * busy (starting) is not asked again until it answers.
 */
export const anywhereReconciler = (store: Store) =>
  Singleton.make(
    "berth-anywhere",
    Effect.gen(function* () {
      const client = yield* Anywhere.client
      const inFlight = new Set<string>()
      const round = Effect.gen(function* () {
        for (const row of yield* store.anywhere()) {
          // wanted down and run nowhere: nothing to do
          if (row.desired === "down" && row.owner === null) continue
          const id = anywhereEntityId(row.project, row.slug)
          if (inFlight.has(id)) continue
          inFlight.add(id)
          yield* client(id)
            .Ensure({ asked: false })
            .pipe(
              Effect.timeout(Duration.minutes(10)),
              Effect.catchAllCause((cause) => Effect.logDebug(`berth cluster: ensuring ${id}`, cause)),
              Effect.ensuring(Effect.sync(() => inFlight.delete(id))),
              Effect.forkScoped
            )
        }
      })
      yield* round.pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: the anywhere round failed", cause)),
        Effect.repeat(Schedule.spaced(Duration.millis(ENSURE_EVERY_MS)))
      )
    }),
    { shardGroup: ANYWHERE_GROUP }
  )
