/**
 * What a failure quotes of a log. The last lines of a log often miss the cause: a database driver prints an error
 * object of thirty lines, `npm ci` its usage after the one line that says what went wrong. So a failure quotes the
 * current run only (each start writes a marker line), and where the first error line of that run is older than the
 * last few lines, the lines around it come first.
 */

/** The marker berth writes into a log before each start of a process, so that runs can be told apart. */
export const runMarker = (what: string, at: Date): string => `── berth: ${what} started at ${at.toISOString()} ──`

const MARKER = /^\u2500\u2500 berth: .* started at .* \u2500\u2500$/

/** The lines of the last run: those after the last marker (all of them when there is none). */
export const currentRun = (lines: ReadonlyArray<string>): ReadonlyArray<string> => {
  for (let i = lines.length - 1; i >= 0; i--) if (MARKER.test(lines[i] ?? "")) return lines.slice(i + 1)
  return lines
}

/** A line that reads like the cause of a failure, in the words tools use for it. */
const ERROR_LINE =
  /\b(error|errno|fatal|panic|exception|traceback|failed|cannot|could not|unable to|not found|denied|refused)\b|ERR!|^E\s/i

/** Lines kept before the first error line, and from it on. */
const BEFORE = 2
const FROM = 8

/**
 * At most `max` lines of `lines` (one run of a log): the whole run when it fits; else, when the first error line is
 * not among the last lines, the lines around it, a `…` line, and the last lines; else the last lines.
 */
export const failureExcerpt = (lines: ReadonlyArray<string>, max = 20): ReadonlyArray<string> => {
  const run = [...currentRun(lines)]
  while (run.length > 0 && run[run.length - 1]!.trim() === "") run.pop()
  if (run.length <= max) return run
  const first = run.findIndex((line) => ERROR_LINE.test(line))
  const lastStart = run.length - max
  if (first < 0 || first >= lastStart) return run.slice(lastStart)
  const around = run.slice(Math.max(0, first - BEFORE), first + FROM)
  const room = max - around.length - 1
  const end = Math.max(first + FROM, run.length - room)
  return room <= 0 ? around.slice(0, max) : [...around, "…", ...run.slice(end)]
}
