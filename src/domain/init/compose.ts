import * as Either from "effect/Either"
import { isMap, isScalar, LineCounter, parseDocument } from "yaml"
import { builtinAdapters, externalAdapterCommand } from "../adapters.js"
import { parseDotenv } from "../dotenv.js"
import { shellQuote } from "../tokens.js"
import { type ConfigDraft, type Health, InitError, type InitResult, type ServiceDraft, todoCmd } from "./model.js"
import { assignLabels, assignNames, toLabel, toName } from "./names.js"
import { renderConfig } from "./render.js"

// ---------------------------------------------------------------------------------------------------------------
// Generic helpers
// ---------------------------------------------------------------------------------------------------------------

type Dict = Readonly<Record<string, unknown>>

const isDict = (value: unknown): value is Dict => typeof value === "object" && value !== null && !Array.isArray(value)

const scalarText = (value: unknown): string | undefined =>
  typeof value === "string"
    ? value
    : typeof value === "number" || typeof value === "boolean"
      ? String(value)
      : undefined

const selfPort = `\${self.port}`

const unique = <A>(values: ReadonlyArray<A>): Array<A> => [...new Set(values)]

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** Normalizes a relative posix path; undefined when it is absolute or climbs above the repo root. */
const repoPath = (base: string, rel: string): string | undefined => {
  if (rel.startsWith("/") || /^[A-Za-z]:[\\/]/.test(rel)) return undefined
  const parts: Array<string> = []
  for (const segment of `${base}/${rel}`.replace(/\\/g, "/").split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment !== "..") parts.push(segment)
    else if (parts.pop() === undefined) return undefined
  }
  return parts.length === 0 ? "." : parts.join("/")
}

const composeDirOf = (composeFile: string): string => {
  const normalized = composeFile.replace(/\\/g, "/")
  // An absolute compose path cannot be related to the repo root here; treat it as living at the root.
  if (normalized.startsWith("/")) return ""
  const slash = normalized.lastIndexOf("/")
  return slash < 0 ? "" : normalized.slice(0, slash)
}

// ---------------------------------------------------------------------------------------------------------------
// Compose variable interpolation: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}`, ...
// ---------------------------------------------------------------------------------------------------------------

type Segment =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Var"; readonly name: string; readonly op: string; readonly arg: ReadonlyArray<Segment> }
  /** A berth token written as is, e.g. `${self.port}`; produced by the conversion, never by compose text. */
  | { readonly _tag: "Token"; readonly token: string }

const varName = /^[A-Za-z_][A-Za-z0-9_]*/

type Step = { readonly text: string; readonly end: number } | { readonly segment: Segment; readonly end: number }

/** `${NAME}` or `${NAME<op>arg}` at `start` (the `$`); undefined when malformed. */
const parseBraced = (input: string, start: number): Step | undefined => {
  const nameStart = start + 2
  const name = varName.exec(input.slice(nameStart))?.[0]
  if (name === undefined) return undefined
  const opStart = nameStart + name.length
  const op = /^:?[-?+]/.exec(input.slice(opStart))?.[0] ?? ""
  const arg = op === "" ? { segments: [], end: opStart } : parseSegments(input, opStart + op.length, true)
  if (input.charAt(arg.end) !== "}") return undefined
  return { segment: { _tag: "Var", name, op, arg: arg.segments }, end: arg.end + 1 }
}

// A `$` that starts no valid reference stays literal rather than being guessed at.
const parseDollar = (input: string, start: number): Step => {
  const next = input.charAt(start + 1)
  if (next === "$") return { text: "$", end: start + 2 }
  if (next === "{") return parseBraced(input, start) ?? { text: "$", end: start + 1 }
  const name = varName.exec(input.slice(start + 1))?.[0]
  return name === undefined
    ? { text: "$", end: start + 1 }
    : { segment: { _tag: "Var", name, op: "", arg: [] }, end: start + 1 + name.length }
}

const parseSegments = (
  input: string,
  start: number,
  nested: boolean
): { readonly segments: Array<Segment>; readonly end: number } => {
  const segments: Array<Segment> = []
  let text = ""
  let i = start
  while (i < input.length) {
    const char = input.charAt(i)
    if (nested && char === "}") break
    const step: Step = char === "$" ? parseDollar(input, i) : { text: char, end: i + 1 }
    if ("text" in step) text += step.text
    else {
      if (text !== "") segments.push({ _tag: "Text", text })
      text = ""
      segments.push(step.segment)
    }
    i = step.end
  }
  if (text !== "") segments.push({ _tag: "Text", text })
  return { segments, end: i }
}

const interpolation = (input: string): ReadonlyArray<Segment> => parseSegments(input, 0, false).segments

/** What compose itself would substitute, given the `.env` values (used only to recognise shapes, never written). */
const resolve = (segments: ReadonlyArray<Segment>, env: ReadonlyMap<string, string>): string =>
  segments
    .map((segment) => {
      if (segment._tag === "Text") return segment.text
      if (segment._tag === "Token") return segment.token
      const value = env.get(segment.name)
      const isSet = value !== undefined
      const nonEmpty = isSet && value !== ""
      switch (segment.op) {
        case ":-":
          return nonEmpty ? value : resolve(segment.arg, env)
        case "-":
          return isSet ? value : resolve(segment.arg, env)
        case ":+":
          return nonEmpty ? resolve(segment.arg, env) : ""
        case "+":
          return isSet ? resolve(segment.arg, env) : ""
        default:
          return value ?? ""
      }
    })
    .join("")

