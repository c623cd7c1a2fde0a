/**
 * Shared by the proxy tests: real backends on port 0, a started proxy in its own scope, a tiny WebSocket client
 * and server (RFC 6455 text frames, enough for echo), and raw HTTP/1.1 exchanges over `net`.
 */
import * as crypto from "node:crypto"
import * as http from "node:http"
import * as net from "node:net"
import type * as stream from "node:stream"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { makeRouteTable, type RouteTable, type RouteTarget } from "../../src/domain/routes.js"
import { makeProxy, type ProxyHandle, type ProxyOptions } from "../../src/services/proxy/Proxy.js"

export const hasIpv6Loopback = await new Promise<boolean>((resolve) => {
  const server = net.createServer()
  server.once("error", () => resolve(false))
  server.listen(0, "::1", () => server.close(() => resolve(true)))
})

export interface Backend {
  readonly port: number
  readonly server: http.Server
  readonly close: () => Promise<void>
  /** stops listening and lets in-flight requests end (Connection: close on them) */
  readonly stop: () => Promise<void>
  /** listens again on the same port */
  readonly restart: () => Promise<void>
}

export const startBackend = async (handler: http.RequestListener, host = "127.0.0.1", port = 0): Promise<Backend> => {
  const server = http.createServer({ keepAliveTimeout: 30_000 }, handler)
  const sockets = new Set<net.Socket>()
  server.on("connection", (s) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  const listen = (p: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject)
      server.listen(p, host, () => {
        server.removeListener("error", reject)
        resolve((server.address() as net.AddressInfo).port)
      })
    })
  const bound = await listen(port)
  // keep closing connections as they fall idle: a pool may hold one past the first sweep
  const stop = () =>
    new Promise<void>((resolve) => {
      const sweep = setInterval(() => server.closeIdleConnections(), 5)
      server.close(() => {
        clearInterval(sweep)
        resolve()
      })
    })
  return {
    port: bound,
    server,
    stop,
    restart: async () => {
      for (let i = 0; ; i++) {
        try {
          await listen(bound)
          return
        } catch (e) {
          if (i > 50) throw e
          await new Promise((r) => setTimeout(r, 20))
        }
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        if (!server.listening) return resolve()
        server.close(() => resolve())
      })
  }
}

export const target = (
  project: string,
  world: string,
  service: string,
  port: number | undefined,
  overrides: Partial<RouteTarget> = {}
): RouteTarget => ({
  project,
  world,
  service,
  worldState: "running",
  serviceState: "healthy",
  port,
  ready: true,
  ...overrides
})

export interface StartedProxy {
  readonly handle: ProxyHandle
  readonly port: number
  readonly httpsPort: number | undefined
  readonly setRoutes: (targets: ReadonlyArray<RouteTarget>) => RouteTable
  readonly close: () => Promise<void>
}

export const startProxy = async (
  targets: ReadonlyArray<RouteTarget>,
  options: Partial<ProxyOptions> = {}
): Promise<StartedProxy> => {
  const scope = Effect.runSync(Scope.make())
  const handle = await Effect.runPromise(
    makeProxy({ http: { port: 0 }, routes: makeRouteTable(targets), ...options }).pipe(Scope.extend(scope))
  )
  return {
    handle,
    port: handle.ports.http!,
    httpsPort: handle.ports.https,
    setRoutes: (next) => {
      const table = makeRouteTable(next)
      handle.setRoutes(table)
      return table
    },
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
  readonly socket: net.Socket
}

/** One request through the proxy at 127.0.0.1:`port` with the given Host. */
export const request = (
  port: number,
  host: string,
  options: {
    readonly path?: string
    readonly method?: string
    readonly headers?: http.OutgoingHttpHeaders
    readonly body?: Buffer | string
    readonly agent?: http.Agent
    readonly address?: string
  } = {}
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: options.address ?? "127.0.0.1",
        port,
        path: options.path ?? "/",
        method: options.method ?? "GET",
        headers: { host, ...options.headers },
        agent: options.agent ?? false
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("error", reject)
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            socket: req.socket as net.Socket
          })
        )
      }
    )
    req.on("error", reject)
    req.end(options.body)
  })

