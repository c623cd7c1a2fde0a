/**
 * The web dashboard as the daemon runs it: the server (`services/dashboard/web.ts`) fed by the same state stream
 * as `Watch`, the Logs stream, and actions taken through `Worlds` with the world's own environment and selection
 * (what its last `up` was given), as the reconciler does — never the daemon's.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { Worlds } from "../actors/Worlds.js"
import { Down, Remove, RestartServices } from "../actors/protocol.js"
import { Cluster, type RemoteWorld } from "../cluster/Cluster.js"
import type { AnywhereRow } from "../cluster/store.js"
import { definedEnv } from "../domain/environment.js"
import { InternalError, InvalidRequest } from "../domain/errors.js"
import { type ActionRequest, serveDashboard } from "../services/dashboard/web.js"
import type { Admission } from "../services/Admission.js"
import type { Router } from "../services/proxy/Router.js"
import type { Platform } from "../services/Platform.js"
import { Registry } from "../services/Registry.js"
import { WatchMessage } from "./api.js"
import { watch } from "./watch.js"

const encode = Schema.encode(WatchMessage)

/**
 * A world that runs anywhere is commanded through the cluster's table, wherever it runs (a down of its copy alone would
 * be undone by the placer, which starts what is wanted up): up, down and remove say what is wanted; the rest act on
 * its copy where it runs.
 */
const actAnywhere = (row: AnywhereRow, action: ActionRequest["action"]) =>
  Effect.gen(function* () {
    const cluster = yield* Cluster
    const desired = action === "up" ? "up" : action === "down" ? "down" : action === "remove" ? "removed" : undefined
    if (desired === undefined) return undefined
    // answered at once: the cluster places and starts it meanwhile, as `up --no-wait` does
    yield* cluster.setAnywhere(row, desired).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning(`web dashboard: ${action} of ${row.name}`, cause)),
      Effect.forkDaemon
    )
    return `${row.name}: ${desired === "up" ? "starting" : desired === "down" ? "stopping" : "removing"} (it runs anywhere)`
  })

/**
 * A world of another machine, commanded there through the cluster: those actions that need nothing of this machine.
 * `up` and `reload` take the world's own environment and selection, which live on its machine: act there.
 */
const actRemote = (remote: RemoteWorld, request: ActionRequest) =>
  Effect.gen(function* () {
    const cluster = yield* Cluster
    const name = remote.status.name
    const there = `on ${remote.machine.name}`
    switch (request.action) {
      case "down":
        yield* cluster.tell(remote, new Down())
        return `${name}: stopped ${there}`
      case "remove":
        yield* cluster.tell(remote, new Remove({ force: false }))
        return `removed ${name} ${there}`
      case "restart":
        yield* cluster.tell(remote, new RestartServices({ services: [request.service ?? ""] }))
        return `${name}: restarted ${request.service ?? ""} ${there}`
      case "up":
      case "reload":
        return yield* new InvalidRequest({
          reason: `world ${name} runs on machine ${remote.machine.name}, which keeps its environment: ${request.action} it from there, or with \`berth ${request.action} ${name}\` in a checkout of ${remote.status.project} here`
        })
    }
  })

const act = (request: ActionRequest) =>
  Effect.gen(function* () {
    const worlds = yield* Worlds
    const registry = yield* Registry
    const cluster = yield* Cluster
    const anywhere = (project: string, slug: string) =>
      Effect.map(cluster.view, (v) => v.anywhere.find((r) => r.project === project && r.slug === slug))
    if (request.world < 0) {
      // a world of another machine: shown here, commanded there
      const remote = yield* cluster.remoteById(request.world)
      if (remote === undefined) return yield* new InvalidRequest({ reason: `world #${request.world} is gone` })
      const row = yield* anywhere(remote.status.project, remote.status.slug)
      const done = row === undefined ? undefined : yield* actAnywhere(row, request.action)
      return done ?? (yield* actRemote(remote, request))
    }
    const w = yield* registry.world(request.world)
    if (w === undefined) return yield* new InvalidRequest({ reason: `world #${request.world} is gone` })
    const row = yield* anywhere(w.projectName, w.slug)
    const done = row === undefined ? undefined : yield* actAnywhere(row, request.action)
    if (done !== undefined) return done
    const ref = { cwd: w.mainRoot, world: w.name }
    const env = w.env ?? definedEnv(process.env)
    switch (request.action) {
      case "up": {
        const s = yield* worlds.up(ref, w.selection, env, false)
        return `${w.name}: ${s.state}`
      }
      case "down":
        yield* worlds.down(ref, false)
        return `${w.name}: stopped`
      case "reload": {
        // the page answers at once, as for up: the stream shows the world coming up (or failing)
        const s = yield* worlds.reload(ref, env, false)
        return `${w.name}: ${s.state}`
      }
      case "remove": {
        const r = yield* worlds.remove(ref, false)
        return `removed ${r.name} (${r.path})`
      }
      case "restart": {
        yield* worlds.restartServices(ref, [request.service ?? ""])
        return `${w.name}: restarted ${request.service ?? ""}`
      }
    }
  }).pipe(
    // a defect is berth's own fault: logged in full, answered as an InternalError, as the socket's handlers do
    Effect.catchAllDefect((defect) =>
      Effect.zipRight(
        Effect.logError(`web dashboard: ${request.action} failed`, Cause.die(defect)),
        Effect.fail(
          new InternalError({ reason: `${request.action} failed inside berth; the daemon's log has the details` })
        )
      )
    )
  )

/** Serves the web dashboard for the daemon's life (see `services/dashboard/web.ts` for who may act). */
export const serveWebDashboard = serveDashboard<Registry | Router | Admission | Worlds | Cluster | Platform>({
  watch: watch(undefined).pipe(Stream.mapEffect((m) => encode(m))),
  logs: (world, service) =>
    Stream.unwrap(
      Effect.gen(function* () {
        if (world < 0) {
          const remote = yield* (yield* Cluster).remoteById(world)
          if (remote === undefined) return yield* new InvalidRequest({ reason: `world #${world} is gone` })
          return (yield* Cluster).logs(remote, { service, follow: true, lines: 200 }).pipe(Stream.map((l) => l.line))
        }
        const w = yield* (yield* Registry).world(world)
        if (w === undefined) return yield* new InvalidRequest({ reason: `world #${world} is gone` })
        return (yield* Worlds)
          .logs({ cwd: w.mainRoot, world: w.name }, { service, follow: true, lines: 200 })
          .pipe(Stream.map((l) => l.line))
      })
    ),
  act
})
