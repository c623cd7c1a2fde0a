/**
 * HTTP/2 (RFC 9113) on the TLS socket, read and written here rather than by node:http2. node's HTTP/2 server, answering
 * a 1 KiB body by itself, serves fewer requests a second than nginx proxies (its Duplex streams, header objects and
 * nghttp2 callbacks cost more than the proxying); this connection parses frames in the bytes the socket read, keeps
 * HPACK state with `hpack.ts`, and writes each turn's frames in one socket write.
 *
 * Its streams offer what `h2.ts` uses of node's (`ProxyStream`): respond, write, end, close, pause/resume, and the
 * events data, end, drain and close, so one forwarding code serves both. What a proxy in front of HTTP/1.1 backends
 * must refuse is refused here, before a request is handed on: header names that are not lower-case tokens, values with
 * CR, LF or NUL, connection-specific fields, pseudo-headers out of place, and bodies longer or shorter than their
 * Content-Length (each would let one request become two on the backend's connection).
 */
import { EventEmitter } from "node:events"
import type * as http2 from "node:http2"
import type * as net from "node:net"
import { encodeHeaders, HeaderListTooLarge, HpackDecoder } from "./hpack.js"
import { TCHAR } from "./http1.js"

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1")

enum Frame {
  Data = 0,
  Headers = 1,
  Priority = 2,
  RstStream = 3,
  Settings = 4,
  PushPromise = 5,
  Ping = 6,
  GoAway = 7,
  WindowUpdate = 8,
  Continuation = 9
}

const END_STREAM = 0x1
const ACK = 0x1
const END_HEADERS = 0x4
const PADDED = 0x8
const PRIORITY = 0x20

/** Error codes (RFC 9113 §7). */
export const H2Code = {
  NoError: 0,
  ProtocolError: 1,
  InternalError: 2,
  FlowControlError: 3,
  StreamClosed: 5,
  FrameSizeError: 6,
  RefusedStream: 7,
  Cancel: 8,
  CompressionError: 9,
  EnhanceYourCalm: 11
} as const

/** What this side advertises. */
const MAX_FRAME = 16_384
const MAX_STREAMS = 256
const MAX_HEADER_LIST = 64 * 1024
/** A header block (HEADERS and its CONTINUATIONs) larger than this ends the connection: a CONTINUATION flood. */
const MAX_HEADER_BLOCK = 256 * 1024
/** Request bodies: each stream may have this much unread; the connection this much in all. */
const STREAM_WINDOW = 256 * 1024
const CONNECTION_WINDOW = 2 * 1024 * 1024
const MAX_WINDOW = 2 ** 31 - 1
/** Past this much unsent in the socket, streams' writes say "wait for drain". */
const SOCKET_HIGH_WATER = 64 * 1024
/** Resets a client may cause (its own, and malformed requests) before their share of its requests is weighed. */
const RESETS_FLOOR = 1_000

/** Our SETTINGS frame, and a connection WINDOW_UPDATE taking its window to CONNECTION_WINDOW. */
const OPENING = (() => {
  const settings: Array<[number, number]> = [
    [0x3, MAX_STREAMS],
    [0x4, STREAM_WINDOW],
    [0x6, MAX_HEADER_LIST],
    // RFC 8441: WebSockets over a stream
    [0x8, 1]
  ]
  const frame = Buffer.alloc(9 + settings.length * 6 + 13)
  frame.writeUIntBE(settings.length * 6, 0, 3)
  frame[3] = Frame.Settings
  let o = 9
  for (const [id, value] of settings) {
    frame.writeUInt16BE(id, o)
    frame.writeUInt32BE(value, o + 2)
    o += 6
  }
  frame.writeUIntBE(4, o, 3)
  frame[o + 3] = Frame.WindowUpdate
  frame.writeUInt32BE(CONNECTION_WINDOW - 65_535, o + 9)
  return frame
})()

const TOO_LARGE = Buffer.from("the request's headers are too large\n")

const SETTINGS_ACK = Buffer.from([0, 0, 0, Frame.Settings, ACK, 0, 0, 0, 0])

/** The part of a node:http2 server stream that `h2.ts` uses: node's streams and these both are one. */
export interface ProxyStream {
  readonly destroyed: boolean
  readonly closed: boolean
  readonly headersSent: boolean
  readonly writableEnded: boolean
  readonly endAfterHeaders: boolean
  respond(headers: http2.OutgoingHttpHeaders, options?: { endStream?: boolean }): void
  additionalHeaders(headers: http2.OutgoingHttpHeaders): void
  write(chunk: Buffer | string): boolean
  end(chunk?: Buffer | string): unknown
  close(code?: number): void
  pause(): unknown
  resume(): unknown
  on(event: "data", listener: (chunk: Buffer) => void): unknown
  on(event: "close" | "drain" | "end", listener: () => void): unknown
  on(event: "error", listener: (error: Error) => void): unknown
  removeListener(event: "data", listener: (chunk: Buffer) => void): unknown
  removeListener(event: "close" | "drain" | "end", listener: () => void): unknown
}