/** Writes `bytes` on a fresh connection and collects everything until the proxy closes it (or `ms` pass). */
export const rawExchange = (port: number, bytes: string | Buffer, ms = 5_000): Promise<string> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    const timer = setTimeout(() => {
      socket.destroy()
      resolve(Buffer.concat(chunks).toString("latin1"))
    }, ms)
    socket.on("data", (c: Buffer) => chunks.push(c))
    socket.on("error", (e) => {
      clearTimeout(timer)
      reject(e)
    })
    socket.on("close", () => {
      clearTimeout(timer)
      resolve(Buffer.concat(chunks).toString("latin1"))
    })
    socket.write(bytes)
  })

// -- WebSocket (RFC 6455), just what echo needs ---------------------------------------------------------------

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
export const acceptKey = (key: string): string =>
  crypto
    .createHash("sha1")
    .update(key + GUID)
    .digest("base64")

/** One frame carrying `payload` (text unless `opcode` says otherwise); clients mask, servers do not. */
export const wsFrame = (payload: Buffer | string, masked: boolean, opcode = 0x1): Buffer => {
  const data = typeof payload === "string" ? Buffer.from(payload) : payload
  const header: Array<number> = [0x80 | opcode]
  const maskBit = masked ? 0x80 : 0
  if (data.length < 126) header.push(maskBit | data.length)
  else if (data.length < 65536) header.push(maskBit | 126, data.length >> 8, data.length & 0xff)
  else {
    header.push(maskBit | 127, 0, 0, 0, 0)
    header.push(
      (data.length >>> 24) & 0xff,
      (data.length >>> 16) & 0xff,
      (data.length >>> 8) & 0xff,
      data.length & 0xff
    )
  }
  if (!masked) return Buffer.concat([Buffer.from(header), data])
  const mask = crypto.randomBytes(4)
  const out = Buffer.from(data)
  for (let i = 0; i < out.length; i++) out[i]! ^= mask[i % 4]!
  return Buffer.concat([Buffer.from(header), mask, out])
}

/** Reads frames from a stream: `next()` resolves with each message's payload (control frames are skipped). */
export const wsReader = (source: stream.Readable, initial: Buffer = Buffer.alloc(0)) => {
  let buf = initial
  const messages: Array<Buffer> = []
  const waiters: Array<(b: Buffer) => void> = []
  const drain = () => {
    for (;;) {
      if (buf.length < 2) return
      const opcode = buf[0]! & 0x0f
      const masked = (buf[1]! & 0x80) !== 0
      let length = buf[1]! & 0x7f
      let offset = 2
      if (length === 126) {
        if (buf.length < 4) return
        length = buf.readUInt16BE(2)
        offset = 4
      } else if (length === 127) {
        if (buf.length < 10) return
        length = Number(buf.readBigUInt64BE(2))
        offset = 10
      }
      const maskOffset = offset
      if (masked) offset += 4
      if (buf.length < offset + length) return
      const payload = Buffer.from(buf.subarray(offset, offset + length))
      if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= buf[maskOffset + (i % 4)]!
      buf = buf.subarray(offset + length)
      if (opcode >= 0x8) continue
      const waiter = waiters.shift()
      if (waiter !== undefined) waiter(payload)
      else messages.push(payload)
    }
  }
  source.on("data", (c: Buffer) => {
    buf = Buffer.concat([buf, c])
    drain()
  })
  drain()
  return {
    next: (): Promise<Buffer> => {
      const ready = messages.shift()
      if (ready !== undefined) return Promise.resolve(ready)
      return new Promise((resolve) => waiters.push(resolve))
    }
  }
}

