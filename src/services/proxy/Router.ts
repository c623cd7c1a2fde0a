/**
 * The machine-wide proxy as the daemon runs it: which ports it listens on (persisted settings, then the defaults —
 * 80 and 443 where the daemon may bind them, else 7355 and 7356), berth's CA for HTTPS, and the route table, brought
 * up to date from the registry whenever a world or service changes (never per request): only the worlds the registry
 * says were written are read again, their config only when its file changed, and the other worlds keep their very
 * routes (`domain/world-routes.ts`). Also what `${svc.url}` is for a world.
 *
 * The HTTP and HTTPS listeners are placed one at a time: one that cannot bind never costs the other, and asking for
 * the port a listener already holds changes nothing.
 *
 * In a cluster, the daemon also hands it the routes of worlds other machines run (`setRemoteTargets`), which the
 * proxy forwards to their owners' proxies, and where this machine's own cluster listener is (`setClusterListener`).
 */
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Model from "../../domain/config/model.js"
import { shortHash } from "../../domain/hash.js"
import { textKnob } from "../../domain/knobs.js"
import { projectLabel } from "../../domain/names.js"
import { dashboardHost, type RouteTable, type RouteTarget } from "../../domain/routes.js"
import {
  emptyBook,
  patchWorlds,
  type RouteBook,
  tableOf,
  withDashboard,
  withRemote,
  type WorldRoutes,
  worldTargets
} from "../../domain/world-routes.js"
import { ConfigFiles } from "../ConfigFiles.js"
import { Home } from "../Home.js"
import { type LeaseRow, Registry, type RegistryError, type ServiceRow, type WorldRow } from "../Registry.js"
import { type CaError, type CertificateAuthority, loadOrCreateCa } from "./ca.js"
import { type ClusterListenerInfo, type ClusterListenerSpec, makeProxy, type ProxyError, type Scheme } from "./Proxy.js"
import { Traffic } from "./traffic.js"

/** Where the proxy listens when port 80 (443) is not available: fixed, so URLs stay the same across restarts. */
export const FALLBACK_HTTP_PORT = 7355
export const FALLBACK_HTTPS_PORT = 7356
export const PROXY_DOMAIN = "localhost"
const PRIVILEGED: Record<Scheme, number> = { http: 80, https: 443 }
const FALLBACK: Record<Scheme, number> = { http: FALLBACK_HTTP_PORT, https: FALLBACK_HTTPS_PORT }

/** A CommonJS hook for `node --require`: `*.localhost` resolves to loopback, as in browsers (RFC 6761). */
const LOCALHOST_RESOLVER = `"use strict"
// written by berth: resolves *.localhost to loopback in this process, as browsers do
const dns = require("node:dns")
const isLocal = (host) => typeof host === "string" && /\\.localhost\\.?$/i.test(host)
const answer = (options) => {
  const family = typeof options === "number" ? options : (options && options.family) || 0
  const all = [
    ...(family === 6 ? [] : [{ address: "127.0.0.1", family: 4 }]),
    ...(family === 4 ? [] : [{ address: "::1", family: 6 }])
  ]
  return options && options.all ? all : all[0]
}
const lookup = dns.lookup
dns.lookup = function (host, options, callback) {
  if (!isLocal(host)) return lookup.apply(this, arguments)
  const cb = typeof options === "function" ? options : callback
  const found = answer(typeof options === "function" ? {} : options)
  process.nextTick(() => (Array.isArray(found) ? cb(null, found) : cb(null, found.address, found.family)))
}
const promises = dns.promises.lookup
dns.promises.lookup = function (host, options) {
  return isLocal(host) ? Promise.resolve(answer(options || {})) : promises.apply(this, arguments)
}
`

const HTTP_SETTING = "proxy.http"
const HTTPS_SETTING = "proxy.https"
const HTTPS_URLS_SETTING = "proxy.https_urls"

/** A listener's port as asked: a number, "auto" (80/443, else the fallback) or "off". */
export type PortChoice = number | "auto" | "off"

export interface ListenerInfo {
  readonly wanted: PortChoice
  /** the port it listens on, when it does */
  readonly port: number | undefined
  /** why it does not listen */
  readonly error: string | undefined
}

export interface ProxyInfo {
  readonly http: ListenerInfo
  readonly https: ListenerInfo
  /** every project's `${svc.url}` is https (as if each had `[project] https = true`) */
  readonly httpsUrls: boolean
  readonly caPath: string
}

