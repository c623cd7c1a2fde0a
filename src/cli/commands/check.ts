/**
 * `berth check [path] [--json]`: validate berth.toml, then warn about footguns. Exit 0 when valid (warnings allowed),
 * 1 on errors. `--json` prints `{ "errors": [...], "warnings": [...] }` in both cases.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { formatDiagnostic } from "../../domain/config/diagnostic.js"
import { ConfigFiles } from "../../services/ConfigFiles.js"
import { json, printError, printJson } from "../output.js"

const path = Args.path({ name: "path" }).pipe(
  Args.withDescription("berth.toml, or a folder at or below the one holding it (default: the current folder)"),
  Args.withDefault(".")
)

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

export const check = Command.make("check", { path, json }, ({ json, path }) =>
  Effect.gen(function* () {
    const files = yield* ConfigFiles
    const loaded = yield* files.load(path).pipe(
      Effect.catchTag("ConfigInvalid", (invalid) =>
        Effect.gen(function* () {
          if (json) yield* printJson({ errors: invalid.diagnostics, warnings: [] })
          else yield* printError(invalid.message)
          process.exitCode = 1
          return undefined
        })
      )
    )
    if (loaded === undefined) return
    const warnings = yield* files.lint(loaded)
    if (json) return yield* printJson({ errors: [], warnings })
    for (const warning of warnings) yield* printError(formatDiagnostic(warning))
    const { config } = loaded.parsed
    const name = files.display(loaded.file)
    const summary = `${plural(config.services.length, "service")}${warnings.length > 0 ? `, ${plural(warnings.length, "warning")}` : ""}`
    yield* Console.log(`${name}: valid (${summary})`)
  })
).pipe(Command.withDescription("Validate berth.toml and warn about likely mistakes"))
