/**
 * `berth init` from the configs of two other tools that give each worktree its own world: isola's `.isola.toml` and
 * binky's `binky.toml`. Both describe what berth.toml does — processes, per-worktree data slices of shared servers,
 * ports, per-branch changes — in keys of their own, which map onto berth's services, slices and settings here. What
 * has no berth equivalent is never dropped without a word: it becomes a note for init to print and a comment right
 * above the spot in berth.toml it would have gone to, naming the source line (`.isola.toml:12`). So `berth check`
 * has nothing to add about an imported config: what a user must decide is written where they will read it.
 */
import * as Either from "effect/Either"
import { parse, TomlError } from "smol-toml"
import { builtinAdapters, isValidAdapterName } from "../adapters.js"
import { formatPath, type KeyPath } from "../config/diagnostic.js"
import { indexPositions, type PositionIndex } from "../config/positions.js"
import { envKey } from "../names.js"
import { shellQuote } from "../tokens.js"
import {
  type ConfigDraft,
  InitError,
  type InitResult,
  type OverrideDraft,
  type ProcessDraft,
  type SliceDraft,
  todoCmd
} from "./model.js"
import { assignLabels, assignNames } from "./names.js"
import { renderConfig } from "./render.js"

type Dict = Readonly<Record<string, unknown>>

const isDict = (value: unknown): value is Dict =>
  typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date)

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined)

const scalar = (value: unknown): string | undefined =>
  typeof value === "string"
    ? value
    : typeof value === "number" || typeof value === "boolean"
      ? String(value)
      : undefined

/** How each tool spells what berth calls the same thing. */
interface Dialect {
  readonly tool: string
  /** the tables whose entries are per-worktree data slices */
  readonly sliceTables: ReadonlyArray<string>
  /** the prefix of the variables the tool gives every process (`ISOLA_BRANCH`, …) */
  readonly builtins: string
}

const isola: Dialect = { tool: "isola", sliceTables: ["accessories"], builtins: "ISOLA" }
const binky: Dialect = { tool: "binky", sliceTables: ["slices", "accessories"], builtins: "BINKY" }

/** One service of the source, as berth will name it. */
interface Named {
  readonly written: string
  readonly name: string
  readonly kind: "process" | "slice"
  /** it gets a port (and so `${name.url}`, `${name.port}`) */
  readonly port: boolean
}

interface Ctx {
  readonly dialect: Dialect
  readonly file: string
  readonly positions: PositionIndex
  readonly notes: Array<string>
  readonly byWritten: ReadonlyMap<string, Named>
}

/** Text with its control characters (a terminal's escape sequences among them) shown as `?`. */
const printable = (line: string): string =>
  Array.from(line, (char) => {
    const code = char.charCodeAt(0)
    return code < 0x20 || (code >= 0x7f && code <= 0x9f) ? "?" : char
  }).join("")

