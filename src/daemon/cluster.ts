/**
 * What the daemon answers about the cluster: `cluster status`, and `status` with every other machine's worlds beside
 * this machine's own (a world of a machine that has not been heard from lately shows `unreachable`).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type { WorldCommand } from "../actors/protocol.js"
import type { Worlds } from "../actors/Worlds.js"
import type { Cluster, RemoteWorld } from "../cluster/Cluster.js"
import type { AnywhereRow } from "../cluster/store.js"
import type { ProxyInfo, Router } from "../services/proxy/Router.js"
import { currentCopies, machineState, UNREACHABLE } from "../domain/cluster.js"
import { fencedReason } from "../domain/fence.js"
import { isAtRest } from "../domain/world-state.js"
import type { ClusterStatus, WorldStatus } from "./api.js"

/** How long a command to another machine's world waits to see the outcome published, and how often it looks. */
const SETTLE_TIMEOUT = Duration.seconds(20)
const SETTLE_POLL = Duration.millis(200)

const pids = (w: WorldStatus) => w.services.map((s) => s.pid).join(",")

/** Another machine's URL of a service, made this machine's: its host name and path kept, this proxy's scheme and port. */
const localOrigin =
  (info: ProxyInfo) =>
  (url: string): string => {
    const https = info.httpsUrls && info.https.port !== undefined
    const port = https ? info.https.port : info.http.port
    if (port === undefined) return url
    try {
      const u = new URL(url)
      u.protocol = https ? "https:" : "http:"
      u.port = String(port)
      return u.href
    } catch {
      return url
    }
  }

