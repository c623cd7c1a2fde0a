/**
 * The proxy on `node:http`: every HTTP/1.1 connection the fast path hands over because it is unusual (plain, or over
 * TLS through node:http2's HTTP/1.1 fallback), WebSockets on those, and the routing and headers the h2 path
 * (`h2.ts`) shares. Bodies stream both ways; the backend pool is a keep-alive agent. A world another machine runs has
 * that machine's proxy as its backend (plain HTTP/1.1 to its cluster listener, Host kept), so HTTPS ends here and
 * the peer sees `X-Forwarded-Proto: https`.
 */
import type * as http from "node:http"
import * as httpModule from "node:http"
import type * as net from "node:net"
import type * as stream from "node:stream"
import {
  choose,
  loopPage,
  lookup,
  notFoundPage,
  type PageModel,
  type RouteTable,
  type RouteTarget,
  type Unavailable,
  unavailablePage,
  wakeIfSuspended
} from "../../domain/routes.js"
import type { Backends, DialCallback } from "./backends.js"
import { HOP_HEADER } from "./http1.js"
import { rawResponse, reasonPhrase, renderPage } from "./pages.js"

export interface Engine {
  readonly routes: () => RouteTable
  readonly hopLimit: number
  readonly backends: Backends
}

type Request = http.IncomingMessage
type Response = http.ServerResponse
type Proto = "http" | "https"

/** Hop-by-hop request and response headers, plus what HTTP/2 forbids. */
export const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
  "host",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  HOP_HEADER
])

export const firstValue = (v: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof v === "string" ? v : v?.[0]

export const parseHops = (v: string | ReadonlyArray<string> | undefined): number => {
  const n = Number.parseInt(firstValue(v) ?? "", 10)
  return Number.isFinite(n) && n > 0 ? n : 0
}

const authorityOf = (req: Request): string | undefined =>
  firstValue(req.headers[":authority"]) ?? firstValue(req.headers.host)

const connectionNamed = (req: Request): Set<string> => {
  const named = new Set<string>()
  const value = req.headers.connection
  for (const v of typeof value === "string" ? [value] : (value ?? [])) {
    for (const t of v.split(",")) named.add(t.trim().toLowerCase())
  }
  named.delete("content-length")
  return named
}

/** The request headers for the backend: hop-by-hop out, Host from `:authority`, X-Forwarded-* and hops in. */
export const backendHeaders = (req: Request, proto: Proto, hops: number): Record<string, string | Array<string>> => {
  const named = connectionNamed(req)
  const out: Record<string, string | Array<string>> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(":") || HOP_BY_HOP.has(name) || named.has(name)) continue
    if (name.startsWith("proxy-")) continue
    out[name] = name === "cookie" && Array.isArray(value) ? value.join("; ") : value
  }
  const host = authorityOf(req)
  if (host !== undefined) {
    out.host = host
    out["x-forwarded-host"] = host
  }
  const previous = req.headers["x-forwarded-for"]
  const client = req.socket?.remoteAddress ?? ""
  out["x-forwarded-for"] = previous === undefined ? client : `${[previous].flat().join(", ")}, ${client}`
  out["x-forwarded-proto"] = proto
  out[HOP_HEADER] = String(hops + 1)
  return out
}

export const responseHeaders = (res: http.IncomingMessage): Record<string, string | Array<string>> => {
  const named = new Set<string>()
  for (const t of (res.headers.connection ?? "").split(",")) named.add(t.trim().toLowerCase())
  const out: Record<string, string | Array<string>> = {}
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name) || name.startsWith("proxy-")) continue
    out[name] = value
  }
  return out
}

const localPort = (req: Request): number => req.socket?.localPort ?? 0

/** Answers with an error page (HTML or text by Accept). */
export const sendPage = (req: Request, res: Response, page: PageModel): void => {
  const rendered = renderPage(page, firstValue(req.headers.accept))
  if (res.headersSent) {
    res.destroy()
    return
  }
  const headers = {
    "content-type": rendered.contentType,
    "content-length": String(rendered.body.length),
    "cache-control": "no-store",
    ...(rendered.retryAfter === undefined ? {} : { "retry-after": String(rendered.retryAfter) })
  }
  res.writeHead(rendered.status, headers)
  if (req.method === "HEAD") res.end()
  else res.end(rendered.body)
}

