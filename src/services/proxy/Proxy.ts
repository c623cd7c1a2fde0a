/**
 * berth's machine-wide proxy: `http://<service>.<world>.<project>.<domain>[:port]` → the service's port, and the
 * same over HTTPS (h2 and HTTP/1.1 by ALPN) with leaf certificates from berth's CA minted on SNI.
 *
 * HTTP/1.1 takes the fast path (`fast.ts`): it reads request heads itself and pins each client connection to one
 * backend connection, which is what makes it fast — on a raw `net` server for plain HTTP, and on the TLS socket once
 * ALPN chose HTTP/1.1 (or the client offered nothing). h2 is berth's own HTTP/2 on the TLS socket (`h2conn.ts`,
 * with `hpack.ts`; node:http2's core API when the fast path is off), forwarded over a pool of keep-alive backend
 * connections (`h2.ts`); the rare HTTP/1.1 request the fast path does not take goes through
 * `node:http` (`slow.ts`). All read the route table the daemon last gave `setRoutes`: one `Map` lookup per request,
 * no disk.
 *
 * The HTTP and the HTTPS listener stand or fall separately: each is bound, moved or closed on its own
 * (`listen`, `close`), and a failed bind leaves whatever listened before as it was. Listens on loopback only
 * (127.0.0.1 and ::1 where the machine has IPv6); everything it opened — listeners, client and backend connections,
 * the backend pool — closes with its scope.
 *
 * Slow clients are cut everywhere: a request head must arrive whole within `headMs` (a TLS handshake too), and a
 * connection with nothing in flight is closed after `idleMs`.
 *
 * In a cluster of machines, a route may name a world another machine runs (`RouteTarget.remote`): its requests go
 * to that machine's proxy, to its *cluster listener* — one more listener, on the one address it is given (the
 * machine's cluster address), that takes connections only from the peers it is told of and serves only this
 * machine's own worlds (`listenCluster`).
 */
import * as http from "node:http"
import * as http2 from "node:http2"
import * as net from "node:net"
import type * as stream from "node:stream"
import type * as tls from "node:tls"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { defaultDomain, emptyRouteTable, type RouteTable } from "../../domain/routes.js"
import { Backends } from "./backends.js"
import { type CertificateAuthority, isPermittedName } from "./ca.js"
import { FastConnection, IdleSweep } from "./fast.js"
import { H2Proxy } from "./h2.js"
import { type Engine, handleRequest, handleUpgrade, refuseConnect } from "./slow.js"

export const LOOPBACK_HOSTS: ReadonlyArray<string> = ["127.0.0.1", "::1"]
/** More hops than this through berth's proxy is a loop: 508. */
export const DEFAULT_HOP_LIMIT = 10

export type Scheme = "http" | "https"
/** What a listener serves: plain HTTP or HTTPS on loopback, or peers' forwarded requests on the cluster address. */
export type ListenerKind = Scheme | "cluster"

export class ProxyError extends Data.TaggedError("ProxyError")<{
  readonly scheme: ListenerKind
  readonly host: string
  readonly port: number
  /** the system's error code, e.g. EADDRINUSE */
  readonly code: string
  /** berth's own listener of this scheme holds the port */
  readonly heldBy?: Scheme | undefined
}> {
  override get message(): string {
    return bindFailureMessage(this.scheme, this.host, this.port, this.code, this.heldBy)
  }
}