/** Literal text in berth form: `$${` is berth's escape for a literal `${`. */
const berthLiteral = (text: string): string => text.replaceAll("${", () => "$${")

const berthSegment = (segment: Segment): string =>
  segment._tag === "Text"
    ? berthLiteral(segment.text)
    : segment._tag === "Token"
      ? segment.token
      : `\${env.${segment.name}}`

/** The berth form: every compose variable becomes `${env.NAME}`; defaults are dropped (they may hold secrets). */
const toBerth = (segments: ReadonlyArray<Segment>): string => segments.map(berthSegment).join("")

/**
 * One exec-form argument as shell text. berth shell-quotes the values it substitutes into a cmd, so tokens stay bare
 * and only the literal text around them is quoted.
 */
const shellArg = (segments: ReadonlyArray<Segment>): string =>
  segments.length === 0
    ? "''"
    : segments
        .map((segment) => (segment._tag === "Text" ? berthLiteral(shellQuote(segment.text)) : berthSegment(segment)))
        .join("")

/** Replaces every match of a global `pattern` inside literal text with the segment `replacement` gives. */
const splitText = (segments: ReadonlyArray<Segment>, pattern: RegExp, replacement: Segment): ReadonlyArray<Segment> =>
  segments.flatMap((segment): Array<Segment> => {
    if (segment._tag !== "Text") return [segment]
    const out: Array<Segment> = []
    let last = 0
    for (const match of segment.text.matchAll(pattern)) {
      if (match.index > last) out.push({ _tag: "Text", text: segment.text.slice(last, match.index) })
      out.push(replacement)
      last = match.index + match[0].length
    }
    if (last < segment.text.length) out.push({ _tag: "Text", text: segment.text.slice(last) })
    return out
  })

const varsOf = (segments: ReadonlyArray<Segment>): Array<string> =>
  segments.flatMap((segment) => (segment._tag === "Var" ? [segment.name] : []))

const hasLiteral = (segments: ReadonlyArray<Segment>): boolean =>
  segments.some((segment) => segment._tag === "Text" && segment.text.trim() !== "")

// ---------------------------------------------------------------------------------------------------------------
// .env and secrets
// ---------------------------------------------------------------------------------------------------------------

// What `berth check` flags as a credential, plus `*_PASS`.
const secretKey = /(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|_KEY$|^KEY$|CREDENTIALS?|(^|_)PASS($|_))/i

interface UrlShape {
  readonly password: string | undefined
  readonly hosts: ReadonlyArray<{ readonly host: string; readonly port: number | undefined }>
}

