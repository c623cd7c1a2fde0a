/**
 * The daemon: one per BERTH_HOME, serving the API over a unix socket (0600) to the CLI and anyone else of this user,
 * and running the reconciler. It holds no process handles that matter to its children: services write their logs
 * straight to files and outlive it, and the next daemon adopts them.
 */
import { chmodSync, existsSync, statSync, unlinkSync } from "node:fs"
import { isAbsolute } from "node:path"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import * as RpcTest from "@effect/rpc/RpcTest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { Down, Reload, Up } from "../actors/protocol.js"
import { ReconcileLoopLive, sweepLeftovers } from "../actors/Reconciler.js"
import { allowKnownWorlds } from "./consent.js"
import { WorldsLive } from "../layers/index.js"
import { Worlds } from "../actors/Worlds.js"
import {
  type DiskFull,
  InternalError,
  InvalidRequest,
  InvalidWorldName,
  NotARepository,
  WorldNotFound
} from "../domain/errors.js"
import { asDiskFull } from "../services/disk.js"
import { resolveHome } from "../services/homePaths.js"
import { parsePortRange } from "../domain/ports.js"
import type { Git } from "../services/Git.js"
import { Home } from "../services/Home.js"
import { Ports } from "../services/Ports.js"
import { Processes } from "../services/Processes.js"
import { HostsKeeper } from "../services/proxy/HostsKeeper.js"
import { Router } from "../services/proxy/Router.js"
import { build, version } from "../version.js"
import { DaemonClient, type DaemonClientService } from "./client.js"
import { DaemonApi } from "./api.js"
import { Cluster } from "../cluster/Cluster.js"
import { makeClusterViews } from "./cluster.js"
import { acquireLock, socketAnswers } from "./lock.js"
import * as machine from "./machine.js"
import { watch } from "./watch.js"
import { serveWebDashboard } from "./web.js"
import type { Admission } from "../services/Admission.js"
import type { Platform } from "../services/Platform.js"
import type { Registry } from "../services/Registry.js"

/** The longest path the kernel takes (PATH_MAX); a world name is a branch, a path under `.git/refs`. */
const PATH_MAX = 4096
/** The longest string the kernel passes to a new process (MAX_ARG_STRLEN), and all of them together (ARG_MAX). */
const MAX_ARG_STRLEN = 128 * 1024
const MAX_ENV = 2 * 1024 * 1024

/** A request's text, short enough to quote back. */
const quoted = (text: string) => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text)

