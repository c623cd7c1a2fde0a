/**
 * A finding about a config file: where it is (file, line, column, key path) and what to do about it.
 * Both `check` and every command that loads a config speak in these.
 */
export type Severity = "error" | "warning"

export type PathSegment = string | number
export type KeyPath = ReadonlyArray<PathSegment>

export interface Diagnostic {
  readonly severity: Severity
  readonly file: string
  readonly line: number
  readonly column: number
  /** the key path as a user writes it: `services.api.depends_on[1]` */
  readonly path: string
  readonly message: string
  readonly hint?: string | undefined
}

const bareKey = /^[A-Za-z0-9_-]+$/

/** Renders a key path the way TOML would spell it, so users can search their file for it. */
export const formatPath = (path: KeyPath): string => {
  let out = ""
  for (const segment of path) {
    if (typeof segment === "number") {
      out += `[${segment}]`
    } else {
      const key = bareKey.test(segment) ? segment : JSON.stringify(segment)
      out += out === "" ? key : `.${key}`
    }
  }
  return out
}

export const byPosition = (a: Diagnostic, b: Diagnostic): number =>
  a.line - b.line || a.column - b.column || a.message.localeCompare(b.message)

/** `file:line:column: error: message (path)` followed by an indented hint. */
export const formatDiagnostic = (d: Diagnostic): string => {
  const where = `${d.file}:${d.line}:${d.column}`
  const at = d.path === "" ? "" : ` (${d.path})`
  const head = `${where}: ${d.severity}: ${d.message}${at}`
  return d.hint === undefined ? head : `${head}\n  hint: ${d.hint}`
}

export const didYouMean = (name: string | undefined): string | undefined =>
  name === undefined ? undefined : `did you mean "${name}"?`