/** Request headers as node gives them: lower-case names; repeats joined (cookie with "; "), set-cookie a list. */
export type RequestHeaders = Record<string, string | Array<string> | undefined>

/** A malformed request, refused with RST_STREAM PROTOCOL_ERROR; the connection goes on. */
const MALFORMED = "malformed"

/** A token (RFC 9110 §5.6.2); `lower`: with no upper-case letter either, as HTTP/2 field names must be. */
const isToken = (s: string, lower: boolean): boolean => {
  if (s.length === 0) return false
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c > 255 || TCHAR[c] !== 1 || (lower && c >= 65 && c <= 90)) return false
  }
  return true
}

/** A field value with no NUL, CR or LF, and no leading or trailing space or tab (RFC 9113 §8.2.1). */
const goodValue = (value: string): boolean => {
  const n = value.length
  if (n === 0) return true
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i)
    if (c === 0 || c === 10 || c === 13) return false
  }
  const first = value.charCodeAt(0)
  const last = value.charCodeAt(n - 1)
  return first !== 32 && first !== 9 && last !== 32 && last !== 9
}

const CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"])
const PSEUDO = new Set([":method", ":scheme", ":authority", ":path", ":protocol"])

/** Builds the headers object from decoded pairs, or MALFORMED. */
const requestHeaders = (pairs: ReadonlyArray<string>): RequestHeaders | typeof MALFORMED => {
  // no prototype: a field named constructor or __proto__ is a field like any other
  const headers: RequestHeaders = Object.create(null)
  let regular = false
  for (let i = 0; i < pairs.length; i += 2) {
    const name = pairs[i]!
    const value = pairs[i + 1]!
    if (name.charCodeAt(0) === 58) {
      // pseudo-headers come first, once each, and only those of requests
      if (regular || !PSEUDO.has(name) || headers[name] !== undefined) return MALFORMED
      if (!goodValue(value)) return MALFORMED
      headers[name] = value
      continue
    }
    regular = true
    if (!isToken(name, true) || !goodValue(value)) return MALFORMED
    if (CONNECTION_SPECIFIC.has(name)) return MALFORMED
    if (name === "te" && value !== "trailers") return MALFORMED
    const existing = headers[name]
    if (existing === undefined) headers[name] = name === "set-cookie" ? [value] : value
    else if (Array.isArray(existing)) existing.push(value)
    else if (name === "cookie") headers[name] = `${existing}; ${value}`
    else if (name === "content-length") {
      if (existing !== value) return MALFORMED
    } else headers[name] = `${existing}, ${value}`
  }
  const method = headers[":method"]
  // a method goes into the backend's request line as it is (RFC 9110 §9.1)
  if (typeof method !== "string" || !isToken(method, false)) return MALFORMED
  const path = headers[":path"]
  if (method === "CONNECT") {
    if (headers[":protocol"] === undefined) {
      // a plain CONNECT names only where to
      if (headers[":scheme"] !== undefined || path !== undefined || headers[":authority"] === undefined)
        return MALFORMED
    } else if (headers[":scheme"] === undefined || typeof path !== "string" || path.charCodeAt(0) !== 47)
      return MALFORMED
  } else {
    if (headers[":protocol"] !== undefined || headers[":scheme"] === undefined || typeof path !== "string")
      return MALFORMED
    // origin-form, or OPTIONS * (RFC 9113 §8.3.1): an absolute URL would name another host to the backend
    if (path.charCodeAt(0) !== 47 && !(path === "*" && method === "OPTIONS")) return MALFORMED
  }
  const length = headers["content-length"]
  if (typeof length === "string" && !/^\d{1,15}$/.test(length)) return MALFORMED
  return headers
}

/** A connection error: GOAWAY with this code, then the connection ends. */
class ConnectionError {
  constructor(readonly code: number) {}
}

export class H2Stream extends EventEmitter implements ProxyStream {
  endAfterHeaders = false
  headersSent = false
  writableEnded = false
  closed = false
  destroyed = false
  /** END_STREAM came from the client */
  remoteEnded = false
  /** we sent END_STREAM */
  localEnded = false
  /** what the client may still send on this stream */
  recvWindow = STREAM_WINDOW
  /** read and not yet handed on (paused, or no 'data' listener yet) */
  private unread: Array<Buffer> | undefined = undefined
  private unreadEnd = false
  /** consumed since the last WINDOW_UPDATE */
  private consumed = 0
  private flowing = false
  private paused = false
  /** request body bytes the client said it sends (-1: not said) and has sent */
  expectedLength = -1
  receivedLength = 0
  /** DATA not yet sent for want of window */
  queue: Array<Buffer> | undefined = undefined
  private queueEnd = false
  needDrain = false