const isDirectory = (path: string): boolean => {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

/**
 * What a request names is checked here, before any handler uses it: `cwd` is an absolute path to an existing folder,
 * and a world name or the environment hold no NUL (no file name, argument or variable can) and fit what the kernel
 * passes to a process. Anything else reaches the caller as a typed failure, never as the error a system call throws.
 */
const checkCwd = (cwd: string): Effect.Effect<void, InvalidRequest | NotARepository> =>
  Effect.suspend((): Effect.Effect<void, InvalidRequest | NotARepository> => {
    if (cwd.includes("\u0000") || cwd.length > PATH_MAX || !isAbsolute(cwd)) {
      return Effect.fail(
        new InvalidRequest({ reason: `cwd must be the absolute path of a folder, not ${quoted(cwd)}` })
      )
    }
    return isDirectory(cwd) ? Effect.void : Effect.fail(new NotARepository({ path: cwd }))
  })

const checkRef = (ref: {
  readonly cwd: string
  readonly world?: string | undefined
}): Effect.Effect<void, InvalidRequest | NotARepository | InvalidWorldName> =>
  Effect.zipRight(
    checkCwd(ref.cwd),
    ref.world === undefined
      ? Effect.void
      : ref.world.includes("\u0000")
        ? Effect.fail(new InvalidWorldName({ name: ref.world, reason: "it contains a NUL character" }))
        : ref.world.length > PATH_MAX
          ? Effect.fail(
              new InvalidWorldName({
                name: `${ref.world.slice(0, 40)}…`,
                reason: `it is longer than ${PATH_MAX} characters`
              })
            )
          : Effect.void
  )

const checkEnv = (env: Readonly<Record<string, string>>): Effect.Effect<void, InvalidRequest> =>
  Effect.suspend(() => {
    let size = 0
    for (const [name, value] of Object.entries(env)) {
      const length = Buffer.byteLength(name) + Buffer.byteLength(value) + 2
      size += length
      if (name === "" || name.includes("=") || name.includes("\u0000") || value.includes("\u0000")) {
        return Effect.fail(
          new InvalidRequest({
            reason: `the environment variable ${quoted(name)} cannot be passed on: a name is not empty and holds no "=" or NUL, a value holds no NUL`
          })
        )
      }
      if (length > MAX_ARG_STRLEN) {
        return Effect.fail(
          new InvalidRequest({
            reason: `the environment variable ${quoted(name)} is ${length} bytes; a process can be given at most ${MAX_ARG_STRLEN}`
          })
        )
      }
    }
    return size > MAX_ENV
      ? Effect.fail(
          new InvalidRequest({ reason: `the environment is ${size} bytes; a process can be given at most ${MAX_ENV}` })
        )
      : Effect.void
  })

/**
 * A defect (a bug, or a system call that threw) is logged in full and answered as an InternalError, never raw; one
 * that found the disk full (a write of berth's own) is a DiskFull, which the user can act on.
 */
const internal = (tag: string, cause: Cause.Cause<unknown>) => {
  const home = resolveHome()
  const full = asDiskFull(Cause.squash(cause), home, home)
  return Effect.zipRight(
    Effect.logError(`${tag}: ${full === undefined ? "unexpected failure" : "the disk is full"}`, cause),
    Effect.fail(full ?? new InternalError({ reason: `${tag} failed unexpectedly` }))
  )
}

const guarded =
  (tag: string) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | InternalError | DiskFull, R> =>
    Effect.catchAllDefect(effect, (defect) => internal(tag, Cause.die(defect)))

const guardedStream =
  (tag: string) =>
  <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E | InternalError | DiskFull, R> =>
    Stream.catchAllCause(
      stream,
      (cause): Stream.Stream<never, E | InternalError | DiskFull> =>
        Cause.isDie(cause) ? Stream.fromEffect(internal(tag, cause)) : Stream.failCause(cause)
    )

interface UpPayload {
  readonly cwd: string
  readonly world?: string | undefined
  readonly env: Readonly<Record<string, string>>
  readonly services: ReadonlyArray<string>
  readonly groups: ReadonlyArray<string>
  readonly wait?: boolean | undefined
  readonly anywhere?: boolean | undefined
  readonly from?: string | undefined
}

interface DownPayload {
  readonly cwd: string
  readonly world?: string | undefined
  readonly all: boolean
}

/**
 * A request's outcome as data, its failure rendered (see `PlainFailure`). The lean path's `up` and `down`: a world
 * not found is told for that command (only `up` offers to make it), and for the worktree asked from when none is named.
 */
const plain = <A, E extends { readonly _tag: string; readonly message: string }>(
  effect: Effect.Effect<A, E>,
  asked: { readonly command: string; readonly world?: string | undefined }
) =>
  effect.pipe(
    Effect.map((value) => ({ _tag: "Success" as const, value })),
    Effect.catchAll((e) => {
      const told =
        e instanceof WorldNotFound
          ? new WorldNotFound({
              project: e.project,
              name: e.name,
              known: e.known,
              command: asked.command,
              current: asked.world === undefined
            })
          : e
      return Effect.succeed({ _tag: "Failure" as const, tag: told._tag, message: told.message })
    })
  )

/** The longest event message kept: a history line, not a log. */
const MAX_EVENT_MESSAGE = 2000

/**
 * Records an event in the history of the world `ref` names (or whose worktree `ref.cwd` is in), resolved as `Worlds`
 * resolves it — the repository's main checkout and the world's name (the branch by default) — without registering
 * anything: an event for a world that does not exist is a WorldNotFound.
 */
/** An agent's note in a world's history (what an MCP tool did): a short kind, a bounded message. */
const recordEvent = (p: {
  readonly cwd: string
  readonly world?: string | undefined
  readonly kind: string
  readonly message: string
}) =>
  Effect.gen(function* () {
    if (!/^[a-z][a-z_]{0,31}$/.test(p.kind)) {
      return yield* new InvalidRequest({ reason: `an event's kind is a short lower-case word, not ${quoted(p.kind)}` })
    }
    const message = p.message.length > MAX_EVENT_MESSAGE ? `${p.message.slice(0, MAX_EVENT_MESSAGE - 1)}…` : p.message
    yield* (yield* Worlds).recordEvent({ cwd: p.cwd, world: p.world }, p.kind, message)
  })

const handlers = (shutdown: Deferred.Deferred<void>) =>
  DaemonApi.toLayer(
    Effect.gen(function* () {
      const worlds = yield* Worlds
      const ports = yield* Ports
      const home = yield* Home
      const router = yield* Router
      const hostsKeeper = yield* HostsKeeper
      const cluster = yield* Cluster
      const clustered = makeClusterViews(worlds, cluster, router)
      const context = yield* Effect.context<
        Admission | Router | HostsKeeper | Ports | Registry | Git | Worlds | Cluster | Platform
      >()
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
      // a world that only another machine of the cluster has is brought up, down or reloaded there
      const up = (p: UpPayload) => {
        const anywhere = (world: string | undefined) =>
          cluster.upAnywhere({
            cwd: p.cwd,
            world,
            selection: { services: p.services, groups: p.groups },
            env: p.env,
            wait: p.wait ?? true
          })
        if (p.from !== undefined) {
          // a copy of a world's slices is made where both worlds are: this machine's
          const from = p.from
          return Effect.gen(function* () {
            yield* checkRef(p)
            yield* checkEnv(p.env)
            if (p.anywhere === true) {
              return yield* new InvalidRequest({
                reason: "up: --from makes a world on this machine; it cannot run anywhere"
              })
            }
            return yield* worlds.up(
              { cwd: p.cwd, world: p.world },
              { services: p.services, groups: p.groups },
              p.env,
              p.wait ?? true,
              { from }
            )
          })
        }
        return Effect.zipRight(checkRef(p), checkEnv(p.env)).pipe(
          Effect.zipRight(
            p.anywhere === true
              ? anywhere(p.world)
              : clustered.anywhereOr(
                  p,
                  (row) => anywhere(row.name),
                  clustered.routed(
                    p,
                    worlds.up(
                      { cwd: p.cwd, world: p.world },
                      { services: p.services, groups: p.groups },
                      p.env,
                      p.wait ?? true
                    ),
                    (remote) =>
                      clustered.forward(
                        remote,
                        new Up({ selection: { services: p.services, groups: p.groups }, env: p.env }),
                        p.wait === false ? ["queued", "starting", "running", "failed"] : ["running", "failed"]
                      )
                  )
                )
          )
        )
      }
      const down = (p: DownPayload) =>
        Effect.zipRight(
          checkRef(p),
          p.all
            ? worlds.down({ cwd: p.cwd, world: p.world }, true)
            : clustered.anywhereOr(
                p,
                (row) => Effect.map(cluster.setAnywhere(row, "down"), (w) => [w]),
                clustered.routed(p, worlds.down({ cwd: p.cwd, world: p.world }, false), (remote) =>
                  Effect.map(clustered.forward(remote, new Down(), ["stopped", "failed"]), (w) => [w])
                )
              )
        )
      return {
        Ping: () => Effect.succeed({ version, build, pid: process.pid, home: home.root }),
        Up: (p) => up(p).pipe(guarded("Up")),
        UpPlain: (p) => plain(up(p).pipe(guarded("UpPlain")), { command: "up", world: p.world }),
        Down: (p) => down(p).pipe(guarded("Down")),
        DownPlain: (p) => plain(down(p).pipe(guarded("DownPlain")), { command: "down", world: p.world }),
        Reset: (p) =>
          Effect.zipRight(checkRef(p), checkEnv(p.env)).pipe(
            Effect.zipRight(worlds.reset({ cwd: p.cwd, world: p.world }, p.slices, p.env)),
            guarded("Reset")
          ),
        StopServices: (p) =>
          checkRef(p).pipe(
            Effect.zipRight(worlds.stopServices({ cwd: p.cwd, world: p.world }, p.services)),
            guarded("StopServices")
          ),
        RestartServices: (p) =>
          checkRef(p).pipe(
            Effect.zipRight(worlds.restartServices({ cwd: p.cwd, world: p.world }, p.services, p.groups ?? [])),
            guarded("RestartServices")
          ),
        Reload: (p) =>
          Effect.zipRight(checkRef(p), checkEnv(p.env)).pipe(
            Effect.zipRight(
              clustered.routed(p, worlds.reload({ cwd: p.cwd, world: p.world }, p.env, p.wait ?? true), (remote) =>
                clustered.forward(
                  remote,
                  new Reload({ env: p.env }),
                  p.wait === false ? ["queued", "starting", "running", "failed"] : ["running", "failed"],
                  true
                )
              )
            ),
            guarded("Reload")
          ),
        Remove: (p) =>
          Effect.zipRight(
            checkRef(p),
            clustered.anywhereOr(
              p,
              (row) =>
                Effect.as(cluster.setAnywhere(row, "removed"), { project: row.project, name: row.name, path: "" }),
              worlds.remove({ cwd: p.cwd, world: p.world }, p.force)
            )
          ).pipe(guarded("Remove")),
        Status: (p) =>
          Effect.zipRight(p.cwd === undefined ? Effect.void : checkCwd(p.cwd), clustered.status(p.cwd)).pipe(
            guarded("Status")
          ),
        Env: (p) =>
          Effect.zipRight(
            checkRef(p),
            clustered.routed(p, worlds.env({ cwd: p.cwd, world: p.world }), (remote) => cluster.env(remote))
          ).pipe(guarded("Env")),
        Logs: (p) => {
          const options = { service: p.service, follow: p.follow, lines: p.lines }
          return Stream.unwrap(
            Effect.zipRight(
              checkRef(p),
              clustered.routed(p, Effect.succeed(worlds.logs({ cwd: p.cwd, world: p.world }, options)), (remote) =>
                Effect.succeed(cluster.logs(remote, options))
              )
            )
          ).pipe(guardedStream("Logs"))
        },
        Watch: (p) =>
          Stream.unwrap(Effect.as(p.cwd === undefined ? Effect.void : checkCwd(p.cwd), watch(p.cwd))).pipe(
            Stream.provideContext(context),
            guardedStream("Watch")
          ),
        GoldenRebuild: (p) =>
          Effect.zipRight(checkRef(p), checkEnv(p.env)).pipe(
            Effect.zipRight(worlds.rebuildGolden({ cwd: p.cwd, world: p.world }, p.service, p.env)),
            guarded("GoldenRebuild")
          ),
        Gc: (p) =>
          Effect.zipRight(
            checkEnv(p.env ?? {}),
            Effect.map(worlds.gc(p.dryRun, p.env ?? {}, false, p.goldens === true), (report) => ({
              unreachable: report.unreachable,
              forgotten: report.forgotten.map(({ name, ...f }) => (name === undefined ? f : { ...f, name })),
              entries: report.entries.map(({ error, ...entry }) => (error === undefined ? entry : { ...entry, error }))
            }))
          ).pipe(guarded("Gc")),
        GetSettings: () =>
          settings.pipe(
            Effect.mapError((e) => new InternalError({ reason: e.message })),
            guarded("GetSettings")
          ),
        SetPortRange: (p) =>
          Effect.gen(function* () {
            const parsed = parsePortRange(`${p.from}-${p.to}`)
            if (Either.isLeft(parsed)) return yield* new InvalidRequest({ reason: parsed.left })
            // the state database's failures are berth's own (or a full disk), never the request's
            yield* ports.setRange(parsed.right)
            return yield* settings
          }).pipe(guarded("SetPortRange")),
        SetProxy: (p) =>
          Effect.gen(function* () {
            for (const choice of [p.http, p.https]) {
              if (typeof choice === "number" && (!Number.isInteger(choice) || choice < 1 || choice > 65_535)) {
                return yield* new InvalidRequest({ reason: `port ${choice} is not a port (1-65535)` })
              }
            }
            // a port the proxy cannot listen on, or a CA it cannot make, refuses the request; the state database's
            // failures are berth's own (or a full disk)
            yield* router.setPorts({ http: p.http, https: p.https, httpsUrls: p.httpsUrls }).pipe(
              Effect.catchTags({
                ProxyError: (e) => new InvalidRequest({ reason: e.message }),
                CaError: (e) => new InvalidRequest({ reason: e.message })
              })
            )
            return yield* settings
          }).pipe(guarded("SetProxy")),
        Config: () => machine.config.pipe(Effect.provide(context), guarded("Config")),
        KeepHosts: (p) =>
          Effect.gen(function* () {
            if (p.file !== null && (!isAbsolute(p.file) || p.file.includes("\0"))) {
              return yield* new InvalidRequest({ reason: `the hosts file must be an absolute path, not ${p.file}` })
            }
            return yield* hostsKeeper.keep(p.file ?? undefined)
          }).pipe(guarded("KeepHosts")),
        Project: (p) => Effect.zipRight(checkCwd(p.cwd), worlds.projectInfo(p.cwd)).pipe(guarded("Project")),
        Reserve: (p) => machine.reserve(p).pipe(Effect.provide(context), guarded("Reserve")),
        Metrics: () => machine.metrics.pipe(Effect.provide(context), guarded("Metrics")),
        RecordEvent: (p) =>
          Effect.zipRight(checkRef(p), recordEvent(p)).pipe(Effect.provide(context), guarded("RecordEvent")),
        ClusterJoin: (p) =>
          cluster
            .join({
              url: p.url,
              name: p.name,
              address: p.address,
              runnerPort: p.runnerPort,
              init: p.init,
              replace: p.replace
            })
            .pipe(Effect.zipRight(clustered.report), guarded("ClusterJoin")),
        ClusterLeave: () => cluster.leave.pipe(Effect.zipRight(clustered.report), guarded("ClusterLeave")),
        ClusterStatus: () => clustered.report.pipe(guarded("ClusterStatus")),
        Shutdown: () => Deferred.succeed(shutdown, undefined).pipe(Effect.asVoid)
      }
    })
  )

/**
 * The daemon's client served in this process, without a socket: the daemon's own handlers over the engine the
 * caller provides (`WorldsLive` and a home). For tests of what the CLI is told, and for programs that want exactly
 * the CLI's answers. `Shutdown` ends nothing here.
 */
export const DaemonClientInProcess = Layer.scoped(
  DaemonClient,
  Effect.gen(function* () {
    const shutdown = yield* Deferred.make<void>()
    const client: DaemonClientService = yield* RpcTest.makeClient(DaemonApi).pipe(Effect.provide(handlers(shutdown)))
    return DaemonClient.make(client)
  })
)

/** Runs the daemon in this process until asked to stop. Returns false when another daemon already serves this home. */
export const runDaemon = Effect.gen(function* () {
  const home = yield* Home
  const lock = yield* Effect.promise(() => acquireLock(home.pidFile))
  if (lock._tag === "Held") {
    yield* Effect.logInfo(`a daemon (pid ${lock.pid ?? "?"}) already serves ${home.root}`)
    return false
  }
  yield* Effect.addFinalizer(() => Effect.sync(lock.release))
  // a socket file nobody answers on is left from a crash: replace it (listening would fail with EADDRINUSE)
  if (existsSync(home.socket)) {
    if (yield* Effect.promise(() => socketAnswers(home.socket))) return false
    unlinkSync(home.socket)
  }
  const shutdown = yield* Deferred.make<void>()
  const worlds = yield* Layer.build(WorldsLive)
  // before any command can start something of this daemon's own
  yield* sweepLeftovers.pipe(Effect.provide(worlds))
  // worlds run before berth asked for consent keep running as they are
  yield* allowKnownWorlds.pipe(
    Effect.provide(worlds),
    Effect.catchAll((e) => Effect.logWarning(`consent: ${e.message}`))
  )
  // runs before the engine's scope closes (finalizers run in reverse): a daemon that stops — asked to, replaced by
  // another build, or signalled — lets go of every process exactly as a crash would, and the next daemon adopts them
  yield* Effect.addFinalizer(() => Context.get(worlds, Processes).detach)
  // runs before that: worlds that run anywhere stop here rather than be left running, since another machine starts
  // them once this one's shards are free
  yield* Effect.addFinalizer(() => Context.get(worlds, Cluster).drain)
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
  yield* Layer.launch(ReconcileLoopLive).pipe(Effect.provide(worlds), Effect.forkScoped)
  // the Prometheus endpoint, when the user asked for one
  yield* machine.serveMetrics.pipe(Effect.provide(worlds))
  // the web dashboard, at berth.localhost through the proxy
  yield* serveWebDashboard.pipe(Effect.provide(worlds))
  yield* Deferred.await(shutdown)
  return true
})
