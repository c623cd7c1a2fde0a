/**
 * The HTTP/1.1 fast path: one client connection pinned to one backend connection. Plain HTTP, and HTTPS once the
 * TLS handshake settled on HTTP/1.1 (h2 goes through node:http2).
 *
 * Browsers keep a connection to one origin, so after a request's head is read the proxy can pass bytes through
 * almost untouched. Each request head is still read, routed and rewritten (hop-by-hop headers out, X-Forwarded-*
 * and the hop count in); its body follows by Content-Length or chunked framing, never buffered. Responses pass
 * back byte for byte; their heads are read only to know where each response ends, so that the connection can move
 * to another backend (the next request names another host, or the route changed) at a response boundary. An
 * upgrade (WebSocket) that the backend accepts turns the pair into a raw pipe.
 *
 * What is answered here: malformed heads (400), heads over the limit (431), heads too slow to arrive (408), loops
 * (508), unknown hosts (404) and unavailable services (502), as pages. What is not usual (CONNECT, absolute-form
 * targets) is handed to the node:http server of the slow path (for TLS, node:http2's HTTP/1.1 fallback) with the bytes
 * read so far.
 *
 * A world another machine runs is the same exchange with that machine's proxy as the backend (its cluster
 * listener, Host kept). Connections a peer made to this machine's cluster listener take the same path, with two
 * differences: the peer's X-Forwarded-Proto is believed, and nothing is forwarded to a third machine.
 */
import type * as net from "node:net"
import {
  choose,
  forwardedOrigin,
  loopPage,
  type Lookup,
  machineOnlyPage,
  lookup,
  notFoundPage,
  type Origin,
  type PageModel,
  type RemoteOwner,
  remotePage,
  type RouteTable,
  type RouteTarget,
  type Unavailable,
  unavailablePage,
  wakeIfSuspended
} from "../../domain/routes.js"
import type { Backends, DialCallback } from "./backends.js"
import {
  ChunkedScanner,
  CRLFCRLF,
  MALFORMED,
  MAX_HEAD_BYTES,
  MORE,
  parseRequestHead,
  type ResponseHead,
  scanResponseHead,
  type RequestHead,
  rewriteRequestHead
} from "./http1.js"
import { rawError, rawResponse, renderPage } from "./pages.js"

export interface FastContext {
  readonly routes: () => RouteTable
  readonly hopLimit: number
  readonly backends: Backends
  /** Gives the connection to the node:http server; the unread bytes were put back on the socket. */
  readonly handOff: (socket: net.Socket) => void
  /** A request head must arrive whole within this. */
  readonly headMs: number
  /** Closes connections left idle. */
  readonly idle: IdleSweep
  /**
   * The connections come from peers' proxies (the cluster listener): their X-Forwarded-Proto is kept, a world owned
   * elsewhere is answered rather than forwarded again, and nothing is handed to the slow path.
   */
  readonly cluster: boolean
  /** How clients reach this listener: what X-Forwarded-Proto says (peers' connections say it themselves). */
  readonly scheme: "http" | "https"
}

/**
 * Closes connections with nothing in flight that moved no bytes for `idleMs`. One timer for all of them: a socket
 * timeout would be re-armed on every read and write, which the hot path pays for; here a request costs one flag.
 * A connection goes between `idleMs` and `idleMs` plus two ticks after its last byte. The timer runs only while
 * connections are open.
 */
export class IdleSweep {
  private readonly connections = new Set<FastConnection>()
  private timer: NodeJS.Timeout | undefined = undefined
  private readonly everyMs: number

  constructor(readonly idleMs: number) {
    this.everyMs = Math.max(25, Math.min(1_000, Math.floor(idleMs / 8)))
  }

  add(connection: FastConnection): void {
    this.connections.add(connection)
    if (this.timer === undefined) {
      this.timer = setInterval(this.sweep, this.everyMs)
      this.timer.unref()
    }
  }

  delete(connection: FastConnection): void {
    this.connections.delete(connection)
    if (this.connections.size === 0) this.stop()
  }