/** A value as a comment may quote it: short, one line, a URL's password hidden. */
const shown = (value: unknown): string => {
  const raw = scalar(value)
  if (raw === undefined) return ""
  const hidden = raw.replace(/([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi, "$1***@").replace(/[\r\n]+/g, " ")
  const clipped = hidden.length > 60 ? `${hidden.slice(0, 60)}…` : hidden
  return typeof value === "string" ? ` = ${JSON.stringify(clipped)}` : ` = ${clipped}`
}

/**
 * Something of the source that berth.toml does not carry as written: a note for init to print, and the comment line
 * returned for the spot it belongs to. Both name the source file and line.
 */
const lost = (ctx: Ctx, path: KeyPath, value: unknown, why: string): string => {
  const line = `${ctx.file}:${ctx.positions.find(path).line}: ${formatPath(path)}${shown(value)}: ${why}`
  ctx.notes.push(line)
  return line
}

// ---------------------------------------------------------------------------------------------------------------
// References: `${…}` in values, as the source tool reads them → berth tokens
// ---------------------------------------------------------------------------------------------------------------

const berthHeads = new Set(["env", "world", "self", "project"])

/**
 * One `${…}` reference as berth writes it; undefined when berth has nothing for it. `command`: the text is a shell
 * command, where a plain `${NAME}` is the shell's own (kept for the shell as `$${NAME}`); elsewhere it names a
 * variable of the environment (`${env.NAME}`).
 */
const reference = (ctx: Ctx, expr: string, self: Named | undefined, command: boolean): string | undefined => {
  const parts = expr.split(".")
  const [head, name, field, ...rest] = parts
  const target = name === undefined ? undefined : ctx.byWritten.get(name)
  if (rest.length > 0) return undefined
  if ((head === "accessories" || head === "slices") && target?.kind === "slice") {
    return field === "url" || field === "address" ? `\${${target.name}.url}` : undefined
  }
  if (head === "services" && target?.kind === "process" && target.port) {
    if (field === "url" || field === "port" || field === "host") return `\${${target.name}.${field}}`
    if (field === "direct_url") return `http://127.0.0.1:\${${target.name}.port}`
    return undefined
  }
  if (parts.length > 1) {
    // already a berth token (binky writes some as berth does): `${world.name}`, `${db.url}`, `${env.X}`
    const known = [...ctx.byWritten.values()].some((s) => s.name === head)
    return head !== undefined && (berthHeads.has(head) || known) ? `\${${expr}}` : undefined
  }
  const prefix = `${ctx.dialect.builtins}_`
  if (expr === "PORT") return self?.port === true ? "${self.port}" : undefined
  if (expr === `${prefix}BRANCH` || expr === `${prefix}WORLD`) return "${world.name}"
  if (expr === `${prefix}BRANCH_SLUG` || expr === `${prefix}WORLD_SLUG`) return "${world.slug}"
  if (expr === `${prefix}PROJECT`) return "${project.name}"
  if (expr === `${prefix}SERVICE`) return self?.name
  const sibling = new RegExp(`^${prefix}(.+?)_(DIRECT_URL|URL|PORT)$`).exec(expr)
  if (sibling !== null) {
    const of = [...ctx.byWritten.values()].find((s) => s.kind === "process" && s.port && envKey(s.name) === sibling[1])
    if (of === undefined) return undefined
    return sibling[2] === "DIRECT_URL"
      ? `http://127.0.0.1:\${${of.name}.port}`
      : `\${${of.name}.${sibling[2] === "URL" ? "url" : "port"}}`
  }
  if (expr.startsWith(prefix)) return undefined
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(expr)) return undefined
  return command ? `$\${${expr}}` : `\${env.${expr}}`
}

/**
 * A value with its references in berth's form. Text outside references is kept; a `${` berth would read as a token
 * is written `$${`. References berth has nothing for are kept as literal text, and returned to be said.
 */
const translate = (
  ctx: Ctx,
  value: string,
  self: Named | undefined,
  command: boolean
): { readonly value: string; readonly unknown: ReadonlyArray<string> } => {
  const unknown: Array<string> = []
  let out = ""
  let last = 0
  for (const match of value.matchAll(/\$\{([^{}]*)\}/g)) {
    out += value.slice(last, match.index)
    last = match.index + match[0].length
    const berth = reference(ctx, match[1]!.trim(), self, command)
    if (berth === undefined) unknown.push(match[0])
    out += berth ?? `$${match[0]}`
  }
  return { value: out + value.slice(last), unknown }
}

// ---------------------------------------------------------------------------------------------------------------
// Slices
// ---------------------------------------------------------------------------------------------------------------

/** A password written out in a URL (one that is itself a `${…}` reference stays a reference). */
const passwordIn = (url: string): boolean => {
  const password = /^[a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:([^\s@/]+)@/i.exec(url)?.[1]
  return password !== undefined && !password.includes("${")
}

/** The tool's kind of store → berth's adapter name (a built-in one, or the name of an external adapter). */
const adapterOf = (kind: string): string | undefined => {
  const bare = kind.includes("/") ? kind.slice(kind.lastIndexOf("/") + 1) : kind
  const name = bare.toLowerCase()
  if (name === "postgresql" || name === "pg") return "postgres"
  return isValidAdapterName(name) ? name : undefined
}

/** The same server with another database: the template isola copied each worktree's database from. */
const withDatabase = (url: string, database: string): string | undefined => {
  try {
    const parsed = new URL(url)
    parsed.pathname = `/${encodeURIComponent(database)}`
    return parsed.toString()
  } catch {
    return undefined
  }
}

/**
 * A seed that fills the golden with a copy of a template database: a dump of it, restored into the slice. Through a
 * file rather than a pipe, so that a dump that fails fails the seed.
 */
const templateSeed = (template: string, slice: string): string =>
  `f=$(mktemp) && pg_dump --no-owner --no-privileges -f "$f" ${template} && psql -q -v ON_ERROR_STOP=1 -f "$f" \${${slice}.url}; s=$?; rm -f "$f"; exit $s`

const sliceDraft = (ctx: Ctx, table: string, slice: Named, def: Dict): SliceDraft => {
  const at = (key: string): KeyPath => [table, slice.written, key]
  const comments: Array<string> = []
  const kindKey = def.adapter !== undefined ? "adapter" : "kind"
  const kind = text(def[kindKey]) ?? ""
  const adapter = adapterOf(kind) ?? slice.name
  if (kind === "")
    comments.push(lost(ctx, at(kindKey), def[kindKey], `no kind of store given: adapter "${adapter}" is a guess`))
  else if (adapterOf(kind) !== kind) {
    comments.push(lost(ctx, at(kindKey), kind, `berth's adapter for it is "${adapter}"`))
  }
  if (!builtinAdapters.has(adapter)) {
    comments.push(
      lost(
        ctx,
        at(kindKey),
        kind,
        `berth has no built-in ${adapter} adapter: it runs berth-adapter-${adapter} from PATH, or binky-adapter-${adapter} (binky's protocol)`
      )
    )
  }
  const serverKey = def.server_url !== undefined ? "server_url" : "admin_url"
  const server = text(def[serverKey])
  const variable = `${envKey(slice.name)}_ADMIN_URL`
  let adminUrl: string | undefined
  let adminUrlHint: string | undefined
  if (server !== undefined && passwordIn(server)) {
    // a credential stays out of berth.toml: it is read from the environment or .env
    adminUrl = `\${env.${variable}}`
    adminUrlHint = `${variable}: ${ctx.dialect.tool}'s ${serverKey} (${ctx.file}:${ctx.positions.find(at(serverKey)).line}), which holds a password: put it in .env`
    ctx.notes.push(
      `${slice.name}: set ${variable} in .env to ${ctx.dialect.tool}'s ${serverKey} (${ctx.file}:${ctx.positions.find(at(serverKey)).line}); it holds a password, which stays out of berth.toml`
    )
  } else if (server !== undefined) {
    const translated = translate(ctx, server, slice, false)
    adminUrl = translated.value
    for (const ref of translated.unknown) comments.push(lost(ctx, at(serverKey), undefined, `berth has no ${ref}`))
  }
  const redis = builtinAdapters.get(adapter)?.family === "redis"
  const migrate = text(def.migrate)
  const ownSeed = text(def.seed)
  let seed = ownSeed === undefined ? undefined : translate(ctx, ownSeed, slice, true).value
  let cloneFrom: "golden" | undefined
  const seedComments: Array<string> = []
  const template = text(def.clone_from)
  if (template === "golden") cloneFrom = "golden"
  else if (template !== undefined && adapter === "postgres" && seed === undefined) {
    cloneFrom = "golden"
    const from = adminUrl === undefined || adminUrl.includes("${") ? undefined : withDatabase(adminUrl, template)
    const templateVariable = `${envKey(slice.name)}_TEMPLATE_URL`
    seed = templateSeed(from === undefined ? `\${env.${templateVariable}}` : shellQuote(from), slice.name)
    seedComments.push(
      `${ctx.file}:${ctx.positions.find(at("clone_from")).line}: ${ctx.dialect.tool} copied each worktree's database from ${template}; berth copies one golden into each world, and this seed fills the golden with a copy of ${template}`
    )
    if (from === undefined) {
      ctx.notes.push(
        `${slice.name}: set ${templateVariable} in .env to the URL of the database ${template}, which the seed copies`
      )
    }
  } else if (template !== undefined) {
    const why =
      adapter === "postgres"
        ? "berth copies a golden its seed fills, and this slice has a seed of its own"
        : `berth copies a golden built by migrate and seed, not a template of the ${adapter} server`
    comments.push(lost(ctx, at("clone_from"), template, why))
  }
  const handled = new Set(["adapter", "kind", "server_url", "admin_url", "clone_from", "migrate", "seed", "inject"])
  for (const [key, value] of Object.entries(def)) {
    if (handled.has(key)) continue
    const why =
      key === "name"
        ? `berth names each world's slice itself (<project>_<world>_${slice.name})`
        : key === "url"
          ? `berth gives the slice's own address as \${${slice.name}.url}`
          : key === "databases" && redis
            ? "berth's redis adapter takes a free database of the server itself"
            : "not carried over: berth.toml has no such key"
    comments.push(lost(ctx, at(key), value, why))
  }
  return {
    _tag: "Slice",
    name: slice.name,
    comments,
    adapter,
    adminUrlHint,
    adminUrl,
    mode: redis ? "db" : undefined,
    cloneFrom,
    migrate: migrate === undefined ? undefined : translate(ctx, migrate, slice, true).value,
    seedComments,
    seed
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------------------------

interface PortRange {
  readonly from: number
  readonly to: number
}

/** `{ min, max }` (isola), `"A-B"`, or `[A, B]`. */
const portRangeOf = (value: unknown): PortRange | undefined => {
  const pair = isDict(value)
    ? [value.min, value.max]
    : Array.isArray(value)
      ? value
      : typeof value === "string"
        ? value.split("-")
        : []
  const [from, to] = pair.map((v) => Number(v))
  return from !== undefined && to !== undefined && Number.isInteger(from) && Number.isInteger(to) && from <= to
    ? { from, to }
    : undefined
}

const envEntries = (
  ctx: Ctx,
  path: KeyPath,
  value: unknown,
  self: Named,
  comments: Array<string>
): Array<readonly [string, string]> => {
  if (value === undefined) return []
  if (!isDict(value)) {
    comments.push(lost(ctx, path, undefined, "not a table of variables"))
    return []
  }
  return Object.entries(value).flatMap(([key, raw]): Array<readonly [string, string]> => {
    const written = scalar(raw)
    if (written === undefined) {
      comments.push(lost(ctx, [...path, key], undefined, "not a string, number or boolean"))
      return []
    }
    const translated = translate(ctx, written, self, false)
    // a variable berth cannot give its value is left out rather than set to text that means nothing
    for (const ref of translated.unknown) {
      comments.push(
        lost(
          ctx,
          [...path, key],
          undefined,
          ref === "${proxy.ca_cert}"
            ? "not carried: berth has no token for its CA's file (`berth trust` makes the system trust it)"
            : `not carried: berth has nothing for ${ref}`
        )
      )
    }
    return translated.unknown.length > 0 ? [] : [[key, translated.value]]
  })
}

interface ProcessInput {
  readonly service: Named
  readonly def: Dict
  readonly label: string
  /** variables every process gets (isola's global [env], the accessories' `inject`) */
  readonly shared: ReadonlyArray<readonly [string, string]>
  /** env_file every process gets unless it names its own */
  readonly envFile: string | undefined
}

const processDraft = (ctx: Ctx, input: ProcessInput): { readonly draft: ProcessDraft; readonly range?: PortRange } => {
  const { service, def } = input
  const at = (key: string): KeyPath => ["services", service.written, key]
  const comments: Array<string> = []
  const commandKey = def.command !== undefined ? "command" : "cmd"
  const written = text(def[commandKey])
  const cmdComments: Array<string> = []
  let cmd = todoCmd(service.name)
  if (written === undefined || written.trim() === "") {
    cmdComments.push(`TODO: ${ctx.file} gives ${service.written} no command; set cmd`)
    ctx.notes.push(`${service.name}: no command in ${ctx.file}; set services.${service.name}.cmd`)
  } else {
    const translated = translate(ctx, written, service, true)
    cmd = translated.value
    for (const ref of translated.unknown)
      comments.push(lost(ctx, at(commandKey), undefined, `berth has nothing for ${ref}`))
  }
  const setupText = text(def.setup)
  const setup = setupText === undefined ? undefined : translate(ctx, setupText, service, true)
  for (const ref of setup?.unknown ?? [])
    comments.push(lost(ctx, at("setup"), undefined, `berth has nothing for ${ref}`))
  const own = envEntries(ctx, at("env"), def.env, service, comments)
  const env = [...input.shared.filter(([key]) => !own.some(([k]) => k === key)), ...own]
  const ownEnvFile = def.env_file === undefined ? input.envFile : text(def.env_file)
  const range = portRangeOf(def.port_range)
  if (def.port_range !== undefined && range === undefined) {
    comments.push(lost(ctx, at("port_range"), undefined, "not a range of ports berth can read"))
  }
  const dependsOn = Array.isArray(def.depends_on)
    ? def.depends_on.flatMap((d) => {
        const target = typeof d === "string" ? ctx.byWritten.get(d) : undefined
        if (target === undefined) comments.push(lost(ctx, at("depends_on"), d, "names no service of the file"))
        return target === undefined ? [] : [target.name]
      })
    : []
  const handled = new Set([
    "command",
    "cmd",
    "setup",
    "dir",
    "env",
    "env_file",
    "port_range",
    "proxy_port",
    "depends_on"
  ])
  for (const [key, value] of Object.entries(def)) {
    if (!handled.has(key)) comments.push(lost(ctx, at(key), value, "not carried over: berth.toml has no such key"))
  }
  const draft: ProcessDraft = {
    _tag: "Process",
    name: service.name,
    comments,
    cmdComments,
    cmd,
    dir: text(def.dir) === "" ? undefined : text(def.dir),
    url: service.port ? input.label : undefined,
    dependsOn,
    env,
    envFile: ownEnvFile === "" ? undefined : ownEnvFile,
    setup: setup?.value
  }
  return range === undefined ? { draft } : { draft, range }
}

// ---------------------------------------------------------------------------------------------------------------
// The whole file
// ---------------------------------------------------------------------------------------------------------------

const parseSource = (input: ImportInput): Either.Either<Dict, InitError> => {
  try {
    const doc = parse(input.text)
    return Either.right(doc)
  } catch (cause) {
    const message = cause instanceof Error ? (cause.message.split("\n")[0] ?? cause.message) : String(cause)
    const line = cause instanceof TomlError ? cause.line : undefined
    return Either.left(
      new InitError(line === undefined ? { message, file: input.file } : { message, file: input.file, line })
    )
  }
}

export interface ImportInput {
  /** the source file's text */
  readonly text: string
  /** its name as shown to the user (`.isola.toml`, `binky.toml`) */
  readonly file: string
  /** the project's name when the file gives none: the folder's */
  readonly projectName: string
}

const tablesOf = (value: unknown): ReadonlyArray<readonly [string, Dict]> =>
  isDict(value) ? Object.entries(value).filter((entry): entry is [string, Dict] => isDict(entry[1])) : []

const convert = (dialect: Dialect, input: ImportInput): Either.Either<InitResult, InitError> =>
  Either.map(parseSource(input), (doc) => {
    const notes: Array<string> = []
    // binky may keep project-wide keys in a [project] table; isola writes them at the top level
    const top: Dict = isDict(doc.project) ? { ...doc, ...doc.project } : doc
    const projectPath = (key: string): KeyPath => (isDict(doc.project) && key in doc.project ? ["project", key] : [key])
    const processes = tablesOf(doc.services)
    const slices = dialect.sliceTables.flatMap((table) =>
      tablesOf(doc[table]).map(([written, def]) => ({ table, written, def }))
    )
    const names = assignNames([...processes.map(([written]) => written), ...slices.map((s) => s.written)])
    const named = new Map<string, Named>()
    for (const [written, def] of processes) {
      const port = def.port_range !== undefined || def.proxy_port !== undefined
      named.set(written, { written, name: names.get(written) ?? written, kind: "process", port })
    }
    for (const s of slices) {
      if (!named.has(s.written)) {
        named.set(s.written, {
          written: s.written,
          name: names.get(s.written) ?? s.written,
          kind: "slice",
          port: false
        })
      }
    }
    const ctx: Ctx = { dialect, file: input.file, positions: indexPositions(input.text), notes, byWritten: named }
    for (const [written, service] of named) {
      if (service.name !== written) notes.push(`renamed ${dialect.tool}'s service ${written} to ${service.name}`)
    }

    const projectComments: Array<string> = []
    const declared = text(top.project) ?? (isDict(doc.project) ? text(doc.project.name) : undefined)
    const projectKey = text(top.project) !== undefined ? "project" : "name"
    const projectName =
      declared !== undefined && /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(declared) ? declared : input.projectName
    if (declared !== undefined && projectName !== declared) {
      projectComments.push(
        lost(ctx, projectPath(projectKey), declared, "not a host name label: the folder's name is used")
      )
    }

    // variables every process gets: isola's global [env] (older files) and each accessory's `inject`
    const shared: Array<readonly [string, string]> = []
    const sharedComments: Array<string> = []
    if (isDict(doc.env)) {
      for (const [key, value] of Object.entries(doc.env)) {
        const written = scalar(value)
        if (written === undefined) continue
        const translated = translate(ctx, written, undefined, false)
        for (const ref of translated.unknown)
          sharedComments.push(lost(ctx, ["env", key], undefined, `berth has nothing for ${ref}`))
        shared.push([key, translated.value])
      }
    }
    for (const s of slices) {
      const inject = text(s.def.inject)
      const slice = named.get(s.written)
      if (inject !== undefined && slice?.kind === "slice") shared.push([inject, `\${${slice.name}.url}`])
    }

    // [env_file]: isola writes each service's variables into its folder's file by default, only where one exists
    let envFile: string | undefined
    if (isDict(doc.env_file)) {
      if (doc.env_file.enabled !== false) envFile = text(doc.env_file.path) ?? ".env"
      if (doc.env_file.create !== undefined) {
        projectComments.push(
          lost(
            ctx,
            ["env_file", "create"],
            doc.env_file.create,
            "berth writes its block into env_file, making the file when there is none"
          )
        )
      }
    } else if (dialect === isola && processes.length > 0) {
      notes.push(
        `${dialect.tool} also wrote each service's variables into an existing .env of its folder; berth does so only where env_file is set: add env_file = ".env" to a service that reads its .env`
      )
    }

    const labels = assignLabels(processes.map(([written]) => named.get(written)?.name ?? written))
    const ranges: Array<{ readonly service: string; readonly range: PortRange }> = []
    const proxyPorts: Array<string> = []
    const processDrafts = processes.map(([written, def]) => {
      const service = named.get(written)!
      if (def.proxy_port !== undefined) proxyPorts.push(`${service.name} ${scalar(def.proxy_port) ?? "?"}`)
      const { draft, range } = processDraft(ctx, {
        service,
        def,
        label: labels.get(service.name) ?? service.name,
        shared,
        envFile
      })
      if (range !== undefined) ranges.push({ service: service.name, range })
      return { ...draft, comments: [...sharedComments, ...(draft.comments ?? [])] }
    })
    const sliceDrafts = slices.flatMap((s) => {
      const slice = named.get(s.written)
      if (slice?.kind !== "slice") {
        notes.push(`skipped ${s.table}.${s.written}: a service of that name comes first`)
        return []
      }
      return [sliceDraft(ctx, s.table, slice, s.def)]
    })

    // ports: berth leases every world's ports from one machine-wide range, and routes through one proxy port
    const topRange = top.port_range === undefined ? undefined : portRangeOf(top.port_range)
    if (topRange !== undefined) ranges.push({ service: "", range: topRange })
    if (ranges.length > 0) {
      const from = Math.min(...ranges.map((r) => r.range.from))
      const to = Math.max(...ranges.map((r) => r.range.to))
      const line = `${dialect.tool} leased ports from ${ranges.map((r) => `${r.range.from}-${r.range.to}${r.service === "" ? "" : ` (${r.service})`}`).join(", ")}; berth leases every world's ports from one range of this machine: \`berth port --range ${from}-${to}\` takes the same`
      projectComments.push(line)
      notes.push(line)
    }
    if (proxyPorts.length > 0) {
      const line = `${dialect.tool}'s proxy ports (${proxyPorts.join(", ")}) are not carried: berth serves every world at http://<url>.<world>.<project>.localhost on its one proxy port (\`berth port --proxy\`)`
      projectComments.push(line)
      notes.push(line)
    }

    const setupText = text(top.setup)
    const setup = setupText === undefined ? undefined : translate(ctx, setupText, undefined, true).value
    // isola copies .env into a new worktree unless copy_files says otherwise
    const copyFiles = top.copy_files ?? top.copy
    const copy = Array.isArray(copyFiles)
      ? copyFiles.flatMap((p) => (typeof p === "string" ? [p] : []))
      : dialect === isola
        ? [".env"]
        : []
    let https: boolean | undefined
    if (isDict(doc.proxy)) {
      if (doc.proxy.https === true) https = true
      for (const [key, value] of Object.entries(doc.proxy)) {
        // on is berth's way too: only a proxy turned off is worth a word
        if (key === "https" || (key === "enabled" && value === true)) continue
        projectComments.push(
          lost(
            ctx,
            ["proxy", key],
            value,
            key === "enabled"
              ? "berth's proxy is the machine's, for every project: `berth port --proxy off` turns it off"
              : key === "auto_trust"
                ? "berth asks for trust only when told: `berth trust`"
                : "not carried over: berth.toml has no such key"
          )
        )
      }
    }

    const branches = overridesOf(ctx, doc.worktrees)
    const overrides = branches.flatMap((b) => b.overrides)
    projectComments.push(...branches.flatMap((b) => b.dropped))
    const known = new Set([
      "project",
      ...(isDict(doc.project) ? ["name"] : []),
      "services",
      ...dialect.sliceTables,
      "env",
      "env_file",
      "setup",
      "copy_files",
      "copy",
      "port_range",
      "proxy",
      "worktrees"
    ])
    for (const [key, value] of Object.entries(top)) {
      if (!known.has(key))
        projectComments.push(lost(ctx, projectPath(key), value, "not carried over: berth.toml has no such key"))
    }
    if (dialect === isola && processes.length > 0) {
      notes.push(
        'isola gave every process ISOLA_BRANCH, ISOLA_<SERVICE>_URL and the like; berth gives BERTH_WORLD, BERTH_PROJECT, BERTH_SERVICE and PORT: where your code reads an ISOLA_ variable, set it in env (e.g. ISOLA_BRANCH = "${world.name}")'
      )
    }
    if (processDrafts.length === 0 && sliceDrafts.length === 0) notes.push(`${input.file} defines no services`)

    const draft: ConfigDraft = {
      header: [
        `Generated by \`berth init\` from ${input.file}.`,
        `Comments naming ${input.file}:<line> say what berth.toml does not carry as ${dialect.tool} had it; review them, then run \`berth check\`.`
      ],
      project: { comments: projectComments, name: projectName, setup, https, copy },
      services: [...sliceDrafts, ...processDrafts],
      overrides
    }
    // notes go to a terminal: nothing the file says may reach it as a control sequence
    return { toml: renderConfig(draft), notes: notes.map(printable) }
  })

/** `[worktrees."<branch>"]` → `[overrides."<branch>"]`: a command and variables of its own; a fixed port is not kept. */
const overridesOf = (
  ctx: Ctx,
  value: unknown
): ReadonlyArray<{ readonly overrides: ReadonlyArray<OverrideDraft>; readonly dropped: ReadonlyArray<string> }> =>
  tablesOf(value).map(([branch, def]) => {
    const comments: Array<string> = []
    const services = tablesOf(def.services).flatMap(([written, o]) => {
      const at = (key: string): KeyPath => ["worktrees", branch, "services", written, key]
      const service = ctx.byWritten.get(written)
      if (service?.kind !== "process") {
        comments.push(lost(ctx, ["worktrees", branch, "services", written], undefined, "names no service of the file"))
        return []
      }
      const command = text(o.command) ?? text(o.cmd)
      const env = envEntries(ctx, at("env"), o.env, service, comments)
      for (const [key, v] of Object.entries(o)) {
        if (key === "command" || key === "cmd" || key === "env") continue
        comments.push(
          lost(
            ctx,
            at(key),
            v,
            key === "port"
              ? "berth leases ports itself; a world keeps its ports for its whole life"
              : "not carried over: berth.toml has no such key"
          )
        )
      }
      return command === undefined && env.length === 0
        ? []
        : [
            {
              name: service.name,
              cmd: command === undefined ? undefined : translate(ctx, command, service, true).value,
              env
            }
          ]
    })
    for (const [key, v] of Object.entries(def)) {
      if (key !== "services")
        comments.push(lost(ctx, ["worktrees", branch, key], v, "not carried over: berth.toml has no such key"))
    }
    // nothing of it carries over: what it said stands above [project]
    return services.length === 0
      ? { overrides: [], dropped: comments }
      : { overrides: [{ pattern: branch, comments, services }], dropped: [] }
  })

/** `.isola.toml` → berth.toml. */
export const fromIsola = (input: ImportInput): Either.Either<InitResult, InitError> => convert(isola, input)

/** `binky.toml` → berth.toml. */
export const fromBinky = (input: ImportInput): Either.Either<InitResult, InitError> => convert(binky, input)
