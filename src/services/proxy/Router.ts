/**
 * The machine-wide proxy as the daemon runs it: which ports it listens on (persisted settings, then the defaults —
 * 80 and 443 where the daemon may bind them, else 7355 and 7356), berth's CA for HTTPS, and the route table, rebuilt
 * from the registry whenever a world or service changes (never per request). Also what `${svc.url}` is for a world.
 */
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Model from "../../domain/config/model.js"
import { shortHash } from "../../domain/hash.js"
import { projectLabel } from "../../domain/names.js"
import { makeRouteTable, type RouteTarget } from "../../domain/routes.js"
import type { ServiceState } from "../../domain/service-state.js"
import type { WorldState } from "../../domain/world-state.js"
import { ConfigFiles } from "../ConfigFiles.js"
import { Home } from "../Home.js"
import { Registry } from "../Registry.js"
import { type CertificateAuthority, loadOrCreateCa } from "./ca.js"
import { makeProxy, type ProxyHandle } from "./Proxy.js"

/** Where the proxy listens when port 80 (443) is not available: fixed, so URLs stay the same across restarts. */
export const FALLBACK_HTTP_PORT = 7355
export const FALLBACK_HTTPS_PORT = 7356
export const PROXY_DOMAIN = "localhost"

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
  /** the CA a process of an HTTPS project should trust (NODE_EXTRA_CA_CERTS) */
  readonly caPath: string | undefined
}

const parseChoice = (value: unknown): PortChoice | undefined => {
  if (value === "auto" || value === "off") return value
  if (typeof value === "string" && value.trim() === "") return undefined
  const n = typeof value === "string" ? Number(value) : value
  return typeof n === "number" && Number.isInteger(n) && n >= 0 && n <= 65_535 ? n : undefined
}

/** A service counts as reachable once it runs (or passed its health check). */
const READY: ReadonlySet<string> = new Set(["running", "healthy"])