  stop(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  private readonly sweep = (): void => {
    const now = performance.now()
    for (const connection of this.connections) connection.sweep(now, this.idleMs)
  }
}

/** Backend reads land in a buffer of this size, or of the larger one once a read filled it (a big body). */
const READ_BYTES = 16 * 1024
const LARGE_READ_BYTES = 64 * 1024

/** Requests that may be sent again when a reused backend connection closes before answering. */
const REPLAYABLE = new Set(["GET", "HEAD", "OPTIONS"])

enum Req {
  Head,
  Length,
  Chunked,
  AwaitUpgrade,
  /** the client asked to close: nothing more is read */
  Done,
  Raw
}

enum Res {
  Head,
  Length,
  Chunked,
  UntilClose,
  Raw
}

interface Pending {
  readonly isHead: boolean
  readonly upgrade: boolean
  readonly close: boolean
  /** the rewritten head, when the request has no body and may be sent again */
  readonly replay: string | undefined
  readonly host: string
  readonly target: RouteTarget
  readonly accept: string | undefined
  /** how the client reached the first proxy, for a request a peer forwarded (else this listener's) */
  readonly origin: Origin | undefined
  /** response bytes have reached the client */
  started: boolean
}

export class FastConnection {
  private backend: net.Socket | undefined = undefined
  private port = 0
  /** the backend is a peer's proxy at this address; undefined: a local service on loopback */
  private address: string | undefined = undefined
  private buf: Buffer | undefined = undefined
  private scanFrom = 0
  private req = Req.Head
  private remaining = 0
  private readonly chunks = new ChunkedScanner()
  private current: Pending | undefined = undefined
  private readonly pending: Array<Pending> = []
  /** not reading the client: dialling, or waiting for responses before a switch */
  private blocked = false
  private waitingForResponses = false
  /** the backend answered an upgrade without switching: read requests again */
  private upgradeRefused = false
  /** a rewritten head waiting to go out with the first body bytes */
  private headPrefix: string | undefined = undefined
  private clientPaused = false
  private backendPaused = false
  private res = Res.Head
  private resRemaining = 0
  private readonly resChunks = new ChunkedScanner()
  private resHead: Buffer | undefined = undefined
  /** the backend said it closes after the current response */
  private doomed = false
  private served = 0
  private replayed = false
  private closeAfterResponse = false
  private refusal: Buffer | undefined = undefined
  private closed = false
  private clientEnded = false
  private readonly clientAddress: string
  private readonly localPort: number
  private cacheTable: RouteTable | undefined = undefined
  private cacheHost: string | undefined = undefined
  private cacheLookup: Lookup | undefined = undefined
  /** part of a request head has come and the rest has not: the head timer runs */
  private headPending = false
  private headTimer: NodeJS.Timeout | undefined = undefined
  /** where the next backend read lands; replaced while a write to the client still holds it */
  private readBuffer: Buffer | undefined = undefined
  /** bytes came from either side since the idle sweep last looked */
  private active = true
  private idleSince = 0

  constructor(
    private readonly client: net.Socket,
    private readonly ctx: FastContext
  ) {
    client.setNoDelay(true)
    this.clientAddress = client.remoteAddress ?? ""
    this.localPort = client.localPort ?? 0
    client.on("data", this.onClientData)
    client.on("end", this.onClientEnd)
    client.on("error", this.onClientError)
    client.on("close", this.onClientClose)
    client.on("drain", this.onClientDrain)
    ctx.idle.add(this)
  }

  // -- client side ------------------------------------------------------------------------------------------

  private readonly onClientData = (chunk: Buffer): void => {
    this.active = true
    if (this.closed) return
    if (this.req === Req.Raw) {
      this.toBackend(chunk)
      return
    }
    this.buf = this.buf === undefined ? chunk : Buffer.concat([this.buf, chunk])
    this.guarded(this.pump)
  }

  /** A fault in this code closes one connection; it must never reach the daemon's event loop. */
  private guarded(f: () => void): void {
    try {
      f.call(this)
    } catch {
      this.destroy()
    }
  }

  private readonly onClientEnd = (): void => {
    this.clientEnded = true
    if (this.closed) return
    if (this.req === Req.Raw) {
      this.backend?.end()
      return
    }
    if (this.req === Req.Length || this.req === Req.Chunked) {
      this.destroy()
      return
    }
    this.maybeFinish()
  }

  private readonly onClientError = (): void => this.destroy()

  private readonly onClientClose = (): void => {
    this.closed = true
    this.backend?.destroy()
    this.backend = undefined
    clearTimeout(this.headTimer)
    this.ctx.idle.delete(this)
  }