/** What `${svc.url}` of a world's routed services looks like. */
export interface Routing {
  readonly scheme: "http" | "https"
  readonly port: number
  readonly domain: string
  readonly project: string
  readonly world: string
  /** the CA a process should trust (NODE_EXTRA_CA_CERTS) when its world's URLs are https */
  readonly caPath: string | undefined
}

const parseChoice = (value: unknown): PortChoice | undefined => {
  if (value === "auto" || value === "off") return value
  if (typeof value === "string" && value.trim() === "") return undefined
  const n = typeof value === "string" ? Number(value) : value
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= 65_535 ? n : undefined
}

/** Rows grouped by their world, in the order read. */
const groupBy = <A extends { readonly worldId: number }>(rows: ReadonlyArray<A>): Map<number, Array<A>> => {
  const out = new Map<number, Array<A>>()
  for (const r of rows) {
    const list = out.get(r.worldId)
    if (list === undefined) out.set(r.worldId, [r])
    else list.push(r)
  }
  return out
}

/**
 * What the Router offers the daemon (written out: the implementation below is checked against it). One route table,
 * rebuilt from the registry as worlds change, served by the machine-wide proxy; the listeners' ports; the
 * environment a routed world's processes get; the cluster's remote routes and listener; and what the proxy saw.
 */
export interface RouterService {
  /** `${svc.url}` of a world of `config`: undefined when the proxy does not listen (URLs stay direct) */
  readonly routing: (config: Model.Config, project: string, world: string) => Routing | undefined
  /** the environment of a routed world's process: the localhost resolver hook, and berth's CA for an HTTPS world */
  readonly processEnv: (
    given: Readonly<Record<string, string>>,
    r: Routing | undefined
  ) => Readonly<Record<string, string>>
  readonly info: Effect.Effect<ProxyInfo>
  /** moves a listener (or turns https URLs on or off), keeping it as it was when the new port cannot be bound */
  readonly setPorts: (p: {
    readonly http?: PortChoice | undefined
    readonly https?: PortChoice | undefined
    readonly httpsUrls?: boolean | undefined
  }) => Effect.Effect<ProxyInfo, RegistryError | CaError | ProxyError>
  /**
   * brings the route table up to date with the registry now: only the worlds written since the last refresh are read
   * again (all of them after a failure)
   */
  readonly refresh: Effect.Effect<void, RegistryError>
  /** the route table the proxy serves now */
  readonly routes: Effect.Effect<RouteTable>
  /** every host name routed now */
  readonly hostNames: SubscriptionRef.SubscriptionRef<ReadonlyArray<string>>
  /** requests per route since the daemon started */
  readonly requests: Effect.Effect<Map<string, number>>
  /** when a world's routes last saw a request (undefined: none since the daemon started) */
  readonly lastRequest: (worldId: number) => Effect.Effect<number | undefined>
  /** when a service (by its url's host label) last answered a proxied request below 500 (undefined: not since start) */
  readonly lastAnswer: (worldId: number, label: string) => Effect.Effect<number | undefined>
  /** routes `berth.localhost` to the daemon's web dashboard on this loopback port (undefined: no more) */
  readonly setDashboard: (port: number | undefined) => Effect.Effect<void, RegistryError>
  /** the web dashboard's origins, one per listening scheme, the first the one to show */
  readonly dashboardOrigins: Effect.Effect<ReadonlyArray<string>>
  /** the routes of worlds other machines run, replacing the last ones given */
  readonly setRemoteTargets: (targets: ReadonlyArray<RouteTarget>) => Effect.Effect<void, RegistryError>
  /** listens for peers' proxies on this machine's cluster address, or stops (undefined); answers what listens now */
  readonly setClusterListener: (
    spec: ClusterListenerSpec | undefined
  ) => Effect.Effect<ClusterListenerInfo | undefined, ProxyError>
  /** the cluster listener, and how many connections from non-peers it closed */
  readonly clusterInfo: Effect.Effect<ClusterListenerInfo | undefined>
  /** who resumes a suspended world that a request reached */
  readonly onWake: (wake: (worldId: number) => void) => Effect.Effect<void>
}

