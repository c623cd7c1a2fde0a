import type { ConfigDraft, Health, ProcessDraft, ServiceDraft, SliceDraft } from "./model.js"

// Characters TOML basic strings cannot hold raw: `"`, `\` and control characters (tab is allowed but escaped for clarity).
const shortEscapes: Readonly<Record<string, string>> = {
  '"': '\\"',
  "\\": "\\\\",
  "\b": "\\b",
  "\t": "\\t",
  "\n": "\\n",
  "\f": "\\f",
  "\r": "\\r"
}

const isControl = (char: string): boolean => {
  const code = char.charCodeAt(0)
  return code < 0x20 || code === 0x7f
}

const escapeChar = (char: string): string =>
  shortEscapes[char] ??
  (isControl(char) ? `\\u${char.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}` : char)

/** A TOML basic string with proper escaping. */
export const tomlString = (value: string): string => `"${Array.from(value, escapeChar).join("")}"`

/** A bare key when TOML allows it, a quoted key otherwise. */
export const tomlKey = (key: string): string => (/^[A-Za-z0-9_-]+$/.test(key) ? key : tomlString(key))

const stringArray = (values: ReadonlyArray<string>): string => `[${values.map(tomlString).join(", ")}]`

const inlineTable = (entries: ReadonlyArray<readonly [string, string]>): string =>
  entries.length === 0 ? "{}" : `{ ${entries.map(([k, v]) => `${tomlKey(k)} = ${v}`).join(", ")} }`

const healthTable = (health: Health): string => {
  if ("http" in health) return inlineTable([["http", tomlString(health.http)]])
  if ("tcp" in health) return inlineTable([["tcp", "true"]])
  if ("cmd" in health) return inlineTable([["cmd", tomlString(health.cmd)]])
  return inlineTable([["log", tomlString(health.log)]])
}

/** Comment lines; newlines and control characters are flattened so a comment can never break out into TOML. */
export const commentLines = (lines: ReadonlyArray<string>): Array<string> =>
  lines
    .flatMap((line) => line.split(/\r?\n/))
    .map((line) => `# ${Array.from(line, (char) => (isControl(char) ? " " : char)).join("")}`.trimEnd())

const nonEmpty = <A>(values: ReadonlyArray<A> | undefined): values is ReadonlyArray<A> =>
  values !== undefined && values.length > 0

const processLines = (service: ProcessDraft): Array<string> => {
  const lines = [...commentLines(service.cmdComments ?? []), `cmd = ${tomlString(service.cmd)}`]
  if (service.dir !== undefined) lines.push(`dir = ${tomlString(service.dir)}`)
  if (service.url !== undefined) lines.push(`url = ${tomlString(service.url)}`)
  if (nonEmpty(service.ports)) lines.push(`ports = ${stringArray(service.ports)}`)
  if (nonEmpty(service.dependsOn)) lines.push(`depends_on = ${stringArray(service.dependsOn)}`)
  if (nonEmpty(service.env)) {
    lines.push(`env = ${inlineTable(service.env.map(([k, v]) => [k, tomlString(v)] as const))}`)
  }
  if (typeof service.envFile === "string") lines.push(`env_file = ${tomlString(service.envFile)}`)
  else if (nonEmpty(service.envFile)) lines.push(`env_file = ${stringArray(service.envFile)}`)
  if (service.health !== undefined) lines.push(`health = ${healthTable(service.health)}`)
  if (nonEmpty(service.groups)) lines.push(`groups = ${stringArray(service.groups)}`)
  return lines
}

const sliceLines = (service: SliceDraft): Array<string> => {
  const lines = [
    `adapter = ${tomlString(service.adapter)}`,
    ...commentLines([service.adminUrlHint]),
    `admin_url = ${tomlString(service.adminUrl)}`
  ]
  if (service.mode !== undefined) lines.push(`mode = ${tomlString(service.mode)}`)
  if (nonEmpty(service.groups)) lines.push(`groups = ${stringArray(service.groups)}`)
  return lines
}

const serviceBlock = (service: ServiceDraft): string =>
  [
    `[services.${tomlKey(service.name)}]`,
    ...(service._tag === "Process" ? processLines(service) : sliceLines(service))
  ].join("\n")

const projectBlock = (project: ConfigDraft["project"]): string =>
  [
    "[project]",
    `name = ${tomlString(project.name)}`,
    ...(project.setup === undefined ? [] : [`setup = ${tomlString(project.setup)}`])
  ].join("\n")

/** The berth.toml text for a draft: header comments, `[project]`, then one table per service in draft order. */
export const renderConfig = (draft: ConfigDraft): string => {
  const header = commentLines(draft.header)
  const blocks = [projectBlock(draft.project), ...draft.services.map(serviceBlock)]
  return `${[...(header.length === 0 ? [] : [header.join("\n")]), ...blocks].join("\n\n")}\n`
}
