/**
 * Errors that cross a process boundary (daemon RPC, MCP, `--json` output) are `Schema.TaggedError`s, defined here so
 * the CLI, the daemon and embedders share one vocabulary. Each has a `message` a person can act on.
 */
import * as Schema from "effect/Schema"
import { formatDiagnostic } from "./config/diagnostic.js"

export const DiagnosticSchema = Schema.Struct({
  severity: Schema.Literal("error", "warning"),
  file: Schema.String,
  line: Schema.Number,
  column: Schema.Number,
  path: Schema.String,
  message: Schema.String,
  hint: Schema.optional(Schema.String)
})

export class ConfigNotFound extends Schema.TaggedError<ConfigNotFound>()("ConfigNotFound", {
  searched: Schema.String
}) {
  override get message(): string {
    return `no berth.toml in ${this.searched} or any folder above it\n  hint: run \`berth init\` to write one`
  }
}

export class ConfigUnreadable extends Schema.TaggedError<ConfigUnreadable>()("ConfigUnreadable", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot read ${this.file}: ${this.reason}`
  }
}

export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  file: Schema.String,
  diagnostics: Schema.Array(DiagnosticSchema)
}) {
  override get message(): string {
    const n = this.diagnostics.filter((d) => d.severity === "error").length
    return [...this.diagnostics.map(formatDiagnostic), `${this.file}: ${n} error${n === 1 ? "" : "s"}`].join("\n")
  }
}

export class InitRefused extends Schema.TaggedError<InitRefused>()("InitRefused", {
  file: Schema.String
}) {
  override get message(): string {
    return `${this.file} already exists\n  hint: pass --force to overwrite it`
  }
}

export class InitFailed extends Schema.TaggedError<InitFailed>()("InitFailed", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot write a config from ${this.file}: ${this.reason}`
  }
}

export type ConfigError = ConfigNotFound | ConfigUnreadable | ConfigInvalid
