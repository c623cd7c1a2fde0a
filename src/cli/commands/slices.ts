/**
 * Slice housekeeping: `berth gc` sweeps what a crash or a vanished world left on the servers; `berth golden rebuild`
 * builds a golden template again now.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { DaemonClient } from "../../daemon/client.js"
import { definedEnv } from "../../domain/environment.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"
import { renderGc, renderWorld } from "../render.js"
import { consenting, yes } from "./consent.js"
import { askedBy, viaDaemon, withDaemon } from "./worlds.js"

export const gc = Command.make(
  "gc",
  {
    dryRun: Options.boolean("dry-run").pipe(Options.withDescription("only say what would be dropped")),
    goldens: Options.boolean("goldens").pipe(
      Options.withDescription("drop the goldens of projects with no world left now, without waiting for the grace")
    ),
    json
  },
  ({ dryRun, goldens, json }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const report = yield* client.Gc({ dryRun, env: definedEnv(process.env), goldens })
        if (json) return yield* printDocument("gc", { dryRun, ...report })
        yield* Console.log(renderGc(report, dryRun))
      })
    )
).pipe(
  Command.withDescription("Drop slices whose world is gone or that a crash left half-made (never anything unowned)"),
  withDaemon
)

const rebuild = Command.make(
  "rebuild",
  {
    world: Args.text({ name: "world" }).pipe(Args.withDescription("the world whose worktree and environment to use")),
    service: Args.text({ name: "service" }).pipe(Args.withDescription('a slice service with clone_from = "golden"')),
    yes,
    json
  },
  ({ json, service, world, yes }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const status = yield* consenting(
          yes,
          client
            .GoldenRebuild({ cwd: process.cwd(), world, service, env: definedEnv(process.env) })
            .pipe(askedBy("golden rebuild", world))
        )
        if (json) return yield* printDocument("golden-rebuild", { world: status })
        const built = status.events.find((e) => e.kind === "golden_ready" && e.service === service)
        yield* Console.log(built?.message ?? `rebuilt the golden of ${service}`)
        yield* Console.log(renderWorld(status).join("\n"))
      })
    )
).pipe(Command.withDescription("Build a golden template again now (new worlds copy the new one)"), withDaemon)

export const golden = Command.make("golden").pipe(
  Command.withDescription("Golden templates of slices"),
  Command.withSubcommands([rebuild])
)
