/**
 * A world's coordinates: where each of its services and slices can be reached, and the environment each process
 * gets. Pure: ports come from the allocator, slice URLs from the adapters, and the rest is the config.
 */
import * as Model from "./config/model.js"
import { envKey } from "./names.js"
import { allowedHostsEnv, injectDevServer } from "./frameworks.js"
import { resolveTemplate, type ServiceCoordinates, type TokenContext } from "./tokens.js"

export interface WorldIdentity {
  readonly project: string
  readonly name: string
  readonly slug: string
  readonly path: string
}

/**
 * The variables that say whose a process is: every process berth runs for a world gets them — its services (with
 * `service`), the project's setup, and the commands an agent or a user runs in it (`exec`, `verify`). This is their
 * one list.
 */
export const identityVariables = (
  world: { readonly project: string; readonly name: string },
  service?: string
): Readonly<Record<string, string>> => ({
  BERTH_WORLD: world.name,
  BERTH_PROJECT: world.project,
  ...(service === undefined ? {} : { BERTH_SERVICE: service })
})

/** The ports a service holds: its main port and its named extras. */
export interface ServicePorts {
  readonly main: number
  readonly named: Readonly<Record<string, number>>
}

/** Every port a world asks for, as `{ service, name }` ("" = the main port), in config order. */
export const portRequests = (
  config: Model.Config
): ReadonlyArray<{ readonly service: string; readonly name: string }> =>
  Model.processes(config).flatMap((s) =>
    Model.hasPort(s) ? [{ service: s.name, name: "" }, ...s.ports.map((name) => ({ service: s.name, name }))] : []
  )

/** Groups allocator output by service. */
export const groupPorts = (
  assigned: ReadonlyArray<{ readonly service: string; readonly name: string; readonly port: number }>
): ReadonlyMap<string, ServicePorts> => {
  const out = new Map<string, { main: number; named: Record<string, number> }>()
  for (const a of assigned) {
    const entry = out.get(a.service) ?? { main: 0, named: {} }
    if (a.name === "") entry.main = a.port
    else entry.named[a.name] = a.port
    out.set(a.service, entry)
  }
  return out
}

/** How a world's routed services are reached through the machine-wide proxy. */
export interface WorldRouting {
  readonly scheme: "http" | "https"
  /** the proxy's port for that scheme; left out of URLs when it is the scheme's default */
  readonly port: number
  readonly domain: string
  /** the project's host label */
  readonly project: string
  /** the world's slug */
  readonly world: string
}

/** `<url>.<world slug>.<project>.<domain>`: the host a routed service answers on. */
export const routeHost = (label: string, routing: WorldRouting): string =>
  `${label}.${routing.world}.${routing.project}.${routing.domain}`.toLowerCase()

/** The address of a routed service, without a trailing slash (`${api.url}/path` reads naturally). */
export const routeUrl = (label: string, routing: WorldRouting): string => {
  const standard = routing.scheme === "http" ? 80 : 443
  return `${routing.scheme}://${routeHost(label, routing)}${routing.port === standard ? "" : `:${routing.port}`}`
}

/**
 * Where each service and slice of the world is reached, as tokens see it. A service with `url` is reached through
 * the proxy when there is one (`routing`); without a proxy, and for services with only ports, directly on 127.0.0.1.
 */
export const coordinates = (
  config: Model.Config,
  ports: ReadonlyMap<string, ServicePorts>,
  sliceUrls: ReadonlyMap<string, string>,
  routing?: WorldRouting
): ReadonlyMap<string, ServiceCoordinates> => {
  const out = new Map<string, ServiceCoordinates>()
  for (const s of config.services) {
    if (s._tag === "Slice") {
      const url = sliceUrls.get(s.name)
      if (url !== undefined) out.set(s.name, { url })
      continue
    }
    const p = ports.get(s.name)
    if (p === undefined) {
      out.set(s.name, {})
      continue
    }
    const label = routing === undefined ? undefined : s.url
    out.set(s.name, {
      url: label !== undefined && routing !== undefined ? routeUrl(label, routing) : `http://127.0.0.1:${p.main}`,
      host: label !== undefined && routing !== undefined ? routeHost(label, routing) : "127.0.0.1",
      port: p.main,
      ports: p.named
    })
  }
  return out
}