export const makeClusterViews = (worlds: Worlds, cluster: Cluster, router: Router) => {
  const report: Effect.Effect<ClusterStatus, never> = Effect.gen(function* () {
    const view = yield* cluster.view
    const own = view.own
    return {
      state: view.state,
      url: view.url ?? null,
      name: view.name ?? null,
      address: view.address ?? null,
      runnerPort: view.runnerPort ?? null,
      slot: view.slot ?? null,
      error: view.error ?? null,
      machines: view.machines.map((m) => ({
        name: m.name,
        slot: m.slot,
        address: m.address,
        runnerPort: m.runnerPort,
        proxyPort: m.proxyPort,
        version: m.version,
        state: machineState(m.heartbeatAgeMs),
        lastSeenMs: m.heartbeatAgeMs,
        worlds: m.name === view.name ? own : view.worlds.filter((w) => w.machine === m.name).length,
        self: m.name === view.name,
        room: m.room ?? null
      }))
    }
  })

  /**
   * Every other machine's worlds (of the project `cwd` is in, when given) as they last published them, each with its
   * machine; a world whose machine is silent shows `unreachable`.
   */
  const remote = (cwd: string | undefined) =>
    Effect.gen(function* () {
      const view = yield* cluster.view
      if (view.worlds.length === 0 && view.anywhere.length === 0) return []
      const labels = cwd === undefined ? undefined : yield* worlds.projectInfo(cwd)
      const late = new Set(
        view.machines.filter((m) => machineState(m.heartbeatAgeMs) === "unreachable").map((m) => m.name)
      )
      const local = localOrigin(yield* router.info)
      const ofProject = (project: string) => labels === undefined || project === labels.label || project === labels.name
      // a world wanted anywhere is listed all the same when its owner lists no copy of it (it is being placed or
      // started, or wanted down): another machine's stale copy does not count
      const here = new Set<string>()
      if (view.anywhere.length > 0) {
        for (const w of (yield* worlds.status(undefined)).worlds) here.add(`${w.project}/${w.slug}`)
      }
      const listedOn = (r: (typeof view.anywhere)[number], machine: string | undefined) =>
        ((machine === undefined || machine === view.name) && here.has(`${r.project}/${r.slug}`)) ||
        view.worlds.some(
          (w) =>
            (machine === undefined || w.machine === machine) &&
            w.status.project === r.project &&
            w.status.slug === r.slug
        )
      // held by a machine: its copy there stands for it; held by none and wanted down: any copy left (stopped where
      // it ran) does; wanted up and held by none, it is being placed
      const listed = (r: (typeof view.anywhere)[number]) =>
        r.owner !== null ? listedOn(r, r.owner) : r.desired !== "up" && listedOn(r, undefined)
      const waiting = view.anywhere
        .filter((r) => ofProject(r.project) && r.desired !== "removed" && !listed(r))
        .map((r) =>
          r.desired === "up"
            ? cluster.placeholder(
                r,
                "starting",
                r.reason ??
                  (r.owner === null ? "waiting for a machine of the cluster to run it" : `${r.owner} is starting it`)
              )
            : cluster.placeholder(r, "stopped", null)
        )
      // a world that runs anywhere is listed where its row says it runs: an old machine's copy is stale
      return currentCopies(view.worlds, view.anywhere)
        .filter((w) => ofProject(w.status.project))
        .map(
          (w): WorldStatus => ({
            ...w.status,
            machine: w.machine,
            // the URL as it works here: through this machine's proxy, which forwards to the world's machine
            services: w.status.services.map((s) => ({ ...s, url: s.url === null ? null : local(s.url) })),
            ...(late.has(w.machine) ? { state: UNREACHABLE, reason: `machine ${w.machine} is not answering` } : {})
          })
        )
        .concat(waiting)
    })

  /** This machine's worlds (of the project `cwd` is in, when given), then every other machine's. */
  const status = (cwd: string | undefined) =>
    Effect.gen(function* () {
      const local = yield* worlds.status(cwd)
      const others = yield* remote(cwd)
      const anywhere = new Set((yield* cluster.view).anywhere.map((r) => `${r.project}/${r.slug}`))
      if (others.length === 0 && anywhere.size === 0) return local
      const here = local.worlds.map((w) =>
        anywhere.has(`${w.project}/${w.slug}`)
          ? { ...w, placement: "anywhere" as const, reason: w.reason ?? fencedReason(w, isAtRest(w.state)) }
          : w
      )
      return { worlds: [...here, ...others] }
    })

  /** The world of another machine that `ref` names, when this machine has no world of that name in the project. */
  const remoteOf = (ref: { readonly cwd: string; readonly world?: string | undefined }) =>
    Effect.gen(function* () {
      const name = ref.world
      if (name === undefined) return undefined
      const view = yield* cluster.view
      if (view.worlds.length === 0) return undefined
      const info = yield* worlds.projectInfo(ref.cwd)
      const local = yield* worlds.status(ref.cwd)
      if (local.worlds.some((w) => w.name === name || w.slug === name)) return undefined
      return yield* cluster.remoteWorld([info.label, info.name], name)
    }).pipe(Effect.orElseSucceed((): RemoteWorld | undefined => undefined))

  /**
   * Sends `command` to a world on its own machine, then asks that machine (at most for `SETTLE_TIMEOUT`) until the
   * world is in one of the `settled` states — after having left the state it was in when the command went, when
   * `change` is asked for (a reload of a running world runs again).
   */
  const forward = <C extends WorldCommand>(
    remote: RemoteWorld,
    command: C,
    settled: ReadonlyArray<string>,
    change = false
  ) =>
    Effect.gen(function* () {
      const before = yield* cluster.statusOf(remote)
      yield* cluster.tell(remote, command)
      let left = !change
      let last = before
      const deadline = Date.now() + Duration.toMillis(SETTLE_TIMEOUT)
      while (Date.now() < deadline) {
        last = yield* cluster.statusOf(remote)
        // a quick reload may be running again before the first look: its processes are new ones then
        if (last.state !== before.state || pids(last) !== pids(before)) left = true
        if (left && settled.includes(last.state)) break
        yield* Effect.sleep(SETTLE_POLL)
      }
      return { ...last, machine: remote.machine.name }
    })

  /** The world wanted anywhere that `ref` names in its project, when it names one (by name: never the cwd's own). */
  const anywhereFor = (ref: { readonly cwd: string; readonly world?: string | undefined }) =>
    Effect.gen(function* () {
      const name = ref.world
      if (name === undefined) return undefined
      const view = yield* cluster.view
      if (view.anywhere.length === 0) return undefined
      const info = yield* worlds.projectInfo(ref.cwd)
      return yield* cluster.anywhereOf([info.label, info.name], name)
    }).pipe(Effect.orElseSucceed((): AnywhereRow | undefined => undefined))

  /** `other` for a world wanted anywhere, else `rest`. */
  const anywhereOr = <A, E, R, E2, R2>(
    ref: { readonly cwd: string; readonly world?: string | undefined },
    other: (row: AnywhereRow) => Effect.Effect<A, E2, R2>,
    rest: Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | E2, R | R2> =>
    Effect.flatMap(anywhereFor(ref), (row): Effect.Effect<A, E | E2, R | R2> => (row === undefined ? rest : other(row)))

  /** `local` for a world of this machine; `remote` for a world that only another machine has. */
  const routed = <A, E, R, E2>(
    ref: { readonly cwd: string; readonly world?: string | undefined },
    local: Effect.Effect<A, E, R>,
    remote: (world: RemoteWorld) => Effect.Effect<A, E2>
  ): Effect.Effect<A, E | E2, R> =>
    Effect.flatMap(remoteOf(ref), (world): Effect.Effect<A, E | E2, R> => (world === undefined ? local : remote(world)))

  return { report, remote, status, routed, forward, anywhereOr } as const
}
