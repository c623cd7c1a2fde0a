/**
 * `berth.toml` text → a validated `Config`, or every error in the file at once, each with file, line, column, key
 * path and, where a typo is likely, the closest valid name.
 */
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { parse as parseToml, TomlError } from "smol-toml"
import { builtinAdapters, isValidAdapterName } from "../adapters.js"
import * as Graph from "../graph.js"
import { closestName } from "../names.js"
import { byPosition, type Diagnostic, didYouMean, formatPath, type KeyPath } from "./diagnostic.js"
import { flattenIssue } from "./issues.js"
import * as Model from "./model.js"
import { indexPositions, type PositionIndex } from "./positions.js"
import * as S from "./schema.js"

export interface ParsedConfig {
  readonly config: Model.Config
  readonly positions: PositionIndex
  /** the document as smol-toml read it, for checks that look at what was written */
  readonly raw: Readonly<Record<string, unknown>>
}

/** Names with a meaning of their own inside `${…}` tokens. */
export const reservedServiceNames: ReadonlySet<string> = new Set(["self", "env", "world", "project"])

const serviceNamePattern = /^[A-Za-z][A-Za-z0-9_-]*$/

const isTable = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date)

class Collector {
  readonly errors: Array<Diagnostic> = []
  constructor(
    readonly file: string,
    readonly positions: PositionIndex
  ) {}
  add(path: KeyPath, message: string, hint?: string): void {
    const at = this.positions.find(path)
    this.errors.push({ severity: "error", file: this.file, ...at, path: formatPath(path), message, hint })
  }
}

/** Decodes `input` with `schema`, reporting every problem under `prefix`. */
const decodeInto = <A, I>(
  schema: Schema.Schema<A, I>,
  input: unknown,
  prefix: KeyPath,
  out: Collector,
  describeTable: string,
  extraHint?: (key: string, known: ReadonlyArray<string>) => string | undefined
): A | undefined => {
  const result = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(input)
  if (Either.isRight(result)) return result.right
  for (const finding of flattenIssue(result.left.issue)) {
    const path = [...prefix, ...finding.path]
    const last = path[path.length - 1]
    if (finding.kind === "unknown-key") {
      const key = String(last)
      out.add(
        path,
        `unknown key "${key}" in ${describeTable}`,
        extraHint?.(key, finding.known) ?? didYouMean(closestName(key, finding.known))
      )
    } else if (finding.kind === "missing") {
      out.add(path, `missing required key "${String(last)}" in ${describeTable}`)
    } else {
      const guess = typeof finding.actual === "string" ? closestName(finding.actual, finding.literals) : undefined
      out.add(path, finding.message, didYouMean(guess))
    }
  }
  return undefined
}

const topLevelKeys = ["project", "services", "agents", "overrides"]

/** The depends_on list as written, when it is a list of strings; anything else is reported by the schema. */
const writtenDependsOn = (value: unknown): ReadonlyArray<string> =>
  isTable(value) && Array.isArray(value.depends_on) ? value.depends_on.filter((d) => typeof d === "string") : []

const sliceOnlyKeys = new Set(["adapter", "admin_url", "migrate", "seed", "clone_from", "golden_inputs"])

/** Keys people bring from docker-compose and other tools, and what berth calls them. */
const familiarKeys: Record<string, string> = {
  command: "cmd",
  environment: "env",
  working_dir: "dir",
  cwd: "dir",
  port: "ports",
  healthcheck: "health",
  depends: "depends_on",
  profiles: "groups"
}

/**
 * The hint for an unknown key of a process service: a slice's key (or a misspelling of one: `adaptor`) says how to
 * make the service a slice; a typo of a key berth takes is pointed at it; another tool's name for a key (or a
 * misspelling of that: `comand`) at berth's.
 */
const processHint = (key: string, known: ReadonlyArray<string>): string | undefined => {
  const asSlice = (slice: string) =>
    `${slice === key ? `"${key}"` : `did you mean "${slice}"? that`} belongs to a slice: add adapter = "postgres" (or another adapter) to make this service a slice`
  if (sliceOnlyKeys.has(key)) return asSlice(key)
  const typo = closestName(key, known)
  if (typo !== undefined) return didYouMean(typo)
  const slice = closestName(key, sliceOnlyKeys)
  if (slice !== undefined) return asSlice(slice)
  const familiar = familiarKeys[key] ?? familiarKeys[closestName(key, Object.keys(familiarKeys)) ?? ""]
  return didYouMean(familiar)
}

const toHealth = (h: S.ProcessServiceInput["health"]): Model.HealthCheck | undefined => {
  if (h === undefined) return undefined
  const timing = {
    timeoutMs: h.timeout ?? Model.defaults.healthTimeoutMs,
    intervalMs: h.interval ?? Model.defaults.healthIntervalMs
  }
  if (h.http !== undefined) return { kind: "http", target: h.http, ...timing }
  if (h.cmd !== undefined) return { kind: "cmd", target: h.cmd, ...timing }
  if (h.log !== undefined) return { kind: "log", target: h.log, ...timing }
  return { kind: "tcp", target: "", ...timing }
}