/** A lenient `scheme://user:pass@host:port,host2/...` reader; WHATWG URL rejects multi-host and odd schemes. */
const urlShape = (text: string): UrlShape | undefined => {
  const match = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/(?:([^@/?#\s]*)@)?([^/?#\s]*)/.exec(text.trim())
  if (match === null) return undefined
  const userinfo = match[1]
  const colon = userinfo?.indexOf(":") ?? -1
  const password = userinfo !== undefined && colon >= 0 ? userinfo.slice(colon + 1) : undefined
  const hosts = (match[2] ?? "").split(",").map((hostPort) => {
    const parts = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(hostPort)
    return {
      host: (parts?.[1] ?? hostPort).toLowerCase(),
      port: parts?.[2] === undefined ? undefined : Number(parts[2])
    }
  })
  return { password: password === "" ? undefined : password, hosts }
}

interface Secret {
  readonly key: string
  readonly value: string
}

// Values that are too short or are well-known dev defaults would collide with ordinary words in commands.
const minSecretLength = 4
const defaultCredentials = new Set(["postgres", "password", "secret", "root", "admin", "guest", "example", "changeme"])

const redactable = (secret: Secret): boolean =>
  secret.value.length >= minSecretLength && !defaultCredentials.has(secret.value.toLowerCase())

const secretsOfEntry = (key: string, value: string): Array<Secret> => {
  const password = urlShape(value)?.password
  const found = secretKey.test(key) && value.trim() !== "" ? [{ key, value }] : []
  return password === undefined ? found : [...found, { key, value: password }]
}

const secretPattern = (secret: Secret): RegExp =>
  new RegExp(`(?<![A-Za-z0-9])${escapeRegExp(secret.value)}(?![A-Za-z0-9])`, "g")

const containsSecret = (text: string, secret: Secret): boolean => secretPattern(secret).test(text)

// ---------------------------------------------------------------------------------------------------------------
// Image classification
// ---------------------------------------------------------------------------------------------------------------

interface Adapter {
  readonly name: string
  readonly images: ReadonlyArray<string>
  readonly port: number
  readonly example: (port: number) => string
}

const adapters: ReadonlyArray<Adapter> = [
  {
    name: "postgres",
    images: ["postgres", "postgresql", "postgis", "timescaledb", "timescaledb-ha"],
    port: 5432,
    example: (port) => `postgres://postgres@127.0.0.1:${port}/postgres`
  },
  { name: "mysql", images: ["mysql", "mysql-server"], port: 3306, example: (port) => `mysql://root@127.0.0.1:${port}` },
  { name: "mariadb", images: ["mariadb"], port: 3306, example: (port) => `mysql://root@127.0.0.1:${port}` },
  {
    name: "percona",
    images: ["percona", "percona-server"],
    port: 3306,
    example: (port) => `mysql://root@127.0.0.1:${port}`
  },
  {
    name: "mongodb",
    images: ["mongo", "mongodb", "mongodb-community-server"],
    port: 27017,
    example: (port) => `mongodb://root@127.0.0.1:${port}/admin`
  },
  {
    name: "redis",
    images: ["redis", "redis-stack", "redis-stack-server"],
    port: 6379,
    example: (port) => `redis://127.0.0.1:${port}`
  },
  { name: "valkey", images: ["valkey"], port: 6379, example: (port) => `redis://127.0.0.1:${port}` },
  { name: "rabbitmq", images: ["rabbitmq"], port: 5672, example: (port) => `amqp://guest@127.0.0.1:${port}` },
  { name: "nats", images: ["nats"], port: 4222, example: (port) => `nats://127.0.0.1:${port}` },
  { name: "kafka", images: ["kafka", "cp-kafka"], port: 9092, example: (port) => `kafka://127.0.0.1:${port}` },
  { name: "redpanda", images: ["redpanda"], port: 9092, example: (port) => `kafka://127.0.0.1:${port}` },
  // S3-compatible servers: one built-in adapter, s3 (admin_url carries the access key and secret, named here only by
  // the variables or defaults each image uses, never by a value from the compose file)
  {
    name: "s3",
    images: ["minio"],
    port: 9000,
    example: (port) => `http://MINIO_ROOT_USER:MINIO_ROOT_PASSWORD@127.0.0.1:${port}`
  },
  { name: "s3", images: ["s3mock"], port: 9090, example: (port) => `http://any:any@127.0.0.1:${port}` },
  { name: "s3", images: ["localstack"], port: 4566, example: (port) => `http://test:test@127.0.0.1:${port}` },
  {
    name: "elasticsearch",
    images: ["elasticsearch"],
    port: 9200,
    example: (port) => `http://elastic@127.0.0.1:${port}`
  },
  { name: "opensearch", images: ["opensearch"], port: 9200, example: (port) => `http://admin@127.0.0.1:${port}` },
  { name: "qdrant", images: ["qdrant"], port: 6333, example: (port) => `http://127.0.0.1:${port}` },
  {
    name: "clickhouse",
    images: ["clickhouse", "clickhouse-server"],
    port: 8123,
    example: (port) => `http://default@127.0.0.1:${port}`
  }
]

// Tooling that only supports local development (admin UIs, mail catchers, coordination for old Kafka, init clients).
const helperImages = new Set([
  "zookeeper",
  "cp-zookeeper",
  "mailhog",
  "mailpit",
  "maildev",
  "adminer",
  "pgadmin",
  "pgadmin4",
  "phpmyadmin",
  "redis-commander",
  "redisinsight",
  "kafka-ui",
  "kafdrop",
  "mongo-express",
  "mc",
  "portainer",
  "dozzle"
])

/** `registry:5000/ns/postgresql:16@sha256:...` → `postgresql`. */
const imageRepository = (image: string): string => {
  const withoutDigest = image.split("@")[0] ?? image
  const last = withoutDigest.slice(withoutDigest.lastIndexOf("/") + 1)
  return (last.split(":")[0] ?? last).toLowerCase()
}

type Kind =
  | { readonly _tag: "Slice"; readonly adapter: Adapter }
  | { readonly _tag: "Helper" }
  | { readonly _tag: "Process" }

const kindOf = (image: string | undefined): Kind => {
  if (image === undefined) return { _tag: "Process" }
  const repository = imageRepository(image)
  const adapter = adapters.find((candidate) => candidate.images.includes(repository))
  if (adapter !== undefined) return { _tag: "Slice", adapter }
  return helperImages.has(repository) ? { _tag: "Helper" } : { _tag: "Process" }
}

// ---------------------------------------------------------------------------------------------------------------
// Context shared by the per-service conversions
// ---------------------------------------------------------------------------------------------------------------

interface Service {
  readonly composeName: string
  readonly name: string
  /** the route label for `url`, unique among services */
  readonly label: string
  readonly def: Dict
  readonly kind: Kind
  readonly image: string | undefined
}

interface Ctx {
  readonly composeDir: string
  readonly dotenv: ReadonlyMap<string, string>
  readonly byName: ReadonlyMap<string, Service>
  readonly byHost: ReadonlyMap<string, Service>
  readonly secrets: ReadonlyArray<Secret>
  readonly notes: Array<string>
  /** Variables berth.toml now reads through `${env.NAME}`. */
  readonly usedVars: Set<string>
  /** Keys whose literal compose value was moved out of berth.toml. */
  readonly movedSecrets: Set<string>
  /** Processes another service reaches by URL, with the container port seen in that URL. */
  readonly urlRefs: Map<string, number | undefined>
}

const note = (ctx: Ctx, text: string): void => {
  if (!ctx.notes.includes(text)) ctx.notes.push(text)
}

const hostAliases = (service: Service): Array<string> => {
  const networks = service.def.networks
  const aliases = isDict(networks)
    ? Object.values(networks).flatMap((network) =>
        isDict(network) && Array.isArray(network.aliases) ? network.aliases.flatMap((a) => scalarText(a) ?? []) : []
      )
    : []
  const named = [service.def.container_name, service.def.hostname].flatMap((value) => scalarText(value) ?? [])
  return [service.composeName, ...named, ...aliases].map((alias) => alias.toLowerCase())
}

// ---------------------------------------------------------------------------------------------------------------
// environment
// ---------------------------------------------------------------------------------------------------------------

/** Map or list form; `null` means "inherit from the host environment". */
const envEntries = (value: unknown): Array<readonly [string, string | null]> => {
  if (isDict(value)) {
    return Object.entries(value).map(([key, raw]): readonly [string, string | null] =>
      raw === null || raw === undefined ? [key, null] : [key, scalarText(raw) ?? JSON.stringify(raw)]
    )
  }
  if (!Array.isArray(value)) return []
  return value.flatMap((item) => {
    const text = scalarText(item)
    if (text === undefined || text.trim() === "") return []
    const eq = text.indexOf("=")
    return [eq < 0 ? ([text.trim(), null] as const) : ([text.slice(0, eq).trim(), text.slice(eq + 1)] as const)]
  })
}

const envRef = (ctx: Ctx, name: string): string => {
  ctx.usedVars.add(name)
  return `\${env.${name}}`
}

const moveSecret = (ctx: Ctx, owner: Service, key: string): string => {
  ctx.movedSecrets.add(key)
  note(ctx, `${owner.name}: ${key} holds a secret, so berth.toml reads it as \${env.${key}}; put its value into .env`)
  return envRef(ctx, key)
}

const LOCAL_HOSTS: ReadonlySet<string> = new Set(["localhost", "127.0.0.1", "0.0.0.0", "[::1]", "[::]"])

/** The service another compose service publishes `port` on, with the port inside its container. */
const publishedBy = (
  ctx: Ctx,
  owner: Service,
  port: number
): { readonly service: Service; readonly port: number } | undefined => {
  for (const service of ctx.byName.values()) {
    if (service === owner) continue
    const mapping = portsOf(ctx, service).find((m) => m.published === port)
    if (mapping !== undefined) return { service, port: mapping.target }
  }
  return undefined
}

/**
 * The compose service a URL points at, if any: by its compose host name (`http://api:4000`), or — written for a
 * developer's machine — by `localhost` and the port another service publishes (`http://localhost:4000`).
 */
const urlTarget = (
  ctx: Ctx,
  owner: Service,
  resolved: string
): { readonly service: Service; readonly port: number | undefined } | undefined => {
  for (const { host, port } of urlShape(resolved)?.hosts ?? []) {
    const service = ctx.byHost.get(host)
    if (service !== undefined) return { service, port }
    const published = LOCAL_HOSTS.has(host) && port !== undefined ? publishedBy(ctx, owner, port) : undefined
    if (published !== undefined) return published
  }
  return undefined
}

/** A process reached by address needs a port of its own, so it gets a `url` even when compose published none. */
const markReached = (ctx: Ctx, target: Service, port: number | undefined): void => {
  if (target.kind._tag === "Process" && !ctx.urlRefs.has(target.composeName)) ctx.urlRefs.set(target.composeName, port)
}

const tokenName = (owner: Service, target: Service): string => (target === owner ? "self" : target.name)

const serviceUrlToken = (
  ctx: Ctx,
  owner: Service,
  key: string,
  target: { readonly service: Service; readonly port: number | undefined }
): string | undefined => {
  if (target.service.kind._tag === "Helper") {
    note(ctx, `${owner.name}: ${key} points at ${target.service.composeName}, which berth init skipped; check it`)
    return undefined
  }
  markReached(ctx, target.service, target.port)
  return `\${${tokenName(owner, target.service)}.url}`
}

/** `api` or `api:4000` naming a process → `${api.host}` or `${api.host}:${api.port}`; a slice only gives a url. */
const hostToken = (ctx: Ctx, owner: Service, key: string, resolved: string): string | undefined => {
  const match = /^([A-Za-z0-9._-]+)(?::(\d+))?$/.exec(resolved.trim())
  const target = match?.[1] === undefined ? undefined : ctx.byHost.get(match[1].toLowerCase())
  if (match === null || target === undefined || target.kind._tag === "Helper") return undefined
  // A bare word is a host only under a host-like key: `QUEUE = "worker"` just names a queue.
  if (match[2] === undefined && !/HOST|ADDR|SERVER|BROKER|ENDPOINT/i.test(key)) return undefined
  if (target.kind._tag === "Slice") {
    note(
      ctx,
      `${owner.name}: ${key} names compose host ${target.composeName}; a slice gives only \${${target.name}.url}`
    )
    return undefined
  }
  markReached(ctx, target, portNumber(match[2]))
  const ref = tokenName(owner, target)
  return match[2] === undefined ? `\${${ref}.host}` : `\${${ref}.host}:\${${ref}.port}`
}

const envValue = (ctx: Ctx, owner: Service, key: string, raw: string | null, port: number | undefined): string => {
  if (raw === null) return envRef(ctx, key)
  const segments = interpolation(raw)
  const resolved = resolve(segments, ctx.dotenv)
  // The service's own listening port is whatever berth hands it.
  if (port !== undefined && /(^|_)PORT$/i.test(key) && resolved.trim() === String(port)) return selfPort
  const target = urlTarget(ctx, owner, resolved)
  const token = target === undefined ? undefined : serviceUrlToken(ctx, owner, key, target)
  if (token !== undefined) return token
  const written = toBerth(segments)
  const literalPassword = urlShape(written)?.password?.replace(/\$\{env\.[A-Za-z0-9_]+\}/g, "")
  const leaks =
    (secretKey.test(key) && hasLiteral(segments)) ||
    (literalPassword !== undefined && literalPassword !== "") ||
    ctx.secrets.some((secret) => containsSecret(written, secret))
  if (leaks) return moveSecret(ctx, owner, key)
  const host = hostToken(ctx, owner, key, resolved)
  if (host !== undefined) return host
  for (const name of varsOf(segments)) ctx.usedVars.add(name)
  return written
}

const convertEnv = (ctx: Ctx, owner: Service): Array<readonly [string, string]> => {
  const entries = new Map<string, string>()
  const port = portsOf(ctx, owner)[0]?.target
  for (const [key, raw] of envEntries(owner.def.environment)) {
    if (key !== "") entries.set(key, envValue(ctx, owner, key, raw, port))
  }
  return [...entries]
}

// ---------------------------------------------------------------------------------------------------------------
// ports, command, health, build, depends_on, env_file
// ---------------------------------------------------------------------------------------------------------------

interface PortMapping {
  readonly target: number
  readonly published: number | undefined
}

const portNumber = (text: string | undefined): number | undefined => {
  if (text === undefined || !/^\d+$/.test(text)) return undefined
  const port = Number(text)
  return port > 0 && port < 65536 ? port : undefined
}

const shortPort = (spec: string): PortMapping | "range" | undefined => {
  const parts = (spec.split("/")[0] ?? spec).replace(/^\[[^\]]*\]:/, "").split(":")
  const container = parts[parts.length - 1]
  if (container?.includes("-")) return "range"
  const target = portNumber(container)
  return target === undefined ? undefined : { target, published: portNumber(parts[parts.length - 2]) }
}

const portsOf = (ctx: Ctx, service: Service): Array<PortMapping> => {
  const value = service.def.ports
  if (!Array.isArray(value)) return []
  return value.flatMap((entry): Array<PortMapping> => {
    const spec = isDict(entry) ? undefined : scalarText(entry)
    const parsed = isDict(entry)
      ? longPort(entry)
      : spec === undefined
        ? undefined
        : shortPort(resolve(interpolation(spec), ctx.dotenv))
    if (parsed === "range") note(ctx, `${service.name}: skipped port range ${spec ?? ""}; add named ports by hand`)
    return parsed === undefined || parsed === "range" ? [] : [parsed]
  })
}

const longPort = (entry: Dict): PortMapping | "range" | undefined => {
  const targetText = scalarText(entry.target)
  if (targetText?.includes("-")) return "range"
  const target = portNumber(targetText)
  return target === undefined ? undefined : { target, published: portNumber(scalarText(entry.published)) }
}

// A port is a standalone token (`--port 3000`, `PORT=3000`, `'3000'`) or follows a local/bind address.
const portBefore = String.raw`(?<=^|[\s='"]|(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]|\*):)`
const portAfter = String.raw`(?=$|[\s'";&|)/])`

/** `--port 3000`, `-p 3000`, `PORT=3000`, `0.0.0.0:3000` → `${self.port}`; other digits are left alone. */
const withSelfPort = (segments: ReadonlyArray<Segment>, port: number | undefined): ReadonlyArray<Segment> => {
  if (port === undefined) return segments
  return splitText(segments, new RegExp(`${portBefore}${port}${portAfter}`, "g"), { _tag: "Token", token: selfPort })
}

/** Secret values repeated in a command become `${env.KEY}` of the key that held them. */
const redact = (ctx: Ctx, owner: Service, field: string, segments: ReadonlyArray<Segment>): ReadonlyArray<Segment> =>
  [...ctx.secrets]
    .sort((a, b) => b.value.length - a.value.length)
    .reduce((acc, secret) => {
      if (!acc.some((segment) => segment._tag === "Text" && containsSecret(segment.text, secret))) return acc
      note(ctx, `${owner.name}: ${field} contained the value of ${secret.key}; it now reads \${env.${secret.key}}`)
      return splitText(acc, secretPattern(secret), { _tag: "Var", name: secret.key, op: "", arg: [] })
    }, segments)

interface CommandOptions {
  readonly owner: Service
  readonly field: string
  /** the service's own port, replaced by `${self.port}`; undefined leaves digits alone */
  readonly port: number | undefined
}

/** One command word or string: compose interpolation, own port, then secrets, as berth segments. */
const commandSegments = (ctx: Ctx, text: string, options: CommandOptions): ReadonlyArray<Segment> => {
  const { port } = options
  // A variable that resolves to the port (`--port ${PORT:-3000}`) is the port too.
  const segments = interpolation(text).map((segment): Segment => {
    const value = segment._tag === "Var" ? resolve([segment], ctx.dotenv) : undefined
    return port !== undefined && value === String(port) ? { _tag: "Text", text: value } : segment
  })
  const converted = redact(ctx, options.owner, options.field, withSelfPort(segments, port))
  for (const name of varsOf(converted)) ctx.usedVars.add(name)
  return converted
}

/** A string is kept as written; compose runs an exec-form array without a shell, so each word is quoted. */
const commandText = (ctx: Ctx, value: unknown, options: CommandOptions): string | undefined => {
  const text =
    typeof value === "string"
      ? toBerth(commandSegments(ctx, value, options)).trim()
      : Array.isArray(value)
        ? value
            .flatMap((arg) => scalarText(arg) ?? [])
            .map((arg) => shellArg(commandSegments(ctx, arg, options)))
            .join(" ")
        : undefined
  return text === undefined || text === "" ? undefined : text
}

const healthTest = (ctx: Ctx, test: unknown, options: CommandOptions): string | undefined => {
  if (typeof test === "string") return commandText(ctx, test, options)
  if (!Array.isArray(test)) return undefined
  const [head, ...rest] = test.map((item) => scalarText(item) ?? "")
  if (head === "NONE" || head === undefined) return undefined
  if (head === "CMD-SHELL") return commandText(ctx, rest.join(" "), options)
  return commandText(ctx, head === "CMD" ? rest : [head, ...rest], options)
}

const localUrl = /\bhttps?:\/\/(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])(?::(\d+))?(\/[^\s'"|;&)]*)?/

const healthOf = (ctx: Ctx, service: Service, port: number | undefined): Health | undefined => {
  const check = service.def.healthcheck
  if (!isDict(check) || check.disable === true) return undefined
  // Read the probe as written first: an http check only makes sense on the port berth hands the service.
  const probe = healthTest(ctx, check.test, { owner: service, field: "healthcheck", port: undefined })
  const http = probe !== undefined && /\b(curl|wget)\b/.test(probe) ? localUrl.exec(probe) : null
  if (http !== null && port !== undefined && Number(http[1] ?? "80") === port) return { http: http[2] ?? "/" }
  const cmd = healthTest(ctx, check.test, { owner: service, field: "healthcheck", port })
  return cmd === undefined ? undefined : { cmd }
}

interface BuildInfo {
  readonly context: string
  readonly dockerfile: string | undefined
}

const buildOf = (value: unknown): BuildInfo | undefined => {
  if (typeof value === "string") return { context: value, dockerfile: undefined }
  if (!isDict(value)) return undefined
  return { context: scalarText(value.context) ?? ".", dockerfile: scalarText(value.dockerfile) }
}

const buildDir = (ctx: Ctx, service: Service, build: BuildInfo): string | undefined => {
  if (/^[a-z][a-z0-9+.-]*:\/\/|^git@/i.test(build.context)) return undefined
  const dir = repoPath(ctx.composeDir, build.context)
  if (dir === undefined) {
    note(ctx, `${service.name}: build context ${build.context} is outside the repo; set dir by hand`)
  }
  return dir === "." ? undefined : dir
}

const volumeMount = (volume: unknown): readonly [string | undefined, string | undefined] => {
  if (isDict(volume)) return [scalarText(volume.source), scalarText(volume.target)]
  const [source, target] = scalarText(volume)?.split(":") ?? []
  return [source, target]
}

/** Image-only dev services usually run the repo's code through a bind mount onto their working_dir. */
const mountDir = (ctx: Ctx, service: Service): string | undefined => {
  const workdir = scalarText(service.def.working_dir)?.replace(/\/$/, "")
  const volumes = Array.isArray(service.def.volumes) ? service.def.volumes : []
  for (const volume of volumes) {
    const [source, target] = volumeMount(volume)
    // Only relative host paths are bind mounts of the repo; bare names are named volumes.
    if (workdir === undefined || source === undefined || !/^\.{1,2}(\/|$)/.test(source)) continue
    if (target?.replace(/\/$/, "") !== workdir) continue
    const dir = repoPath(ctx.composeDir, source)
    return dir === "." ? undefined : dir
  }
  return undefined
}

const todoComment = (service: Service, build: BuildInfo | undefined): string => {
  if (build !== undefined) {
    const dockerfile = build.dockerfile === undefined ? "" : ` (${build.dockerfile})`
    return `TODO: compose builds ${service.composeName} from context ${build.context}${dockerfile} and gives no command; set cmd`
  }
  if (service.image !== undefined) {
    return `TODO: compose runs image ${service.image} for ${service.composeName} and gives no command; set cmd`
  }
  return `TODO: compose gives ${service.composeName} no command, image or build; set cmd`
}

const dependsOn = (ctx: Ctx, service: Service): Array<string> => {
  const value = service.def.depends_on
  const names = Array.isArray(value)
    ? value.flatMap((v) => scalarText(v) ?? [])
    : isDict(value)
      ? Object.keys(value)
      : []
  return unique(
    names.flatMap((name) => {
      const target = ctx.byName.get(name)
      if (target === undefined) note(ctx, `${service.name}: depends_on names unknown service ${name}; dropped`)
      return target === undefined || target.kind._tag === "Helper" ? [] : [target.name]
    })
  )
}

const envFileOf = (ctx: Ctx, value: unknown): string | Array<string> | undefined => {
  const items = Array.isArray(value) ? value : value === undefined ? [] : [value]
  const paths = items.flatMap((item) => scalarText(isDict(item) ? item.path : item) ?? [])
  const relocated = paths.map((path) => repoPath(ctx.composeDir, path) ?? path)
  if (relocated.length === 0) return undefined
  return typeof value === "string" && relocated[0] !== undefined ? relocated[0] : relocated
}

const groupsOf = (value: unknown): Array<string> =>
  Array.isArray(value) ? unique(value.flatMap((v) => scalarText(v) ?? []).map(toLabel)) : []

// ---------------------------------------------------------------------------------------------------------------
// Service drafts
// ---------------------------------------------------------------------------------------------------------------

const sliceDraft = (ctx: Ctx, service: Service, adapter: Adapter): ServiceDraft => {
  const variable = `${adapter.name.toUpperCase()}_ADMIN_URL`
  const published = portsOf(ctx, service).find((mapping) => mapping.target === adapter.port)?.published
  note(
    ctx,
    `${service.name}: now a slice (adapter ${adapter.name}); set ${variable} in .env to a shared ${adapter.name} server`
  )
  if (!builtinAdapters.has(adapter.name)) {
    note(
      ctx,
      `${service.name}: berth has no built-in ${adapter.name} adapter; it needs ${externalAdapterCommand(adapter.name)} on PATH`
    )
  }
  return {
    _tag: "Slice",
    name: service.name,
    adapter: adapter.name,
    adminUrlHint: `${variable}, e.g. ${adapter.example(published ?? adapter.port)}`,
    adminUrl: `\${env.${variable}}`,
    mode: adapter.name === "redis" || adapter.name === "valkey" ? "db" : undefined,
    groups: groupsOf(service.def.profiles)
  }
}

const processDraft = (ctx: Ctx, service: Service, env: Array<readonly [string, string]>): ServiceDraft => {
  const ports = portsOf(ctx, service).map((mapping) => mapping.target)
  const referenced = ctx.urlRefs.has(service.composeName)
  const port = ports[0] ?? ctx.urlRefs.get(service.composeName)
  const build = buildOf(service.def.build)
  const options = { owner: service, field: "command", port }
  const command = [commandText(ctx, service.def.entrypoint, options), commandText(ctx, service.def.command, options)]
    .filter((part): part is string => part !== undefined)
    .join(" ")
  const cmd = command === "" ? todoCmd(service.name) : command
  if (command === "") note(ctx, `${service.name}: no command in compose; set services.${service.name}.cmd`)
  return {
    _tag: "Process",
    name: service.name,
    cmdComments: command === "" ? [todoComment(service, build)] : [],
    cmd,
    dir: build === undefined ? mountDir(ctx, service) : buildDir(ctx, service, build),
    url: ports.length > 0 || referenced ? service.label : undefined,
    ports: unique(ports.slice(1).filter((extra) => extra !== ports[0])).map((extra) => `p${extra}`),
    dependsOn: dependsOn(ctx, service),
    env,
    envFile: envFileOf(ctx, service.def.env_file),
    health: healthOf(ctx, service, ports.length > 0 || referenced ? port : undefined),
    groups: groupsOf(service.def.profiles)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing and assembly
// ---------------------------------------------------------------------------------------------------------------

const initError = (message: string, file: string, line: number | undefined): InitError =>
  new InitError(line === undefined ? { message, file } : { message, file, line })

interface ComposeRoot {
  readonly services: Dict
  readonly hasInclude: boolean
}

const parseCompose = (text: string, file: string): Either.Either<ComposeRoot, InitError> => {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { merge: true, lineCounter, prettyErrors: false })
  const error = doc.errors[0]
  if (error !== undefined) {
    return Either.left(initError(`invalid YAML: ${error.message}`, file, lineCounter.linePos(error.pos[0]).line))
  }
  const servicesKey = isMap(doc.contents)
    ? doc.contents.items.find((pair) => isScalar(pair.key) && pair.key.value === "services")?.key
    : undefined
  const servicesLine =
    isScalar(servicesKey) && servicesKey.range ? lineCounter.linePos(servicesKey.range[0]).line : undefined
  let root: unknown
  try {
    root = doc.toJS({ maxAliasCount: 1000 })
  } catch (cause) {
    return Either.left(
      initError(`invalid YAML: ${cause instanceof Error ? cause.message : String(cause)}`, file, undefined)
    )
  }
  if (!isDict(root) || !isDict(root.services)) {
    return Either.left(initError("compose file has no `services` map", file, servicesLine))
  }
  return Either.right({ services: root.services, hasInclude: root.include !== undefined })
}

const collectSecrets = (services: ReadonlyArray<Service>, dotenv: ReadonlyMap<string, string>): Array<Secret> => {
  const fromCompose = services.flatMap((service) =>
    envEntries(service.def.environment).flatMap(([key, raw]) =>
      raw === null ? [] : secretsOfEntry(key, resolve(interpolation(raw), dotenv))
    )
  )
  const fromDotenv = [...dotenv].flatMap(([key, value]) => secretsOfEntry(key, value))
  return [...fromCompose, ...fromDotenv].filter(redactable)
}

const toServices = (defs: Dict, dotenv: ReadonlyMap<string, string>, notes: Array<string>): Array<Service> => {
  const entries = Object.entries(defs).flatMap(([composeName, def]): Array<readonly [string, Dict]> => {
    if (def === null || def === undefined) return [[composeName, {}]]
    if (isDict(def)) return [[composeName, def]]
    notes.push(`skipped ${composeName}: its compose definition is not a map`)
    return []
  })
  const names = assignNames(entries.map(([composeName]) => composeName))
  const labels = assignLabels([...names.values()])
  return entries.map(([composeName, def]) => {
    const imageText = scalarText(def.image)
    const image = imageText === undefined ? undefined : resolve(interpolation(imageText), dotenv)
    return {
      composeName,
      name: names.get(composeName) ?? toName(composeName),
      label: labels.get(names.get(composeName) ?? "") ?? toLabel(composeName),
      def,
      kind: kindOf(image),
      image: imageText
    }
  })
}

const makeCtx = (
  composeFile: string,
  dotenv: ReadonlyMap<string, string>,
  services: ReadonlyArray<Service>,
  notes: Array<string>
): Ctx => {
  const byHost = new Map<string, Service>()
  for (const service of services) {
    for (const alias of hostAliases(service)) if (!byHost.has(alias)) byHost.set(alias, service)
  }
  return {
    composeDir: composeDirOf(composeFile),
    dotenv,
    byName: new Map(services.map((service) => [service.composeName, service])),
    byHost,
    secrets: collectSecrets(services, dotenv),
    notes,
    usedVars: new Set(),
    movedSecrets: new Set(),
    urlRefs: new Map()
  }
}

const serviceNotes = (ctx: Ctx, services: ReadonlyArray<Service>): void => {
  for (const service of services) {
    if (service.name !== service.composeName) {
      note(ctx, `renamed compose service ${service.composeName} to ${service.name}`)
    }
    if (service.kind._tag === "Helper") {
      note(
        ctx,
        `skipped ${service.composeName} (image ${service.image ?? "?"}): a dev helper, not an app or data service`
      )
    }
    if (service.def.extends !== undefined) note(ctx, `${service.name}: compose \`extends\` is not followed; check it`)
  }
}

const missingVarsNote = (ctx: Ctx): void => {
  const missing = [...ctx.usedVars].filter((name) => !ctx.dotenv.has(name) && !ctx.movedSecrets.has(name)).sort()
  if (missing.length > 0) {
    note(ctx, `berth.toml reads these from the environment or .env; make sure they are set: ${missing.join(", ")}`)
  }
}

const header = (composeFile: string): Array<string> => [
  `Generated by \`berth init\` from ${composeFile}.`,
  "Review the TODOs, then run `berth check`."
]

/** Turns a docker-compose file (and the project's `.env` text) into a starting berth.toml. */
export const fromCompose = (input: {
  readonly composeText: string
  readonly composeFile: string
  readonly envText?: string | undefined
  readonly projectName: string
}): Either.Either<InitResult, InitError> =>
  Either.map(parseCompose(input.composeText, input.composeFile), (root) => {
    const notes: Array<string> = []
    const dotenv = parseDotenv(input.envText ?? "")
    const services = toServices(root.services, dotenv, notes)
    const ctx = makeCtx(input.composeFile, dotenv, services, notes)
    serviceNotes(ctx, services)
    if (root.hasInclude) note(ctx, "compose `include` files are not read; add their services by hand")
    // Env first: it discovers which processes others reach by URL, and those need a `url` of their own.
    const envs = new Map(
      services.map((service) => [service.composeName, service.kind._tag === "Process" ? convertEnv(ctx, service) : []])
    )
    const drafts = services.flatMap((service): Array<ServiceDraft> => {
      if (service.kind._tag === "Helper") return []
      if (service.kind._tag === "Slice") return [sliceDraft(ctx, service, service.kind.adapter)]
      return [processDraft(ctx, service, envs.get(service.composeName) ?? [])]
    })
    if (drafts.length === 0) note(ctx, "the compose file defines no services berth can run")
    missingVarsNote(ctx)
    const draft: ConfigDraft = {
      header: header(input.composeFile),
      project: { name: input.projectName },
      services: drafts
    }
    return { toml: renderConfig(draft), notes: ctx.notes }
  })