  private readonly onClientDrain = (): void => {
    if (this.backendPaused) {
      this.backendPaused = false
      this.backend?.resume()
    }
  }

  /** Called by the idle sweep: a connection waiting for a response, or a WebSocket, is never idle. */
  sweep(now: number, idleMs: number): void {
    if (this.active) {
      this.active = false
      this.idleSince = now
    } else if (now - this.idleSince >= idleMs && this.pending.length === 0 && !this.blocked && this.req !== Req.Raw) {
      this.destroy()
    }
  }

  /**
   * A head began and is not whole yet: its time starts now. A head that comes in one read never gets here, so the
   * hot path pays nothing; one dripped a byte at a time costs a timer reset once. The idle timeout cannot catch a
   * drip, since every byte counts as activity.
   */
  private headStarted(): void {
    if (this.headPending) return
    this.headPending = true
    if (this.headTimer === undefined) this.headTimer = setTimeout(this.onHeadTimeout, this.ctx.headMs)
    else this.headTimer.refresh()
  }

  private readonly onHeadTimeout = (): void => {
    if (!this.headPending || this.closed || this.req !== Req.Head) return
    this.guarded(() => this.refuse(408, "the request head took too long"))
  }

  private pump(): void {
    while (this.buf !== undefined && !this.blocked && !this.closed) {
      const state = this.req
      if (state === Req.Head) {
        if (!this.readHead()) break
      } else if (state === Req.Length) {
        const buf = this.buf
        const n = Math.min(this.remaining, buf.length)
        this.toBackendBody(n === buf.length ? buf : buf.subarray(0, n))
        this.consume(n)
        this.remaining -= n
        if (this.remaining === 0) this.requestDone()
      } else if (state === Req.Chunked) {
        const buf = this.buf
        const end = this.chunks.scan(buf, 0)
        if (end === MALFORMED) {
          this.destroy()
          return
        }
        if (end === MORE) {
          this.toBackendBody(buf)
          this.buf = undefined
        } else {
          this.toBackendBody(end === buf.length ? buf : buf.subarray(0, end))
          this.consume(end)
          this.requestDone()
        }
      } else if (state === Req.Raw) {
        this.toBackend(this.buf)
        this.buf = undefined
      } else if (state === Req.Done) {
        this.buf = undefined
      } else {
        // awaiting the backend's answer to an upgrade: keep the bytes
        break
      }
    }
  }

  private consume(n: number): void {
    const buf = this.buf!
    this.buf = n >= buf.length ? undefined : buf.subarray(n)
  }

  private find(host: string | undefined): Lookup {
    const table = this.ctx.routes()
    if (table === this.cacheTable && host === this.cacheHost && this.cacheLookup !== undefined) return this.cacheLookup
    const found = lookup(table, host)
    this.cacheTable = table
    this.cacheHost = host
    this.cacheLookup = found
    return found
  }

  /** Reads one request head and acts on it; false when nothing more can be done now. */
  private readHead(): boolean {
    let buf = this.buf!
    if (this.scanFrom === 0) {
      // empty lines before a request line are allowed
      let skip = 0
      while (buf[skip] === 13 && buf[skip + 1] === 10) skip += 2
      if (skip > 0) {
        this.consume(skip)
        if (this.buf === undefined) {
          // empty lines dripped one after another are a head that never comes
          this.headStarted()
          return false
        }
        buf = this.buf
      }
    }
    const end = buf.indexOf(CRLFCRLF, this.scanFrom)
    if (end === -1) {
      if (buf.length > MAX_HEAD_BYTES) return this.refuse(431, "the request head is too large")
      this.scanFrom = Math.max(0, buf.length - 3)
      this.headStarted()
      return false
    }
    this.scanFrom = 0
    this.headPending = false
    if (end + 4 > MAX_HEAD_BYTES) return this.refuse(431, "the request head is too large")
    const head = parseRequestHead(buf.toString("latin1", 0, end))
    if (!head.ok) return this.refuse(head.status, head.reason)
    if (head.method === "CONNECT" || head.target.charCodeAt(0) !== 47) return this.slow()
    const found = this.find(head.host)
    if (head.hops >= this.ctx.hopLimit) return this.answerPage(head, end + 4, loopPage(found.host, head.hops))
    const table = this.cacheTable!
    if (found._tag === "UnknownHost")
      return this.answerPage(head, end + 4, notFoundPage(table, found, this.origin(head)))
    const target = found.target
    if (this.ctx.cluster && target.machineOnly === true) {
      return this.answerPage(head, end + 4, machineOnlyPage(found.host))
    }
    const remote = target.remote
    if (remote !== undefined) return this.readRemote(head, end + 4, found.host, target, remote)
    if (!target.ready || target.port === undefined) {
      wakeIfSuspended(table, target)
      return this.answerPage(head, end + 4, unavailablePage(table, found.host, target, "not-ready", this.origin(head)))
    }
    if (this.backend === undefined || this.port !== target.port || this.address !== undefined || this.doomed) {
      if (this.pending.length > 0) return this.waitForResponses()
      // counted once it goes out (or is refused): this head is read again when the backend is there
      this.connect(target.port, undefined, head, found.host, target)
      return false
    }
    table.seen?.(target)
    this.forward(head, end + 4, found.host, target)
    return true
  }

