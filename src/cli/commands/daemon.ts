/**
 * `berth daemon start|stop|status|run` and `berth port`: the machine-wide side of berth.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { DaemonClient, ensureDaemon } from "../../daemon/client.js"
import { withDaemon } from "./worlds.js"
import { socketAnswers } from "../../daemon/lock.js"
import { runDaemon } from "../../daemon/server.js"
import { request } from "../../daemon/wire.js"
import { InvalidRequest } from "../../domain/errors.js"
import { formatPortRange, parsePortRange } from "../../domain/ports.js"
import { Home } from "../../services/Home.js"
import { json, printJson } from "../output.js"

const ping = (socket: string) =>
  Effect.promise(() => request(socket, "Ping", undefined, 5_000)).pipe(
    Effect.map((r) =>
      r._tag === "Success" ? Option.some(r.value as { version: string; pid: number; home: string }) : Option.none()
    )
  )

const start = Command.make("start", { json }, ({ json }) =>
  Effect.gen(function* () {
    const home = yield* Home
    yield* ensureDaemon(home)
    const info = yield* ping(home.socket)
    if (json) return yield* printJson(Option.getOrNull(info))
    yield* Console.log(
      Option.match(info, { onNone: () => "started", onSome: (i) => `running: pid ${i.pid}, berth ${i.version}` })
    )
  })
).pipe(Command.withDescription("Start the daemon of this BERTH_HOME (commands start it on demand too)"))

const stop = Command.make("stop", { json }, ({ json }) =>
  Effect.gen(function* () {
    const home = yield* Home
    const info = yield* ping(home.socket)
    if (Option.isSome(info)) {
      yield* Effect.promise(() => request(home.socket, "Shutdown", undefined, 5_000))
      for (let i = 0; i < 100 && (yield* Effect.promise(() => socketAnswers(home.socket))); i++) {
        yield* Effect.sleep("100 millis")
      }
    }
    if (json) return yield* printJson({ stopped: Option.isSome(info) })
    yield* Console.log(
      Option.isSome(info) ? "stopped (services keep running; the next daemon adopts them)" : "not running"
    )
  })
).pipe(Command.withDescription("Stop the daemon; the services it supervises keep running"))

const status = Command.make("status", { json }, ({ json }) =>
  Effect.gen(function* () {
    const home = yield* Home
    const info = yield* ping(home.socket)
    if (json) {
      return yield* printJson({
        running: Option.isSome(info),
        home: home.root,
        log: home.daemonLog,
        ...Option.getOrElse(info, () => ({}))
      })
    }
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
    const served = yield* Effect.scoped(runDaemon)
    if (!served) process.exitCode = 0
  })
).pipe(Command.withDescription("Run the daemon in the foreground (what `start` launches)"))

export const daemon = Command.make("daemon").pipe(
  Command.withDescription("The machine-wide daemon that supervises every world"),
  Command.withSubcommands([start, stop, status, run]),
  Command.provide(Home.layer)
)

export const port = Command.make(
  "port",
  {
    range: Options.text("range").pipe(
      Options.withDescription("the range ports are leased from, e.g. 4000-5999"),
      Options.optional
    ),
    json
  },
  ({ json, range }) =>
    Effect.gen(function* () {
      const client = yield* DaemonClient
      const settings = yield* Option.match(range, {
        onNone: () => client.GetSettings(),
        onSome: (text) =>
          Effect.gen(function* () {
            const parsed = parsePortRange(text)
            if (Either.isLeft(parsed)) return yield* new InvalidRequest({ reason: parsed.left })
            return yield* client.SetPortRange(parsed.right)
          })
      })
      if (json) return yield* printJson(settings)
      yield* Console.log(`port range: ${formatPortRange(settings.portRange)}`)
    })
).pipe(Command.withDescription("Show or set the machine-wide port settings"), withDaemon)