/** Makes `server` accept WebSocket upgrades on any path and echo every message with a prefix. */
export const acceptWebSockets = (server: http.Server, prefix = "echo:"): void => {
  server.on("upgrade", (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const key = req.headers["sec-websocket-key"]
    if (typeof key !== "string") {
      socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
      return
    }
    socket.on("error", () => socket.destroy())
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`
    )
    const reader = wsReader(socket, head)
    const loop = async () => {
      for (;;) {
        const message = await reader.next()
        if (socket.destroyed) return
        socket.write(wsFrame(`${prefix}${message.toString()}`, false))
      }
    }
    void loop()
  })
}

/** A WebSocket client handshake over `socket` (already connected, TLS or not). */
export const wsConnect = (
  socket: stream.Duplex,
  host: string,
  path = "/ws"
): Promise<{ readonly send: (text: string) => void; readonly next: () => Promise<string>; readonly status: number }> =>
  new Promise((resolve, reject) => {
    const key = crypto.randomBytes(16).toString("base64")
    let buf = Buffer.alloc(0)
    const onData = (c: Buffer) => {
      buf = Buffer.concat([buf, c])
      const end = buf.indexOf("\r\n\r\n")
      if (end === -1) return
      socket.removeListener("data", onData)
      const head = buf.subarray(0, end).toString("latin1")
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0)
      if (status !== 101) return reject(new Error(`no upgrade: ${head}`))
      if (!head.toLowerCase().includes(`sec-websocket-accept: ${acceptKey(key).toLowerCase()}`)) {
        return reject(new Error(`bad accept: ${head}`))
      }
      const reader = wsReader(socket, buf.subarray(end + 4))
      resolve({
        status,
        send: (text) => socket.write(wsFrame(text, true)),
        next: async () => (await reader.next()).toString()
      })
    }
    socket.on("data", onData)
    socket.on("error", reject)
    socket.write(
      `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`
    )
  })

export const connect = (port: number, host = "127.0.0.1"): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(port, host, () => resolve(socket))
    socket.once("error", reject)
  })

export interface Dripped {
  /** how long the proxy kept the connection, or undefined when it was still open after `giveUpMs` */
  readonly closedAfterMs: number | undefined
  /** what the proxy sent back */
  readonly received: string
}

/**
 * Sends `bytes` one byte every `everyMs` on `socket` (after `prefix` in one write), as a slow-drip client does,
 * and reports when the proxy closes the connection.
 */
export const drip = (
  socket: stream.Duplex,
  bytes: Buffer | string,
  options: { readonly everyMs?: number; readonly giveUpMs: number; readonly prefix?: Buffer }
): Promise<Dripped> =>
  new Promise((resolve) => {
    const data = typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes
    const started = Date.now()
    const chunks: Array<Buffer> = []
    let i = 0
    if (options.prefix !== undefined) socket.write(options.prefix)
    const timer = setInterval(() => {
      // the last byte is never sent: the head (or frame) stays incomplete
      if (i < data.length - 1 && !socket.destroyed) socket.write(data.subarray(i, ++i))
    }, options.everyMs ?? 50)
    const finish = (closedAfterMs: number | undefined) => {
      clearInterval(timer)
      clearTimeout(giveUp)
      socket.destroy()
      resolve({ closedAfterMs, received: Buffer.concat(chunks).toString("latin1") })
    }
    const giveUp = setTimeout(() => finish(undefined), options.giveUpMs)
    socket.on("data", (c: Buffer) => chunks.push(c))
    socket.on("error", () => {})
    socket.on("close", () => finish(Date.now() - started))
  })

/** The client preface and an empty SETTINGS frame, then the first bytes of a HEADERS frame that never completes. */
export const h2Preface = Buffer.concat([
  Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])
])
export const h2PartialHeaders = Buffer.concat([Buffer.from([0, 0, 64, 1, 4, 0, 0, 0, 1]), Buffer.alloc(64, 0x82)])

/** The first flight a TLS client sends (its ClientHello for `servername`), captured from a real handshake. */
export const clientHello = (servername: string): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      socket.once("data", (c: Buffer) => {
        socket.destroy()
        server.close()
        resolve(c)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const client = tls.connect({ host: "127.0.0.1", port: (server.address() as net.AddressInfo).port, servername })
      client.on("error", () => {})
    })
    server.on("error", reject)
  })

/** Reads a request's body to its end, then hands over its length and SHA-256: what the echo backends answer with. */
export const onBody = (req: http.IncomingMessage, done: (length: number, sha256: string) => void): void => {
  const hash = crypto.createHash("sha256")
  let length = 0
  req.on("data", (c: Buffer) => {
    hash.update(c)
    length += c.length
  })
  req.on("end", () => done(length, hash.digest("hex")))
}
