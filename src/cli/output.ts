/**
 * How the CLI speaks: plain text for people, JSON for programs (`--json`), never a stack trace. Errors become one
 * clear message on stderr (or `{ "schema": 1, "error": { "tag", "message", "hint" } }` in JSON mode) and an exit code:
 * 1 for a failure,
 * 2 for a usage error.
 */
import { createInterface } from "node:readline/promises"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { asDiskFull } from "../services/disk.js"
import { resolveHome } from "../services/homePaths.js"
import { formatErrorLine } from "./documents.js"
import { errorPrefix, wantsColour } from "./render.js"

export const json = Options.boolean("json").pipe(
  Options.withDescription("print machine-readable JSON (one document, described in docs/json)")
)

/** JSON mode is decided from argv so that even a usage error, found before options are parsed, is reported in it. */
export const wantsJson = (argv: ReadonlyArray<string>): boolean => {
  const end = argv.indexOf("--")
  return (end === -1 ? argv : argv.slice(0, end)).includes("--json")
}

export const useColor = (): boolean => wantsColour()

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching ANSI escapes is the point
const ansi = /\u001b\[[0-9;]*m/g
export const stripAnsi = (text: string): string => text.replace(ansi, "")

/**
 * The console the CLI runs with. @effect/cli colours help even when piped, so colour is stripped unless wanted; and
 * it prints its own rendering of usage errors through `Console.error` before failing, which `reportFailure` replaces
 * with one line, so that channel is muted. berth's commands write to stderr through `printError`.
 */
export const withCliConsole = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Console.consoleWith((current) => {
    const plain = !useColor()
    return Effect.withConsole(effect, {
      ...current,
      log: (...args: ReadonlyArray<unknown>) =>
        current.log(...args.map((a) => (plain && typeof a === "string" ? stripAnsi(a) : a))),
      error: () => Effect.void
    })
  })

/** A line on stderr (warnings, progress), outside the muted `Console.error`. */
export const printError = (line: string) =>
  Effect.sync(() => {
    process.stderr.write(`${line}\n`)
  })

/** A usage mistake found before @effect/cli runs (unknown command or option). */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly message: string }> {}

/** Asks a yes/no question at the terminal (on stderr); anything but y or yes is a no. */
export const confirm = (question: string) =>
  Effect.promise(async () => {
    const rl = createInterface({ input: process.stdin, output: process.stderr })
    try {
      return /^y(es)?$/i.test((await rl.question(question)).trim())
    } finally {
      rl.close()
    }
  })

/** A question can be asked: a person is at the terminal (stdin and stderr are TTYs). */
export const canAsk = (): boolean => process.stdin.isTTY === true && process.stderr.isTTY === true

export interface Failure {
  readonly tag: string
  readonly message: string
  readonly exitCode: 1 | 2
}

const hasTagAndMessage = (e: unknown): e is { readonly _tag: string; readonly message: string } =>
  typeof e === "object" && e !== null && typeof (e as { _tag?: unknown })._tag === "string" && "message" in e

/**
 * Node's `process.cwd()` throws when the shell's folder was deleted under it (by `berth remove`, say); whichever
 * command needed the folder then fails with this, never with Node's stack.
 */
const lostWorkingDirectory = (error: unknown): Failure | undefined => {
  if (!(error instanceof Error) || (error as NodeJS.ErrnoException).syscall !== "uv_cwd") return undefined
  const code = (error as NodeJS.ErrnoException).code
  const message =
    code === "ENOENT"
      ? "the current folder no longer exists (was it removed?): cd to a folder that exists and run berth again"
      : `cannot read the current folder (${code ?? error.message}): cd to a folder you can read and run berth again`
  return { tag: "WorkingDirectoryGone", message, exitCode: 1 }
}

/** Any failure → what to tell the user. Unknown defects are reported without their stack. */
export const describeFailure = (error: unknown): Failure => {
  const lost = lostWorkingDirectory(error)
  if (lost !== undefined) return lost
  // a write of the CLI's own (BERTH_HOME's folders, the consent store, a file it writes) that found the disk full
  if (!hasTagAndMessage(error)) {
    const home = resolveHome()
    const full = asDiskFull(error, home, home)
    if (full !== undefined) return { tag: full._tag, message: full.message, exitCode: 1 }
  }
  if (ValidationError.isValidationError(error)) {
    return { tag: error._tag, message: usageMessage(error), exitCode: 2 }
  }
  if (error instanceof UsageError) return { tag: error._tag, message: error.message, exitCode: 2 }
  if (hasTagAndMessage(error)) return { tag: error._tag, message: error.message, exitCode: 1 }
  if (error instanceof Error) return { tag: error.name, message: error.message, exitCode: 1 }
  return { tag: "Unknown", message: String(error), exitCode: 1 }
}

const usageMessage = (error: ValidationError.ValidationError): string => {
  const text =
    "error" in error
      ? stripAnsi(HelpDoc.toAnsiText(error.error))
          .trim()
          .replace(/\s*\n\s*/g, " ")
      : ""
  return text === "" ? "invalid usage: see berth --help" : text
}

/** Writes the failure and sets the exit code; the program then ends normally. */
export const reportFailure = (error: unknown, jsonMode: boolean) =>
  Effect.sync(() => {
    const failure = describeFailure(error)
    if (jsonMode) {
      process.stderr.write(`${formatErrorLine(failure.tag, failure.message)}\n`)
    } else {
      process.stderr.write(`${errorPrefix(failure.exitCode === 2 ? "berth:" : "error:")} ${failure.message}\n`)
    }
    process.exitCode = failure.exitCode
  })