  constructor(
    readonly id: number,
    private readonly conn: H2Connection,
    public sendWindow: number
  ) {
    super()
  }

  override addListener(event: string | symbol, listener: Listener): this {
    return this.on(event, listener)
  }

  override on(event: string | symbol, listener: Listener): this {
    super.on(event, listener)
    if (event === "data" && !this.flowing && !this.paused) {
      this.flowing = true
      // as node's streams: what came before the listener is handed on once the caller has finished attaching
      if (this.unread !== undefined || this.unreadEnd) process.nextTick(this.flush)
    }
    return this
  }

  pause(): this {
    this.paused = true
    this.flowing = false
    return this
  }

  resume(): this {
    this.paused = false
    if (!this.flowing) {
      this.flowing = true
      if (this.unread !== undefined || this.unreadEnd) process.nextTick(this.flush)
    }
    return this
  }

  private readonly flush = (): void => {
    try {
      while (this.flowing && this.unread !== undefined) {
        const chunk = this.unread.shift()!
        if (this.unread.length === 0) this.unread = undefined
        this.deliver(chunk)
      }
      if (this.flowing && this.unread === undefined && this.unreadEnd) {
        this.unreadEnd = false
        this.emit("end")
      }
    } catch {
      // a fault in a listener ends this stream, never the daemon
      this.close(H2Code.InternalError)
    }
  }

  private deliver(chunk: Buffer): void {
    this.emit("data", chunk)
    this.consume(chunk.length)
  }

  /** Bytes read from the window: given back to the client in WINDOW_UPDATEs of half the window or more. */
  consume(n: number): void {
    this.conn.consumed(n)
    this.consumed += n
    if (this.consumed >= STREAM_WINDOW / 2 && !this.remoteEnded && !this.closed) {
      this.conn.windowUpdate(this.id, this.consumed)
      this.recvWindow += this.consumed
      this.consumed = 0
    }
  }

  /** Request body bytes from a DATA frame (already counted against the window). */
  received(chunk: Buffer): void {
    if (this.flowing && this.unread === undefined) this.deliver(chunk)
    else if (this.unread === undefined) this.unread = [chunk]
    else this.unread.push(chunk)
  }

  remoteEnd(): void {
    this.remoteEnded = true
    if (this.flowing && this.unread === undefined) this.emit("end")
    else this.unreadEnd = true
    if (this.localEnded) this.finish()
  }

  respond(headers: http2.OutgoingHttpHeaders, options?: { endStream?: boolean }): void {
    if (this.headersSent || this.closed) throw new Error("the stream cannot take a response now")
    const block = encodeHeaders(fields(headers))
    this.headersSent = true
    const end = options?.endStream === true
    this.conn.sendHeaders(this.id, block, end)
    if (end) this.sentEnd()
  }

  additionalHeaders(headers: http2.OutgoingHttpHeaders): void {
    if (this.headersSent || this.closed) return
    this.conn.sendHeaders(this.id, encodeHeaders(fields(headers)), false)
  }

  write(chunk: Buffer | string): boolean {
    if (this.closed || this.writableEnded) return false
    const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk
    if (data.length > 0) this.send(data, false)
    return this.writable()
  }

  end(chunk?: Buffer | string): this {
    if (this.writableEnded || this.closed) return this
    this.writableEnded = true
    if (!this.headersSent) this.respond({ ":status": 200 })
    const data = chunk === undefined ? EMPTY : typeof chunk === "string" ? Buffer.from(chunk) : chunk
    this.send(data, true)
    return this
  }

  private writable(): boolean {
    if (this.queue !== undefined || this.conn.socketFull()) {
      this.needDrain = true
      return false
    }
    return true
  }

  /** DATA frames as far as the windows allow; the rest waits in the queue. */
  private send(data: Buffer, end: boolean): void {
    if (this.queue !== undefined) {
      if (data.length > 0) this.queue.push(data)
      if (end) this.queueEnd = true
      return
    }
    const sent = this.conn.sendData(this, data, end)
    if (sent < data.length) {
      this.queue = [sent === 0 ? data : data.subarray(sent)]
      this.queueEnd = end
      this.conn.blocked(this)
    } else if (end) this.sentEnd()
  }

