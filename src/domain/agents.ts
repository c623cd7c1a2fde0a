/**
 * The pure parts of what agents use — `berth exec`, `berth verify` and the MCP server: durations given on a command
 * line, the last lines of a command's output, exit codes as a shell reports them, the hint inside an error's message,
 * the world a folder belongs to, and a tool call told as an event without the secrets it may carry.
 */
import { constants } from "node:os"
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

/** The world whose worktree holds `folder`: the deepest one (a worktree may sit inside the main checkout). */
export const worldAt = <W extends { readonly path: string }>(
  worlds: ReadonlyArray<W>,
  folder: string
): W | undefined => {
  let best: W | undefined
  for (const w of worlds) {
    if (w.path === "") continue
    const inside = folder === w.path || folder.startsWith(w.path.endsWith("/") ? w.path : `${w.path}/`)
    if (inside && (best === undefined || w.path.length > best.path.length)) best = w
  }
  return best
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
