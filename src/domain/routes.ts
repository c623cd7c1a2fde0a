/**
 * The proxy's routing, as pure data: which `<service>.<world slug>.<project>.<domain>` host goes to which port, how
 * a Host header is read, and what the 404/502/508 pages say. The daemon builds a `RouteTable` from its worlds and
 * hands it to the proxy, which swaps it in at once; a request only ever does a `Map` lookup here.
 */
import type { ServiceState } from "./service-state.js"
import type { WorldState } from "./world-state.js"

export const defaultDomain = "localhost"

/** The machine that runs a world this machine does not: requests for it go to that machine's proxy. */
export interface RemoteOwner {
  /** The owner machine's name, as pages show it. */
  readonly machine: string
  /** Its proxy's cluster listener (an IP address and a port). */
  readonly address: string
  readonly port: number
}

/** One routable service of one world. */
export interface RouteTarget {
  /** The project's host label (`[a-z0-9-]`). */
  readonly project: string
  /** The world's slug, as it appears in host names. */
  readonly world: string
  /** The world's own name (its branch) when it differs from the slug; pages show it. */
  readonly worldName?: string | undefined
  /** The service's host label (its `url`). */
  readonly service: string
  readonly worldState: WorldState
  readonly serviceState: ServiceState
  /** The port the service listens on; undefined when it has none (yet). */
  readonly port: number | undefined
  /** Whether requests should be sent to it now. */
  readonly ready: boolean
  /** The project's own domain when it is not the table's (`[project] domain`). */
  readonly domain?: string | undefined
  /** The world's id, so a request to a suspended world can wake it. */
  readonly worldId?: number | undefined
  /**
   * Another machine runs the world: requests are forwarded to its proxy, Host kept. `ready` then says whether that
   * machine takes them now (false while the world moves); `port` and the states are only for pages.
   */
  readonly remote?: RemoteOwner | undefined
  /**
   * Served only to this machine's own clients, never to a peer through the cluster listener: berth's dashboard,
   * whose page carries the token that lets it act (loopback is its boundary).
   */
  readonly machineOnly?: boolean | undefined
}

export interface RouteTable {
  /** Lower case, without dots at either end. */
  readonly domain: string
  /** `<service>.<world>.<project>.<domain>` → target */
  readonly byHost: ReadonlyMap<string, RouteTarget>
  /** project label → its targets, in the order given */
  readonly byProject: ReadonlyMap<string, ReadonlyArray<RouteTarget>>
  /** Asks for a suspended world to be resumed (a request reached it); set by the daemon. */
  readonly wake?: ((worldId: number) => void) | undefined
  /** Counts a request routed to `target` (metrics, and `idle_suspend`'s clock); set by the daemon. */
  readonly seen?: ((target: RouteTarget) => void) | undefined
  /** Notes that `target`'s service answered (below 500): a passed liveness probe; set by the daemon. */
  readonly answered?: ((target: RouteTarget) => void) | undefined
}

const normalizeDomain = (domain: string): string =>
  domain
    .trim()
    .toLowerCase()
    .replace(/^\.+|\.+$/g, "")

export const hostOf = (target: Pick<RouteTarget, "service" | "world" | "project">, domain: string): string =>
  `${target.service}.${target.world}.${target.project}.${normalizeDomain(domain)}`.toLowerCase()

/** The URL of a target as a browser would write it: the port only when it is not the scheme's default. */
export const urlOf = (
  target: Pick<RouteTarget, "service" | "world" | "project">,
  domain: string,
  scheme: "http" | "https",
  port: number
): string => {
  const defaultPort = scheme === "http" ? 80 : 443
  return `${scheme}://${hostOf(target, domain)}${port === defaultPort ? "" : `:${port}`}/`
}

/** A table of `targets`; when two claim one host the first keeps it. */
export const makeRouteTable = (targets: ReadonlyArray<RouteTarget>, domain: string = defaultDomain): RouteTable => {
  const d = normalizeDomain(domain)
  const byHost = new Map<string, RouteTarget>()
  const byProject = new Map<string, Array<RouteTarget>>()
  for (const target of targets) {
    const host = hostOf(target, target.domain ?? d)
    if (byHost.has(host)) continue
    byHost.set(host, target)
    const list = byProject.get(target.project)
    if (list === undefined) byProject.set(target.project, [target])
    else list.push(target)
  }
  return { domain: d, byHost, byProject }
}