  /** A world another machine runs: its proxy is the backend. Not counted here; the owner counts what reaches it. */
  private readRemote(
    head: RequestHead,
    headLength: number,
    host: string,
    target: RouteTarget,
    remote: RemoteOwner
  ): boolean {
    const choice = choose(target, this.ctx.cluster)
    if (choice !== "forward") {
      const trouble = choice === "elsewhere" ? "elsewhere" : "moving"
      return this.answerPage(
        head,
        headLength,
        remotePage(this.cacheTable!, host, target, remote, trouble, this.origin(head))
      )
    }
    if (this.backend === undefined || this.port !== remote.port || this.address !== remote.address || this.doomed) {
      if (this.pending.length > 0) return this.waitForResponses()
      this.connect(remote.port, remote.address, head, host, target)
      return false
    }
    this.forward(head, headLength, host, target)
    return true
  }

  /** Where page links point: this listener, or for a peer's forwarded request, where its client came in. */
  private origin(head: RequestHead | undefined): Origin {
    if (this.ctx.cluster && head !== undefined) return forwardedOrigin(head.host, head.forwardedProto)
    return { scheme: this.ctx.scheme, port: this.localPort }
  }

  private forward(head: RequestHead, headLength: number, host: string, target: RouteTarget): void {
    // a peer's proxy says whether its client came over TLS; anyone else's claim is dropped
    const proto = this.ctx.cluster ? (head.forwardedProto === "https" ? "https" : "http") : this.ctx.scheme
    const out = rewriteRequestHead(head, this.clientAddress, proto, head.hops + 1)
    const bodyless = !head.chunked && head.contentLength <= 0
    const pending: Pending = {
      isHead: head.method === "HEAD",
      upgrade: head.upgrade !== undefined,
      close: head.close,
      replay: bodyless && head.upgrade === undefined && REPLAYABLE.has(head.method) ? out : undefined,
      host,
      target,
      accept: head.accept,
      origin: this.ctx.cluster ? forwardedOrigin(head.host, head.forwardedProto) : undefined,
      started: false
    }
    this.pending.push(pending)
    // body bytes that came with the head go out in the same write
    if (bodyless || this.buf!.length === headLength) this.toBackend(out)
    else this.headPrefix = out
    this.consume(headLength)
    this.current = pending
    if (head.chunked) {
      this.req = Req.Chunked
      this.chunks.reset()
    } else if (head.contentLength > 0) {
      this.req = Req.Length
      this.remaining = head.contentLength
    } else {
      this.requestDone()
    }
  }

  private requestDone(): void {
    const p = this.current
    this.current = undefined
    if (p?.upgrade === true) {
      // nothing is read until the backend says whether it switches protocols
      this.req = Req.AwaitUpgrade
      this.block()
    } else {
      this.req = p?.close === true ? Req.Done : Req.Head
    }
  }

  /** Answers a request with one of the proxy's pages; keeps the connection when the request had no body. */
  private answerPage(head: RequestHead, headLength: number, page: PageModel): boolean {
    if (this.pending.length > 0) return this.waitForResponses()
    const keep = !head.chunked && head.contentLength <= 0 && !head.close && head.upgrade === undefined
    const rendered = renderPage(page, head.accept)
    const bytes = rawResponse(rendered, { close: !keep, head: head.method === "HEAD" })
    this.consume(headLength)
    if (keep) {
      this.client.write(bytes)
      return true
    }
    this.closed = true
    this.dropBackend()
    this.buf = undefined
    this.client.end(bytes)
    return false
  }

