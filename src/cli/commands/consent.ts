/**
 * Consent before a repository's commands run (`domain/consent.ts`): `berth allow` and `berth deny`, and what a
 * command that meets a config not allowed yet does — at a terminal it shows what would run and asks; `--yes` allows
 * it at once; otherwise it fails saying how to allow it.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { commandsOf } from "../../domain/consent.js"
import type { ConfigNotAllowed } from "../../domain/errors.js"
import { record } from "../../services/Consent.js"
import { ConfigFiles } from "../../services/ConfigFiles.js"
import { homePaths, resolveHome } from "../../services/homePaths.js"
import { printDocument } from "../json.js"
import { canAsk, confirm, json } from "../output.js"

const store = () => homePaths(resolveHome()).consentFile

export const yes = Options.boolean("yes").pipe(
  Options.withAlias("y"),
  Options.withDescription(
    "allow the project's berth.toml to run its commands if it is new or changed (as berth allow does), without asking"
  )
)

/**
 * Runs `attempt`; should it meet a berth.toml not allowed yet, allows it — with `yes`, or when the person at the
 * terminal says so after reading what it would run — and runs it again. Otherwise the failure stands, with its hint.
 */
export const consenting = <A, E, R>(yes: boolean, attempt: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  attempt.pipe(
    Effect.catchIf(
      (e): e is E & ConfigNotAllowed =>
        typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "ConfigNotAllowed",
      (e) =>
        Effect.gen(function* () {
          const allowed =
            yes ||
            (canAsk() &&
              (yield* confirm(
                `${e.message.split("\n  hint:")[0]}\nAllow ${e.file} to run these (berth remembers until it changes)? [y/N] `
              )))
          if (!allowed) return yield* Effect.fail(e)
          yield* Effect.sync(() => record(store(), "allow", e.digest, e.file))
          return yield* attempt
        })
    )
  )

const path = Args.path({ name: "path" }).pipe(
  Args.withDescription("berth.toml, or a folder at or below the one holding it (default: the current folder)"),
  Args.withDefault(".")
)

/** The config at `path`, what it would run, and its digest. */
const configAt = (path: string) =>
  Effect.gen(function* () {
    const loaded = yield* (yield* ConfigFiles).load(path)
    return { file: loaded.file, digest: loaded.digest, commands: commandsOf(loaded.parsed.config) }
  })

export const allow = Command.make("allow", { path, json }, ({ json, path }) =>
  Effect.gen(function* () {
    const config = yield* configAt(path)
    yield* Effect.sync(() => record(store(), "allow", config.digest, config.file))
    if (json) return yield* printDocument("allow", { ...config, allowed: true })
    yield* Console.log(
      [
        `allowed ${config.file} as it is now (sha256 ${config.digest.slice(0, 12)}…): berth may run`,
        ...config.commands.map((c) => `    ${c.field}: ${c.command}`),
        "  a change to the file asks again"
      ].join("\n")
    )
  })
).pipe(
  Command.withDescription("Let berth run the commands of this berth.toml, as it is now (it asks again after a change)")
)

export const deny = Command.make("deny", { path, json }, ({ json, path }) =>
  Effect.gen(function* () {
    const config = yield* configAt(path)
    yield* Effect.sync(() => record(store(), "deny", config.digest))
    if (json) return yield* printDocument("allow", { ...config, allowed: false })
    yield* Console.log(
      `denied ${config.file}: berth runs none of its commands until it is allowed again (what runs now keeps running)`
    )
  })
).pipe(Command.withDescription("Take back the leave to run this berth.toml's commands"))