export class Router extends Effect.Service<Router>()("berth/Router", {
  scoped: Effect.gen(function* () {
    const home = yield* Home
    const registry = yield* Registry
    const configs = yield* ConfigFiles
    const caDir = join(home.root, "ca")
    const caPath = join(caDir, "ca.crt")
    let ca: CertificateAuthority | undefined
    let info: ProxyInfo = {
      http: { wanted: "auto", port: undefined, error: "not started" },
      https: { wanted: "auto", port: undefined, error: "not started" },
      httpsUrls: false,
      caPath
    }
    // the engine lives as long as the daemon; its listeners come and go
    const proxy = yield* makeProxy({ domain: PROXY_DOMAIN })

    // environment first (tests and CI give every BERTH_HOME its own ports), then the persisted settings
    const choice = (variable: string, setting: string) =>
      Effect.zipWith(
        textKnob(variable),
        registry.getSetting(setting),
        (given, stored) => parseChoice(given) ?? parseChoice(stored) ?? "auto"
      )

    /**
     * A world's config and its services with a url, remembered per parsed file (ConfigFiles hands back the same
     * object until the file changes): a world read again whose file did not change costs no parsing.
     */
    const routedCache = new WeakMap<
      object,
      Map<string, { config: Model.Config; routed: ReadonlyArray<Model.ProcessService> }>
    >()
    const routedOf = (parsed: Model.Config, world: string) => {
      let byWorld = routedCache.get(parsed)
      if (byWorld === undefined) {
        byWorld = new Map()
        routedCache.set(parsed, byWorld)
      }
      let entry = byWorld.get(world)
      if (entry === undefined) {
        const config = Model.forWorld(parsed, world)
        entry = { config, routed: Model.processes(config).filter((s) => s.url !== undefined) }
        byWorld.set(world, entry)
      }
      return entry
    }

    /** A world's routes from its rows and its config (none when the config cannot be read, as before it is fixed). */
    const routesOf = (w: WorldRow, services: ReadonlyArray<ServiceRow>, leases: ReadonlyArray<LeaseRow>) =>
      Effect.gen(function* () {
        const order = { project: w.declaredName, createdAt: w.createdAt, id: w.id }
        const folder = w.path !== "" && existsSync(w.path) ? w.path : w.mainRoot
        const loaded = yield* configs.load(folder).pipe(Effect.option)
        if (loaded._tag === "None") return { order, targets: [] }
        const { config, routed } = routedOf(loaded.value.parsed.config, w.name)
        const ports = new Map<string, number>()
        for (const l of leases) if (l.name === "" && !ports.has(l.service)) ports.set(l.service, l.port)
        const targets = worldTargets({
          id: w.id,
          project: projectLabel(w.projectName),
          slug: w.slug,
          name: w.name,
          observed: w.observed,
          states: new Map(services.map((s) => [s.name, s.observed])),
          ports,
          routed,
          domain: config.project.domain
        })
        return { order, targets }
      })

    /** Past this many worlds written since the last look, three queries for all rows beat three per world. */
    const FEW = 8

    /**
     * The worlds' routes read again where the registry says they were written since `since` (every world when it
     * cannot say, or at the first look): the book to publish, and the version it is up to.
     */
    const update = (current: RouteBook, since: number | undefined) =>
      Effect.gen(function* () {
        const touched = yield* registry.touchedSince(since ?? 0)
        const wanted = since === undefined || touched.worlds === "all" ? undefined : touched.worlds
        const changed = new Map<number, WorldRoutes | undefined>()
        if (wanted !== undefined && wanted.size <= FEW) {
          for (const id of wanted) {
            const w = yield* registry.world(id)
            changed.set(
              id,
              w === undefined ? undefined : yield* routesOf(w, yield* registry.services(id), yield* registry.leases(id))
            )
          }
        } else if (wanted === undefined || wanted.size > 0) {
          const leases = groupBy(yield* registry.leases())
          const services = groupBy(yield* registry.services())
          for (const w of yield* registry.worlds()) {
            if (wanted !== undefined && !wanted.has(w.id)) continue
            changed.set(w.id, yield* routesOf(w, services.get(w.id) ?? [], leases.get(w.id) ?? []))
          }
          // a world written and then removed has no row left: its routes go
          if (wanted !== undefined) for (const id of wanted) if (!changed.has(id)) changed.set(id, undefined)
        }
        return { version: touched.version, book: patchWorlds(current, changed, wanted === undefined) }
      })

    /** what a request to a suspended world calls: set by the engine above (the router cannot know worlds) */
    let waker: (worldId: number) => void = () => {}
    /** requests per route (host) since the daemon started, and when each world last saw one */
    const traffic = new Traffic()

    /** every routed host name, for the hosts file berth keeps when asked (`HostsKeeper`) */
    const hostNames = yield* SubscriptionRef.make<ReadonlyArray<string>>([])
    /** the loopback port of the daemon's web dashboard, routed as `berth.localhost` (see `withDashboardRoute`) */
    let dashboardPort: number | undefined
    /** the routes of worlds other machines run, as the daemon last gave them */
    let remoteTargets: ReadonlyArray<RouteTarget> = []
    /** the table as last published, world by world */
    let book: RouteBook | undefined
    /** the registry's version the book is up to; undefined: read every world at the next refresh */
    let upTo: number | undefined
    // one refresh at a time: each starts from the book the one before published, and two racing could publish an
    // older table last
    const oneAtATime = yield* Effect.makeSemaphore(1)

    const refresh: Effect.Effect<void, RegistryError> = oneAtATime.withPermits(1)(
      Effect.gen(function* () {
        const before = book
        const read = yield* update(before ?? emptyBook, upTo)
        // a world of this machine keeps its name here: every clone's main checkout is a world `main`, so two machines
        // often publish the same host, and the person at this machine means their own (tableOf: first wins)
        const next = withDashboard(withRemote(read.book, remoteTargets), dashboardPort)
        if (next !== before) {
          const table = tableOf(next, PROXY_DOMAIN)
          traffic.prepare(table.byHost.values())
          proxy.setRoutes({ ...table, wake: (id) => waker(id), seen: traffic.seen, answered: traffic.answered })
          book = next
          const names = [...table.byHost.keys()].sort()
          if (names.join("\n") !== (yield* SubscriptionRef.get(hostNames)).join("\n")) {
            yield* SubscriptionRef.set(hostNames, names)
          }
        }
        upTo = read.version
      }).pipe(
        // whatever failed, the next refresh reads every world: it cannot miss what this one did not finish
        Effect.onExit((exit) =>
          Exit.isSuccess(exit)
            ? Effect.void
            : Effect.sync(() => {
                upTo = undefined
              })
        )
      )
    )

    const loadCa = Effect.gen(function* () {
      if (ca !== undefined) return ca
      const loaded = yield* loadOrCreateCa(caDir)
      if (loaded.replaced !== undefined) {
        yield* Effect.logWarning(
          `berth's CA was made again, now limited to *.localhost and *.test names: run \`berth trust\` to trust it. ` +
            `The old one (${loaded.replaced}) can sign nothing more: its key is deleted.`
        )
      }
      ca = loaded
      return loaded
    })

    /**
     * Puts one listener where `wanted` says: a port, or for "auto" the privileged port and then the fallback.
     * Fails when it cannot listen there, and the listener stays as it was.
     */
    const place = (scheme: Scheme, wanted: PortChoice): Effect.Effect<ListenerInfo, ProxyError | CaError> =>
      Effect.gen(function* () {
        if (wanted === "off") {
          yield* proxy.close(scheme)
          return { wanted, port: undefined, error: "turned off" }
        }
        const authority = scheme === "https" ? yield* loadCa : undefined
        const ports = wanted === "auto" ? [PRIVILEGED[scheme], FALLBACK[scheme]] : [wanted]
        let failure: ProxyError | undefined
        for (const port of ports) {
          const bound = yield* Effect.either(
            authority === undefined
              ? proxy.listen({ scheme: "http", port })
              : proxy.listen({ scheme, port, ca: authority })
          )
          if (bound._tag === "Right") return { wanted, port: bound.right, error: undefined }
          // for "auto", the fallback's failure is the one to tell: the privileged port is often simply not allowed
          failure = bound.left
        }
        return yield* failure!
      })

    // at start, each listener on its own: a failure is reported in `berth port` and the daemon log
    const start = Effect.gen(function* () {
      // a CA made before name constraints is replaced now, even with HTTPS off: its key should not wait on disk
      if (existsSync(caPath)) yield* Effect.ignore(Effect.tapError(loadCa, (e) => Effect.logWarning(e.message)))
      const listener = (scheme: Scheme, wanted: PortChoice) =>
        place(scheme, wanted).pipe(
          Effect.tapError((e) => Effect.logWarning(`proxy: ${e.message}`)),
          Effect.catchAll((e) => Effect.succeed<ListenerInfo>({ wanted, port: undefined, error: e.message }))
        )
      const http = yield* listener("http", yield* choice("BERTH_PROXY_PORT", HTTP_SETTING))
      const https = yield* listener("https", yield* choice("BERTH_HTTPS_PORT", HTTPS_SETTING))
      info = { http, https, httpsUrls: (yield* registry.getSetting(HTTPS_URLS_SETTING)) === true, caPath }
      yield* refresh
    })

    yield* start
    // every change of a world's or a service's state reaches the table within one pass
    // a burst of changes (an `up` writes many) costs one refresh after the one running: only the latest waits
    yield* registry.changes.changes.pipe(
      Stream.buffer({ capacity: 1, strategy: "sliding" }),
      // and a pause after each, so a long burst (an `up` of many services) does not keep the daemon busy rebuilding;
      // every world command still refreshes before it replies
      Stream.runForEach(() =>
        refresh.pipe(
          Effect.catchAllCause((c) => Effect.logWarning("routes", c)),
          Effect.zipRight(Effect.sleep("20 millis"))
        )
      ),
      Effect.forkScoped
    )

    /** `${svc.url}` of a world of `config`: undefined when the proxy does not listen (URLs stay direct). */
    const routing = (config: Model.Config, project: string, world: string): Routing | undefined => {
      const wantsHttps = config.project.https || info.httpsUrls
      const https = wantsHttps && info.https.port !== undefined
      const port = https ? info.https.port : info.http.port
      if (port === undefined) return undefined
      return {
        scheme: https ? "https" : "http",
        port,
        domain: config.project.domain,
        project: projectLabel(project),
        world,
        // whichever way the URLs became https (the project, or `berth port --https-urls on`), its processes call
        // them, so they trust the CA
        caPath: wantsHttps && ca !== undefined ? caPath : undefined
      }
    }

    /**
     * Moves the listeners asked about (only those), then saves the choice. A port that cannot be had fails the call
     * with the reason, and that listener — and its setting — stay as they were.
     */
    const setPorts = Effect.fn("Router.setPorts")(function* (p: {
      readonly http?: PortChoice | undefined
      readonly https?: PortChoice | undefined
      readonly httpsUrls?: boolean | undefined
    }) {
      for (const [scheme, wanted, setting] of [
        ["http", p.http, HTTP_SETTING],
        ["https", p.https, HTTPS_SETTING]
      ] as const) {
        if (wanted === undefined) continue
        const placed = yield* place(scheme, wanted)
        yield* registry.setSetting(setting, wanted)
        info = { ...info, [scheme]: placed }
      }
      if (p.httpsUrls !== undefined) {
        yield* registry.setSetting(HTTPS_URLS_SETTING, p.httpsUrls)
        info = { ...info, httpsUrls: p.httpsUrls }
      }
      return info
    })

    /**
     * Browsers resolve `*.localhost` to loopback themselves; programs ask the system, which often does not (glibc
     * without nss-myhostname). So that `${api.url}` works from a world's Node processes too, they load this hook,
     * which answers `*.localhost` lookups with loopback and passes everything else on.
     */
    const resolverHook = join(home.root, "node", "localhost-resolver.cjs")
    yield* Effect.sync(() => {
      mkdirSync(dirname(resolverHook), { recursive: true, mode: 0o700 })
      writeFileSync(resolverHook, LOCALHOST_RESOLVER, { mode: 0o600 })
    })

    /**
     * The environment of a process of a routed world: the resolver hook in NODE_OPTIONS (after the user's own
     * options); for an HTTPS world, NODE_EXTRA_CA_CERTS naming berth's CA — joined with the user's own extra CAs when
     * they have some, since Node reads only one such file.
     */
    const bundles = new Map<string, number>()
    const processEnv = (
      given: Readonly<Record<string, string>>,
      r: Routing | undefined
    ): Readonly<Record<string, string>> => {
      if (r === undefined) return given
      const hook = `--require=${resolverHook}`
      const options = given.NODE_OPTIONS ?? ""
      const env = options.includes(hook) ? given : { ...given, NODE_OPTIONS: `${options} ${hook}`.trim() }
      if (r.caPath === undefined || ca === undefined) return env
      const own = env.NODE_EXTRA_CA_CERTS
      if (own === undefined || own === "" || own === r.caPath) return { ...env, NODE_EXTRA_CA_CERTS: r.caPath }
      const bundle = join(caDir, `with-${shortHash(own, 10)}.pem`)
      try {
        // written again only when their file changed since
        const stamp = statSync(own).mtimeMs
        if (bundles.get(bundle) !== stamp) {
          writeFileSync(bundle, `${readFileSync(own, "utf8").trimEnd()}\n${ca.certPem}`, { mode: 0o600 })
          bundles.set(bundle, stamp)
        }
        return { ...env, NODE_EXTRA_CA_CERTS: bundle }
      } catch {
        // their file is unreadable: berth's CA alone still lets the world's own HTTPS work
        return { ...env, NODE_EXTRA_CA_CERTS: r.caPath }
      }
    }

    return {
      routing,
      processEnv,
      info: Effect.sync(() => info),
      setPorts,
      refresh,
      routes: Effect.sync(() => proxy.routes()),
      hostNames,
      /** requests per route since the daemon started */
      requests: Effect.sync(() => traffic.requests()),
      /** when a world's routes last saw a request (undefined: none since the daemon started) */
      lastRequest: (worldId: number) => Effect.sync(() => traffic.lastRequest(worldId)),
      lastAnswer: (worldId: number, label: string) => Effect.sync(() => traffic.lastAnswer(worldId, label)),
      /** routes `berth.localhost` to the daemon's web dashboard on this loopback port (undefined: no more) */
      setDashboard: (port: number | undefined) =>
        Effect.suspend(() => {
          dashboardPort = port
          return refresh
        }),
      /**
       * The web dashboard's origins, one per listening scheme (`http://berth.localhost:7355`), the first the one to
       * show: https when every URL is, else http. Empty when it does not run or the proxy listens nowhere.
       */
      dashboardOrigins: Effect.sync((): ReadonlyArray<string> => {
        if (dashboardPort === undefined) return []
        const origin = (scheme: "http" | "https", port: number | undefined) =>
          port === undefined
            ? []
            : [`${scheme}://${dashboardHost(PROXY_DOMAIN)}${port === PRIVILEGED[scheme] ? "" : `:${port}`}`]
        const http = origin("http", info.http.port)
        const https = origin("https", info.https.port)
        return info.httpsUrls ? [...https, ...http] : [...http, ...https]
      }),
      /**
       * The routes of worlds other machines run (each with `remote` set: the owner's name and its cluster listener;
       * `ready: false` while the world moves), replacing the last ones given; the table is rebuilt at once. A host
       * also routed locally goes to the remote owner. A world id is this machine's numbering: any given is dropped.
       */
      setRemoteTargets: (targets: ReadonlyArray<RouteTarget>) =>
        Effect.suspend(() => {
          remoteTargets = targets.flatMap((t) => (t.remote === undefined ? [] : [{ ...t, worldId: undefined }]))
          return refresh
        }),
      /**
       * Listens for peers' proxies on this machine's cluster address (only there, only from `peers`), or stops
       * (undefined). Moving it binds the new address first: a failure leaves the listener as it was. Answers what
       * listens now.
       */
      setClusterListener: (
        spec: ClusterListenerSpec | undefined
      ): Effect.Effect<ClusterListenerInfo | undefined, ProxyError> =>
        spec === undefined
          ? Effect.as(proxy.closeCluster, undefined)
          : Effect.map(proxy.listenCluster(spec), () => proxy.cluster()),
      /** the cluster listener, and how many connections from non-peers it closed */
      clusterInfo: Effect.sync((): ClusterListenerInfo | undefined => proxy.cluster()),
      /** who resumes a suspended world that a request reached */
      onWake: (wake: (worldId: number) => void) =>
        Effect.sync(() => {
          waker = wake
        })
    } satisfies RouterService
  }),
  dependencies: []
}) {}

/**
 * The Router with no listener: routes are kept, counted and answered from (`routes`, `lastAnswer`, pages), but no
 * proxy port is bound — for tests and for embedders that proxy on their own. The other knobs come from the
 * environment as usual.
 */
export const RouterWithoutListeners = Router.Default.pipe(
  Layer.provide(
    Layer.setConfigProvider(
      ConfigProvider.fromMap(
        new Map([
          ["BERTH_PROXY_PORT", "off"],
          ["BERTH_HTTPS_PORT", "off"]
        ])
      ).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))
    )
  )
)