  /** 400/408/431: answered once earlier responses are out, then the connection closes. */
  private refuse(status: 400 | 408 | 431, reason: string): boolean {
    this.refusal = rawError(status, reason)
    this.req = Req.Done
    this.buf = undefined
    if (this.pending.length === 0) this.flushRefusal()
    return false
  }

  private flushRefusal(): void {
    const bytes = this.refusal!
    this.refusal = undefined
    this.closed = true
    this.dropBackend()
    this.client.end(bytes)
  }

  /** Hands the connection, with what it sent so far, to the node:http server. */
  private slow(): boolean {
    if (this.pending.length > 0) return this.waitForResponses()
    // peers forward only origin-form requests
    if (this.ctx.cluster) return this.refuse(400, "unsupported request")
    // a socket whose reading side ended cannot take bytes back
    if (this.clientEnded) return this.refuse(400, "unsupported request")
    this.dropBackend()
    this.closed = true
    const client = this.client
    client.pause()
    client.removeListener("data", this.onClientData)
    client.removeListener("end", this.onClientEnd)
    client.removeListener("error", this.onClientError)
    client.removeListener("close", this.onClientClose)
    client.removeListener("drain", this.onClientDrain)
    clearTimeout(this.headTimer)
    this.ctx.idle.delete(this)
    if (this.buf !== undefined) client.unshift(this.buf)
    this.buf = undefined
    this.ctx.handOff(client)
    return false
  }

  private block(): void {
    this.blocked = true
    this.client.pause()
  }

  private unblock(): void {
    this.blocked = false
    if (!this.clientPaused) this.client.resume()
    queueMicrotask(() => this.guarded(this.pump))
  }

  private waitForResponses(): boolean {
    this.waitingForResponses = true
    this.block()
    return false
  }

  private maybeFinish(): void {
    if (
      this.clientEnded &&
      !this.closed &&
      this.pending.length === 0 &&
      !this.blocked &&
      (this.buf === undefined || this.req === Req.Done)
    ) {
      this.finish()
    }
  }

  private finish(): void {
    this.closed = true
    this.dropBackend()
    this.client.end()
  }

  private destroy(): void {
    this.closed = true
    this.backend?.destroy()
    this.backend = undefined
    this.client.destroy()
  }

  // -- backend side -----------------------------------------------------------------------------------------

  /**
   * Dials a backend whose reads land in this connection's own buffer (net's `onread`): no 'data' event, no new buffer
   * per read. Reads of a socket that is no longer this connection's backend are dropped.
   */
  private dial(port: number, address: string | undefined, callback: DialCallback): void {
    let socket: net.Socket | undefined
    this.readBuffer ??= Buffer.allocUnsafeSlow(READ_BYTES)
    const dialled: DialCallback = (error, s) => {
      socket = s
      callback(error, s)
    }
    const onread = {
      buffer: this.nextReadBuffer,
      // true: go on reading (pausing is the stream's pause(), as before)
      callback: (n: number, buffer: Uint8Array) => {
        if (this.backend === socket) this.onBackendRead(n, buffer as Buffer)
        return true
      }
    }
    if (address === undefined) this.ctx.backends.dial(port, dialled, onread)
    else this.ctx.backends.dialRemote(address, port, dialled, onread)
  }

  private readonly nextReadBuffer = (): Buffer => this.readBuffer!

  private onBackendRead(n: number, buffer: Buffer): void {
    try {
      this.onBackendData(buffer.subarray(0, n))
    } catch {
      this.destroy()
    }
    // a write the client has not taken yet still holds those bytes: the next read must not overwrite them
    if (this.client.writableLength !== 0) this.readBuffer = Buffer.allocUnsafeSlow(buffer.length)
    else if (n === buffer.length && buffer.length < LARGE_READ_BYTES) {
      this.readBuffer = Buffer.allocUnsafeSlow(LARGE_READ_BYTES)
    }
  }

  private connect(
    port: number,
    address: string | undefined,
    head: RequestHead,
    host: string,
    target: RouteTarget
  ): void {
    this.dropBackend()
    this.block()
    this.dial(port, address, (error, socket) => {
      if (this.closed) {
        socket?.destroy()
        return
      }
      if (error !== undefined || socket === undefined) {
        this.blocked = false
        if (address === undefined) this.cacheTable?.seen?.(target)
        this.answerDirect(head.method === "HEAD", head.accept, host, target, "refused", this.origin(head))
        return
      }
      this.attach(socket, port, address)
      this.unblock()
    })
  }

