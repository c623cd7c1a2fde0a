/**
 * The proxy on `node:http`/`node:http2`: HTTPS (h2 and HTTP/1.1), WebSockets over both (RFC 8441 extended CONNECT
 * on h2, bridged to an HTTP/1.1 upgrade), the error pages, and every plain-HTTP connection the fast path hands over
 * because it is unusual. Bodies stream both ways; the backend pool is a keep-alive agent. A world another machine
 * runs has that machine's proxy as its backend (plain HTTP/1.1 to its cluster listener, Host kept), so HTTPS and h2
 * end here and the peer sees `X-Forwarded-Proto: https`.
 */
import * as crypto from "node:crypto"
import type * as http from "node:http"
import * as httpModule from "node:http"
import type * as http2 from "node:http2"
import type * as net from "node:net"
import type * as stream from "node:stream"
import {
  choose,
  loopPage,
  lookup,
  notFoundPage,
  type PageModel,
  type RouteTable,
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

type Request = http.IncomingMessage | http2.Http2ServerRequest
type Response = http.ServerResponse | http2.Http2ServerResponse
type Proto = "http" | "https"

/** Hop-by-hop request and response headers, plus what HTTP/2 forbids. */
const HOP_BY_HOP = new Set([
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

const firstValue = (v: string | ReadonlyArray<string> | undefined): string | undefined =>
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

const responseHeaders = (res: http.IncomingMessage): Record<string, string | Array<string>> => {
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
  ;(res as http.ServerResponse).writeHead(rendered.status, headers)
  if (req.method === "HEAD") res.end()
  else res.end(rendered.body)
}

type Routed =
  | { readonly _tag: "Page"; readonly page: PageModel }
  | {
      readonly _tag: "Go"
      readonly port: number
      /** a peer's proxy at this address; undefined: a local service */
      readonly address: string | undefined
      readonly hops: number
      readonly unavailable: (reason: Unavailable) => PageModel
    }

/** Where a request goes, or the page that answers it. */
const route = (engine: Engine, req: Request, proto: Proto): Routed => {
  const hops = parseHops(req.headers[HOP_HEADER])
  const authority = authorityOf(req)
  const table = engine.routes()
  const found = lookup(table, authority)
  const origin = { scheme: proto, port: localPort(req) } as const
  if (hops >= engine.hopLimit) return { _tag: "Page", page: loopPage(found.host, hops) }
  if (found._tag === "UnknownHost") return { _tag: "Page", page: notFoundPage(table, found, origin) }
  const target = found.target
  // a remote target's pages are 503s that say so (see `unavailablePage`)
  const unavailable = (reason: Unavailable) => unavailablePage(table, found.host, target, reason, origin)
  // connections from peers never come here (the cluster listener keeps to the fast path)
  const choice = choose(target, false)
  const remote = target.remote
  if (choice === "forward" && remote !== undefined) {
    return { _tag: "Go", port: remote.port, address: remote.address, hops, unavailable }
  }
  if (choice !== "local" || target.port === undefined) {
    // a remote world's id is its owner's to use: that machine wakes it when a request reaches it
    if (remote === undefined) wakeIfSuspended(table, target)
    return { _tag: "Page", page: unavailable("not-ready") }
  }
  table.seen?.(target)
  return { _tag: "Go", port: target.port, address: undefined, hops, unavailable }
}

type Go = Extract<Routed, { _tag: "Go" }>

/** A connection to where a routed request goes: the local service, or the owner machine's proxy. */
const dialFor = (engine: Engine, routed: Go, callback: DialCallback): void => {
  if (routed.address === undefined) engine.backends.dial(routed.port, callback)
  else engine.backends.dialRemote(routed.address, routed.port, callback)
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

const failureReason = (error: NodeJS.ErrnoException): Unavailable =>
  error.code === "ECONNREFUSED" || error.code === "ETIMEDOUT" ? "refused" : "closed"

/** Requests that may be sent again when a pooled backend connection turns out to be closed. */
const REPLAYABLE = new Set(["GET", "HEAD", "OPTIONS"])
const STALE_SOCKET = new Set(["ECONNRESET", "EPIPE"])

const hasBody = (req: Request): boolean => {
  const length = req.headers["content-length"]
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined
}

/** A normal request (either protocol). */
export const handleRequest = (engine: Engine, proto: Proto) => (req: Request, res: Response) => {
  const routed = route(engine, req, proto)
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
      try {
        ;(res as http.ServerResponse).writeHead(status, responseHeaders(answer))
      } catch {
        // a header HTTP/2 (or node) will not carry: the response cannot be passed on
        answer.destroy()
        sendPage(req, res, routed.unavailable("closed"))
        return
      }
      // server-sent events and other streams: the head goes out before the first body byte
      if (answer.headers["content-length"] === undefined) (res as http.ServerResponse).flushHeaders()
      answer.on("error", () => res.destroy())
      answer.on("aborted", () => res.destroy())
      answer.pipe(res as stream.Writable)
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
    const routed = route(engine, req, proto)
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

/**
 * RFC 8441: a WebSocket over an HTTP/2 stream (`CONNECT` with `:protocol websocket`). The backend speaks HTTP/1.1,
 * so the proxy makes a classic upgrade with its own key, answers the stream 200 when the backend switches, and then
 * pipes the frames (WebSocket frames are the same bytes on both).
 */
export const handleExtendedConnect =
  (engine: Engine) => (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    const protocol = firstValue(req.headers[":protocol"])
    if (protocol === undefined) {
      res.writeHead(405, { "content-type": "text/plain; charset=utf-8" })
      res.end("CONNECT is not supported by berth's proxy\n")
      return
    }
    const routed = route(engine, req, "https")
    if (routed._tag === "Page") return sendPage(req, res, routed.page)
    const headers = backendHeaders(req, "https", routed.hops)
    delete headers["sec-websocket-key"]
    Object.assign(headers, {
      connection: "upgrade",
      upgrade: protocol,
      "sec-websocket-key": crypto.randomBytes(16).toString("base64"),
      "sec-websocket-version": firstValue(req.headers["sec-websocket-version"]) ?? "13"
    })
    const upstream = httpModule.request({
      createConnection: (_options: unknown, callback: (e: Error | null, s: net.Socket) => void) => {
        dialFor(engine, routed, (error, socket) => callback(error ?? null, socket!))
        return undefined as unknown as net.Socket
      },
      host: "localhost",
      port: routed.port,
      method: "GET",
      path: req.url,
      headers,
      setHost: false
    })
    upstream.on("upgrade", (answer: http.IncomingMessage, backend: net.Socket, rest: Buffer) => {
      const out: Record<string, string> = {}
      for (const name of ["sec-websocket-protocol", "sec-websocket-extensions"]) {
        const v = firstValue(answer.headers[name])
        if (v !== undefined) out[name] = v
      }
      res.writeHead(200, out)
      if (rest.length > 0) res.write(rest)
      backend.pipe(res as unknown as stream.Writable)
      ;(req as unknown as stream.Readable).pipe(backend)
      const done = () => {
        backend.destroy()
        if (!res.writableEnded) res.end()
      }
      backend.on("error", done)
      backend.on("close", done)
      res.on("close", () => backend.destroy())
    })
    upstream.on("response", (answer) => {
      try {
        res.writeHead(answer.statusCode ?? 502, responseHeaders(answer))
      } catch {
        answer.destroy()
        res.destroy()
        return
      }
      answer.pipe(res as unknown as stream.Writable)
    })
    upstream.on("error", (error: NodeJS.ErrnoException) => {
      if (!res.headersSent) sendPage(req, res, routed.unavailable(failureReason(error)))
      else res.destroy()
    })
    res.on("close", () => upstream.destroy())
    upstream.end()
  }

/** A plain `CONNECT host:port` over HTTP/1.1: berth is not a forward proxy. */
export const refuseConnect = (socket: stream.Duplex): void => {
  socket.on("error", () => socket.destroy())
  const body = "berth's proxy routes by Host; it is not a forward proxy\n"
  socket.end(
    `HTTP/1.1 405 ${reasonPhrase(405)}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}
