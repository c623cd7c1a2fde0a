/**
 * `berth daemon start|stop|status|run` (and `install|uninstall`, in daemon-install.ts) and `berth port`: the machine-wide side of berth.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { DaemonClient, ensureDaemon, shutdownDaemon } from "../../daemon/client.js"
import { daemonInstall } from "./daemon-install.js"
import { withDaemon } from "./worlds.js"
import { request } from "../../daemon/wire.js"
import { DaemonUnavailable, InvalidRequest } from "../../domain/errors.js"
import { formatPortRange, parsePortRange } from "../../domain/ports.js"
import { Home } from "../../services/Home.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"

const ping = (socket: string) =>
  Effect.promise(() => request(socket, "Ping", undefined, 5_000)).pipe(
    Effect.map((r) =>
      r._tag === "Success"
        ? Option.some(r.value as { version: string; build?: string; pid: number; home: string })
        : Option.none()
    )
  )

/** `daemon start` and `daemon status` print one document: a start that found no daemon answering says running: false. */
const printDaemonInfo = (
  home: { readonly root: string; readonly daemonLog: string },
  info: Option.Option<{ version: string; build?: string; pid: number; home: string }>
) =>
  printDocument("daemon-status", {
    running: Option.isSome(info),
    home: home.root,
    log: home.daemonLog,
    ...Option.getOrElse(info, () => ({}))
  })

const start = Command.make("start", { json }, ({ json }) =>
  Effect.gen(function* () {
    const home = yield* Home
    yield* ensureDaemon(home)
    const info = yield* ping(home.socket)
    if (json) return yield* printDaemonInfo(home, info)
    yield* Console.log(
      Option.match(info, { onNone: () => "started", onSome: (i) => `running: pid ${i.pid}, berth ${i.version}` })
    )
  })
).pipe(Command.withDescription("Start the daemon of this BERTH_HOME (commands start it on demand too)"))

const stop = Command.make("stop", { json }, ({ json }) =>
  Effect.gen(function* () {
    const home = yield* Home
    // returns once the old daemon has let go of its socket and lock, so a command right after starts a new one cleanly
    const stopped = yield* Effect.tryPromise({
      try: () => shutdownDaemon(home),
      catch: (e) => new DaemonUnavailable({ reason: e instanceof Error ? e.message : String(e), log: home.daemonLog })
    })
    const info = stopped === undefined ? Option.none() : Option.some(stopped)
    if (json) return yield* printDocument("daemon-stop", { stopped: Option.isSome(info) })
    yield* Console.log(
      Option.isSome(info) ? "stopped (services keep running; the next daemon adopts them)" : "not running"
    )
  })
).pipe(Command.withDescription("Stop the daemon; the services it supervises keep running"))

const status = Command.make("status", { json }, ({ json }) =>
  Effect.gen(function* () {
    const home = yield* Home
    const info = yield* ping(home.socket)
    if (json) return yield* printDaemonInfo(home, info)
    yield* Console.log(
      Option.match(info, {
        onNone: () => `not running (home ${home.root})`,
        onSome: (i) => `running: pid ${i.pid}, berth ${i.version}, home ${i.home}, log ${home.daemonLog}`
      })
    )
  })
).pipe(Command.withDescription("Is the daemon running, and where"))

const run = Command.make("run", {}, () =>
  Effect.gen(function* () {
    // the engine is loaded here, by the daemon alone: every other command is its client, and evaluating the engine's
    // modules was a tenth of each one's start
    const { runDaemon } = yield* Effect.promise(() => import("../../daemon/server.js"))
    const served = yield* Effect.scoped(runDaemon)
    if (!served) process.exitCode = 0
    // the services' watchers (timers, child handles) were let go, not stopped: nothing is left to wait for
    else process.exit(0)
  })
).pipe(Command.withDescription("Run the daemon in the foreground (what `start` launches)"))

export const daemon = Command.make("daemon").pipe(
  Command.withDescription("The machine-wide daemon that supervises every world"),
  Command.withSubcommands([start, stop, status, run, ...daemonInstall]),
  Command.provide(Home.layer)
)

/** `80`, `auto` or `off`, as `--proxy` and `--https` take them. */
const parseChoice = (flag: string, text: string): Effect.Effect<number | "auto" | "off", InvalidRequest> => {
  if (text === "auto" || text === "off") return Effect.succeed(text)
  const n = Number(text)
  return Number.isInteger(n) && n >= 1 && n <= 65_535
    ? Effect.succeed(n)
    : Effect.fail(
        new InvalidRequest({ reason: `--${flag} ${JSON.stringify(text)}: expected a port (1-65535), auto or off` })
      )
}

const listenerLine = (
  name: string,
  l: { readonly wanted: number | string; readonly port: number | null; readonly error: string | null }
) =>
  l.port !== null
    ? `${name}: ${l.port}${l.wanted === "auto" ? " (auto)" : ""}`
    : `${name}: not listening (${l.wanted}${l.error === null ? "" : `: ${l.error.split("\n")[0]}`})`

export const port = Command.make(
  "port",
  {
    range: Options.text("range").pipe(
      Options.withDescription("the range ports are leased from, e.g. 4000-5999"),
      Options.optional
    ),
    proxy: Options.text("proxy").pipe(
      Options.withDescription("the proxy's HTTP port: a number, auto (80, else 7355) or off"),
      Options.optional
    ),
    https: Options.text("https").pipe(
      Options.withDescription("the proxy's HTTPS port: a number, auto (443, else 7356) or off"),
      Options.optional
    ),
    httpsUrls: Options.choice("https-urls", ["on", "off"]).pipe(
      Options.withDescription("on: every project's ${svc.url} is https, as with [project] https = true"),
      Options.optional
    ),
    json
  },
  ({ https, httpsUrls, json, proxy, range }) =>
    Effect.gen(function* () {
      const client = yield* DaemonClient
      if (Option.isSome(range)) {
        const parsed = parsePortRange(range.value)
        if (Either.isLeft(parsed)) return yield* new InvalidRequest({ reason: parsed.left })
        yield* client.SetPortRange(parsed.right)
      }
      if (Option.isSome(proxy) || Option.isSome(https) || Option.isSome(httpsUrls)) {
        yield* client.SetProxy({
          http: Option.isSome(proxy) ? yield* parseChoice("proxy", proxy.value) : undefined,
          https: Option.isSome(https) ? yield* parseChoice("https", https.value) : undefined,
          httpsUrls: Option.isSome(httpsUrls) ? httpsUrls.value === "on" : undefined
        })
      }
      const settings = yield* client.GetSettings()
      if (json) return yield* printDocument("port", settings)
      yield* Console.log(
        [
          `port range: ${formatPortRange(settings.portRange)}`,
          listenerLine("proxy (http)", settings.proxy.http),
          listenerLine("proxy (https)", settings.proxy.https),
          `https urls for every project: ${settings.proxy.httpsUrls ? "on" : "off"}`,
          `CA: ${settings.proxy.caPath}`
        ].join("\n")
      )
    })
).pipe(
  Command.withDescription("Show or set the machine-wide port settings: the lease range and the proxy's ports"),
  withDaemon
)