/** What a failed bind means for a person, naming the port and the setting that moves it. */
export const bindFailureMessage = (
  scheme: ListenerKind,
  host: string,
  port: number,
  code: string,
  heldBy?: Scheme
): string => {
  if (scheme === "cluster") {
    const where = `${host} port ${port} for berth's cluster listener`
    if (code === "EADDRINUSE") return `${where} is already in use by another program`
    if (code === "EADDRNOTAVAIL") return `${where}: no interface of this machine has that address`
    if (code === "EINVAL") return `${where}: the cluster listener needs one IP address of this machine, and a port`
    return `cannot listen on ${where}: ${code}`
  }
  const option = scheme === "http" ? "--proxy" : "--https"
  const where = `port ${port} (${host}) for the ${scheme.toUpperCase()} proxy`
  if (heldBy !== undefined) {
    return `port ${port} is berth's own ${heldBy.toUpperCase()} proxy port\n  hint: choose another port for the ${scheme.toUpperCase()} proxy with \`berth port ${option} P\``
  }
  if (code === "EADDRINUSE") {
    return `${where} is already in use by another program\n  hint: stop it, or choose another port with \`berth port ${option} P\``
  }
  if (code === "EACCES" || code === "EPERM") {
    return `berth may not listen on ${where}: ports below 1024 need root or the CAP_NET_BIND_SERVICE capability\n  hint: choose another port with \`berth port ${option} P\``
  }
  return `cannot listen on ${where}: ${code}`
}

/** The whole request head (and a TLS handshake) must arrive within this; a slow drip is cut. */
export const HEAD_TIMEOUT_MS = 20_000
/** A connection with nothing in flight is closed after this long. */
export const IDLE_TIMEOUT_MS = 30_000

export type ListenerSpec =
  | { readonly scheme: "http"; readonly port: number; readonly hosts?: ReadonlyArray<string> }
  | {
      readonly scheme: "https"
      readonly port: number
      readonly hosts?: ReadonlyArray<string>
      readonly ca: CertificateAuthority
    }

/** Where peers' proxies reach this one: one address of this machine, and the peers that may connect. */
export interface ClusterListenerSpec {
  /** An IP address of this machine (never a wildcard such as 0.0.0.0 or ::). */
  readonly host: string
  /** 0: any free port */
  readonly port: number
  /** The peers' addresses, as their connections come from; a connection from any other is closed at once. */
  readonly peers: ReadonlyArray<string>
}

export interface ClusterListenerInfo {
  readonly host: string
  readonly port: number
  readonly peers: ReadonlyArray<string>
  /** Connections closed at once since the proxy started: they came from no peer. */
  readonly refused: number
}

export interface ProxyOptions {
  /** Listens for plain HTTP at once (or later through `listen`). */
  readonly http?: { readonly port: number; readonly hosts?: ReadonlyArray<string> }
  /** Listens for HTTPS at once (or later through `listen`). */
  readonly https?: {
    readonly port: number
    readonly hosts?: ReadonlyArray<string>
    readonly ca: CertificateAuthority
  }
  /** Host names end in `.<domain>`; the bare domain's certificate is the one for names berth does not route. */
  readonly domain?: string
  /** The first route table (default: empty). */
  readonly routes?: RouteTable
  readonly hopLimit?: number
  /** false: plain HTTP goes through node:http as well (for comparisons). Default true. */
  readonly fastPath?: boolean
  /** Default `HEAD_TIMEOUT_MS`, `IDLE_TIMEOUT_MS`, `REMOTE_CONNECT_TIMEOUT_MS`, `REMOTE_PROBE_MS`; tests shorten them. */
  readonly timeouts?: {
    readonly headMs?: number
    readonly idleMs?: number
    readonly remoteConnectMs?: number
    readonly remoteProbeMs?: number
  }
  /** Listens for peers' proxies at once (or later through `listenCluster`). */
  readonly cluster?: ClusterListenerSpec
}