  /** The windows grew: sends what waited; true when nothing waits any more. */
  sendQueued(): boolean {
    const queue = this.queue
    if (queue === undefined || this.closed) return true
    while (queue.length > 0) {
      const data = queue[0]!
      const last = queue.length === 1
      const end = last && this.queueEnd
      const sent = this.conn.sendData(this, data, end)
      if (sent < data.length) {
        queue[0] = data.subarray(sent)
        return false
      }
      queue.shift()
    }
    this.queue = undefined
    if (this.queueEnd) {
      this.queueEnd = false
      this.sentEnd()
    } else if (this.needDrain && !this.conn.socketFull()) {
      this.needDrain = false
      this.emit("drain")
    }
    return true
  }

  /** The socket took what it held. */
  socketDrained(): void {
    if (this.needDrain && this.queue === undefined && !this.closed) {
      this.needDrain = false
      this.emit("drain")
    }
  }

  private sentEnd(): void {
    this.localEnded = true
    this.writableEnded = true
    if (this.remoteEnded) this.finish()
    // answered before the request body ended: the client may stop sending it (RFC 9113 §8.1)
    else this.close(H2Code.NoError)
  }

  close(code: number = H2Code.NoError): void {
    if (this.closed) return
    this.conn.sendReset(this.id, code)
    this.finish()
  }

  destroy(): this {
    this.close(H2Code.Cancel)
    return this
  }

  /** The stream is over (both ends, a reset either way, or the connection): 'close' on the next tick, as node's. */
  finish(): void {
    if (this.closed) return
    this.closed = true
    this.destroyed = true
    this.queue = undefined
    // what nobody will read frees the connection's window
    if (this.unread !== undefined) {
      let n = 0
      for (const chunk of this.unread) n += chunk.length
      this.unread = undefined
      this.conn.consumed(n)
    }
    this.conn.forget(this)
    process.nextTick(emitClose, this)
  }
}

type Listener = Parameters<EventEmitter["on"]>[1]

const emitClose = (stream: H2Stream): void => {
  try {
    stream.emit("close")
  } catch {
    // a fault in a listener must not reach the daemon's event loop
  }
}

const EMPTY = Buffer.alloc(0)

/** Flat name/value pairs of a response head for the encoder; pseudo-headers first. */
const fields = (headers: http2.OutgoingHttpHeaders): Array<string> => {
  const out: Array<string> = []
  const status = headers[":status"]
  if (status !== undefined) out.push(":status", String(status))
  for (const name in headers) {
    if (name === ":status") continue
    const value = headers[name]
    if (value === undefined) continue
    const lower = name.toLowerCase()
    if (Array.isArray(value)) for (const v of value) out.push(lower, String(v))
    else out.push(lower, String(value))
  }
  return out
}

export interface H2Options {
  /** A connection with no stream open and no byte read or written for this long is closed. */
  readonly idleMs: number
  readonly onStream: (stream: H2Stream, headers: RequestHeaders) => void
}

export class H2Connection {
  private buf: Buffer | undefined = undefined
  /** reads after `buf` that do not yet make a whole frame, their bytes, and how many more `buf` needs */
  private parts: Array<Buffer> = []
  private partsBytes = 0
  private need = 0
  private preface = false
  /** the client's SETTINGS came */
  private settled = false
  private readonly streams = new Map<number, H2Stream>()
  private lastStreamId = 0
  private readonly decoder = new HpackDecoder()
  private readonly pairs: Array<string> = []
  /** a header block in pieces: HEADERS without END_HEADERS, then CONTINUATION */
  private blockStream = 0
  private blockFlags = 0
  private blockParts: Array<Buffer> | undefined = undefined
  private blockBytes = 0
  /** the peer's settings */
  private peerWindow = 65_535
  private maxFrame = MAX_FRAME
  /** what we may still send on the connection, and what the client may */
  private sendWindow = 65_535
  private recvWindow = CONNECTION_WINDOW
  private recvConsumed = 0
  private readonly waiting = new Set<H2Stream>()
  private out: Array<Buffer> = []
  private scheduled = false
  private goingAway = false
  private dead = false
  private requests = 0
  private resets = 0

  constructor(
    private readonly socket: net.Socket,
    private readonly options: H2Options
  ) {
    socket.setNoDelay(true)
    socket.on("data", this.onData)
    socket.on("close", this.onClose)
    socket.on("error", this.onError)
    socket.on("drain", this.onDrain)
    socket.on("timeout", this.onTimeout)
    socket.setTimeout(options.idleMs)
    this.queue(OPENING)
  }

  // -- reading --------------------------------------------------------------------------------------------------

