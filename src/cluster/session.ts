/**
 * One session with the cluster's PostgreSQL: this machine's row (its slot, the address peers dial), the slices of
 * worlds that run anywhere handed to the cluster, the fence's lease, this machine as an `@effect/cluster` runner with
 * the `World` entity (so a command for one of its worlds can come from any machine), the proxy's door for peers, then
 * a round every second (publishing.ts) until something fails. Everything it holds is released when it ends.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import { WorldEntityLive } from "../actors/WorldEntity.js"
import { Worlds } from "../actors/Worlds.js"
import { ANYWHERE_SETTING, anywhereIds, clusterOwner, clusterProxyPort, type Room, timings } from "../domain/cluster.js"
import type { ClusterRefused, ClusterUnavailable } from "../domain/errors.js"
import { Git, type GitService } from "../services/Git.js"
import { Home, type HomePaths } from "../services/Home.js"
import { Registry, type RegistryService } from "../services/Registry.js"
import type { RouterService } from "../services/proxy/Router.js"
import type { SliceLedgerService } from "../services/slices/SliceLedger.js"
import { version } from "../version.js"
import { anywhereLayer, anywherePlacer } from "./anywhere.js"
import { type Hold, keepLease } from "./fence.js"
import type { Holder } from "./holder.js"
import type { Settings } from "./membership.js"
import { pgLayer } from "./membership.js"
import { makeRounds } from "./publishing.js"
import { WorldQueryLive } from "./queries.js"
import { runnerLayer } from "./runner.js"
import { sharedSlicesOf, sliceOrphansOf } from "./slices.js"
import { type AnywhereRow, makeStore } from "./store.js"
import type { makeTidy } from "./tidy.js"
import { type ClusterState, updateView, withAnywhereRow } from "./view.js"

export interface SessionOptions {
  readonly state: ClusterState
  readonly hold: Hold
  readonly holder: Pick<Holder, "deadline">
  readonly registry: RegistryService
  readonly worlds: Worlds
  readonly git: GitService
  readonly home: HomePaths
  readonly router: RouterService
  readonly ledger: SliceLedgerService
  /** this machine's room for one more world, as the placer reads it */
  readonly room: Effect.Effect<Room>
  readonly tidy: Effect.Effect.Success<ReturnType<typeof makeTidy>>
}

export const makeSession =
  (options: SessionOptions) =>
  (settings: Settings, ready: Deferred.Deferred<void, ClusterUnavailable | ClusterRefused>) =>
    Effect.scoped(
      Effect.gen(function* () {
        const { state, hold, registry, worlds, home, router } = options
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
          options.ledger.install(
            sharedSlicesOf(store, settings.name, clusterMark, (project, slug) =>
              Effect.gen(function* () {
                const row = (yield* state.view.get).anywhere.find((r) => r.project === project && r.slug === slug)
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
          () => options.ledger.install(() => Effect.succeedNone)
        )
        // before the runner: its scope closes after the runner's, once the engine has stopped this session's worlds.
        // The hold outlives a session: a session that starts again right away has lost nothing of it
        yield* keepLease(hold, options.holder).pipe(
          Effect.provideService(Home, home),
          Effect.provideService(Registry, registry)
        )
        const anywhereHost = {
          store,
          machine: settings.name,
          draining: Ref.get(state.draining),
          saw: (row: AnywhereRow) => updateView(state, (v) => withAnywhereRow(v, row))
        }
        const sharding = yield* Layer.build(
          Layer.mergeAll(WorldEntityLive, WorldQueryLive, anywhereLayer(anywhereHost), anywherePlacer(store)).pipe(
            Layer.provideMerge(runnerLayer({ address: settings.address, port: settings.runnerPort, slot }, hold)),
            Layer.provide(Layer.succeedContext(sql)),
            Layer.provide(
              Layer.mergeAll(
                Layer.succeed(Worlds, worlds),
                Layer.succeed(Git, options.git),
                Layer.succeed(Home, home),
                Layer.succeed(Registry, registry)
              )
            )
          )
        )
        yield* Effect.acquireRelease(Ref.set(state.connected, { sharding, store, machine: settings.name }), () =>
          Ref.set(state.connected, undefined)
        )
        yield* updateView(state, (v) => ({ ...v, state: "member", slot, error: undefined }))
        yield* Effect.logInfo(`berth cluster: this machine is ${settings.name} (slot ${slot}) at ${settings.address}`)

        // the proxy's door for peers: on the cluster address only, open to the cluster's machines only. A failure is
        // tried again each round, and said once
        const listening = yield* Ref.make<number | null>(null)
        const listenError = yield* Ref.make<string | undefined>(undefined)
        const admit = (peers: ReadonlyArray<string>) =>
          router
            .setClusterListener({ host: settings.address, port: clusterProxyPort(settings.runnerPort), peers })
            .pipe(
              Effect.tap((info) =>
                Effect.zipRight(Ref.set(listening, info?.port ?? null), Ref.set(listenError, undefined))
              ),
              Effect.catchAll((e) =>
                Effect.gen(function* () {
                  yield* Ref.set(listening, null)
                  if ((yield* Ref.getAndSet(listenError, e.message)) === e.message) return
                  yield* Effect.logWarning(`berth cluster: other machines cannot reach this one's URLs: ${e.message}`)
                })
              )
            )
        yield* admit([])
        yield* Effect.addFinalizer(() =>
          Effect.zipRight(router.setRemoteTargets([]), router.setClusterListener(undefined)).pipe(Effect.ignore)
        )

        const { round, watchChanges } = yield* makeRounds({
          store,
          machine: settings,
          worlds,
          state,
          room: options.room,
          sawAnywhere: (anywhere, startedAt) =>
            Effect.gen(function* () {
              // the hold renews only now that what this machine owns is known afresh (the fence's rule reads it)
              hold.beatAt = startedAt
              yield* options.tidy.countFenced
              yield* options.tidy.tidy(anywhere, settings.name, store)
            }),
          door: {
            port: Ref.get(listening),
            admit,
            route: (targets) => router.setRemoteTargets(targets).pipe(Effect.ignore)
          }
        })
        yield* Effect.forkScoped(watchChanges)
        // the first round is done before a join returns, so its answer lists the machines
        yield* round
        yield* Deferred.succeed(ready, undefined)
        yield* round.pipe(Effect.repeat(Schedule.spaced(Duration.millis(timings.publishMs))))
      })
    )