export interface ProxyHandle {
  /** The bound ports (the real ones when 0 was asked for); undefined where nothing listens. */
  readonly ports: { readonly http: number | undefined; readonly https: number | undefined }
  /** Swaps the route table at once: requests in flight keep the backend they have; the next ones see the new table. */
  readonly setRoutes: (table: RouteTable) => void
  readonly routes: () => RouteTable
  /**
   * Listens for `spec.scheme` on `spec.port`, never touching the other scheme's listener. Where it already listens
   * on that port (or any port, for 0), nothing changes. Otherwise the new port is bound first and the old listener
   * closed after, so a failure leaves the old one serving. Connections already open finish on their own.
   */
  readonly listen: (spec: ListenerSpec) => Effect.Effect<number, ProxyError>
  /** Stops listening for `scheme`; its open connections finish (or idle out). */
  readonly close: (scheme: Scheme) => Effect.Effect<void>
  /**
   * Listens for peers' proxies on `spec.host`:`spec.port` only. Where it already listens there (or anywhere on that
   * host, for port 0), only the peers change, at once. Otherwise the new address is bound first and the old
   * listener closed after, so a failure leaves the old one serving. Fails without binding for a host that is not
   * one IP address (a wildcard included).
   */
  readonly listenCluster: (spec: ClusterListenerSpec) => Effect.Effect<number, ProxyError>
  /** Stops listening for peers; their open connections finish (or idle out). */
  readonly closeCluster: Effect.Effect<void>
  /** The cluster listener, when there is one. */
  readonly cluster: () => ClusterListenerInfo | undefined
}

type Listener = net.Server | http2.Http2SecureServer

const NO_ADDRESS_FAMILY = new Set(["EADDRNOTAVAIL", "EAFNOSUPPORT"])

const listenOn = (server: Listener, host: string, port: number) =>
  Effect.async<number, NodeJS.ErrnoException>((resume) => {
    const onError = (error: NodeJS.ErrnoException) => {
      server.removeListener("listening", onListening)
      resume(Effect.fail(error))
    }
    const onListening = () => {
      server.removeListener("error", onError)
      const address = server.address()
      resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : port))
    }
    server.once("error", onError)
    server.once("listening", onListening)
    server.listen({ port, host, exclusive: true })
  })

/**
 * Binds one server per host on one port. With port 0 the first host picks the port and the others follow it
 * (retrying when the other family has it taken). A host of a family the machine lacks is skipped. On failure
 * every server it bound is closed again.
 */
const listenAll = (scheme: ListenerKind, make: () => Listener, hosts: ReadonlyArray<string>, port: number) =>
  Effect.gen(function* () {
    for (let attempt = 0; ; attempt++) {
      const mine: Array<Listener> = []
      let bound = port
      let failure: ProxyError | undefined
      for (const host of hosts) {
        const server = make()
        const result = yield* Effect.either(listenOn(server, host, bound))
        if (result._tag === "Right") {
          server.on("error", () => {})
          mine.push(server)
          bound = result.right
          continue
        }
        const code = result.left.code ?? "UNKNOWN"
        if (NO_ADDRESS_FAMILY.has(code)) continue
        failure = new ProxyError({ scheme, host, port: bound, code })
        break
      }
      if (failure === undefined && mine.length > 0) return { port: bound, servers: mine }
      for (const server of mine) server.close()
      if (failure === undefined) {
        return yield* new ProxyError({ scheme, host: hosts.join(", "), port, code: "EADDRNOTAVAIL" })
      }
      // port 0: the port the first family got may be taken in the other; pick again
      if (port === 0 && mine.length > 0 && failure.code === "EADDRINUSE" && attempt < 20) continue
      return yield* failure
    }
  })

const closeServer = (server: Listener) =>
  Effect.async<void>((resume) => {
    if (!server.listening) return resume(Effect.void)
    server.close(() => resume(Effect.void))
  })

/** Closes idle HTTP/2 sessions: no stream open and no frame for `idleMs` (a HEADERS frame dripped never completes). */
const watchSession = (idleMs: number) => (session: http2.ServerHttp2Session) => {
  let open = 0
  const closed = () => {
    open--
  }
  session.on("stream", (stream: http2.ServerHttp2Stream) => {
    open++
    stream.once("close", closed)
  })
  session.setTimeout(idleMs)
  // a stream waiting for its backend is not idleness; the timer fires again after the next frame
  session.on("timeout", () => {
    if (open === 0) session.destroy()
  })
}

/**
 * The cluster listener's address as node binds it, or undefined when `host` is not one IP address of a single
 * interface: a wildcard (0.0.0.0, ::) would listen everywhere, a name could resolve to anything.
 */