  private readonly onData = (chunk: Buffer): void => {
    if (this.dead) return
    if (this.buf === undefined) this.buf = chunk
    else {
      // a frame in pieces is joined once it is whole, not at every read (a frame dripped a byte at a time)
      this.parts.push(chunk)
      this.partsBytes += chunk.length
      if (this.partsBytes < this.need) return
      this.buf = Buffer.concat([this.buf, ...this.parts])
      this.parts = []
      this.partsBytes = 0
    }
    try {
      this.parse()
    } catch (error) {
      this.fail(error instanceof ConnectionError ? error.code : H2Code.InternalError)
    }
    // answers the client does not read must not pile up: read no more until they are taken
    if (!this.dead && this.socketFull() && !this.socket.isPaused()) this.socket.pause()
  }

  private parse(): void {
    let buf = this.buf!
    let i = 0
    if (!this.preface) {
      const n = Math.min(buf.length, PREFACE.length)
      if (buf.compare(PREFACE, 0, n, 0, n) !== 0) throw new ConnectionError(H2Code.ProtocolError)
      if (buf.length < PREFACE.length) {
        this.need = PREFACE.length - buf.length
        return
      }
      this.preface = true
      i = PREFACE.length
    }
    this.need = 9
    while (buf.length - i >= 9 && !this.dead) {
      const length = (buf[i]! << 16) | (buf[i + 1]! << 8) | buf[i + 2]!
      if (length > MAX_FRAME) throw new ConnectionError(H2Code.FrameSizeError)
      if (buf.length - i < 9 + length) {
        this.need = 9 + length
        break
      }
      const type = buf[i + 3]!
      // the client's first frame is its SETTINGS (RFC 9113 §3.4)
      if (!this.settled) {
        if (type !== Frame.Settings || (buf[i + 4]! & ACK) !== 0) throw new ConnectionError(H2Code.ProtocolError)
        this.settled = true
      }
      const flags = buf[i + 4]!
      const id = buf.readUInt32BE(i + 5) & 0x7fffffff
      const start = i + 9
      i = start + length
      this.frame(type, flags, id, buf, start, i)
      // the connection ended within that frame
      if (this.buf === undefined) return
      buf = this.buf
    }
    // what is left waits for the rest of its frame: `need` counts from its start
    this.buf = i === buf.length ? undefined : buf.subarray(i)
    if (this.buf !== undefined) this.need -= this.buf.length
  }

  private frame(type: number, flags: number, id: number, buf: Buffer, start: number, end: number): void {
    // a header block in pieces must go on uninterrupted
    if (this.blockParts !== undefined && (type !== Frame.Continuation || id !== this.blockStream))
      throw new ConnectionError(H2Code.ProtocolError)
    switch (type) {
      case Frame.Data:
        this.onDataFrame(flags, id, buf, start, end)
        return
      case Frame.Headers:
        this.onHeadersFrame(flags, id, buf, start, end)
        return
      case Frame.Continuation: {
        if (this.blockParts === undefined) throw new ConnectionError(H2Code.ProtocolError)
        // a frame's header counts too: empty CONTINUATION frames are a flood as well
        this.blockBytes += end - start + 9
        if (this.blockBytes > MAX_HEADER_BLOCK) throw new ConnectionError(H2Code.EnhanceYourCalm)
        this.blockParts.push(Buffer.from(buf.subarray(start, end)))
        if ((flags & END_HEADERS) !== 0) {
          const parts = this.blockParts
          this.blockParts = undefined
          this.onHeaderBlock(this.blockFlags, this.blockStream, Buffer.concat(parts))
        }
        return
      }
      case Frame.Priority:
        if (id === 0) throw new ConnectionError(H2Code.ProtocolError)
        if (end - start !== 5) this.resetStream(id, H2Code.FrameSizeError)
        return
      case Frame.RstStream: {
        if (id === 0) throw new ConnectionError(H2Code.ProtocolError)
        if (end - start !== 4) throw new ConnectionError(H2Code.FrameSizeError)
        if (id > this.lastStreamId) throw new ConnectionError(H2Code.ProtocolError)
        const stream = this.streams.get(id)
        if (stream !== undefined) {
          this.countReset()
          stream.finish()
        }
        return
      }
      case Frame.Settings:
        this.onSettings(flags, id, buf, start, end)
        return
      case Frame.PushPromise:
        throw new ConnectionError(H2Code.ProtocolError)
      case Frame.Ping:
        if (id !== 0) throw new ConnectionError(H2Code.ProtocolError)
        if (end - start !== 8) throw new ConnectionError(H2Code.FrameSizeError)
        if ((flags & ACK) === 0) {
          const pong = Buffer.allocUnsafe(17)
          pong.writeUIntBE(8, 0, 3)
          pong[3] = Frame.Ping
          pong[4] = ACK
          pong.writeUInt32BE(0, 5)
          buf.copy(pong, 9, start, end)
          this.queue(pong)
        }
        return
      case Frame.GoAway:
        if (id !== 0) throw new ConnectionError(H2Code.ProtocolError)
        if (end - start < 8) throw new ConnectionError(H2Code.FrameSizeError)
        // no new streams; the open ones finish
        this.goingAway = true
        if (this.streams.size === 0) this.end()
        return
      case Frame.WindowUpdate:
        this.onWindowUpdate(id, buf, start, end)
        return
      default:
      // unknown frame types are ignored (RFC 9113 §4.1)
    }
  }