const toProcess = (name: string, s: S.ProcessServiceInput): Model.ProcessService => ({
  _tag: "Process",
  name,
  cmd: s.cmd,
  dir: s.dir,
  url: s.url,
  ports: s.ports ?? [],
  dependsOn: s.depends_on ?? [],
  env: s.env ?? {},
  envFiles: s.env_file === undefined ? [] : typeof s.env_file === "string" ? [s.env_file] : s.env_file,
  setup: s.setup,
  health: toHealth(s.health),
  restart: s.restart ?? Model.defaults.restart,
  maxRestarts: s.max_restarts ?? Model.defaults.maxRestarts,
  restartBackoffMs: s.restart_backoff ?? Model.defaults.restartBackoffMs,
  stopGraceMs: s.stop_grace ?? Model.defaults.stopGraceMs,
  groups: s.groups ?? [],
  inject: s.inject ?? true
})

/** A slice of a built-in adapter accepts the common keys plus its own; an external adapter's keys pass through. */
const decodeSlice = (name: string, table: Record<string, unknown>, out: Collector): Model.SliceService | undefined => {
  const prefix = ["services", name]
  const adapter = table.adapter
  if (typeof adapter !== "string" || !isValidAdapterName(adapter)) {
    out.add(
      [...prefix, "adapter"],
      `expected an adapter name such as "postgres", got ${JSON.stringify(adapter)}`,
      `built-in adapters: ${[...builtinAdapters.keys()].join(", ")}`
    )
    return undefined
  }
  const info = builtinAdapters.get(adapter)
  const optionFields: Record<string, Schema.Schema<string>> = {}
  for (const [key, values] of Object.entries(info?.options ?? {})) {
    optionFields[key] =
      values.length === 0
        ? S.Text
        : Schema.Literal(...(values as [string, ...Array<string>])).annotations({
            description: values.map((v) => JSON.stringify(v)).join(" or ")
          })
  }
  const schema = Schema.Struct({
    ...S.sliceFields,
    ...Object.fromEntries(Object.entries(optionFields).map(([k, v]) => [k, Schema.optional(v)]))
  })
  // an external adapter's own keys are not ours to judge: keep them as options
  const common = Object.fromEntries(Object.entries(table).filter(([k]) => info !== undefined || k in S.sliceFields))
  const decoded = decodeInto(schema, common, prefix, out, `the slice "${name}" (adapter "${adapter}")`)
  if (decoded === undefined) return undefined
  const options = Object.fromEntries(Object.entries(table).filter(([k]) => !(k in S.sliceFields)))
  return {
    _tag: "Slice",
    name,
    adapter,
    adminUrl: decoded.admin_url,
    migrate: decoded.migrate,
    seed: decoded.seed,
    cloneFrom: decoded.clone_from === "golden" ? "golden" : undefined,
    cloneSource: decoded.clone_from === "golden" ? undefined : decoded.clone_from,
    goldenInputs: decoded.golden_inputs ?? [],
    options,
    dependsOn: [],
    groups: decoded.groups ?? []
  }
}

const decodeService = (name: string, value: unknown, out: Collector): Model.Service | undefined => {
  const prefix = ["services", name]
  if (!serviceNamePattern.test(name)) {
    out.add(prefix, `"${name}" is not a valid service name`, 'start with a letter; use letters, digits, "-" and "_"')
    return undefined
  }
  if (reservedServiceNames.has(name)) {
    out.add(prefix, `"${name}" is reserved for \${${name}.…} tokens and cannot name a service`, "rename the service")
    return undefined
  }
  if (!isTable(value)) {
    out.add(prefix, `expected a service table, got ${JSON.stringify(value)}`, `write [services.${name}] with a cmd`)
    return undefined
  }
  if ("adapter" in value) return decodeSlice(name, value, out)
  const decoded = decodeInto(S.ProcessService, value, prefix, out, `the service "${name}"`, processHint)
  if (decoded === undefined) return undefined
  const ports = decoded.ports ?? []
  ports.forEach((port, i) => {
    if (ports.indexOf(port) !== i) out.add([...prefix, "ports", i], `port "${port}" is listed twice`)
  })
  return toProcess(name, decoded)
}

