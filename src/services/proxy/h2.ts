/**
 * h2 on node:http2's core API: each stream is answered with `stream.respond` and forwarded as an HTTP/1.1 request
 * over a pool of keep-alive backend connections this module reads and writes itself. node's compatibility layer
 * (`Http2ServerRequest`/`Http2ServerResponse`) and its HTTP client (`http.Agent`, `ClientRequest`, a parser per
 * response) cost several times what the proxying does; here a request is one head written and a response head read
 * with a few string operations, its body passing in the buffers the socket read.
 *
 * What the stream path keeps from the node:http path: routing by `:authority`, X-Forwarded-* and the hop count,
 * hop-by-hop headers out both ways, the pages (404, 502, 503, 508) and waking a suspended world, `seen` and
 * `answered`, bodies streamed both ways under flow control, a GET sent again once when a reused connection turns out
 * closed, client resets cancelling the backend request and backend failures resetting the stream (or the 502 page
 * before any response), and WebSockets over RFC 8441 extended CONNECT, bridged to an HTTP/1.1 upgrade.
 */
import * as crypto from "node:crypto"
import * as httpModule from "node:http"
import * as http2 from "node:http2"
import type * as net from "node:net"
import type * as tls from "node:tls"
import type { PageModel, RouteTable, Unavailable } from "../../domain/routes.js"
import { ChunkedScanner, HOP_HEADER, MALFORMED, MORE, nameAt, statusLineAt, TCHAR } from "./http1.js"
import { H2Connection, type ProxyStream, type RequestHeaders } from "./h2conn.js"
import { renderPage } from "./pages.js"
import {
  dialFor,
  type Engine,
  failureReason,
  firstValue,
  type Go,
  HOP_BY_HOP,
  parseHops,
  REPLAYABLE,
  type Routed,
  responseHeaders,
  route
} from "./slow.js"

const { NGHTTP2_INTERNAL_ERROR } = http2.constants

/** The largest response head read from a backend (as the fast path's). */
const MAX_RESPONSE_HEAD = 64 * 1024
/** Idle backend connections kept per backend: a burst's worth, the rest closed as they come back. */
const MAX_FREE_LOCAL = 256
const MAX_FREE_REMOTE = 16
/** Backend reads land in a buffer of this size, or of the larger one once a read filled it (a big body). */
const READ_BYTES = 16 * 1024
const LARGE_READ_BYTES = 64 * 1024
/**
 * Body pieces up to this size are copied out of the read buffer (into node's pooled small buffers) so that it can
 * take the next read; a larger piece is lent to the stream as it is, and the connection reads into a new buffer.
 */
const COPY_BYTES = 4 * 1024

/** Methods whose empty body goes without Content-Length (as node's client sends them). */
const NO_BODY_METHODS = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"])

/** Response headers of which a repeat is dropped, as node's client does; other repeats join with ", ". */
const SINGLE_VALUE = new Set([
  "content-type",
  "content-length",
  "user-agent",
  "referer",
  "host",
  "authorization",
  "proxy-authorization",
  "if-modified-since",
  "if-unmodified-since",
  "from",
  "location",
  "max-forwards",
  "retry-after",
  "etag",
  "last-modified",
  "server",
  "age",
  "expires"
])

/** Names most responses carry, by length: matched in the bytes, so no string is made for them. */
const KNOWN_NAMES = new Map<number, ReadonlyArray<string>>()
for (const name of [
  "date",
  "etag",
  "vary",
  "server",
  "expires",
  "location",
  "connection",
  "keep-alive",
  "set-cookie",
  "content-type",
  "x-powered-by",
  "cache-control",
  "last-modified",
  "accept-ranges",
  "content-length",
  "content-encoding",
  "transfer-encoding"
]) {
  KNOWN_NAMES.set(name.length, [...(KNOWN_NAMES.get(name.length) ?? []), name])
}

/** The lower-case header name at `buf[from, to)`, which holds tchars only. */
const headerName = (buf: Buffer, from: number, to: number): string => {
  const known = KNOWN_NAMES.get(to - from)
  if (known !== undefined) for (const name of known) if (nameAt(buf, from, name)) return name
  return buf.toString("latin1", from, to).toLowerCase()
}

