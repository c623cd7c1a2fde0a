/**
 * How worlds look in a terminal: aligned columns, readable without colour; on a terminal (and without NO_COLOR)
 * states and URLs are coloured too.
 */
import { waitingLine } from "../mcp/progress.js"
import type { GcReport, ServiceStatus, WorldStatus } from "../daemon/api.js"
import { forgottenLine } from "../domain/gc.js"

/** Events worth a line under the world: what changed how it was made, not routine progress. */
const NOTABLE_EVENTS: ReadonlySet<string> = new Set(["clone_fallback", "golden_wait", "dev_server", "worktree_created"])

/** Colour for a terminal that wants it: stdout a TTY, NO_COLOR unset, TERM not dumb. */
export const wantsColour = (stream: { readonly isTTY?: boolean } = process.stdout): boolean =>
  stream.isTTY === true && process.env.NO_COLOR === undefined && process.env.TERM !== "dumb"

const GOOD = new Set(["running", "healthy", "ready"])
const MOVING = new Set([
  "starting",
  "queued",
  "pending",
  "restarting",
  "stopping",
  "suspending",
  "provisioning",
  "removing"
])
const BAD = new Set(["failed", "unhealthy", "exited"])

/** A state's SGR colour: green for up, yellow for under way, red for failed, dim for stopped (status and dashboard). */
export const stateStyle = (state: string): string =>
  GOOD.has(state) ? "32" : MOVING.has(state) ? "33" : BAD.has(state) ? "31" : "2"

const paint = (code: string, text: string) => `\u001b[${code}m${text}\u001b[0m`

/** A state word, coloured as `stateStyle` says. */
const stateWord = (state: string, colour: boolean): string => (colour ? paint(stateStyle(state), state) : state)

// biome-ignore lint/suspicious/noControlCharactersInRegex: measuring past ANSI escapes is the point
const visibleLength = (cell: string) => cell.replace(/\u001b\[[0-9;]*m/g, "").length

const pad = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, visibleLength(cell))
  }
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell + " ".repeat((widths[i] ?? 0) - visibleLength(cell))))
      .join("  ")
      .trimEnd()
  )
}

const serviceRow = (s: ServiceStatus, colour: boolean): Array<string> => [
  s.name,
  stateWord(s.state, colour),
  s.pid === null ? "" : `pid ${s.pid}`,
  s.port === null ? "" : `:${s.port}`,
  s.url === null ? "" : colour ? paint("36", s.url) : s.url,
  s.reason ?? ""
]

export const renderWorld = (w: WorldStatus, indent = "", colour = wantsColour()): Array<string> => {
  const name = colour ? paint("1", w.name) : w.name
  const where = w.machine === undefined ? w.path : `on ${w.machine}  ${w.path}`
  const head = `${indent}${name}  ${stateWord(w.state, colour)}${w.reason === null ? "" : ` (${w.reason})`}  ${where}`
  const services = pad(w.services.map((s) => serviceRow(s, colour))).map((line) => `${indent}  ${line}`)
  const failed = w.services
    .filter((s) => s.state === "failed" && s.logTail.length > 0)
    .flatMap((s) => [`${indent}  last lines of ${s.name}:`, ...s.logTail.slice(-5).map((l) => `${indent}    ${l}`)])
  // newest first in the status; at most one line per kind
  const seen = new Set<string>()
  const notes = w.events
    .filter((e) => NOTABLE_EVENTS.has(e.kind) && !seen.has(e.kind) && seen.add(e.kind))
    .map((e) => `${indent}  ${e.kind}${e.service === null ? "" : ` (${e.service})`}: ${e.message}`)
  const project = [w.projectNote, w.configNote].flatMap((note) =>
    note === undefined ? [] : [`${indent}  note: ${note}`]
  )
  return [head, ...project, ...services, ...failed, ...notes]
}