export interface ProcessLaunch {
  /** as started: tokens resolved, and a recognised dev server's flags appended */
  readonly command: string
  /** the dev server berth recognised in the command and gave its flags to */
  readonly framework: string | undefined
  readonly setup: string | undefined
  readonly env: Readonly<Record<string, string>>
  /** values that came from `${env.…}`: kept out of anything berth itself prints or writes */
  readonly secrets: ReadonlyArray<string>
  /** tokens that resolved to nothing (already warned about by `check`) */
  readonly unresolved: ReadonlyArray<string>
}

/**
 * `node_modules/.bin` of `folder` (relative to the worktree, "" for its root) and of every folder above it up to the
 * worktree, deepest first, in front of `path`: as `npm run` does, so a bare `cmd = "vite"` finds the project's own.
 */
export const withLocalBins = (path: string | undefined, worktree: string, folder = ""): string => {
  const parts: Array<string> = []
  for (const part of folder.split("/")) {
    if (part === "..") parts.pop()
    else if (part !== "" && part !== ".") parts.push(part)
  }
  const bins: Array<string> = []
  for (let depth = parts.length; depth >= 0; depth--) {
    bins.push([worktree, ...parts.slice(0, depth), "node_modules", ".bin"].join("/"))
  }
  return [...bins, ...(path === undefined || path === "" ? [] : [path])].join(":")
}

/**
 * What one process is started with: its command with tokens resolved and quoted for `sh -c`, and its environment —
 * the user's, then the config's `env` with tokens resolved, then PORT and the identity variables.
 */
export const launch = (
  service: Model.ProcessService,
  world: WorldIdentity,
  coords: ReadonlyMap<string, ServiceCoordinates>,
  userEnv: Readonly<Record<string, string>>,
  dotenv: ReadonlyMap<string, string>,
  /** the package.json scripts of the service's folder, where a dev server may be named */
  scripts: Readonly<Record<string, string>> = {}
): ProcessLaunch => {
  const ctx: TokenContext = {
    self: service.name,
    services: coords,
    env: (name) => userEnv[name] ?? dotenv.get(name),
    world: { name: world.name, slug: world.slug, path: world.path },
    project: { name: world.project }
  }
  const secrets = new Set<string>()
  const unresolved = new Set<string>()
  const resolve = (template: string, shell: boolean) => {
    const r = resolveTemplate(template, ctx, { shell })
    for (const s of r.secrets) secrets.add(s)
    for (const u of r.unresolved) unresolved.add(u)
    return r.value
  }
  const env: Record<string, string> = { ...userEnv, PATH: withLocalBins(userEnv.PATH, world.path, service.dir) }
  for (const [key, value] of Object.entries(service.env)) env[key] = resolve(value, false)
  const own = coords.get(service.name)
  if (own?.port !== undefined) env.PORT = String(own.port)
  Object.assign(env, identityVariables(world, service.name))
  const command = resolve(service.cmd, true)
  const server = service.inject && own?.port !== undefined ? injectDevServer(command, own.port, scripts) : undefined
  if (server !== undefined && own?.host !== undefined) Object.assign(env, allowedHostsEnv(server, own.host))
  return {
    command: server?.command ?? command,
    framework: server?.framework,
    setup: service.setup === undefined ? undefined : resolve(service.setup, true),
    env,
    secrets: [...secrets],
    unresolved: [...unresolved]
  }
}

/** `berth env`: `<SERVICE>_URL` and `<SERVICE>_PORT` (and `<SERVICE>_<NAME>_PORT`) per service with a port, `<SLICE>_URL` per slice. */
export const worldVariables = (
  config: Model.Config,
  coords: ReadonlyMap<string, ServiceCoordinates>
): Readonly<Record<string, string>> => {
  const vars: Record<string, string> = {}
  for (const s of config.services) {
    const c = coords.get(s.name)
    if (c === undefined) continue
    const key = envKey(s.name)
    if (c.url !== undefined) vars[`${key}_URL`] = c.url
    if (c.port !== undefined) vars[`${key}_PORT`] = String(c.port)
    for (const [name, port] of Object.entries(c.ports ?? {})) vars[`${key}_${envKey(name)}_PORT`] = String(port)
  }
  return vars
}

/** Replaces every secret in `text` so that nothing berth shows or stores carries one. */
export const redact = (text: string, secrets: ReadonlyArray<string>): string =>
  secrets.reduce((t, s) => (s.length >= 4 ? t.replaceAll(s, "***") : t), text)