  private attach(socket: net.Socket, port: number, address: string | undefined): void {
    this.backend = socket
    this.port = port
    this.address = address
    this.res = Res.Head
    this.resHead = undefined
    this.doomed = false
    this.served = 0
    socket.on("end", () => {
      if (this.backend === socket) this.onBackendEnd()
    })
    socket.on("error", () => {
      if (this.backend === socket) this.backendGone()
    })
    socket.on("close", () => {
      if (this.backend === socket) this.backendGone()
    })
    socket.on("drain", () => {
      if (this.backend === socket && this.clientPaused) {
        this.clientPaused = false
        if (!this.blocked) this.client.resume()
      }
    })
    if (this.backendPaused) socket.pause()
  }

  private dropBackend(): void {
    const backend = this.backend
    if (backend === undefined) return
    this.backend = undefined
    backend.destroy()
    if (this.clientPaused) {
      this.clientPaused = false
      if (!this.blocked && !this.closed) this.client.resume()
    }
  }

  private toBackend(data: Buffer | string): void {
    const backend = this.backend
    // the backend answered early and went away: the rest of the body has nowhere to go
    if (backend === undefined) return
    const ok = typeof data === "string" ? backend.write(data, "latin1") : backend.write(data)
    if (!ok && !this.clientPaused) {
      this.clientPaused = true
      this.client.pause()
    }
  }

  private toBackendBody(data: Buffer): void {
    const prefix = this.headPrefix
    if (prefix === undefined) {
      this.toBackend(data)
      return
    }
    this.headPrefix = undefined
    this.toBackend(Buffer.concat([Buffer.from(prefix, "latin1"), data]))
  }

  private toClient(data: Buffer): void {
    if (!this.client.write(data) && !this.backendPaused) {
      this.backendPaused = true
      this.backend?.pause()
    }
  }

  private onBackendData(chunk: Buffer): void {
    this.active = true
    if (this.closed) return
    if (this.res === Res.Raw) {
      this.toClient(chunk)
      return
    }
    const length = chunk.length
    let i = 0
    let broken = false
    while (i < length) {
      const p = this.pending[0]
      if (p === undefined) {
        // bytes nobody asked for
        broken = true
        break
      }
      p.started = true
      const state = this.res
      if (state === Res.Length) {
        const n = Math.min(this.resRemaining, length - i)
        i += n
        this.resRemaining -= n
        if (this.resRemaining === 0) this.responseDone()
      } else if (state === Res.Chunked) {
        const end = this.resChunks.scan(chunk, i)
        if (end === MALFORMED) {
          broken = true
          break
        }
        if (end === MORE) i = length
        else {
          i = end
          this.responseDone()
        }
      } else if (state === Res.UntilClose) {
        i = length
      } else {
        let head: ResponseHead | null | undefined
        let next = 0
        if (this.resHead === undefined) {
          head = scanResponseHead(chunk, i)
          if (head === null) {
            // a copy: the read buffer is used again
            this.resHead = Buffer.from(chunk.subarray(i))
            i = length
            break
          }
          if (head !== undefined) next = head.end
        } else {
          const before = this.resHead.length
          const joined = Buffer.concat([this.resHead, chunk.subarray(i)])
          head = scanResponseHead(joined, 0)
          if (head === null) {
            if (joined.length > MAX_HEAD_BYTES) {
              broken = true
              break
            }
            this.resHead = joined
            i = length
            break
          }
          this.resHead = undefined
          if (head !== undefined) next = i + head.end - before
        }
        if (head === undefined) {
          broken = true
          break
        }
        i = next
        if (head.status === 101) {
          if (!p.upgrade) {
            broken = true
            break
          }
          if (p.target.remote === undefined) this.cacheTable?.answered?.(p.target)
          this.toClient(chunk)
          this.goRaw()
          return
        }
        // 1xx: the final response follows
        if (head.status < 200) continue
        // the service answered: a liveness probe passed (its watcher skips the next one)
        if (head.status < 500 && p.target.remote === undefined) this.cacheTable?.answered?.(p.target)
        if (head.close) this.doomed = true
        if (p.isHead || head.status === 204 || head.status === 304) this.responseDone()
        else if (head.chunked) {
          this.res = Res.Chunked
          this.resChunks.reset()
        } else if (head.contentLength === 0) this.responseDone()
        else if (head.contentLength > 0) {
          this.res = Res.Length
          this.resRemaining = head.contentLength
        } else this.res = Res.UntilClose
      }
    }
    if (broken) {
      if (i > 0) this.toClient(chunk.subarray(0, i))
      // a response cut short or garbled cannot be repaired for the client
      this.destroy()
      return
    }
    this.toClient(chunk)
    if (this.pending.length === 0) this.afterResponses()
  }

