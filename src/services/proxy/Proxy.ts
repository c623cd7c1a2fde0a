/**
 * berth's machine-wide proxy: `http://<service>.<world>.<project>.<domain>[:port]` → the service's port, and the
 * same over HTTPS (h2 and HTTP/1.1 by ALPN) with leaf certificates from berth's CA minted on SNI.
 *
 * Plain HTTP takes the fast path (`fast.ts`): a raw `net` server that reads request heads itself and pins each
 * client connection to one backend connection, which is what makes it fast. HTTPS, and the rare plain request the
 * fast path does not take, go through `node:http`/`node:http2` (`slow.ts`). Both read the route table the daemon
 * last gave `setRoutes`: one `Map` lookup per request, no disk.
 *
 * Listens on loopback only (127.0.0.1 and ::1 where the machine has IPv6); everything it opened — listeners, client
 * and backend connections, the backend pool — closes with its scope.
 */
import * as http from "node:http"
import * as http2 from "node:http2"
import * as net from "node:net"
import type * as stream from "node:stream"
import type * as tls from "node:tls"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { defaultDomain, emptyRouteTable, isUnderDomain, type RouteTable } from "../../domain/routes.js"
import { Backends } from "./backends.js"
import type { CertificateAuthority } from "./ca.js"
import { FastConnection } from "./fast.js"
import { type Engine, handleExtendedConnect, handleRequest, handleUpgrade, refuseConnect } from "./slow.js"

export const LOOPBACK_HOSTS: ReadonlyArray<string> = ["127.0.0.1", "::1"]
/** More hops than this through berth's proxy is a loop: 508. */
export const DEFAULT_HOP_LIMIT = 10

export class ProxyError extends Data.TaggedError("ProxyError")<{
  readonly scheme: "http" | "https"
  readonly host: string
  readonly port: number
  /** the system's error code, e.g. EADDRINUSE */
  readonly code: string
}> {
  override get message(): string {
    return bindFailureMessage(this.scheme, this.host, this.port, this.code)
  }
}

/** What a failed bind means for a person, naming the port and the setting that moves it. */
export const bindFailureMessage = (scheme: "http" | "https", host: string, port: number, code: string): string => {
  const option = scheme === "http" ? "--proxy" : "--https"
  const where = `port ${port} (${host}) for the ${scheme.toUpperCase()} proxy`
  if (code === "EADDRINUSE") {
    return `${where} is already in use by another program\n  hint: stop it, or choose another port with \`berth port ${option} P\``
  }
  if (code === "EACCES" || code === "EPERM") {
    return `berth may not listen on ${where}: ports below 1024 need root or the CAP_NET_BIND_SERVICE capability\n  hint: choose another port with \`berth port ${option} P\``
  }
  return `cannot listen on ${where}: ${code}`
}

export interface ProxyOptions {
  readonly http: { readonly port: number; readonly hosts?: ReadonlyArray<string> }
  readonly https?: {
    readonly port: number
    readonly hosts?: ReadonlyArray<string>
    readonly ca: CertificateAuthority
  }
  /** Host names end in `.<domain>`; certificates are minted only under it. Default `localhost`. */
  readonly domain?: string
  /** The first route table (default: empty). */
  readonly routes?: RouteTable
  readonly hopLimit?: number
  /** false: plain HTTP goes through node:http as well (for comparisons). Default true. */
  readonly fastPath?: boolean
}

export interface ProxyHandle {
  /** The bound ports (the real ones when 0 was asked for). */
  readonly ports: { readonly http: number; readonly https: number | undefined }
  /** Swaps the route table at once: requests in flight keep the backend they have; the next ones see the new table. */
  readonly setRoutes: (table: RouteTable) => void
  readonly routes: () => RouteTable
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
 * (retrying when the other family has it taken). A host of a family the machine lacks is skipped.
 */
const listenAll = (
  scheme: "http" | "https",
  make: () => Listener,
  hosts: ReadonlyArray<string>,
  port: number,
  opened: Array<Listener>
) =>
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
          opened.push(server)
          bound = result.right
          continue
        }
        const code = result.left.code ?? "UNKNOWN"
        if (NO_ADDRESS_FAMILY.has(code)) continue
        failure = new ProxyError({ scheme, host, port: bound, code })
        break
      }
      if (failure === undefined && mine.length > 0) return bound
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