  /** The payload without its padding, or a connection error. */
  private unpad(flags: number, start: number, end: number): number {
    if ((flags & PADDED) === 0) return start
    if (end - start < 1) throw new ConnectionError(H2Code.FrameSizeError)
    return start + 1
  }

  private padEnd(flags: number, buf: Buffer, start: number, end: number): number {
    if ((flags & PADDED) === 0) return end
    const pad = buf[start]!
    if (pad >= end - start) throw new ConnectionError(H2Code.ProtocolError)
    return end - pad
  }

  private onDataFrame(flags: number, id: number, buf: Buffer, start: number, end: number): void {
    if (id === 0) throw new ConnectionError(H2Code.ProtocolError)
    const size = end - start
    // the whole payload, padding too, counts against the windows
    if (size > this.recvWindow) throw new ConnectionError(H2Code.FlowControlError)
    this.recvWindow -= size
    const stream = this.streams.get(id)
    if (stream === undefined) {
      if (id > this.lastStreamId) throw new ConnectionError(H2Code.ProtocolError)
      // a stream already closed (reset by us, say): what was in flight is dropped
      this.consumed(size)
      return
    }
    if (stream.remoteEnded) {
      this.consumed(size)
      this.resetStream(id, H2Code.StreamClosed)
      return
    }
    if (size > stream.recvWindow) {
      this.consumed(size)
      this.resetStream(id, H2Code.FlowControlError)
      return
    }
    stream.recvWindow -= size
    const from = this.unpad(flags, start, end)
    const to = this.padEnd(flags, buf, start, end)
    const n = to - from
    stream.receivedLength += n
    if (stream.expectedLength !== -1 && stream.receivedLength > stream.expectedLength) {
      this.malformed(stream)
      return
    }
    // padding is consumed at once
    if (size > n) stream.consume(size - n)
    // the socket's chunks are not used again: the stream may keep a view of one
    if (n > 0) stream.received(buf.subarray(from, to))
    if ((flags & END_STREAM) !== 0) {
      if (stream.expectedLength !== -1 && stream.receivedLength !== stream.expectedLength) {
        this.malformed(stream)
        return
      }
      stream.remoteEnd()
    }
  }

  private onHeadersFrame(flags: number, id: number, buf: Buffer, start: number, end: number): void {
    if (id === 0) throw new ConnectionError(H2Code.ProtocolError)
    let from = this.unpad(flags, start, end)
    const to = this.padEnd(flags, buf, start, end)
    if ((flags & PRIORITY) !== 0) {
      from += 5
      if (from > to) throw new ConnectionError(H2Code.FrameSizeError)
    }
    if ((flags & END_HEADERS) !== 0) {
      this.onHeaderBlock(flags, id, buf.subarray(from, to))
      return
    }
    this.blockStream = id
    this.blockFlags = flags
    this.blockBytes = to - from
    this.blockParts = [Buffer.from(buf.subarray(from, to))]
  }

  private onHeaderBlock(flags: number, id: number, block: Buffer): void {
    // the decoder writes the list from its start
    const pairs = this.pairs
    let tooLarge = false
    try {
      this.decoder.decode(block, pairs, MAX_HEADER_LIST)
    } catch (error) {
      if (!(error instanceof HeaderListTooLarge)) throw new ConnectionError(H2Code.CompressionError)
      tooLarge = true
    }
    const existing = this.streams.get(id)
    if (existing !== undefined) {
      if (existing.remoteEnded) {
        this.resetStream(id, H2Code.StreamClosed)
        return
      }
      // trailers end the request (berth's backends get none: a chunked body's end is sent without them); a body
      // short of its Content-Length is malformed, as it would be without them
      if (
        (flags & END_STREAM) === 0 ||
        (existing.expectedLength !== -1 && existing.receivedLength !== existing.expectedLength)
      ) {
        this.malformed(existing)
        return
      }
      existing.remoteEnd()
      return
    }
    if ((id & 1) === 0) throw new ConnectionError(H2Code.ProtocolError)
    // trailers of a stream already reset here: decoded (the table stays in step) and dropped
    if (id <= this.lastStreamId) return
    // after the client's GOAWAY it opens no stream
    if (this.goingAway) return
    this.lastStreamId = id
    if (this.streams.size >= MAX_STREAMS) {
      this.sendReset(id, H2Code.RefusedStream)
      return
    }
    const stream = new H2Stream(id, this, this.peerWindow)
    this.streams.set(id, stream)
    this.requests++
    stream.endAfterHeaders = (flags & END_STREAM) !== 0
    // 'end' waits for a reader, as node's
    if (stream.endAfterHeaders) stream.remoteEnd()
    if (tooLarge) {
      stream.respond({
        ":status": 431,
        "content-type": "text/plain; charset=utf-8",
        "content-length": TOO_LARGE.length
      })
      stream.end(TOO_LARGE)
      return
    }
    const headers = requestHeaders(pairs)
    if (headers === MALFORMED) {
      this.malformed(stream)
      return
    }
    const length = headers["content-length"]
    if (typeof length === "string") {
      stream.expectedLength = Number(length)
      // a request (HEAD's too) that names a body it does not send: the backend would read the next request as it
      if (stream.endAfterHeaders && stream.expectedLength !== 0) {
        this.malformed(stream)
        return
      }
    }
    try {
      this.options.onStream(stream, headers)
    } catch {
      stream.close(H2Code.InternalError)
    }
  }

