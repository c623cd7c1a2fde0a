/**
 * How worlds look in a terminal. Plain text, aligned columns, no colour needed to read it.
 */
import type { ServiceStatus, WorldStatus } from "../daemon/api.js"

const pad = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length)
  }
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd()
  )
}

const serviceRow = (s: ServiceStatus): Array<string> => [
  s.name,
  s.state,
  s.pid === null ? "" : `pid ${s.pid}`,
  s.port === null ? "" : `:${s.port}`,
  s.url ?? "",
  s.reason ?? ""
]

export const renderWorld = (w: WorldStatus, indent = ""): Array<string> => {
  const head = `${indent}${w.name}  ${w.state}${w.reason === null ? "" : ` (${w.reason})`}  ${w.path}`
  const services = pad(w.services.map(serviceRow)).map((line) => `${indent}  ${line}`)
  const failed = w.services
    .filter((s) => s.state === "failed" && s.logTail.length > 0)
    .flatMap((s) => [`${indent}  last lines of ${s.name}:`, ...s.logTail.slice(-5).map((l) => `${indent}    ${l}`)])
  return [head, ...services, ...failed]
}

/** What `down` reports: each world and the state it reached. */
export const renderDown = (worlds: ReadonlyArray<WorldStatus>): string =>
  worlds.map((w) => `${w.name}: ${w.state}`).join("\n")

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
