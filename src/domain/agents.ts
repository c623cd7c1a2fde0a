/**
 * The pure parts of what agents use — `berth exec`, `berth verify` and the MCP server: durations given on a command
 * line, the last lines of a command's output, exit codes as a shell reports them, the hint inside an error's message,
 * the world a folder belongs to, a tool call told as an event without the secrets it may carry, and why a tool refused
 * its arguments.
 */
import { constants } from "node:os"
import type * as ParseResult from "effect/ParseResult"
import { closestName } from "./names.js"
import { hidePassword, secretsOf } from "./redact.js"
import { shellQuote } from "./tokens.js"

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** `"90s"`, `"500ms"`, `"2m"`, `"1h"`, or a bare number of seconds (as coreutils' `timeout` takes it); > 0. */
export const parseTimeout = (text: string): number | undefined => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text)
  if (m === null) return undefined
  const ms = Number(m[1]) * (units[m[2] ?? "s"] ?? 1000)
  return ms > 0 && Number.isFinite(ms) ? Math.round(ms) : undefined
}

/** What coreutils' `timeout` exits with when it had to stop the command: scripts already test for it. */
export const TIMEOUT_EXIT_CODE = 124

/** A process's end as a shell reports it: its code, or 128 + the number of the signal that ended it. */
export const exitCodeOf = (code: number | null, signal: string | null): number => {
  if (code !== null) return code
  const number = signal === null ? undefined : constants.signals[signal as keyof typeof constants.signals]
  return 128 + (number ?? 0)
}

/** An argv as one line a person can paste into a shell. */
export const commandLine = (argv: ReadonlyArray<string>): string => argv.map(shellQuote).join(" ")

const MAX_LINE = 2000

/**
 * The last `max` lines of a stream of text, kept as it arrives: a command may print gigabytes, an agent needs the
 * end. A line longer than 2000 characters is cut (a minified bundle on one line would otherwise be the whole tail).
 */
export class LineTail {
  private lines: Array<string> = []
  private partial = ""

  constructor(private readonly max: number) {}

  push(chunk: string): void {
    const parts = (this.partial + chunk).split("\n")
    this.partial = parts.pop() ?? ""
    if (this.partial.length > MAX_LINE * 2) this.partial = this.partial.slice(-MAX_LINE)
    for (const line of parts) this.lines.push(cut(line.endsWith("\r") ? line.slice(0, -1) : line))
    if (this.lines.length > this.max * 2) this.lines = this.lines.slice(-this.max)
  }

  /** the lines so far, the unfinished last one included */
  get(): ReadonlyArray<string> {
    const all = this.partial === "" ? this.lines : [...this.lines, cut(this.partial)]
    return all.slice(-this.max)
  }
}

const cut = (line: string) => (line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line)

// in a module of its own so the CLI's lean path can split hints without loading this one
export { splitHint } from "./hint.js"

/** The folder's own checkout: the nearest folder at or above it that `isCheckout` (holds `.git`), if any. */
export const checkoutOf = (folder: string, isCheckout: (dir: string) => boolean): string | undefined => {
  for (let dir = folder; ; ) {
    if (isCheckout(dir)) return dir
    const up = dir.slice(0, Math.max(dir.lastIndexOf("/"), 1))
    if (up === dir) return undefined
    dir = up
  }
}

/**
 * The world whose worktree holds `folder`: the one whose path is the folder's own checkout. A worktree may sit inside
 * the main checkout (`.worktrees/x`): until it has a world of its own, no world holds it — never the checkout around it.
 */
export const worldAt = <W extends { readonly path: string }>(
  worlds: ReadonlyArray<W>,
  folder: string,
  isCheckout: (dir: string) => boolean
): W | undefined => {
  const checkout = checkoutOf(folder, isCheckout)
  return checkout === undefined ? undefined : worlds.find((w) => w.path === checkout)
}

/**
 * A hint as an MCP tool's caller follows it: berth's `berth up …` (a world that is not there yet) is the up tool
 * there — for the server's own worktree, or with the world the call named — and `berth status` the status tool.
 */