export type Routed =
  | { readonly _tag: "Page"; readonly page: PageModel }
  | {
      readonly _tag: "Go"
      readonly port: number
      /** a peer's proxy at this address; undefined: a local service */
      readonly address: string | undefined
      readonly hops: number
      readonly unavailable: (reason: Unavailable) => PageModel
      /** notes the local service's answer (a passed liveness probe); undefined for a peer's proxy */
      readonly answered: (() => void) | undefined
      /** the local service, counted (`seen`) per request; undefined for a peer's proxy */
      readonly local: RouteTarget | undefined
    }

/** Where a request goes, or the page that answers it; `localPort`: the listener's, for the pages' links. */
export const route = (
  engine: Engine,
  authority: string | undefined,
  hops: number,
  proto: Proto,
  localPort: number
): Routed => {
  const table = engine.routes()
  const found = lookup(table, authority)
  const origin = { scheme: proto, port: localPort } as const
  if (hops >= engine.hopLimit) return { _tag: "Page", page: loopPage(found.host, hops) }
  if (found._tag === "UnknownHost") return { _tag: "Page", page: notFoundPage(table, found, origin) }
  const target = found.target
  // a remote target's pages are 503s that say so (see `unavailablePage`)
  const unavailable = (reason: Unavailable) => unavailablePage(table, found.host, target, reason, origin)
  // connections from peers never come here (the cluster listener keeps to the fast path)
  const choice = choose(target, false)
  const remote = target.remote
  if (choice === "forward" && remote !== undefined) {
    return {
      _tag: "Go",
      port: remote.port,
      address: remote.address,
      hops,
      unavailable,
      answered: undefined,
      local: undefined
    }
  }
  if (choice !== "local" || target.port === undefined) {
    // a remote world's id is its owner's to use: that machine wakes it when a request reaches it
    if (remote === undefined) wakeIfSuspended(table, target)
    return { _tag: "Page", page: unavailable("not-ready") }
  }
  table.seen?.(target)
  const answered = table.answered === undefined ? undefined : () => table.answered?.(target)
  return { _tag: "Go", port: target.port, address: undefined, hops, unavailable, answered, local: target }
}

export type Go = Extract<Routed, { _tag: "Go" }>

/** A request's route, from its headers and the connection it came on. */
const routeRequest = (engine: Engine, req: Request, proto: Proto): Routed =>
  route(engine, authorityOf(req), parseHops(req.headers[HOP_HEADER]), proto, localPort(req))

/** A connection to where a routed request goes: the local service, or the owner machine's proxy. */
export const dialFor = (engine: Engine, routed: Go, callback: DialCallback, onread?: net.OnReadOpts): void => {
  if (routed.address === undefined) engine.backends.dial(routed.port, callback, onread)
  else engine.backends.dialRemote(routed.address, routed.port, callback, onread)
}

/** A peer's proxy reads origin-form targets only: an absolute-form one (`http://host/path`) becomes its path. */
export const originForm = (url: string | undefined): string => {
  if (url === undefined || url === "") return "/"
  if (url.startsWith("/") || url === "*") return url
  try {
    const parsed = new URL(url)
    return `${parsed.pathname}${parsed.search}`
  } catch {
    return url
  }
}

export const failureReason = (error: NodeJS.ErrnoException): Unavailable =>
  error.code === "ECONNREFUSED" || error.code === "ETIMEDOUT" ? "refused" : "closed"

/** Requests that may be sent again when a pooled backend connection turns out to be closed. */
export const REPLAYABLE = new Set(["GET", "HEAD", "OPTIONS"])
const STALE_SOCKET = new Set(["ECONNRESET", "EPIPE"])

const hasBody = (req: Request): boolean => {
  const length = req.headers["content-length"]
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined
}