  private responseDone(): void {
    const p = this.pending.shift()!
    this.res = Res.Head
    this.served++
    this.replayed = false
    if (p.close) this.closeAfterResponse = true
    if (p.upgrade && this.req === Req.AwaitUpgrade) {
      this.req = p.close ? Req.Done : Req.Head
      this.upgradeRefused = true
    }
  }

  /** Every response owed is out: the connection may switch, close, or go on. */
  private afterResponses(): void {
    if (this.closeAfterResponse) {
      this.finish()
      return
    }
    if (this.doomed && this.current === undefined) this.dropBackend()
    if (this.refusal !== undefined) {
      this.flushRefusal()
      return
    }
    if (this.waitingForResponses || this.upgradeRefused) {
      this.waitingForResponses = false
      this.upgradeRefused = false
      this.unblock()
    }
    this.maybeFinish()
  }

  private goRaw(): void {
    this.pending.length = 0
    this.res = Res.Raw
    this.req = Req.Raw
    this.blocked = false
    if (this.buf !== undefined) {
      this.toBackend(this.buf)
      this.buf = undefined
    }
    if (!this.clientPaused) this.client.resume()
    if (this.clientEnded) this.backend?.end()
  }

  private onBackendEnd(): void {
    if (this.res === Res.Raw) {
      this.closed = true
      this.client.end()
      return
    }
    if (this.res === Res.UntilClose) {
      // that response ends with the connection; so does the client's
      this.pending.length = 0
      this.finish()
      return
    }
    this.backendGone()
  }

  private backendGone(): void {
    const backend = this.backend
    if (backend === undefined || this.closed) return
    this.backend = undefined
    backend.destroy()
    if (this.res === Res.Raw || this.res === Res.UntilClose) {
      this.closed = true
      this.client.end()
      return
    }
    const p = this.pending[0]
    if (p === undefined) {
      // an idle backend connection closed: the next request dials again
      if (this.clientPaused) {
        this.clientPaused = false
        if (!this.blocked) this.client.resume()
      }
      return
    }
    if (p.started) {
      this.destroy()
      return
    }
    const inBody = this.req === Req.Length || this.req === Req.Chunked
    // a reused connection the backend closed as the request went out: send it once more on a new one
    if (p.replay !== undefined && this.pending.length === 1 && !inBody && this.served > 0 && !this.replayed) {
      this.replay(p)
      return
    }
    this.answerDirect(p.isHead, p.accept, p.host, p.target, "closed", p.origin)
  }

  private replay(p: Pending): void {
    const replay = p.replay!
    this.pending.length = 0
    this.block()
    const address = this.address
    this.dial(this.port, address, (error, socket) => {
      if (this.closed) {
        socket?.destroy()
        return
      }
      if (error !== undefined || socket === undefined) {
        return this.answerDirect(p.isHead, p.accept, p.host, p.target, "refused", p.origin)
      }
      this.attach(socket, this.port, address)
      this.replayed = true
      this.pending.push(p)
      this.toBackend(replay)
      this.unblock()
    })
  }

  /** A 502 (503 for a peer's world) written by the proxy at a response boundary, then the connection closes. */
  private answerDirect(
    isHead: boolean,
    accept: string | undefined,
    host: string,
    target: RouteTarget,
    reason: Unavailable,
    origin: Origin | undefined
  ): void {
    const page = unavailablePage(this.ctx.routes(), host, target, reason, origin ?? this.origin(undefined))
    this.closed = true
    this.pending.length = 0
    this.buf = undefined
    this.dropBackend()
    this.client.end(rawResponse(renderPage(page, accept), { close: true, head: isHead }))
  }
}