export const toolHint = (hint: string | null, world: string | undefined): string | null => {
  if (hint === null) return null
  const makes = /^berth up(\s|$)/.test(hint) || /never brought up: berth up starts it$/.test(hint)
  if (!makes) return hint.replaceAll("berth status", "the status tool")
  return world === undefined
    ? "call the up tool: it makes this worktree's world"
    : `call the up tool with world ${JSON.stringify(world)} to make it`
}

const SECRET_ASSIGNMENT =
  /\b([A-Za-z_][A-Za-z0-9_]*(?:pass|secret|token|key|credential|auth|private|cookie|session)[A-Za-z0-9_]*)=(\S+)/gi
const SECRET_HEADER =
  /^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|[a-z0-9-]*token[a-z0-9-]*)\s*:.*$/i
const SECRET_KEY = /pass|secret|token|credential|auth|private|cookie|session|^api[-_]?key$/i
const URL_WITH_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:)[^@/\s]+@/gi

/** One string with what looks secret in it masked: assignments of secret-looking names, URL passwords, known values. */
const maskText = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = secrets.reduce((t, s) => (s.length >= 4 ? t.replaceAll(s, "***") : t), text)
  out = out.replace(URL_WITH_PASSWORD, "$1***@").replace(SECRET_ASSIGNMENT, "$1=***")
  const header = SECRET_HEADER.exec(out)
  return header === null ? out : `${out.slice(0, out.indexOf(":"))}: ***`
}

/**
 * A tool call's arguments with every secret masked, for the world's event history: values of secret-looking keys,
 * `NAME=value` assignments and headers that carry credentials, URL passwords, and the values of the caller's own
 * secret variables wherever they appear.
 */
export const maskArguments = (value: unknown, secrets: ReadonlyArray<string>): unknown => {
  if (typeof value === "string") return maskText(value, secrets)
  if (Array.isArray(value)) return value.map((v) => maskArguments(v, secrets))
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        SECRET_KEY.test(k) && typeof v === "string" ? "***" : maskArguments(v, secrets)
      ])
    )
  }
  return value
}

const MAX_EVENT = 500

/**
 * A tool call as one line of a world's history: `exec {"command":["npm","test"]} → exit 0`. Secrets are masked (the
 * caller's environment names which values are secret) and the line is kept short.
 */
export const toolCallEvent = (
  tool: string,
  args: unknown,
  outcome: string,
  env: Readonly<Record<string, string>>
): string => {
  const secrets = secretsOf(env)
  const shown = JSON.stringify(maskArguments(args, secrets)) ?? "{}"
  const line = `${tool} ${shown === "{}" ? "" : `${shown} `}→ ${hidePassword(maskText(outcome, secrets))}`
  return line.length > MAX_EVENT ? `${line.slice(0, MAX_EVENT - 1)}…` : line
}

/** What a tool's `inputSchema` (JSON Schema) says of its arguments, as far as messages need it. */
export interface ToolInput {
  readonly properties?: Readonly<Record<string, unknown>>
  readonly required?: ReadonlyArray<string>
}

/** An argument a tool refused: one it does not take, one it needs, or a value that is not what it takes. */
export interface ArgumentProblem {
  readonly argument: string
  readonly kind: "unknown" | "missing" | "invalid"
}

const field = (schema: unknown, key: string): unknown =>
  typeof schema === "object" && schema !== null ? (schema as Record<string, unknown>)[key] : undefined

const plural = (schema: unknown): string => {
  switch (field(schema, "type")) {
    case "string":
      return "strings"
    case "integer":
      return "integers"
    case "number":
      return "numbers"
    case "boolean":
      return "true or false"
    default:
      return "values"
  }
}

const between = (noun: string, schema: unknown): string => {
  const min = field(schema, "minimum")
  const max = field(schema, "maximum")
  if (typeof min === "number" && typeof max === "number") return `${noun} from ${min} to ${max}`
  if (typeof min === "number") return `${noun} of at least ${min}`
  if (typeof max === "number") return `${noun} of at most ${max}`
  return noun
}