/** What `gc` did (or, with --dry-run, would do). */
export const renderGc = (report: GcReport, dryRun: boolean): string => {
  const lines: Array<string> = []
  const forgotten = report.forgotten ?? []
  if (report.entries.length === 0 && forgotten.length === 0) {
    lines.push(dryRun ? "nothing to collect" : "nothing collected")
  }
  lines.push(
    ...pad(
      report.entries.map((e) => [e.outcome, e.adapter, e.name, e.reason, e.where, e.error === undefined ? "" : e.error])
    )
  )
  for (const f of forgotten) lines.push(forgottenLine(f))
  for (const u of report.unreachable) {
    lines.push(`skipped ${u.adapter} at ${u.where}: ${u.error}`)
  }
  return lines.join("\n")
}

/** What a waiting `up` says about its world's place in line, or undefined once it is not in line. */
export const queueLine = (w: WorldStatus | undefined): string | undefined =>
  w?.queue === undefined
    ? undefined
    : `${w.name}: ${w.state}, #${w.queue.position} in line, waiting for ${w.queue.waitingFor}`

/**
 * The live line of a waiting `up` on a terminal: its place in line, else what it waits for now (a golden being
 * built, services not ready yet), with the time since it asked. Piped, only the place in line is told, a line per
 * change (`queueLine`).
 */
export const progressLine = (w: WorldStatus | undefined, elapsedMs: number): string | undefined => {
  if (w === undefined) return undefined
  const queued = queueLine(w)
  if (queued !== undefined) return queued
  if (w.state !== "starting" && w.state !== "queued") return undefined
  return `${waitingLine(w)} (${(elapsedMs / 1000).toFixed(1)} s)`
}

/**
 * What a Ctrl-C of a waiting `up` leaves behind, said on stderr: a world still in line is taken out of it (the daemon
 * withdraws it when the request goes); one already starting keeps starting, since its processes may be half up.
 */
export const interruptedLine = (w: WorldStatus | undefined): string => {
  if (w === undefined) return "berth: stopped waiting; what the daemon started stays (berth status shows it)"
  if (w.queue !== undefined || w.state === "queued") {
    return `berth: stopped waiting; ${w.name} is taken out of the line (berth up ${w.name} puts it back)`
  }
  if (w.state === "running") return `berth: stopped waiting; ${w.name} is running`
  return `berth: stopped waiting; ${w.name} keeps starting in the daemon (berth status shows it, berth down ${w.name} stops it)`
}

/**
 * The world an `up` means among a project's statuses: the one named, or the one whose worktree holds `cwd` (the
 * deepest, since worktrees may sit inside the main checkout).
 */
export const worldOf = (
  worlds: ReadonlyArray<WorldStatus>,
  name: string | undefined,
  cwd: string
): WorldStatus | undefined =>
  name !== undefined
    ? worlds.find((w) => w.name === name)
    : worlds
        .filter((w) => w.path !== "" && (cwd === w.path || cwd.startsWith(`${w.path}/`)))
        .sort((a, b) => b.path.length - a.path.length)[0]

export const renderDown = (worlds: ReadonlyArray<WorldStatus>, colour = wantsColour()): string =>
  worlds.map((w) => `${w.name}: ${stateWord(w.state, colour)}`).join("\n")

/** The word before a failure on stderr: red on a terminal that wants colour. */
export const errorPrefix = (prefix: "error:" | "berth:"): string =>
  wantsColour(process.stderr) ? paint("31", prefix) : prefix

/** Worlds grouped by project. */
export const renderStatus = (worlds: ReadonlyArray<WorldStatus>): string => {
  if (worlds.length === 0) return "no worlds yet: berth up <branch> creates one"
  const out: Array<string> = []
  let project: string | undefined
  for (const w of worlds) {
    if (w.project !== project) {
      if (project !== undefined) out.push("")
      project = w.project
      out.push(project)
    }
    out.push(...renderWorld(w, "  "))
  }
  return out.join("\n")
}

const shellQuoteValue = (v: string) => `'${v.replaceAll("'", `'\\''`)}'`

export const renderEnv = (vars: Readonly<Record<string, string>>, format: "plain" | "dotenv" | "shell"): string =>
  Object.entries(vars)
    .map(([k, v]) =>
      format === "shell"
        ? `export ${k}=${shellQuoteValue(v)}`
        : format === "dotenv"
          ? `${k}=${JSON.stringify(v)}`
          : `${k}=${v}`
    )
    .join("\n")