  private malformed(stream: H2Stream): void {
    this.countReset()
    stream.close(H2Code.ProtocolError)
  }

  /**
   * A client whose streams mostly end in a reset (its own or a malformed request) is flooding the proxy: each one
   * costs a backend request begun and cancelled. Browsers cancel some streams, never most of thousands.
   */
  private countReset(): void {
    this.resets++
    if (this.resets > RESETS_FLOOR && this.resets * 2 > this.requests) throw new ConnectionError(H2Code.EnhanceYourCalm)
  }

  private resetStream(id: number, code: number): void {
    const stream = this.streams.get(id)
    if (stream !== undefined) stream.close(code)
    else this.sendReset(id, code)
  }

  private onSettings(flags: number, id: number, buf: Buffer, start: number, end: number): void {
    if (id !== 0) throw new ConnectionError(H2Code.ProtocolError)
    if ((flags & ACK) !== 0) {
      if (end !== start) throw new ConnectionError(H2Code.FrameSizeError)
      return
    }
    if ((end - start) % 6 !== 0) throw new ConnectionError(H2Code.FrameSizeError)
    for (let o = start; o < end; o += 6) {
      const setting = buf.readUInt16BE(o)
      const value = buf.readUInt32BE(o + 2)
      if (setting === 0x2 && value > 1) throw new ConnectionError(H2Code.ProtocolError)
      if (setting === 0x4) {
        if (value > MAX_WINDOW) throw new ConnectionError(H2Code.FlowControlError)
        const delta = value - this.peerWindow
        this.peerWindow = value
        for (const stream of this.streams.values()) {
          stream.sendWindow += delta
          if (stream.sendWindow > MAX_WINDOW) throw new ConnectionError(H2Code.FlowControlError)
        }
        if (delta > 0) this.sendWaiting()
      } else if (setting === 0x5) {
        if (value < MAX_FRAME || value > 16_777_215) throw new ConnectionError(H2Code.ProtocolError)
        this.maxFrame = value
      }
      // the header table size the client's decoder allows: this encoder uses no dynamic table, so any is fine
    }
    this.queue(SETTINGS_ACK)
  }

  private onWindowUpdate(id: number, buf: Buffer, start: number, end: number): void {
    if (end - start !== 4) throw new ConnectionError(H2Code.FrameSizeError)
    const increment = buf.readUInt32BE(start) & 0x7fffffff
    if (id === 0) {
      if (increment === 0) throw new ConnectionError(H2Code.ProtocolError)
      this.sendWindow += increment
      if (this.sendWindow > MAX_WINDOW) throw new ConnectionError(H2Code.FlowControlError)
      this.sendWaiting()
      return
    }
    const stream = this.streams.get(id)
    if (stream === undefined) {
      if (id > this.lastStreamId) throw new ConnectionError(H2Code.ProtocolError)
      return
    }
    if (increment === 0) {
      this.resetStream(id, H2Code.ProtocolError)
      return
    }
    stream.sendWindow += increment
    if (stream.sendWindow > MAX_WINDOW) {
      this.resetStream(id, H2Code.FlowControlError)
      return
    }
    if (stream.queue !== undefined && stream.sendQueued()) this.waiting.delete(stream)
  }

  private sendWaiting(): void {
    for (const stream of this.waiting) {
      if (this.sendWindow <= 0) return
      if (stream.sendQueued()) this.waiting.delete(stream)
    }
  }

  // -- writing --------------------------------------------------------------------------------------------------

