/**
 * `berth check [path] [--json]`: validate berth.toml, then warn about footguns. Exit 0 when valid (warnings allowed),
 * 1 on errors. `--json` prints `{ "errors": [...], "warnings": [...] }` in both cases.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { formatDiagnostic } from "../../domain/config/diagnostic.js"
import { request } from "../../daemon/wire.js"
import { projectLabel } from "../../domain/names.js"
import { ConfigFiles } from "../../services/ConfigFiles.js"
import { homePaths, resolveHome } from "../../services/homePaths.js"
import { printDocument } from "../json.js"
import { json, printError } from "../output.js"

const path = Args.path({ name: "path" }).pipe(
  Args.withDescription("berth.toml, or a folder at or below the one holding it (default: the current folder)"),
  Args.withDefault(".")
)

/**
 * When a daemon runs, asks it what it calls this repository's project: another repository may hold the name (two
 * clones, say), and then this one's hosts and slices carry a suffix. No daemon is started for this.
 */
const sharedName = (root: string) =>
  Effect.promise(() => request(homePaths(resolveHome()).socket, "Project", { cwd: root }, 2_000)).pipe(
    Effect.map((reply) => {
      if (reply._tag !== "Success") return undefined
      const p = reply.value as { readonly name: string; readonly label: string; readonly others: ReadonlyArray<string> }
      return p.others.length > 0 && p.label !== projectLabel(p.name) ? p : undefined
    }),
    Effect.orElseSucceed(() => undefined)
  )

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

export const check = Command.make("check", { path, json }, ({ json, path }) =>
  Effect.gen(function* () {
    const files = yield* ConfigFiles
    const loaded = yield* files.load(path).pipe(
      Effect.catchTag("ConfigInvalid", (invalid) =>
        Effect.gen(function* () {
          if (json) yield* printDocument("check", { errors: invalid.diagnostics, warnings: [] })
          else yield* printError(invalid.message)
          process.exitCode = 1
          return undefined
        })
      )
    )
    if (loaded === undefined) return
    const warnings = yield* files.lint(loaded)
    const project = yield* sharedName(loaded.root)
    if (json)
      return yield* printDocument("check", { errors: [], warnings, ...(project === undefined ? {} : { project }) })
    for (const warning of warnings) yield* printError(formatDiagnostic(warning))
    if (project !== undefined) {
      yield* printError(
        `note: project ${project.name} is also the name of ${project.others.join(", ")}: this repository's worlds are ${project.label} (hosts *.${project.label}.localhost); set [project] name in berth.toml to choose another`
      )
    }
    const { config } = loaded.parsed
    const name = files.display(loaded.file)
    const summary = `${plural(config.services.length, "service")}${warnings.length > 0 ? `, ${plural(warnings.length, "warning")}` : ""}`
    yield* Console.log(`${name}: valid (${summary})`)
  })
).pipe(Command.withDescription("Validate berth.toml and warn about likely mistakes"))
