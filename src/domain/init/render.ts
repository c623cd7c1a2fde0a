import type { ConfigDraft, Health, OverrideDraft, ProcessDraft, ServiceDraft, SliceDraft } from "./model.js"

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
  if (service.setup !== undefined) lines.push(`setup = ${tomlString(service.setup)}`)
  if (nonEmpty(service.groups)) lines.push(`groups = ${stringArray(service.groups)}`)
  return lines
}

const sliceLines = (service: SliceDraft): Array<string> => {
  const lines = [`adapter = ${tomlString(service.adapter)}`]
  if (service.adminUrlHint !== undefined) lines.push(...commentLines([service.adminUrlHint]))
  if (service.adminUrl !== undefined) lines.push(`admin_url = ${tomlString(service.adminUrl)}`)
  if (service.mode !== undefined) lines.push(`mode = ${tomlString(service.mode)}`)
  if (service.cloneFrom !== undefined) lines.push(`clone_from = ${tomlString(service.cloneFrom)}`)
  if (service.migrate !== undefined) lines.push(`migrate = ${tomlString(service.migrate)}`)
  if (service.seed !== undefined) {
    lines.push(...commentLines(service.seedComments ?? []), `seed = ${tomlString(service.seed)}`)
  }
  if (nonEmpty(service.groups)) lines.push(`groups = ${stringArray(service.groups)}`)
  return lines
}

const serviceBlock = (service: ServiceDraft): string =>
  [
    ...commentLines(service.comments ?? []),
    `[services.${tomlKey(service.name)}]`,
    ...(service._tag === "Process" ? processLines(service) : sliceLines(service))
  ].join("\n")

const projectBlock = (project: ConfigDraft["project"]): string =>
  [
    ...commentLines(project.comments ?? []),
    "[project]",
    `name = ${tomlString(project.name)}`,
    ...(project.setup === undefined ? [] : [`setup = ${tomlString(project.setup)}`]),
    ...(project.https === undefined ? [] : [`https = ${project.https}`]),
    ...(nonEmpty(project.copy) ? [`copy = ${stringArray(project.copy)}`] : [])
  ].join("\n")

const overrideBlocks = (override: OverrideDraft): Array<string> =>
  override.services.map((service, i) =>
    [
      ...(i === 0 ? commentLines(override.comments ?? []) : []),
      `[overrides.${tomlString(override.pattern)}.services.${tomlKey(service.name)}]`,
      ...(service.cmd === undefined ? [] : [`cmd = ${tomlString(service.cmd)}`]),
      ...(nonEmpty(service.env)
        ? [`env = ${inlineTable(service.env.map(([k, v]) => [k, tomlString(v)] as const))}`]
        : [])
    ].join("\n")
  )

/**
 * The berth.toml text for a draft: header comments, `[project]`, one table per service in draft order, then the
 * overrides.
 */
export const renderConfig = (draft: ConfigDraft): string => {
  const header = commentLines(draft.header)
  const blocks = [
    projectBlock(draft.project),
    ...draft.services.map(serviceBlock),
    ...(draft.overrides ?? []).flatMap(overrideBlocks)
  ]
  return `${[...(header.length === 0 ? [] : [header.join("\n")]), ...blocks].join("\n\n")}\n`
}
