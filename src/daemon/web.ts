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
import { Cluster } from "../cluster/Cluster.js"
import { definedEnv } from "../domain/environment.js"
import { InternalError, InvalidRequest } from "../domain/errors.js"
import { type ActionRequest, serveDashboard } from "../services/dashboard/web.js"
import { Registry } from "../services/Registry.js"
import { WatchMessage } from "./api.js"
import { watch } from "./watch.js"

const encode = Schema.encode(WatchMessage)

const act = (request: ActionRequest) =>
  Effect.gen(function* () {
    const worlds = yield* Worlds
    const registry = yield* Registry
    if (request.world < 0) {
      // a world of another machine: shown here, commanded there (its environment and selection live there)
      const remote = yield* (yield* Cluster).remoteById(request.world)
      return yield* new InvalidRequest({
        reason:
          remote === undefined
            ? `world #${request.world} is gone`
            : `world ${remote.status.name} runs on machine ${remote.machine.name}: ${request.action} it from there, or with \`berth ${request.action === "restart" ? "reload" : request.action} ${remote.status.name}\` in a checkout of ${remote.status.project} here`
      })
    }
    const w = yield* registry.world(request.world)
    if (w === undefined) return yield* new InvalidRequest({ reason: `world #${request.world} is gone` })
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
        const s = yield* worlds.reload(ref, env)
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
export const serveWebDashboard = serveDashboard({
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