const graphErrors = (issues: ReadonlyArray<Graph.GraphIssue>, names: ReadonlyArray<string>, out: Collector) => {
  for (const issue of issues) {
    switch (issue._tag) {
      case "UnknownDependency":
        out.add(
          ["services", issue.service, "depends_on", issue.index],
          `"${issue.name}" is not a service in this file`,
          didYouMean(closestName(issue.name, names)) ?? `services: ${names.join(", ")}`
        )
        break
      case "SelfDependency":
        out.add(["services", issue.service, "depends_on", issue.index], `"${issue.service}" depends on itself`)
        break
      case "DuplicateDependency":
        out.add(["services", issue.service, "depends_on", issue.index], `"${issue.name}" is listed twice`)
        break
      case "Cycle":
        out.add(
          ["services", issue.path[0]!, "depends_on"],
          `depends_on has a cycle: ${issue.path.join(" → ")}`,
          "remove one of these dependencies"
        )
        break
    }
  }
}

const decodeOverrides = (
  input: Schema.Schema.Type<typeof S.Overrides>,
  services: ReadonlyMap<string, Model.Service>,
  names: ReadonlyArray<string>,
  out: Collector
): ReadonlyArray<Model.Override> =>
  Object.entries(input).map(([pattern, o]) => {
    const overridden = new Map<string, Model.ServiceOverride>()
    for (const [name, so] of Object.entries(o.services ?? {})) {
      const path = ["overrides", pattern, "services", name]
      const target = services.get(name)
      if (!names.includes(name)) {
        out.add(path, `"${name}" is not a service in this file`, didYouMean(closestName(name, names)))
      } else if (target?._tag === "Slice") {
        out.add(path, `"${name}" is a slice: overrides change processes only`)
      }
      overridden.set(name, { cmd: so.cmd, env: so.env ?? {}, ports: so.ports })
    }
    return { pattern, services: overridden }
  })

export const parseConfig = (text: string, file: string): Either.Either<ParsedConfig, ReadonlyArray<Diagnostic>> => {
  let raw: Record<string, unknown>
  try {
    raw = parseToml(text)
  } catch (e) {
    if (e instanceof TomlError) {
      const message = e.message.replace(/^Invalid TOML document: /, "").split("\n")[0] ?? "invalid TOML"
      return Either.left([
        { severity: "error", file, line: e.line, column: e.column, path: "", message: `invalid TOML: ${message}` }
      ])
    }
    throw e
  }
  const positions = indexPositions(text)
  const out = new Collector(file, positions)
  // each section is decoded on its own, so that one broken table does not hide the errors of another
  for (const key of Object.keys(raw)) {
    if (!topLevelKeys.includes(key)) {
      out.add([key], `unknown key "${key}" in berth.toml`, didYouMean(closestName(key, topLevelKeys)))
    }
  }
  const project = raw.project === undefined ? {} : decodeInto(S.Project, raw.project, ["project"], out, "[project]")
  const agents = raw.agents === undefined ? {} : decodeInto(S.Agents, raw.agents, ["agents"], out, "[agents]")
  const rawOverrides =
    raw.overrides === undefined ? {} : decodeInto(S.Overrides, raw.overrides, ["overrides"], out, "[overrides]")
  if (raw.services !== undefined && !isTable(raw.services)) {
    out.add(["services"], "expected a table of service tables", "write each service as [services.NAME]")
  }
  const rawServices = isTable(raw.services) ? raw.services : {}
  const services = new Map<string, Model.Service>()
  for (const [name, value] of Object.entries(rawServices)) {
    const service = decodeService(name, value, out)
    if (service !== undefined) services.set(name, service)
  }
  const names = Object.keys(rawServices)
  // depends_on is checked even for a service with other errors, so one run shows them all
  const graph = Graph.analyse(names.map((name) => ({ name, dependsOn: writtenDependsOn(rawServices[name]) })))
  if (Either.isLeft(graph)) graphErrors(graph.left, names, out)
  const overrides = rawOverrides === undefined ? [] : decodeOverrides(rawOverrides, services, names, out)
  if (out.errors.length > 0 || project === undefined || agents === undefined || Either.isLeft(graph)) {
    return Either.left([...out.errors].sort(byPosition))
  }
  const config: Model.Config = {
    file,
    project: {
      name: project.name,
      domain: project.domain ?? Model.defaults.domain,
      worktrees: project.worktrees,
      setup: project.setup,
      https: project.https ?? false,
      idleSuspendMs: project.idle_suspend,
      copy: project.copy ?? [],
      link: project.link ?? []
    },
    services: names.map((n) => services.get(n)!),
    agents: { verify: agents.verify ?? [] },
    overrides,
    graph: graph.right
  }
  return Either.right({ config, positions, raw })
}

/** Is `dir` inside the worktree? Pure path arithmetic on a relative POSIX path. */
export const dirEscapes = (dir: string): boolean => {
  if (dir.startsWith("/")) return true
  let depth = 0
  for (const part of dir.split("/")) {
    if (part === "..") depth--
    else if (part !== "." && part !== "") depth++
    if (depth < 0) return true
  }
  return false
}