/** A normal HTTP/1.1 request. */
export const handleRequest = (engine: Engine, proto: Proto) => (req: Request, res: Response) => {
  const routed = routeRequest(engine, req, proto)
  if (routed._tag === "Page") {
    // the body is not wanted; drain it so the connection can be reused
    req.resume()
    return sendPage(req, res, routed.page)
  }
  const headers = backendHeaders(req, proto, routed.hops)
  const replayable = REPLAYABLE.has(req.method ?? "") && !hasBody(req)
  const send = (mayRetry: boolean): http.ClientRequest => {
    const remote = routed.address !== undefined
    const upstream = httpModule.request({
      agent: remote ? engine.backends.remoteAgent : engine.backends.agent,
      host: routed.address ?? "localhost",
      port: routed.port,
      method: req.method,
      path: remote ? originForm(req.url) : req.url,
      headers,
      setHost: false
    })
    upstream.on("response", (answer) => {
      const status = answer.statusCode ?? 502
      if (status < 500) routed.answered?.()
      try {
        res.writeHead(status, responseHeaders(answer))
      } catch {
        // a header HTTP/2 (or node) will not carry: the response cannot be passed on
        answer.destroy()
        sendPage(req, res, routed.unavailable("closed"))
        return
      }
      // server-sent events and other streams: the head goes out before the first body byte
      if (answer.headers["content-length"] === undefined) res.flushHeaders()
      answer.on("error", () => res.destroy())
      answer.on("aborted", () => res.destroy())
      answer.pipe(res)
    })
    upstream.on("error", (error: NodeJS.ErrnoException) => {
      // the pool handed out a connection the backend had just closed: once more on a new one
      if (mayRetry && upstream.reusedSocket && !res.headersSent && STALE_SOCKET.has(error.code ?? "")) {
        current = send(false)
        return
      }
      if (!res.headersSent) sendPage(req, res, routed.unavailable(failureReason(error)))
      else res.destroy()
    })
    if (replayable) {
      req.resume()
      upstream.end()
    } else {
      req.pipe(upstream)
    }
    return upstream
  }
  let current = send(replayable)
  res.on("close", () => {
    if (!res.writableFinished) current.destroy()
  })
  req.on("error", () => current.destroy())
}

/** The head of an HTTP/1.1 request, as text, from node's parsed request. */
const requestHeadText = (method: string, path: string, headers: Record<string, string | Array<string>>): string => {
  let out = `${method} ${path} HTTP/1.1\r\n`
  for (const [name, value] of Object.entries(headers)) {
    for (const v of Array.isArray(value) ? value : [value]) out += `${name}: ${v}\r\n`
  }
  return `${out}\r\n`
}

const writePageAndClose = (socket: stream.Duplex, req: Request, page: PageModel): void => {
  const rendered = renderPage(page, firstValue(req.headers.accept))
  socket.end(rawResponse(rendered, { close: true, head: false }))
}

const pipeBoth = (a: stream.Duplex, b: stream.Duplex): void => {
  a.pipe(b)
  b.pipe(a)
  const done = () => {
    a.destroy()
    b.destroy()
  }
  a.on("error", done)
  b.on("error", done)
  a.on("close", done)
  b.on("close", done)
}

/** An HTTP/1.1 upgrade (WebSocket) on a connection node:http holds: the backend gets the upgrade, then a raw pipe. */
export const handleUpgrade =
  (engine: Engine, proto: Proto) => (req: http.IncomingMessage, socket: stream.Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy())
    const routed = routeRequest(engine, req, proto)
    if (routed._tag === "Page") return writePageAndClose(socket, req, routed.page)
    const headers = backendHeaders(req, proto, routed.hops)
    const upgrade = firstValue(req.headers.upgrade) ?? "websocket"
    headers.connection = "upgrade"
    headers.upgrade = upgrade
    dialFor(engine, routed, (error, backend) => {
      if (socket.destroyed) return backend?.destroy()
      if (error !== undefined || backend === undefined) {
        return writePageAndClose(socket, req, routed.unavailable(failureReason(error ?? new Error("no socket"))))
      }
      const path = routed.address === undefined ? (req.url ?? "/") : originForm(req.url)
      backend.write(requestHeadText(req.method ?? "GET", path, headers), "latin1")
      if (head.length > 0) backend.write(head)
      pipeBoth(socket, backend)
    })
  }

/** A plain `CONNECT host:port` over HTTP/1.1: berth is not a forward proxy. */
export const refuseConnect = (socket: stream.Duplex): void => {
  socket.on("error", () => socket.destroy())
  const body = "berth's proxy routes by Host; it is not a forward proxy\n"
  socket.end(
    `HTTP/1.1 405 ${reasonPhrase(405)}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}