/** Starts the proxy in the current scope. */
export const makeProxy = Effect.fn("Proxy.make")(function* (options: ProxyOptions) {
  const domain = (options.domain ?? defaultDomain).toLowerCase()
  let table = options.routes ?? emptyRouteTable(domain)
  const hopLimit = options.hopLimit ?? DEFAULT_HOP_LIMIT
  const backends = new Backends()
  const engine: Engine = { routes: () => table, hopLimit, backends }
  const clients = new Set<stream.Duplex>()
  const track = (socket: stream.Duplex) => {
    clients.add(socket)
    socket.once("close", () => clients.delete(socket))
  }
  const opened: Array<Listener> = []

  yield* Effect.addFinalizer(() =>
    Effect.gen(function* () {
      const closing = opened.map(closeServer)
      for (const socket of clients) socket.destroy()
      clients.clear()
      backends.destroy()
      yield* Effect.all(closing, { concurrency: "unbounded", discard: true })
    }).pipe(
      // close callbacks wait for sessions; everything was destroyed, so this only guards against a stuck one
      Effect.timeout("3 seconds"),
      Effect.interruptible,
      Effect.ignore
    )
  )

  // plain HTTP: the fast path, with node:http behind it for what it hands over
  const slowHttp = http.createServer({ keepAliveTimeout: 5_000 })
  slowHttp.on("request", handleRequest(engine, "http"))
  slowHttp.on("upgrade", handleUpgrade(engine, "http"))
  slowHttp.on("connect", (_req: http.IncomingMessage, socket: stream.Duplex) => refuseConnect(socket))
  const fast = options.fastPath !== false
  const fastContext = {
    routes: () => table,
    hopLimit,
    backends,
    handOff: (socket: net.Socket) => {
      slowHttp.emit("connection", socket)
      socket.resume()
    }
  }
  const onHttpConnection = (socket: net.Socket) => {
    track(socket)
    if (fast) new FastConnection(socket, fastContext)
    else slowHttp.emit("connection", socket)
  }
  const httpPort = yield* listenAll(
    "http",
    () => net.createServer({ allowHalfOpen: true, noDelay: true }, onHttpConnection),
    options.http.hosts ?? LOOPBACK_HOSTS,
    options.http.port,
    opened
  )

  let httpsPort: number | undefined
  const https = options.https
  if (https !== undefined) {
    const ca = https.ca
    const fallback = ca.leaf(domain)
    const onRequest = handleRequest(engine, "https")
    const onUpgrade = handleUpgrade(engine, "https")
    const onExtendedConnect = handleExtendedConnect(engine)
    const make = () => {
      const server = http2.createSecureServer({
        allowHTTP1: true,
        // clients that send no SNI (an IP address) get the domain's own certificate
        key: fallback.keyPem,
        cert: fallback.certPem + ca.certPem,
        settings: { enableConnectProtocol: true },
        SNICallback: (servername: string, callback: (error: Error | null, context?: tls.SecureContext) => void) => {
          const name = servername.toLowerCase()
          // the domain's names, and the hosts of projects routed under a domain of their own
          if (!isUnderDomain(name, domain) && !table.byHost.has(name)) return callback(null, undefined)
          try {
            callback(null, ca.leafFor(name))
          } catch (error) {
            callback(error instanceof Error ? error : new Error(String(error)))
          }
        }
      })
      // HTTP/1.1 over TLS would cut a request body still arriving after 5 minutes (a big, slow upload)
      Object.assign(server, { requestTimeout: 0 })
      server.on("request", onRequest)
      server.on("upgrade", onUpgrade)
      server.on("connect", (req: http2.Http2ServerRequest | http.IncomingMessage, second: unknown) => {
        if (req.httpVersionMajor === 2) {
          onExtendedConnect(req as http2.Http2ServerRequest, second as http2.Http2ServerResponse)
        } else {
          refuseConnect(second as stream.Duplex)
        }
      })
      server.on("connection", track)
      server.on("sessionError", () => {})
      server.on("tlsClientError", () => {})
      return server
    }
    httpsPort = yield* listenAll("https", make, https.hosts ?? LOOPBACK_HOSTS, https.port, opened)
  }

  const handle: ProxyHandle = {
    ports: { http: httpPort, https: httpsPort },
    setRoutes: (next) => {
      table = next
    },
    routes: () => table
  }
  return handle
})