/** berth's own web dashboard, which the daemon serves on a loopback port: `http://berth.<domain>[:port]/`. */
export const dashboardHost = (domain: string = defaultDomain): string => `berth.${normalizeDomain(domain)}`

/**
 * The table with one more route, `berth.<domain>` → the daemon's dashboard on `port` (none when it does not run). It
 * is not a project's, so no project's 404 page lists it, and no project's host can take it (theirs have three labels).
 */
export const withDashboardRoute = (table: RouteTable, port: number | undefined): RouteTable => {
  if (port === undefined) return table
  const byHost = new Map(table.byHost)
  byHost.set(dashboardHost(table.domain), {
    project: "berth",
    world: "",
    service: "",
    worldState: "running",
    serviceState: "running",
    port,
    ready: true,
    machineOnly: true
  })
  return { ...table, byHost }
}

export const emptyRouteTable = (domain: string = defaultDomain): RouteTable => makeRouteTable([], domain)

/**
 * The host a Host header (or `:authority`) names: without the port, lower case, without a trailing dot.
 * An IPv6 literal keeps its brackets. Undefined or blank gives `""`.
 */
export const normalizeHost = (header: string | undefined): string => {
  if (header === undefined) return ""
  let host = header.trim()
  if (host.startsWith("[")) {
    const end = host.indexOf("]")
    return (end === -1 ? host : host.slice(0, end + 1)).toLowerCase()
  }
  const colon = host.lastIndexOf(":")
  // only a port of digits comes off: `name:@other` stays whole, so no route matches what a URL parser reads as other
  if (colon !== -1 && /^\d*$/.test(host.slice(colon + 1))) host = host.slice(0, colon)
  host = host.toLowerCase()
  return host.endsWith(".") ? host.slice(0, -1) : host
}

export type Lookup =
  | { readonly _tag: "Found"; readonly host: string; readonly target: RouteTarget }
  | {
      readonly _tag: "UnknownHost"
      readonly host: string
      /** The project label the host names (the label just before the domain), whether or not it is known. */
      readonly project: string | undefined
    }

/** The label just before `.<domain>` (or undefined when `host` is not under the domain). */
export const projectOfHost = (host: string, domain: string): string | undefined => {
  const suffix = `.${domain}`
  if (!host.endsWith(suffix)) return undefined
  const rest = host.slice(0, -suffix.length)
  const label = rest.slice(rest.lastIndexOf(".") + 1)
  return label === "" ? undefined : label
}

export const lookup = (table: RouteTable, hostHeader: string | undefined): Lookup => {
  const host = normalizeHost(hostHeader)
  const target = table.byHost.get(host)
  if (target !== undefined) return { _tag: "Found", host, target }
  return { _tag: "UnknownHost", host, project: projectOfHost(host, table.domain) }
}

/**
 * What to do with a request for `target`: send it to the local port, forward it to the owner machine's proxy, or
 * answer a page — not ready here, moving there, or (reached through the cluster listener, from a peer) owned
 * elsewhere, which is never forwarded again: two machines whose tables disagree must not bounce a request.
 * Returns a constant: the hot path allocates nothing.
 */
export type Choice = "local" | "forward" | "not-ready" | "moving" | "elsewhere"

export const choose = (target: RouteTarget, viaCluster: boolean): Choice => {
  const remote = target.remote
  if (remote === undefined) return target.ready && target.port !== undefined ? "local" : "not-ready"
  if (viaCluster) return "elsewhere"
  return target.ready ? "forward" : "moving"
}

/** The 404 a peer gets for a route served only on its own machine (see `RouteTarget.machineOnly`). */
export const machineOnlyPage = (host: string): PageModel => ({
  status: 404,
  title: "Not found",
  message: `${host} is served only to its own machine, not to other machines of the cluster.`,
  hint: undefined,
  host,
  project: undefined,
  worlds: []
})

/** Whether a host name may get a certificate from berth's CA: the domain itself or a name under it. */
export const isUnderDomain = (host: string, domain: string): boolean =>
  (host === domain || host.endsWith(`.${domain}`)) && /^[a-z0-9.-]+$/.test(host) && !host.includes("..")

// ---------------------------------------------------------------------------------------------------------------
// Pages

export interface PageService {
  readonly service: string
  readonly state: ServiceState
  readonly ready: boolean
  readonly url: string
}