  /** Frames go out together at the end of the turn: one socket write for a response's HEADERS and DATA. */
  private queue(frame: Buffer): void {
    if (this.dead) return
    this.out.push(frame)
    if (!this.scheduled) {
      this.scheduled = true
      queueMicrotask(this.flushOut)
    }
  }

  private readonly flushOut = (): void => {
    this.scheduled = false
    const out = this.out
    if (out.length === 0 || this.dead) return
    this.out = []
    this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out))
  }

  socketFull(): boolean {
    return this.socket.writableLength > SOCKET_HIGH_WATER
  }

  sendHeaders(id: number, block: Buffer, end: boolean): void {
    let flags = end ? END_STREAM : 0
    let o = 0
    let type: number = Frame.Headers
    do {
      const n = Math.min(block.length - o, this.maxFrame)
      const last = o + n === block.length
      if (last) flags |= END_HEADERS
      const header = frameHeader(n, type, flags, id)
      this.queue(header)
      if (n > 0) this.queue(o === 0 && last ? block : block.subarray(o, o + n))
      o += n
      type = Frame.Continuation
      flags = 0
    } while (o < block.length)
  }

  /** Sends as much of `data` as the windows allow; returns how much. */
  sendData(stream: H2Stream, data: Buffer, end: boolean): number {
    if (this.dead) return data.length
    let o = 0
    do {
      // a window may be below zero (the client lowered its initial window, RFC 9113 §6.9.2): nothing then
      const room = Math.max(0, Math.min(this.sendWindow, stream.sendWindow, this.maxFrame))
      const n = Math.min(room, data.length - o)
      if (n <= 0 && data.length > 0) return o
      const last = o + n === data.length
      this.queue(frameHeader(n, Frame.Data, last && end ? END_STREAM : 0, stream.id))
      if (n > 0) this.queue(n === data.length ? data : data.subarray(o, o + n))
      this.sendWindow -= n
      stream.sendWindow -= n
      o += n
    } while (o < data.length)
    return o
  }

  /**
   * Request body bytes read (or dropped): the connection's window is given back as they are, so that what waits
   * unread on all streams together stays within CONNECTION_WINDOW.
   */
  consumed(n: number): void {
    this.recvConsumed += n
    if (this.recvConsumed >= CONNECTION_WINDOW / 2 && !this.dead) {
      this.windowUpdate(0, this.recvConsumed)
      this.recvWindow += this.recvConsumed
      this.recvConsumed = 0
    }
  }

  blocked(stream: H2Stream): void {
    this.waiting.add(stream)
  }

  windowUpdate(id: number, increment: number): void {
    const frame = frameHeader(4, Frame.WindowUpdate, 0, id, 13)
    frame.writeUInt32BE(increment, 9)
    this.queue(frame)
  }

  sendReset(id: number, code: number): void {
    const frame = frameHeader(4, Frame.RstStream, 0, id, 13)
    frame.writeUInt32BE(code, 9)
    this.queue(frame)
  }

  forget(stream: H2Stream): void {
    this.streams.delete(stream.id)
    this.waiting.delete(stream)
    if (this.goingAway && this.streams.size === 0) this.end()
  }

  private readonly onDrain = (): void => {
    if (this.socket.isPaused() && !this.dead) this.socket.resume()
    for (const stream of this.streams.values()) if (stream.needDrain) stream.socketDrained()
  }

  private readonly onTimeout = (): void => {
    // a stream waiting for its backend is not idleness; the timer fires again after the next byte
    if (this.streams.size === 0) this.fail(H2Code.NoError)
  }

  /** GOAWAY naming the last stream taken, then the connection ends once it is written. */
  private fail(code: number): void {
    if (this.dead) return
    const frame = frameHeader(8, Frame.GoAway, 0, 0, 17)
    frame.writeUInt32BE(this.lastStreamId, 9)
    frame.writeUInt32BE(code, 13)
    this.queue(frame)
    this.flushOut()
    this.dead = true
    this.buf = undefined
    this.socket.end()
    // a client that never reads must not hold the socket
    setTimeout(() => this.socket.destroy(), 1_000).unref()
    for (const stream of [...this.streams.values()]) stream.finish()
  }

  private end(): void {
    this.fail(H2Code.NoError)
  }

  private readonly onError = (): void => {
    this.socket.destroy()
  }

  private readonly onClose = (): void => {
    this.dead = true
    this.buf = undefined
    this.out = []
    for (const stream of [...this.streams.values()]) stream.finish()
  }
}

const frameHeader = (length: number, type: number, flags: number, id: number, size = 9): Buffer => {
  const b = Buffer.allocUnsafe(size)
  b[0] = length >>> 16
  b[1] = (length >>> 8) & 0xff
  b[2] = length & 0xff
  b[3] = type
  b[4] = flags
  b.writeUInt32BE(id, 5)
  return b
}
