/**
 * The daemon: one per BERTH_HOME, serving the API over a unix socket (0600) to the CLI and anyone else of this user,
 * and running the reconciler. It holds no process handles that matter to its children: services write their logs
 * straight to files and outlive it, and the next daemon adopts them.
 */
import { chmodSync, existsSync, unlinkSync } from "node:fs"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import * as Deferred from "effect/Deferred"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { ReconcilerLive } from "../actors/Reconciler.js"
import { WorldsLive } from "../layers/index.js"
import { Worlds } from "../actors/Worlds.js"
import { InvalidRequest } from "../domain/errors.js"
import { parsePortRange } from "../domain/ports.js"
import { Home } from "../services/Home.js"
import { Ports } from "../services/Ports.js"
import { Processes } from "../services/Processes.js"
import { Router } from "../services/proxy/Router.js"
import { build, version } from "../version.js"
import { DaemonApi } from "./api.js"
import { acquireLock, releaseLock, socketAnswers } from "./lock.js"

/** A request's outcome as data, its failure rendered (see `PlainFailure`). */
const plain = <A, E extends { readonly _tag: string; readonly message: string }>(effect: Effect.Effect<A, E>) =>
  effect.pipe(
    Effect.map((value) => ({ _tag: "Success" as const, value })),
    Effect.catchAll((e) => Effect.succeed({ _tag: "Failure" as const, tag: e._tag, message: e.message }))
  )

const handlers = (shutdown: Deferred.Deferred<void>) =>
  DaemonApi.toLayer(
    Effect.gen(function* () {
      const worlds = yield* Worlds
      const ports = yield* Ports
      const home = yield* Home
      const router = yield* Router
      const proxyInfo = Effect.map(router.info, (i) => ({
        http: { wanted: i.http.wanted, port: i.http.port ?? null, error: i.http.error ?? null },
        https: { wanted: i.https.wanted, port: i.https.port ?? null, error: i.https.error ?? null },
        httpsUrls: i.httpsUrls,
        caPath: i.caPath
      }))
      const settings = Effect.map(Effect.all([ports.range(), proxyInfo]), ([portRange, proxy]) => ({
        portRange,
        proxy
      }))
      return {
        Ping: () => Effect.succeed({ version, build, pid: process.pid, home: home.root }),
        Up: (p) => worlds.up({ cwd: p.cwd, world: p.world }, { services: p.services, groups: p.groups }, p.env),
        UpPlain: (p) =>
          plain(worlds.up({ cwd: p.cwd, world: p.world }, { services: p.services, groups: p.groups }, p.env)),
        Down: (p) => worlds.down({ cwd: p.cwd, world: p.world }, p.all),
        DownPlain: (p) => plain(worlds.down({ cwd: p.cwd, world: p.world }, p.all)),
        Reload: (p) => worlds.reload({ cwd: p.cwd, world: p.world }, p.env),
        Remove: (p) => worlds.remove({ cwd: p.cwd, world: p.world }, p.force),
        Status: (p) => worlds.status(p.cwd),
        Env: (p) => worlds.env({ cwd: p.cwd, world: p.world }),
        Logs: (p) =>
          worlds.logs({ cwd: p.cwd, world: p.world }, { service: p.service, follow: p.follow, lines: p.lines }),
        GoldenRebuild: (p) => worlds.rebuildGolden({ cwd: p.cwd, world: p.world }, p.service, p.env),
        Gc: (p) =>
          Effect.map(worlds.gc(p.dryRun, p.env ?? {}), (report) => ({
            unreachable: report.unreachable,
            entries: report.entries.map(({ error, ...entry }) => (error === undefined ? entry : { ...entry, error }))
          })),
        GetSettings: () => settings.pipe(Effect.orDie),
        SetPortRange: (p) =>
          Effect.gen(function* () {
            const parsed = parsePortRange(`${p.from}-${p.to}`)
            if (Either.isLeft(parsed)) return yield* new InvalidRequest({ reason: parsed.left })
            yield* ports.setRange(parsed.right).pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
            return yield* settings.pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
          }),
        SetProxy: (p) =>
          Effect.gen(function* () {
            for (const choice of [p.http, p.https]) {
              if (typeof choice === "number" && (!Number.isInteger(choice) || choice < 1 || choice > 65_535)) {
                return yield* new InvalidRequest({ reason: `port ${choice} is not a port (1-65535)` })
              }
            }
            yield* router
              .setPorts({ http: p.http, https: p.https, httpsUrls: p.httpsUrls })
              .pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
            return yield* settings.pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
          }),
        Shutdown: () => Deferred.succeed(shutdown, undefined).pipe(Effect.asVoid)
      }
    })
  )

/** Runs the daemon in this process until asked to stop. Returns false when another daemon already serves this home. */
export const runDaemon = Effect.gen(function* () {
  const home = yield* Home
  const lock = acquireLock(home.pidFile)
  if (lock._tag === "Held") {
    yield* Effect.logInfo(`a daemon (pid ${lock.pid}) already serves ${home.root}`)
    return false
  }
  yield* Effect.addFinalizer(() => Effect.sync(() => releaseLock(home.pidFile)))
  // a socket file nobody answers on is left from a crash: replace it (listening would fail with EADDRINUSE)
  if (existsSync(home.socket)) {
    if (yield* Effect.promise(() => socketAnswers(home.socket))) return false
    unlinkSync(home.socket)
  }
  const shutdown = yield* Deferred.make<void>()
  const worlds = yield* Layer.build(WorldsLive)
  // runs before the engine's scope closes (finalizers run in reverse): a daemon that stops — asked to, replaced by
  // another build, or signalled — lets go of every process exactly as a crash would, and the next daemon adopts them
  yield* Effect.addFinalizer(() => Context.get(worlds, Processes).detach)
  const server = RpcServer.layer(DaemonApi, { concurrency: "unbounded" }).pipe(
    Layer.provide(handlers(shutdown)),
    Layer.provide(RpcServer.layerProtocolSocketServer),
    Layer.provide(RpcSerialization.layerNdjson),
    Layer.provide(NodeSocketServer.layer({ path: home.socket }))
  )
  // the socket is born owner-only (umask), then the umask is restored before anything else is started, since git
  // and the services inherit it
  const previousUmask = process.umask(0o077)
  yield* Layer.launch(server).pipe(Effect.provide(worlds), Effect.forkScoped)
  for (let i = 0; i < 500 && !existsSync(home.socket); i++) yield* Effect.sleep("10 millis")
  process.umask(previousUmask)
  if (!existsSync(home.socket)) return yield* Effect.dieMessage(`the daemon could not listen on ${home.socket}`)
  chmodSync(home.socket, 0o600)
  yield* Effect.logInfo(`berth ${version} daemon (pid ${process.pid}) serving ${home.root}`)
  yield* Layer.launch(ReconcilerLive).pipe(Effect.provide(worlds), Effect.forkScoped)
  yield* Deferred.await(shutdown)
  return true
})