export interface PageWorld {
  readonly world: string
  readonly worldName: string | undefined
  readonly state: WorldState
  readonly services: ReadonlyArray<PageService>
}

/** What an error page says; `pages.ts` renders it as HTML or plain text. */
export interface PageModel {
  readonly status: 400 | 404 | 502 | 503 | 508
  /** seconds after which to try again: a `Retry-After` header, and a page that reloads itself */
  readonly retryAfter?: number | undefined
  readonly title: string
  /** One or two sentences saying what happened. */
  readonly message: string
  /** What to do about it, when there is something. */
  readonly hint: string | undefined
  readonly host: string
  readonly project: string | undefined
  /** The project's worlds and services, for finding the right address. */
  readonly worlds: ReadonlyArray<PageWorld>
}

/** How the request reached the proxy: page links use the same scheme and port. */
export interface Origin {
  readonly scheme: "http" | "https"
  readonly port: number
}

/**
 * How a client reached the first proxy, read from the request a peer's proxy forwarded (Host kept, its
 * X-Forwarded-Proto): the links of a page this machine answers are the client's, not the cluster listener's.
 */
export const forwardedOrigin = (hostHeader: string | undefined, proto: string | undefined): Origin => {
  const scheme = proto === "https" ? "https" : "http"
  const host = hostHeader ?? ""
  const colon = host.lastIndexOf(":")
  const port = colon > host.lastIndexOf("]") ? Number(host.slice(colon + 1).trim()) : Number.NaN
  return { scheme, port: Number.isInteger(port) && port > 0 && port < 65_536 ? port : scheme === "https" ? 443 : 80 }
}

const worldsOf = (table: RouteTable, project: string | undefined, origin: Origin): ReadonlyArray<PageWorld> => {
  if (project === undefined) return []
  const worlds = new Map<
    string,
    { world: string; worldName: string | undefined; state: WorldState; s: PageService[] }
  >()
  for (const t of table.byProject.get(project) ?? []) {
    if (t.worldState === "removed" || t.worldState === "removing") continue
    let w = worlds.get(t.world)
    if (w === undefined) {
      w = { world: t.world, worldName: t.worldName, state: t.worldState, s: [] }
      worlds.set(t.world, w)
    }
    w.s.push({
      service: t.service,
      state: t.serviceState,
      ready: t.ready,
      url: urlOf(t, t.domain ?? table.domain, origin.scheme, origin.port)
    })
  }
  return [...worlds.values()]
    .sort((a, b) => a.world.localeCompare(b.world))
    .map((w) => ({
      world: w.world,
      worldName: w.worldName,
      state: w.state,
      services: w.s.sort((a, b) => a.service.localeCompare(b.service))
    }))
}

const displayWorld = (t: Pick<RouteTarget, "world" | "worldName">): string =>
  t.worldName !== undefined && t.worldName !== t.world ? `${t.worldName} (${t.world})` : t.world

/** The 404 page for a host no route names. */
export const notFoundPage = (
  table: RouteTable,
  result: Extract<Lookup, { _tag: "UnknownHost" }>,
  origin: Origin
): PageModel => {
  const worlds = worldsOf(table, result.project, origin)
  const known = result.project !== undefined && table.byProject.has(result.project)
  const host = result.host === "" ? "(no Host header)" : result.host
  let message: string
  let hint: string | undefined
  if (known) {
    message = `No service of project ${result.project} answers to ${host}.`
    hint =
      worlds.length === 0
        ? `No world of ${result.project} is up: run \`berth up <world>\` in the project.`
        : `Addresses have the form <service>.<world>.${result.project}.${table.domain}.`
  } else if (result.project !== undefined) {
    message = `berth knows no project named ${result.project} (host ${host}).`
    hint = `Run \`berth up <world>\` in the project, or \`berth status\` to see what is up.`
  } else {
    message = `berth routes only names under .${table.domain}; ${host} is not one.`
    hint = `Addresses have the form <service>.<world>.<project>.${table.domain}.`
  }
  return { status: 404, title: "Not found", message, hint, host, project: result.project, worlds }
}

/** Why a known host cannot be answered. */
export type Unavailable = "not-ready" | "refused" | "closed"

