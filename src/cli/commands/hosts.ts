/**
 * `berth hosts sync [--watch] | clean`: the live routes' names in a marked block of the hosts file, for programs
 * that cannot resolve `*.localhost` themselves. When berth may not write the file it prints the exact line that does
 * it as root. `BERTH_HOSTS_FILE` names another file (tests, or a system that keeps hosts elsewhere).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { resolve } from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { DaemonClient } from "../../daemon/client.js"
import { InvalidRequest } from "../../domain/errors.js"
import { hostsIn, routedNames, withHosts, withoutHosts } from "../../domain/hosts.js"
import { shellQuote } from "../../domain/tokens.js"
import { homePaths, resolveHome } from "../../services/homePaths.js"
import { printDocument } from "../json.js"
import { launcherPath } from "../launcher.js"
import { json, UsageError } from "../output.js"
import { viaDaemon, withDaemon } from "./worlds.js"

const hostsFile = () => process.env.BERTH_HOSTS_FILE ?? "/etc/hosts"

/** The host names of every routed service of every world the daemon knows (never a slice's address). */
const liveNames = Effect.gen(function* () {
  const client = yield* DaemonClient
  const { worlds } = yield* client.Status({})
  return routedNames(worlds)
})

/** Writes the file, or fails saying how to do it as root (the same command, with this BERTH_HOME). */
const write = (file: string, text: string, again: string) =>
  Effect.gen(function* () {
    const home = homePaths(resolveHome())
    yield* Effect.try({
      try: () => writeFileSync(file, text),
      catch: (e) => {
        const code = (e as NodeJS.ErrnoException).code
        const berth = launcherPath() ?? "berth"
        return new InvalidRequest({
          reason:
            code === "EACCES" || code === "EPERM"
              ? `berth may not write ${file}\n  hint: sudo env BERTH_HOME=${shellQuote(home.root)} ${shellQuote(berth)} hosts ${again}`
              : `cannot write ${file}: ${e instanceof Error ? e.message : String(e)}`
        })
      }
    })
  })

const read = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : "")

const syncOnce = (file: string, again: string) =>
  Effect.gen(function* () {
    const names = yield* liveNames
    const before = read(file)
    const after = withHosts(before, names)
    if (after !== before) yield* write(file, after, again)
    return { names: hostsIn(after), changed: after !== before }
  })

const sync = Command.make(
  "sync",
  {
    watch: Options.boolean("watch").pipe(
      Options.withDescription("keep the block in step with the routes until interrupted (every 2 s)")
    ),
    daemon: Options.boolean("daemon").pipe(
      Options.withDescription(
        "have the daemon keep the block in step from now on, at every change of the routes and across restarts (berth hosts clean stops it)"
      )
    ),
    json
  },
  ({ daemon, json, watch }) =>
    viaDaemon(
      Effect.gen(function* () {
        const file = resolve(hostsFile())
        if (daemon) {
          if (watch) return yield* new UsageError({ message: "hosts sync: --daemon or --watch, not both" })
          const kept = yield* (yield* DaemonClient).KeepHosts({ file })
          if (json) return yield* printDocument("hosts", { file, names: kept.names })
          return yield* Console.log(
            `${file}: ${kept.names.length} route name(s) on 127.0.0.1, kept in step by the daemon from now on`
          )
        }
        const again = watch ? "sync --watch" : "sync"
        const first = yield* syncOnce(file, again)
        if (json) yield* printDocument("hosts", { file, names: first.names })
        else yield* Console.log(`${file}: ${first.names.length} route name(s) on 127.0.0.1`)
        if (!watch) return
        yield* syncOnce(file, again).pipe(
          Effect.tap((r) =>
            r.changed && !json ? Console.log(`${file}: ${r.names.length} route name(s) on 127.0.0.1`) : Effect.void
          ),
          Effect.repeat(Schedule.spaced("2 seconds"))
        )
      })
    )
).pipe(
  Command.withDescription("Write the live routes' names into the hosts file, in a block of berth's own"),
  withDaemon
)

const clean = Command.make("clean", { json }, ({ json }) =>
  Effect.gen(function* () {
    const file = resolve(hostsFile())
    // a daemon keeping the block would write it again at the next change: it stops first (where it may not take
    // its block out, this command does, or says how to as root)
    yield* (yield* DaemonClient).KeepHosts({ file: null }).pipe(Effect.catchTag("InvalidRequest", () => Effect.void))
    const before = read(file)
    const after = withoutHosts(before)
    if (after !== before) yield* write(file, after, "clean")
    if (json) yield* printDocument("hosts", { file, names: [] })
    else yield* Console.log(`${file}: berth's block removed`)
  }).pipe(viaDaemon)
).pipe(Command.withDescription("Take berth's block out of the hosts file (and stop the daemon keeping it)"), withDaemon)

export const hosts = Command.make("hosts").pipe(
  Command.withDescription("Route names in the hosts file, for programs that cannot resolve *.localhost"),
  Command.withSubcommands([sync, clean])
)