/** A path or authority that could break the HTTP/1.1 request line (nghttp2 already refuses these; kept as a guard). */
const badTarget = (s: string): boolean => {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c <= 32 || c === 127) return true
  }
  return false
}

export interface ResponseHead {
  readonly status: number
  readonly headers: http2.OutgoingHttpHeaders
  /** -1 when absent */
  readonly contentLength: number
  readonly chunked: boolean
  /** the body runs until the connection closes */
  readonly untilClose: boolean
  /** the backend said it closes the connection after this response */
  readonly close: boolean
  /** where the head's bytes end, past the blank line */
  readonly end: number
}

/**
 * Reads an HTTP/1.x response head at `buf[start, end)` into headers for `stream.respond` (hop-by-hop ones out, a
 * repeat joined or dropped as node's client does) and its framing, in one pass over the bytes: strings are made only
 * of values and of names that are not common ones. Null when the head does not end within the bytes; undefined when
 * it is not a response head this proxy passes on (every line must end in CRLF).
 */
export const parseResponseHead = (buf: Buffer, start: number, end: number): ResponseHead | null | undefined => {
  const statusLine = statusLineAt(buf, start, end)
  if (statusLine === null || statusLine === undefined) return statusLine
  const { status } = statusLine
  if (status < 100) return undefined
  let lf: number
  const headers: http2.OutgoingHttpHeaders = { ":status": status }
  let contentLength = -1
  let transferEncoding: string | undefined
  let connection = ""
  let line = statusLine.next
  for (;;) {
    lf = line
    while (lf < end && buf[lf] !== 10) lf++
    if (lf === end) return null
    if (lf === line || buf[lf - 1] !== 13) return undefined
    const lineEnd = lf - 1
    const next = lf + 1
    // the blank line
    if (lineEnd === line) {
      line = next
      break
    }
    let colon = line
    while (colon < lineEnd && TCHAR[buf[colon]!] === 1) colon++
    if (colon === line || colon === lineEnd || buf[colon] !== 58) return undefined
    let v = colon + 1
    while (v < lineEnd && (buf[v] === 32 || buf[v] === 9)) v++
    let vEnd = lineEnd
    while (vEnd > v && (buf[vEnd - 1] === 32 || buf[vEnd - 1] === 9)) vEnd--
    for (let k = v; k < vEnd; k++) {
      const c = buf[k]!
      if ((c < 32 && c !== 9) || c === 127) return undefined
    }
    const name = headerName(buf, line, colon)
    line = next
    if (name === "content-length") {
      if (vEnd === v || vEnd - v > 15) return undefined
      let n = 0
      for (let k = v; k < vEnd; k++) {
        const d = buf[k]! - 48
        if (d < 0 || d > 9) return undefined
        n = n * 10 + d
      }
      if (contentLength !== -1 && contentLength !== n) return undefined
      contentLength = n
      continue
    }
    const value = buf.toString("latin1", v, vEnd)
    if (name === "transfer-encoding") {
      transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`
      continue
    }
    if (name === "connection") {
      connection = connection === "" ? value : `${connection},${value}`
      continue
    }
    if (HOP_BY_HOP.has(name) || name.startsWith("proxy-")) continue
    const existing = headers[name]
    if (existing === undefined) headers[name] = name === "set-cookie" ? [value] : value
    else if (Array.isArray(existing)) existing.push(value)
    else if (!SINGLE_VALUE.has(name)) headers[name] = `${existing}, ${value}`
  }
  let close = statusLine.http10
  if (connection !== "") {
    for (const raw of connection.split(",")) {
      const token = raw.trim().toLowerCase()
      if (token === "close") close = true
      else if (token === "keep-alive") {
        if (statusLine.http10) close = false
      } else if (token !== "" && token !== "content-length") delete headers[token]
    }
  }
  let chunked = false
  let untilClose = false
  if (transferEncoding !== undefined) {
    // a body with a transfer coding other than chunked runs until the connection closes
    chunked = transferEncoding.toLowerCase().split(",").at(-1)?.trim() === "chunked"
    untilClose = !chunked
    contentLength = -1
  } else if (contentLength === -1) {
    untilClose = true
  } else {
    headers["content-length"] = contentLength
  }
  return { status, headers, contentLength, chunked, untilClose, close, end: line }
}

/** Idle keep-alive connections to backends, by backend: local ones by port, a peer's proxy by address and port. */
class Pool {
  private readonly free = new Map<number | string, Array<Upstream>>()

  take(key: number | string): Upstream | undefined {
    const list = this.free.get(key)
    if (list === undefined) return undefined
    // most recently used first: the likeliest to be open still
    for (let up = list.pop(); up !== undefined; up = list.pop()) {
      up.idle = false
      if (!up.socket.destroyed) return up
    }
    return undefined
  }

  give(up: Upstream): void {
    if (up.socket.destroyed) return
    let list = this.free.get(up.key)
    if (list === undefined) {
      list = []
      this.free.set(up.key, list)
    }
    up.idle = true
    list.push(up)
    if (list.length > (typeof up.key === "number" ? MAX_FREE_LOCAL : MAX_FREE_REMOTE)) {
      const oldest = list.shift()!
      oldest.idle = false
      oldest.socket.destroy()
    }
  }

  remove(up: Upstream): void {
    up.idle = false
    const list = this.free.get(up.key)
    const i = list?.indexOf(up) ?? -1
    if (i !== -1) list!.splice(i, 1)
  }

  destroy(): void {
    for (const list of this.free.values()) for (const up of list) up.socket.destroy()
    this.free.clear()
  }
}

/**
 * One keep-alive connection to a backend; it carries one exchange at a time. Its reads land in a buffer of its own
 * (net's `onread`): no 'data' event and no new buffer for each read.
 */
class Upstream {
  socket!: net.Socket
  exchange: Exchange | undefined = undefined
  idle = false
  /** responses this connection carried: a failure before the first byte of a later one may be a stale connection */
  served = 0
  /** a piece of `buffer` went to a stream as it is: the next read needs another buffer */
  lent = false
  private buffer = Buffer.allocUnsafeSlow(READ_BYTES)
  private eof = false
  private error: NodeJS.ErrnoException | undefined = undefined
  readonly onread: net.OnReadOpts = {
    buffer: () => this.buffer,
    // true: go on reading (pausing is the socket's pause())
    callback: (n: number, buffer: Uint8Array) => {
      this.onRead(n, buffer as Buffer)
      return true
    }
  }

  constructor(
    readonly key: number | string,
    private readonly pool: Pool
  ) {}

  /** The dialled connection is this one's. */
  connected(socket: net.Socket): void {
    this.socket = socket
    socket.on("end", this.onEnd)
    socket.on("error", this.onError)
    socket.on("close", this.onClose)
    socket.on("drain", this.onDrain)
  }

  private onRead(n: number, buffer: Buffer): void {
    const exchange = this.exchange
    // bytes nobody asked for: the connection is not in a state to trust
    if (exchange === undefined) {
      this.socket.destroy()
      return
    }
    try {
      exchange.fromBackend(buffer, n)
    } catch {
      exchange.fail()
    }
    if (this.lent) {
      this.lent = false
      this.buffer = Buffer.allocUnsafeSlow(n === buffer.length ? LARGE_READ_BYTES : buffer.length)
    }
  }

  private readonly onEnd = (): void => {
    this.eof = true
  }

  private readonly onError = (error: NodeJS.ErrnoException): void => {
    this.error = error
  }

  private readonly onClose = (): void => {
    if (this.idle) this.pool.remove(this)
    const exchange = this.exchange
    this.exchange = undefined
    if (exchange === undefined) return
    try {
      exchange.backendClosed(this.eof && this.error === undefined, this.error)
    } catch {
      exchange.fail()
    }
  }

  private readonly onDrain = (): void => {
    this.exchange?.backendDrained()
  }
}

enum Body {
  Head,
  Length,
  Chunked,
  UntilClose,
  Done
}

/** Request body framing towards the backend. */
enum Upload {
  None,
  Raw,
  Chunked
}

/** One h2 stream forwarded to a backend: its request out, its response back. */
class Exchange {
  private upstream: Upstream | undefined = undefined
  private state = Body.Head
  private partial: Buffer | undefined = undefined
  private remaining = 0
  private readonly chunks = new ChunkedScanner()
  private reuse = false
  private responded = false
  /** the response is out whole (or the exchange was given up): nothing more happens */
  private done = false
  private sent = false
  private gotBytes = false
  private retried = false
  /** the connection had carried a response before this request: a failure before any byte may mean it was stale */
  private reused = false
  private backendPaused = false
  private clientPaused = false
  private waitingDrain = false

  constructor(
    private readonly proxy: H2Proxy,
    private readonly stream: ProxyStream,
    private readonly routed: Go,
    private readonly head: string,
    private readonly upload: Upload,
    private readonly isHead: boolean,
    private readonly accept: string | undefined,
    private readonly replayable: boolean,
    /** the request body's Content-Length, for a body sent as it is */
    private unsent: number
  ) {
    stream.on("close", this.onStreamClose)
    stream.on("error", noop)
    if (upload === Upload.None || (upload === Upload.Raw && unsent === 0)) this.sent = true
  }

  /** Sends the request on a pooled connection, or (`dial`, or none is free) on a new one. */
  start(dial: boolean): void {
    const up = dial ? undefined : this.proxy.pool.take(this.key())
    if (up !== undefined) {
      this.attach(up)
      return
    }
    const routed = this.routed
    const fresh = new Upstream(this.key(), this.proxy.pool)
    dialFor(
      this.proxy.engine,
      routed,
      (error, socket) => {
        if (socket !== undefined) {
          fresh.connected(socket)
          // the client went away while dialling: the connection serves the next one
          if (this.done) this.proxy.pool.give(fresh)
          else {
            try {
              this.attach(fresh)
            } catch {
              this.fail()
            }
          }
          return
        }
        if (!this.done) this.page(routed.unavailable(failureReason(error ?? new Error("no socket"))))
      },
      fresh.onread
    )
  }

  private key(): number | string {
    const routed = this.routed
    return routed.address === undefined ? routed.port : `${routed.address}|${routed.port}`
  }

  private attach(up: Upstream): void {
    this.upstream = up
    up.exchange = this
    this.reused = up.served > 0
    up.socket.write(this.head, "latin1")
    if (this.upload !== Upload.None) {
      const stream = this.stream
      stream.on("data", this.onClientData)
      stream.on("end", this.onClientEnd)
    }
  }

  // -- request body --------------------------------------------------------------------------------------------

  private readonly onClientData = (chunk: Buffer): void => {
    const socket = this.upstream?.socket
    if (socket === undefined || this.done) return
    let ok: boolean
    if (this.upload === Upload.Chunked) {
      if (chunk.length === 0) return
      socket.cork()
      socket.write(`${chunk.length.toString(16)}\r\n`, "latin1")
      socket.write(chunk)
      ok = socket.write("\r\n", "latin1")
      socket.uncork()
    } else {
      ok = socket.write(chunk)
      // all of a Content-Length body is out: the answer may come before the stream's end does
      this.unsent -= chunk.length
      if (this.unsent <= 0) this.sent = true
    }
    if (!ok && !this.clientPaused) {
      this.clientPaused = true
      this.stream.pause()
    }
  }

  private readonly onClientEnd = (): void => {
    const up = this.upstream
    if (this.done || up === undefined) return
    if (this.upload === Upload.Chunked) up.socket.write("0\r\n\r\n", "latin1")
    this.sent = true
  }

  backendDrained(): void {
    if (this.clientPaused) {
      this.clientPaused = false
      this.stream.resume()
    }
  }

  // -- response ------------------------------------------------------------------------------------------------

  /** `buf[0, length)` came from the backend; `buf` is read into again once this returns. */
  fromBackend(buf: Buffer, length: number): void {
    this.gotBytes = true
    let i = 0
    while (i < length) {
      const state = this.state
      if (state === Body.Head) {
        const partial = this.partial
        let head: ResponseHead | null | undefined
        if (partial === undefined) {
          head = parseResponseHead(buf, i, length)
          if (head === null) {
            // a copy: the read buffer is used again
            this.partial = Buffer.from(buf.subarray(i, length))
            return
          }
        } else {
          const joined = Buffer.concat([partial, buf.subarray(i, length)])
          head = parseResponseHead(joined, 0, joined.length)
          if (head === null) {
            if (joined.length > MAX_RESPONSE_HEAD) {
              this.backendBroken()
              return
            }
            this.partial = joined
            return
          }
          this.partial = undefined
          // where this read's bytes after the head begin
          if (head !== undefined) head = { ...head, end: i + head.end - partial.length }
        }
        if (head === undefined) {
          this.backendBroken()
          return
        }
        i = head.end
        if (head.status < 200) {
          // 100 Continue and other interim answers: the final one follows (101 only answers an upgrade)
          if (head.status === 101) {
            this.backendBroken()
            return
          }
          continue
        }
        // a response with no body ends here; anything after it is more than was asked for
        if (!this.respond(head, i < length)) return
        continue
      }
      if (state === Body.Length) {
        const n = Math.min(this.remaining, length - i)
        const data = this.piece(buf, i, i + n)
        i += n
        this.remaining -= n
        if (this.remaining === 0) {
          this.state = Body.Done
          this.stream.end(data)
          this.responseDone(i < length)
          return
        }
        this.toClient(data)
        continue
      }
      if (state === Body.Chunked) {
        const at = this.chunks.scan(buf, i, length, this.chunkData)
        if (at === MORE) return
        if (at === MALFORMED) {
          this.backendBroken()
          return
        }
        this.state = Body.Done
        this.stream.end()
        this.responseDone(at < length)
        return
      }
      if (state === Body.UntilClose) {
        this.toClient(this.piece(buf, i, length))
        return
      }
      this.extraBytes()
      return
    }
  }

  /** Bytes after the response ended: the connection cannot be trusted again. */
  private extraBytes(): void {
    this.reuse = false
    this.upstream?.socket.destroy()
  }

  /** `buf[from, to)` for the stream: copied when small, else lent (the connection then reads into a new buffer). */
  private piece(buf: Buffer, from: number, to: number): Buffer {
    if (to - from <= COPY_BYTES) return Buffer.from(buf.subarray(from, to))
    if (this.upstream !== undefined) this.upstream.lent = true
    return buf.subarray(from, to)
  }

  /** Sends the head; false when the exchange ended (a head h2 cannot carry). */
  private respond(head: ResponseHead, more: boolean): boolean {
    const routed = this.routed
    if (head.status < 500) routed.answered?.()
    const bodiless = this.isHead || head.status === 204 || head.status === 304
    const empty = bodiless || head.contentLength === 0
    // a body that runs until the connection closes leaves nothing to reuse; a response that has none, something
    this.reuse = !head.close && (bodiless || !head.untilClose)
    try {
      this.stream.respond(head.headers, { endStream: empty })
    } catch {
      // a header HTTP/2 (or node) will not carry: the response cannot be passed on
      this.reuse = false
      this.upstream?.socket.destroy()
      this.page(routed.unavailable("closed"))
      return false
    }
    this.responded = true
    if (empty) {
      this.state = Body.Done
      this.responseDone(more)
      return false
    }
    if (head.chunked) {
      this.state = Body.Chunked
      this.chunks.reset()
    } else if (head.untilClose) {
      this.state = Body.UntilClose
    } else {
      this.state = Body.Length
      this.remaining = head.contentLength
    }
    return true
  }

  /** A run of a chunked body's data, its framing taken off: to the client. */
  private readonly chunkData = (buf: Buffer, from: number, to: number): void => {
    this.toClient(this.piece(buf, from, to))
  }

  private toClient(data: Buffer): void {
    if (!this.stream.write(data) && !this.backendPaused) {
      this.backendPaused = true
      this.upstream?.socket.pause()
      if (!this.waitingDrain) {
        this.waitingDrain = true
        this.stream.on("drain", this.onStreamDrain)
      }
    }
  }

  private readonly onStreamDrain = (): void => {
    if (this.backendPaused) {
      this.backendPaused = false
      this.upstream?.socket.resume()
    }
  }

  /** The response went out whole; `extra`: the backend sent more than it framed. */
  private responseDone(extra: boolean): void {
    this.done = true
    const up = this.upstream
    if (up === undefined) return
    up.served++
    if (extra) this.reuse = false
    if (!this.sent) {
      // answered before the request body was all sent: what is left of it has nowhere to go
      this.reuse = false
      this.stream.removeListener("data", this.onClientData)
      this.stream.resume()
    }
    this.release()
  }

  private release(): void {
    const up = this.upstream
    if (up === undefined) return
    this.upstream = undefined
    up.exchange = undefined
    if (this.backendPaused) up.socket.resume()
    if (this.reuse && this.sent) this.proxy.pool.give(up)
    else up.socket.destroy()
  }

  /** The backend connection closed with this exchange on it. */
  backendClosed(clean: boolean, error: NodeJS.ErrnoException | undefined): void {
    this.upstream = undefined
    if (this.done) return
    if (this.state === Body.UntilClose && clean) {
      this.done = true
      this.stream.end()
      return
    }
    if (this.responded) {
      // a response cut short: the client must not take it for whole
      this.reset()
      return
    }
    // a reused connection the backend had just closed: once more, on a new one
    if (!this.gotBytes && this.replayable && !this.retried && this.reused) {
      this.retried = true
      this.start(true)
      return
    }
    this.page(this.routed.unavailable(reasonOf(error)))
  }

  private backendBroken(): void {
    const up = this.upstream
    this.upstream = undefined
    if (up !== undefined) {
      up.exchange = undefined
      up.socket.destroy()
    }
    if (this.done) return
    if (this.responded) this.reset()
    else this.page(this.routed.unavailable("closed"))
  }

  private page(page: PageModel): void {
    this.done = true
    respondPage(this.stream, page, this.accept, this.isHead)
  }

  private reset(): void {
    this.done = true
    if (!this.stream.destroyed) this.stream.close(NGHTTP2_INTERNAL_ERROR)
  }

  /** A fault in this code ends one stream; it must never reach the daemon's event loop. */
  fail(): void {
    const up = this.upstream
    this.upstream = undefined
    if (up !== undefined) {
      up.exchange = undefined
      up.socket.destroy()
    }
    this.done = true
    if (!this.stream.destroyed) this.stream.close(NGHTTP2_INTERNAL_ERROR)
  }

  /** The client's stream is gone: a request still in flight is cancelled with its backend connection. */
  private readonly onStreamClose = (): void => {
    if (this.done && this.upstream === undefined) return
    this.done = true
    const up = this.upstream
    this.upstream = undefined
    if (up !== undefined) {
      up.exchange = undefined
      up.socket.destroy()
    }
  }
}

const noop = (): void => {}

/** A WebSocket's frames both ways between a stream and its backend, each side paused while the other is full. */
const bridge = (stream: ProxyStream, backend: net.Socket): void => {
  backend.on("data", (chunk: Buffer) => {
    if (!stream.write(chunk)) backend.pause()
  })
  stream.on("drain", () => backend.resume())
  stream.on("data", (chunk: Buffer) => {
    if (!backend.write(chunk)) stream.pause()
  })
  backend.on("drain", () => stream.resume())
  stream.on("end", () => backend.end())
  const done = () => {
    backend.destroy()
    if (!stream.writableEnded && !stream.destroyed) stream.end()
  }
  backend.on("end", done)
  backend.on("error", done)
  backend.on("close", done)
  stream.on("close", () => backend.destroy())
}

const reasonOf = (error: NodeJS.ErrnoException | undefined): Unavailable =>
  error === undefined ? "closed" : failureReason(error)

/** Answers a stream with one of the proxy's pages (HTML or text by Accept); a stream already answered is reset. */
export const respondPage = (
  stream: ProxyStream,
  page: PageModel,
  accept: string | undefined,
  isHead: boolean
): void => {
  if (stream.destroyed || stream.closed) return
  if (stream.headersSent) {
    stream.close(NGHTTP2_INTERNAL_ERROR)
    return
  }
  const rendered = renderPage(page, accept)
  const headers: http2.OutgoingHttpHeaders = {
    ":status": rendered.status,
    "content-type": rendered.contentType,
    "content-length": rendered.body.length,
    "cache-control": "no-store"
  }
  if (rendered.retryAfter !== undefined) headers["retry-after"] = String(rendered.retryAfter)
  // the body is not wanted
  stream.resume()
  stream.respond(headers, { endStream: isHead })
  if (!isHead) stream.end(rendered.body)
}

/** The request headers for the backend from an h2 request: as `backendHeaders` in `slow.ts`, for the stream API. */
const forwardedHeaders = (
  headers: RequestHeaders,
  client: string,
  hops: number
): Record<string, string | Array<string>> => {
  const out: Record<string, string | Array<string>> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined || name.charCodeAt(0) === 58 || HOP_BY_HOP.has(name) || name.startsWith("proxy-")) continue
    out[name] = value
  }
  const authority = firstValue(headers[":authority"]) ?? firstValue(headers.host)
  if (authority !== undefined) {
    out.host = authority
    out["x-forwarded-host"] = authority
  }
  const previous = headers["x-forwarded-for"]
  out["x-forwarded-for"] = previous === undefined ? client : `${[previous].flat().join(", ")}, ${client}`
  out["x-forwarded-proto"] = "https"
  out[HOP_HEADER] = String(hops + 1)
  return out
}

/** A session's last route to a service (pages are not kept: they count and wake each time). */
interface RouteCache {
  table: RouteTable | undefined
  authority: string | undefined
  hops: number
  routed: Go | undefined
}

/** The h2 side of the HTTPS listener. */
export class H2Proxy {
  readonly pool = new Pool()

  constructor(readonly engine: Engine) {}

  /** Serves a new h2 session's streams. */
  readonly onSession = (session: http2.ServerHttp2Session): void => {
    // the client's address, read once: `session.socket` is a proxy object
    const socket = session.socket
    const client = socket.remoteAddress ?? ""
    const localPort = socket.localPort ?? 0
    session.on("stream", this.streams(client, localPort))
  }

  /** Serves an h2 connection on the TLS socket with berth's own HTTP/2 (`h2conn.ts`). */
  readonly onConnection = (socket: tls.TLSSocket, idleMs: number): void => {
    new H2Connection(socket, { idleMs, onStream: this.streams(socket.remoteAddress ?? "", socket.localPort ?? 0) })
  }

  /** A connection's stream handler. */
  private streams(client: string, localPort: number): (stream: ProxyStream, headers: RequestHeaders) => void {
    const cache: RouteCache = { table: undefined, authority: undefined, hops: 0, routed: undefined }
    return (stream, headers) => {
      try {
        this.onStream(stream, headers, client, localPort, cache)
      } catch {
        if (!stream.destroyed) stream.close(NGHTTP2_INTERNAL_ERROR)
      }
    }
  }

  destroy(): void {
    this.pool.destroy()
  }

  private onStream(
    stream: ProxyStream,
    headers: RequestHeaders,
    client: string,
    localPort: number,
    cache: RouteCache
  ): void {
    const method = firstValue(headers[":method"]) ?? "GET"
    if (method === "CONNECT") {
      this.onConnect(stream, headers, client, localPort)
      return
    }
    const isHead = method === "HEAD"
    const authority = firstValue(headers[":authority"]) ?? firstValue(headers.host)
    const hops = parseHops(headers[HOP_HEADER])
    const table = this.engine.routes()
    let routed: Routed
    const cached = cache.routed
    if (cached !== undefined && cache.table === table && cache.authority === authority && cache.hops === hops) {
      // a session's streams mostly go to one host: routed once per table, counted per request
      routed = cached
      if (cached.local !== undefined) table.seen?.(cached.local)
    } else {
      routed = route(this.engine, authority, hops, "https", localPort)
      if (routed._tag === "Go") {
        cache.table = table
        cache.authority = authority
        cache.hops = hops
        cache.routed = routed
      }
    }
    if (routed._tag === "Page") {
      respondPage(stream, routed.page, firstValue(headers.accept), isHead)
      return
    }
    const path = firstValue(headers[":path"]) ?? "/"
    if (badTarget(path) || (authority !== undefined && badTarget(authority))) {
      stream.close(http2.constants.NGHTTP2_PROTOCOL_ERROR)
      return
    }
    let head = `${method} ${path} HTTP/1.1\r\n`
    if (authority !== undefined) head += `host: ${authority}\r\nx-forwarded-host: ${authority}\r\n`
    for (const name in headers) {
      if (name.charCodeAt(0) === 58 || HOP_BY_HOP.has(name) || name.startsWith("proxy-")) continue
      const value = headers[name]
      if (typeof value === "string") head += `${name}: ${value}\r\n`
      else if (value !== undefined) for (const v of value) head += `${name}: ${v}\r\n`
    }
    const previous = headers["x-forwarded-for"]
    head += `x-forwarded-for: ${previous === undefined ? client : `${[previous].flat().join(", ")}, ${client}`}\r\n`
    head += `x-forwarded-proto: https\r\n${HOP_HEADER}: ${hops + 1}\r\n`
    let upload = Upload.None
    if (!stream.endAfterHeaders) upload = headers["content-length"] === undefined ? Upload.Chunked : Upload.Raw
    if (upload === Upload.Chunked) head += "transfer-encoding: chunked\r\n"
    else if (upload === Upload.None && headers["content-length"] === undefined && !NO_BODY_METHODS.has(method)) {
      head += "content-length: 0\r\n"
    }
    head += "\r\n"
    // h2 clients wait for 100 Continue before a body; the node:http path answered it at once too
    if (upload !== Upload.None && firstValue(headers.expect)?.toLowerCase() === "100-continue") {
      stream.additionalHeaders({ ":status": 100 })
    }
    const replayable = upload === Upload.None && REPLAYABLE.has(method)
    const length = upload === Upload.Raw ? Number(headers["content-length"]) : 0
    const accept = firstValue(headers.accept)
    const exchange = new Exchange(this, stream, routed, head, upload, isHead, accept, replayable, length)
    exchange.start(false)
  }

  /**
   * RFC 8441: a WebSocket over an HTTP/2 stream (`CONNECT` with `:protocol websocket`). The backend speaks HTTP/1.1,
   * so the proxy makes a classic upgrade with its own key, answers the stream 200 when the backend switches, and
   * then pipes the frames (WebSocket frames are the same bytes on both).
   */
  private onConnect(stream: ProxyStream, headers: RequestHeaders, client: string, localPort: number): void {
    stream.on("error", noop)
    const protocol = firstValue(headers[":protocol"])
    if (protocol === undefined) {
      stream.respond({ ":status": 405, "content-type": "text/plain; charset=utf-8" })
      stream.end("CONNECT is not supported by berth's proxy\n")
      return
    }
    const authority = firstValue(headers[":authority"]) ?? firstValue(headers.host)
    const hops = parseHops(headers[HOP_HEADER])
    const routed = route(this.engine, authority, hops, "https", localPort)
    const accept = firstValue(headers.accept)
    if (routed._tag === "Page") {
      respondPage(stream, routed.page, accept, false)
      return
    }
    const out = forwardedHeaders(headers, client, hops)
    delete out["sec-websocket-key"]
    Object.assign(out, {
      connection: "upgrade",
      upgrade: protocol,
      "sec-websocket-key": crypto.randomBytes(16).toString("base64"),
      "sec-websocket-version": firstValue(headers["sec-websocket-version"]) ?? "13"
    })
    const engine = this.engine
    const upstream = httpModule.request({
      createConnection: (_options: unknown, callback: (e: Error | null, s: net.Socket) => void) => {
        dialFor(engine, routed, (error, socket) => callback(error ?? null, socket!))
        return undefined as unknown as net.Socket
      },
      host: "localhost",
      port: routed.port,
      method: "GET",
      path: firstValue(headers[":path"]) ?? "/",
      headers: out,
      setHost: false
    })
    upstream.on("upgrade", (answer: httpModule.IncomingMessage, backend: net.Socket, rest: Buffer) => {
      if (stream.destroyed) {
        backend.destroy()
        return
      }
      const reply: http2.OutgoingHttpHeaders = { ":status": 200 }
      for (const name of ["sec-websocket-protocol", "sec-websocket-extensions"]) {
        const v = firstValue(answer.headers[name])
        if (v !== undefined) reply[name] = v
      }
      if (answer.statusCode !== undefined && answer.statusCode < 500) routed.answered?.()
      stream.respond(reply)
      if (rest.length > 0) stream.write(rest)
      bridge(stream, backend)
    })
    upstream.on("response", (answer) => {
      const status = answer.statusCode ?? 502
      if (status < 500) routed.answered?.()
      try {
        stream.respond({ ...responseHeaders(answer), ":status": status })
      } catch {
        answer.destroy()
        if (!stream.destroyed) stream.close(NGHTTP2_INTERNAL_ERROR)
        return
      }
      answer.on("data", (chunk: Buffer) => {
        if (!stream.write(chunk)) answer.pause()
      })
      stream.on("drain", () => answer.resume())
      answer.on("end", () => stream.end())
    })
    upstream.on("error", (error: NodeJS.ErrnoException) => {
      if (!stream.headersSent) respondPage(stream, routed.unavailable(failureReason(error)), accept, false)
      else if (!stream.destroyed) stream.close(NGHTTP2_INTERNAL_ERROR)
    })
    stream.on("close", () => upstream.destroy())
    upstream.end()
  }
}