/** The 502 page for a known host whose service cannot answer now. */
export const unavailablePage = (
  table: RouteTable,
  host: string,
  target: RouteTarget,
  reason: Unavailable,
  origin: Origin
): PageModel => {
  if (target.remote !== undefined) {
    return remotePage(table, host, target, target.remote, reason === "not-ready" ? "moving" : "unreachable", origin)
  }
  const who = `service ${target.service} of world ${displayWorld(target)} (project ${target.project})`
  let message: string
  let hint: string | undefined
  if (reason === "not-ready" && (target.worldState === "suspended" || target.worldState === "queued")) {
    // the request itself queues the world's resume (see `wakeIfSuspended`): a page that says so and comes back
    return {
      status: 503,
      retryAfter: 2,
      title: target.worldState === "queued" ? "Waiting for room" : "Waking up",
      message:
        target.worldState === "queued"
          ? `World ${displayWorld(target)} of project ${target.project} is waiting for room on this machine.`
          : `World ${displayWorld(target)} of project ${target.project} was suspended to free memory or while idle; berth is bringing it back.`,
      hint: "This page reloads by itself.",
      host,
      project: target.project,
      worlds: worldsOf(table, target.project, origin)
    }
  }
  if (reason === "not-ready" && worldStopped(target.worldState)) {
    message = `World ${displayWorld(target)} of project ${target.project} is ${target.worldState}.`
    hint = `Run \`berth up ${target.worldName ?? target.world}\` in the project to start it.`
  } else if (reason === "not-ready") {
    message = `The ${who} is not ready: it is ${target.serviceState}.`
    hint =
      target.serviceState === "failed" || target.serviceState === "exited"
        ? `See \`berth logs ${target.worldName ?? target.world} ${target.service}\`.`
        : "Reload this page in a moment."
  } else if (reason === "refused") {
    message = `The ${who} is ${target.serviceState}, but nothing accepts connections on port ${target.port}.`
    hint = "The service may still be starting, or may listen on another port than the one berth gave it."
  } else {
    message = `The ${who} closed the connection without answering.`
    hint = undefined
  }
  return {
    status: 502,
    title: reason === "not-ready" && worldStopped(target.worldState) ? "World stopped" : "Service unavailable",
    message,
    hint,
    host,
    project: target.project,
    worlds: worldsOf(table, target.project, origin)
  }
}

/** Seconds a client waits before asking again while a world's owner cannot answer. */
export const REMOTE_RETRY_AFTER = 2

/**
 * Why a world another machine runs cannot be reached: it is moving, its owner's proxy does not answer, or a peer
 * sent the request here although this machine's table says the world is elsewhere (the tables disagree while it
 * moves). Always 503 with `Retry-After`: each is over within seconds, and the page reloads itself.
 */
export type RemoteTrouble = "moving" | "unreachable" | "elsewhere"

export const remotePage = (
  table: RouteTable,
  host: string,
  target: RouteTarget,
  remote: RemoteOwner,
  trouble: RemoteTrouble,
  origin: Origin
): PageModel => {
  const world = `World ${displayWorld(target)} of project ${target.project}`
  const message =
    trouble === "moving"
      ? `${world} is moving to machine ${remote.machine}.`
      : trouble === "unreachable"
        ? `${world} runs on machine ${remote.machine}, whose proxy does not answer.`
        : `${world} runs on machine ${remote.machine}, but a machine that thinks it runs here sent the request: berth's machines are still agreeing where it is.`
  return {
    status: 503,
    retryAfter: REMOTE_RETRY_AFTER,
    title: trouble === "unreachable" ? "Machine unreachable" : "Moving",
    message,
    hint: "This page reloads by itself.",
    host,
    project: target.project,
    worlds: worldsOf(table, target.project, origin)
  }
}

/** A request reached a suspended world: it asks for the world to come back (the gate decides when). */
export const wakeIfSuspended = (table: RouteTable, target: RouteTarget): void => {
  table.seen?.(target)
  if (target.worldState === "suspended" && target.worldId !== undefined) table.wake?.(target.worldId)
}

// a degraded world runs, save a failed service: its other routes stay up
const worldStopped = (state: WorldState): boolean => state !== "running" && state !== "degraded" && state !== "starting"

export const loopPage = (host: string, hops: number): PageModel => ({
  status: 508,
  title: "Loop detected",
  message: `The request for ${host} went through berth's proxy ${hops} times: a service forwards to its own address.`,
  hint: "Check where the service proxies its requests to.",
  host,
  project: undefined,
  worlds: []
})