export const clusterHost = (host: string): string | undefined => {
  const family = net.isIP(host)
  if (family === 0) return undefined
  const probe = new net.BlockList()
  probe.addAddress(family === 4 ? "0.0.0.0" : "::", family === 4 ? "ipv4" : "ipv6")
  return probe.check(host, family === 4 ? "ipv4" : "ipv6") ? undefined : host
}

/** The peers as a list (what was given, IP addresses only: nothing else can match a connection) and a matcher. */
export const peerList = (given: ReadonlyArray<string>): { list: ReadonlyArray<string>; allowed: net.BlockList } => {
  const allowed = new net.BlockList()
  const list: Array<string> = []
  for (const peer of given) {
    const family = net.isIP(peer)
    if (family === 0) continue
    allowed.addAddress(peer, family === 4 ? "ipv4" : "ipv6")
    list.push(peer)
  }
  return { list, allowed }
}

/** Whether a connection from `address` comes from a peer (an IPv4 peer matches its IPv4-mapped IPv6 form too). */
export const isPeer = (allowed: net.BlockList, address: string | undefined): boolean => {
  if (address === undefined) return false
  const family = net.isIP(address)
  return family !== 0 && allowed.check(address, family === 4 ? "ipv4" : "ipv6")
}

/** Starts the proxy in the current scope. */
export const makeProxy = Effect.fn("Proxy.make")(function* (options: ProxyOptions) {
  const domain = (options.domain ?? defaultDomain).toLowerCase()
  let table = options.routes ?? emptyRouteTable(domain)
  const hopLimit = options.hopLimit ?? DEFAULT_HOP_LIMIT
  const headMs = options.timeouts?.headMs ?? HEAD_TIMEOUT_MS
  const idleMs = options.timeouts?.idleMs ?? IDLE_TIMEOUT_MS
  // how often node looks for heads past their time
  const checkEveryMs = Math.max(100, Math.min(5_000, Math.floor(headMs / 4)))
  const backends = new Backends({
    ...(options.timeouts?.remoteConnectMs === undefined
      ? {}
      : { remoteConnectTimeoutMs: options.timeouts.remoteConnectMs }),
    ...(options.timeouts?.remoteProbeMs === undefined ? {} : { remoteProbeMs: options.timeouts.remoteProbeMs })
  })
  const engine: Engine = { routes: () => table, hopLimit, backends }
  const h2 = new H2Proxy(engine)
  const clients = new Set<stream.Duplex>()
  const track = (socket: stream.Duplex) => {
    clients.add(socket)
    socket.once("close", () => clients.delete(socket))
  }
  const listeners: Record<Scheme, { port: number; servers: ReadonlyArray<Listener> } | undefined> = {
    http: undefined,
    https: undefined
  }

  // plain HTTP: the fast path, with node:http behind it for what it hands over
  const slowHttp = http.createServer({
    keepAliveTimeout: idleMs,
    headersTimeout: headMs,
    // a big upload may take its time; only the head is timed
    requestTimeout: 0,
    connectionsCheckingInterval: checkEveryMs
  })
  // node starts timing heads when a server starts listening; this one never does (it is handed connections)
  slowHttp.emit("listening")

  let clusterListener:
    | { readonly host: string; readonly port: number; readonly servers: ReadonlyArray<Listener> }
    | undefined
  let peers = { list: [] as ReadonlyArray<string>, allowed: new net.BlockList() }
  let refusedPeers = 0

  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      const closing = [listeners.http, listeners.https, clusterListener]
        .flatMap((l) => l?.servers ?? [])
        .map(closeServer)
      listeners.http = undefined
      listeners.https = undefined
      clusterListener = undefined
      slowHttp.close()
      idle.stop()
      for (const socket of clients) socket.destroy()
      clients.clear()
      h2.destroy()
      backends.destroy()
      yield* Effect.all(closing, { concurrency: "unbounded", discard: true })
    }).pipe(
      // close callbacks wait for sessions; everything was destroyed, so this only guards against a stuck one
      Effect.timeout("3 seconds"),
      Effect.interruptible,
      Effect.ignore
    )
  )

  slowHttp.on("request", handleRequest(engine, "http"))
  slowHttp.on("upgrade", handleUpgrade(engine, "http"))
  slowHttp.on("connect", (_req: http.IncomingMessage, socket: stream.Duplex) => refuseConnect(socket))
  const fast = options.fastPath !== false
  const idle = new IdleSweep(idleMs)
  const fastContext = {
    routes: () => table,
    hopLimit,
    backends,
    headMs,
    idle,
    handOff: (socket: net.Socket) => {
      slowHttp.emit("connection", socket)
      socket.resume()
    },
    cluster: false,
    scheme: "http" as const
  }
  // peers' connections: always the fast path, which never hands them on
  const clusterContext = { ...fastContext, cluster: true }
  /** HTTP/1.1 over TLS: the fast path, handing what it does not take to node:http2's HTTP/1.1 fallback. */
  const tlsContext = (h1: (socket: tls.TLSSocket) => void) => ({
    ...fastContext,
    scheme: "https" as const,
    handOff: (socket: net.Socket) => {
      h1(socket as tls.TLSSocket)
      socket.resume()
    }
  })
  const onHttpConnection = (socket: net.Socket) => {
    track(socket)
    if (fast) new FastConnection(socket, fastContext)
    else slowHttp.emit("connection", socket)
  }
  const makeHttp = () => net.createServer({ allowHalfOpen: true, noDelay: true }, onHttpConnection)
  const onClusterConnection = (socket: net.Socket) => {
    if (!isPeer(peers.allowed, socket.remoteAddress)) {
      refusedPeers++
      socket.destroy()
      return
    }
    track(socket)
    new FastConnection(socket, clusterContext)
  }
  const makeCluster = () => net.createServer({ allowHalfOpen: true, noDelay: true }, onClusterConnection)

  const onRequest = handleRequest(engine, "https")
  const onUpgrade = handleUpgrade(engine, "https")
  const onSession = watchSession(idleMs)
  const makeHttps = (ca: CertificateAuthority) => {
    // clients that send no SNI (an IP address), and names berth does not route, get the domain's own certificate
    const fallback = ca.leaf(domain)
    const server = http2.createSecureServer({
      allowHTTP1: true,
      key: fallback.keyPem,
      cert: fallback.certPem + ca.certPem,
      settings: { enableConnectProtocol: true },
      // Without it a response's HEADERS and DATA frames, two small writes, wait on the client's delayed ACK (Nagle):
      // tens of milliseconds a request on an HTTP/2 connection
      noDelay: true,
      handshakeTimeout: headMs,
      SNICallback: (servername: string, callback: (error: Error | null, context?: tls.SecureContext) => void) => {
        const name = servername.toLowerCase()
        // A leaf only for a name the table routes, so asking for many names mints (and caches) nothing: any other
        // name shares the fallback, and the client says the name does not match — clearer than a failed handshake,
        // and a person may still go on to the 404 page, which lists the project's worlds.
        if (!table.byHost.has(name) || !isPermittedName(name)) return callback(null, undefined)
        try {
          callback(null, ca.leafFor(name))
        } catch (error) {
          callback(error instanceof Error ? error : new Error(String(error)))
        }
      }
    })
    Object.assign(server, {
      // HTTP/1.1 over TLS: a request body still arriving after 5 minutes (a big, slow upload) is not cut; the head is
      // timed, and an idle kept-alive connection closed (node sets no keep-alive time on this server)
      requestTimeout: 0,
      headersTimeout: headMs,
      keepAliveTimeout: idleMs,
      connectionsCheckingInterval: checkEveryMs
    })
    // HTTP/1.1 that node:http2 hands to node:http
    server.on("request", onRequest)
    server.on("upgrade", onUpgrade)
    server.on("connect", (_req: http.IncomingMessage, socket: stream.Duplex) => refuseConnect(socket))
    // node adds its compatibility layer's stream handler with the first 'request' listener: h2 streams go to the
    // core API instead (`h2.ts`), with no request and response objects made for each
    server.removeAllListeners("stream")
    // node:http2 hands an HTTP/1.1 connection to node:http; the fast path takes it instead, and gives node what it
    // does not take (CONNECT, absolute-form targets) through that same listener
    const [onSecure] = server.listeners("secureConnection") as Array<(socket: tls.TLSSocket) => void>
    if (fast && onSecure !== undefined) {
      const context = tlsContext((socket) => onSecure.call(server, socket))
      server.removeListener("secureConnection", onSecure)
      server.on("secureConnection", (socket: tls.TLSSocket) => {
        // h2 on berth's own HTTP/2 (`h2conn.ts`): node:http2's sessions cost more than the proxying
        if (socket.alpnProtocol === "h2") h2.onConnection(socket, idleMs)
        else new FastConnection(socket, context)
      })
    }
    server.on("connection", track)
    server.on("session", onSession)
    server.on("session", h2.onSession)
    server.on("sessionError", () => {})
    server.on("tlsClientError", () => {})
    return server
  }

  const other = (scheme: Scheme): Scheme => (scheme === "http" ? "https" : "http")

  const listen = (spec: ListenerSpec): Effect.Effect<number, ProxyError> =>
    Effect.gen(function* () {
      const hosts = spec.hosts ?? LOOPBACK_HOSTS
      const current = listeners[spec.scheme]
      if (current !== undefined && (current.port === spec.port || spec.port === 0)) return current.port
      if (spec.port !== 0 && listeners[other(spec.scheme)]?.port === spec.port) {
        return yield* new ProxyError({
          scheme: spec.scheme,
          host: hosts.join(", "),
          port: spec.port,
          code: "EADDRINUSE",
          heldBy: other(spec.scheme)
        })
      }
      const make = spec.scheme === "https" ? () => makeHttps(spec.ca) : makeHttp
      const bound = yield* listenAll(spec.scheme, make, hosts, spec.port)
      listeners[spec.scheme] = bound
      // the old port stops accepting; what it accepted finishes there
      for (const server of current?.servers ?? []) server.close()
      return bound.port
    })

  const close = (scheme: Scheme) =>
    Effect.sync(() => {
      for (const server of listeners[scheme]?.servers ?? []) server.close()
      listeners[scheme] = undefined
    })

  const listenCluster = (spec: ClusterListenerSpec): Effect.Effect<number, ProxyError> =>
    Effect.gen(function* () {
      const host = clusterHost(spec.host)
      if (host === undefined || !Number.isInteger(spec.port) || spec.port < 0 || spec.port > 65_535) {
        return yield* new ProxyError({ scheme: "cluster", host: spec.host, port: spec.port, code: "EINVAL" })
      }
      const allowed = peerList(spec.peers)
      const current = clusterListener
      if (current !== undefined && current.host === host && (current.port === spec.port || spec.port === 0)) {
        peers = allowed
        return current.port
      }
      const bound = yield* listenAll("cluster", makeCluster, [host], spec.port)
      clusterListener = { host, port: bound.port, servers: bound.servers }
      peers = allowed
      // peers know this machine by its cluster address: dials to them leave from it
      backends.source = host
      for (const server of current?.servers ?? []) server.close()
      return bound.port
    })

  const closeCluster = Effect.sync(() => {
    for (const server of clusterListener?.servers ?? []) server.close()
    clusterListener = undefined
    backends.source = undefined
  })

  if (options.http !== undefined) yield* listen({ scheme: "http", ...options.http })
  if (options.https !== undefined) yield* listen({ scheme: "https", ...options.https })
  if (options.cluster !== undefined) yield* listenCluster(options.cluster)

  const handle: ProxyHandle = {
    ports: {
      get http() {
        return listeners.http?.port
      },
      get https() {
        return listeners.https?.port
      }
    },
    setRoutes: (next) => {
      table = next
    },
    routes: () => table,
    listen,
    close,
    listenCluster,
    closeCluster,
    cluster: () =>
      clusterListener === undefined
        ? undefined
        : { host: clusterListener.host, port: clusterListener.port, peers: peers.list, refused: refusedPeers }
  }
  return handle
})