/** One argument's JSON Schema in words: "a string", "an integer from 1 to 1000", "a non-empty array of strings". */
export const describeArgument = (schema: unknown): string => {
  const anyOf = field(schema, "anyOf")
  if (Array.isArray(anyOf)) return anyOf.map(describeArgument).join(" or ")
  const literals = field(schema, "enum")
  if (Array.isArray(literals)) return `one of ${literals.map((l) => JSON.stringify(l)).join(", ")}`
  switch (field(schema, "type")) {
    case "string":
      return "a string"
    case "boolean":
      return "true or false"
    case "integer":
      return between("an integer", schema)
    case "number":
      return between("a number", schema)
    case "array": {
      const min = field(schema, "minItems")
      return `${typeof min === "number" && min > 0 ? "a non-empty array" : "an array"} of ${plural(field(schema, "items"))}`
    }
    case "object": {
      const values = field(schema, "additionalProperties")
      return typeof values === "object" && values !== null ? `an object of ${plural(values)}` : "an object"
    }
    default:
      return "a value as the tool's inputSchema describes"
  }
}

const MAX_SHOWN = 80

/** A value an agent sent, short enough to quote back. */
const shown = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN - 1)}…` : text
}

/**
 * Why a tool refused its arguments, for the agent that sent them: each argument it named wrongly (with the closest
 * one it takes), each one missing, each value that is not what the tool takes (what it must be, in words, and what
 * was sent); and, as the hint, the arguments the tool takes.
 */
export const refusedArguments = (
  tool: string,
  input: ToolInput,
  problems: ReadonlyArray<ArgumentProblem>,
  args: Readonly<Record<string, unknown>>
): { readonly message: string; readonly hint: string } => {
  const properties = input.properties ?? {}
  const names = Object.keys(properties)
  const required = input.required ?? []
  const wanted = (name: string) => {
    const description = field(properties[name], "description")
    const what = describeArgument(properties[name])
    return typeof description === "string" && description !== "" ? `${what} (${description})` : what
  }
  const order = (p: ArgumentProblem) => (p.kind === "unknown" ? -1 : names.indexOf(p.argument))
  const told = [...problems]
    .sort((a, b) => order(a) - order(b))
    .map((p) => {
      if (p.kind === "unknown") {
        const close = closestName(p.argument, names)
        return `unknown argument ${JSON.stringify(p.argument)}${close === undefined ? "" : ` (did you mean ${JSON.stringify(close)}?)`}`
      }
      if (p.kind === "missing") return `argument ${JSON.stringify(p.argument)} is required: ${wanted(p.argument)}`
      return `argument ${JSON.stringify(p.argument)} must be ${wanted(p.argument)}, not ${shown(args[p.argument])}`
    })
  const takes = [...required, ...names.filter((n) => !required.includes(n))].map((n) =>
    required.includes(n) ? `${n} (required)` : n
  )
  return {
    message: `${tool}: ${told.join("; ") || "its arguments do not match its inputSchema"}`,
    hint:
      takes.length === 0
        ? `${tool} takes no arguments`
        : `${tool} takes ${takes.join(", ")}, as its inputSchema describes them`
  }
}

/**
 * The arguments a decoding of a tool's parameters found wrong (`Schema.decodeUnknownEither(…, { errors: "all" })`):
 * the first key under each failure, missing or invalid.
 */
export const argumentProblems = (issue: ParseResult.ParseIssue): ReadonlyArray<ArgumentProblem> => {
  const out: Array<ArgumentProblem> = []
  const walk = (issue: ParseResult.ParseIssue): void => {
    switch (issue._tag) {
      case "Pointer": {
        const key = Array.isArray(issue.path) ? issue.path[0] : issue.path
        const argument = String(key)
        if (out.some((p) => p.argument === argument)) return
        const kind =
          issue.issue._tag === "Missing" ? "missing" : issue.issue._tag === "Unexpected" ? "unknown" : "invalid"
        out.push({ argument, kind })
        return
      }
      case "Composite":
        for (const inner of Array.isArray(issue.issues) ? issue.issues : [issue.issues as ParseResult.ParseIssue]) {
          walk(inner)
        }
        return
      case "Refinement":
      case "Transformation":
        walk(issue.issue)
        return
      default:
        return
    }
  }
  walk(issue)
  return out
}