export class Router extends Effect.Service<Router>()("berth/Router", {
  scoped: Effect.gen(function* () {
    const home = yield* Home
    const registry = yield* Registry
    const configs = yield* ConfigFiles
    const caDir = join(home.root, "ca")
    const caPath = join(caDir, "ca.crt")
    let ca: CertificateAuthority | undefined
    let proxy: ProxyHandle | undefined
    let scope: Scope.CloseableScope | undefined
    let info: ProxyInfo = {
      http: { wanted: "auto", port: undefined, error: "not started" },
      https: { wanted: "auto", port: undefined, error: "not started" },
      httpsUrls: false,
      caPath
    }

    // environment first (tests and CI give every BERTH_HOME its own ports), then the persisted settings
    const choice = (variable: string, setting: string) =>
      Effect.map(
        registry.getSetting(setting),
        (stored) => parseChoice(process.env[variable]) ?? parseChoice(stored) ?? "auto"
      )

    // three queries for the whole table, however many worlds there are
    const targets = Effect.gen(function* () {
      const out: Array<RouteTarget> = []
      const allLeases = yield* registry.leases()
      const allServices = yield* registry.services()
      for (const w of yield* registry.worlds()) {
        const folder = w.path !== "" && existsSync(w.path) ? w.path : w.mainRoot
        const loaded = yield* configs.load(folder).pipe(Effect.option)
        if (loaded._tag === "None") continue
        const leases = allLeases.filter((l) => l.worldId === w.id)
        const states = new Map(allServices.filter((s) => s.worldId === w.id).map((s) => [s.name, s.observed]))
        const { config, routed } = routedOf(loaded.value.parsed.config, w.name)
        for (const s of routed) {
          if (s.url === undefined) continue
          const state = (states.get(s.name) ?? "stopped") as ServiceState
          out.push({
            project: projectLabel(w.projectName),
            world: w.slug,
            worldName: w.name,
            service: s.url,
            worldState: w.observed as WorldState,
            serviceState: state,
            port: leases.find((l) => l.service === s.name && l.name === "")?.port,
            ready: READY.has(state),
            domain: config.project.domain
          })
        }
      }
      return out
    })

    /**
     * A world's config and its services with a url, remembered per parsed file (ConfigFiles hands back the same
     * object until the file changes): rebuilding the table must stay cheap, it runs on every burst of changes.
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

    const refresh = Effect.gen(function* () {
      if (proxy === undefined) return
      proxy.setRoutes(makeRouteTable(yield* targets, PROXY_DOMAIN))
    })

    /** Binds `wanted`, or for "auto" the privileged port and then the fallback. */
    const candidates = (wanted: PortChoice, privileged: number, fallback: number): ReadonlyArray<number> =>
      wanted === "off" ? [] : wanted === "auto" ? [privileged, fallback] : [wanted]

    const start = Effect.gen(function* () {
      if (scope !== undefined) yield* Scope.close(scope, Exit.void)
      proxy = undefined
      scope = yield* Scope.make()
      const httpWanted = yield* choice("BERTH_PROXY_PORT", HTTP_SETTING)
      const httpsWanted = yield* choice("BERTH_HTTPS_PORT", HTTPS_SETTING)
      const httpsUrls = (yield* registry.getSetting(HTTPS_URLS_SETTING)) === true
      if (httpsWanted !== "off" && ca === undefined) {
        ca = yield* loadOrCreateCa(caDir).pipe(
          Effect.tapError((e) => Effect.logWarning(`berth's CA: ${e.message}`)),
          Effect.orElseSucceed(() => undefined)
        )
      }
      const errors: Array<string> = []
      // the engine always has an HTTP listener: with HTTP off but HTTPS on, it gets an unadvertised ephemeral one
      const httpOff = httpWanted === "off"
      const httpPorts = httpOff ? (httpsWanted === "off" ? [] : [0]) : candidates(httpWanted, 80, FALLBACK_HTTP_PORT)
      const httpsPorts = ca === undefined ? [] : candidates(httpsWanted, 443, FALLBACK_HTTPS_PORT)
      let httpError: string | undefined = httpWanted === "off" ? "turned off" : undefined
      let httpsError: string | undefined =
        httpsWanted === "off" ? "turned off" : ca === undefined ? "berth's CA could not be made" : undefined
      // each listener walks its own candidates: a taken 443 must not cost the HTTP routes, nor the reverse
      let h = 0
      let t = 0
      while (h < httpPorts.length) {
        const tls = ca !== undefined && t < httpsPorts.length ? { port: httpsPorts[t]!, ca } : undefined
        const attempt = yield* Scope.extend(
          makeProxy({
            http: { port: httpPorts[h]! },
            ...(tls === undefined ? {} : { https: tls }),
            domain: PROXY_DOMAIN
          }),
          scope
        ).pipe(Effect.either)
        if (attempt._tag === "Right") {
          proxy = attempt.right
          if (!httpOff) httpError = undefined
          if (tls !== undefined) httpsError = undefined
          break
        }
        errors.push(attempt.left.message)
        if (attempt.left.scheme === "https") {
          httpsError = attempt.left.message
          t++
        } else {
          httpError = attempt.left.message
          h++
        }
      }
      info = {
        http: { wanted: httpWanted, port: httpOff ? undefined : proxy?.ports.http, error: httpError },
        https: {
          wanted: httpsWanted,
          port: proxy?.ports.https,
          error: proxy?.ports.https === undefined ? httpsError : undefined
        },
        httpsUrls,
        caPath
      }
      for (const e of errors) yield* Effect.logWarning(`proxy: ${e}`)
      yield* refresh
    })

    yield* start
    yield* Effect.addFinalizer(() => (scope === undefined ? Effect.void : Scope.close(scope, Exit.void)))
    // every change of a world's or a service's state reaches the table within one pass
    // a burst of changes (an `up` writes many) costs one rebuild after the one running: only the latest waits
    yield* registry.changes.changes.pipe(
      Stream.buffer({ capacity: 1, strategy: "sliding" }),
      // and a pause after each, so a long burst (an `up` of many services) does not keep the daemon busy rebuilding;
      // every world command still rebuilds before it replies
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
      const https = (config.project.https || info.httpsUrls) && info.https.port !== undefined
      const port = https ? info.https.port : info.http.port
      if (port === undefined) return undefined
      return {
        scheme: https ? "https" : "http",
        port,
        domain: config.project.domain,
        project: projectLabel(project),
        world,
        caPath: config.project.https && ca !== undefined ? caPath : undefined
      }
    }

    const setPorts = Effect.fn("Router.setPorts")(function* (p: {
      readonly http?: PortChoice | undefined
      readonly https?: PortChoice | undefined
      readonly httpsUrls?: boolean | undefined
    }) {
      if (p.http !== undefined) yield* registry.setSetting(HTTP_SETTING, p.http)
      if (p.https !== undefined) yield* registry.setSetting(HTTPS_SETTING, p.https)
      if (p.httpsUrls !== undefined) yield* registry.setSetting(HTTPS_URLS_SETTING, p.httpsUrls)
      yield* start
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
      /** rebuilds the route table now */
      refresh
    } as const
  }),
  dependencies: []
}) {}
