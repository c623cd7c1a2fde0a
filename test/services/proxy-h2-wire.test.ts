/**
 * berth's own HTTP/2 (`h2conn.ts`) frame by frame, with a raw TLS client: what a proxy in front of HTTP/1.1 backends
 * must refuse (a request that could become two on the backend's connection), flow control both ways, and the frames a
 * connection must answer or end on. The request-level behaviour (bodies, responses, failures) is in
 * proxy-h2-streams.test.ts, driven by node's HTTP/2 client.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as crypto from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import type * as http from "node:http"
import * as http2 from "node:http2"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import { type CertificateAuthority, loadOrCreateCa } from "../../src/services/proxy/ca.js"
import { H2Connection, type H2Stream } from "../../src/services/proxy/h2conn.js"
import { encodeHeaders, HpackDecoder } from "../../src/services/proxy/hpack.js"
import { type Backend, onBody, type StartedProxy, startBackend, startProxy, target } from "./proxy-helpers.js"

const base = mkdtempSync(join(tmpdir(), "berth-proxy-h2-wire-"))
const web = "web.w1.demo.localhost"

let ca: CertificateAuthority
let backend: Backend
let proxy: StartedProxy
/** every request the backend saw, by method and path */
const seen: Array<string> = []
/** requests to /hold wait here until released */
const held: Array<http.ServerResponse> = []

beforeAll(async () => {
  ca = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
  backend = await startBackend((req, res) => {
    seen.push(`${req.method} ${req.url}`)
    if (req.url === "/echo") {
      onBody(req, (length, sha256) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ length, sha256 }))
      })
      return
    }
    if (req.url === "/headers") {
      req.resume()
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify(req.rawHeaders))
      return
    }
    if (req.url === "/slow-echo") {
      // reads the body slowly: the proxy must hold the client back, not buffer without bound
      req.pause()
      const hash = crypto.createHash("sha256")
      let length = 0
      const tick = setInterval(() => {
        for (let chunk = req.read(); chunk !== null; chunk = req.read()) {
          hash.update(chunk)
          length += chunk.length
        }
      }, 5)
      req.on("end", () => {
        clearInterval(tick)
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ length, sha256: hash.digest("hex") }))
      })
      return
    }
    if (req.url === "/big") {
      req.resume()
      const body = Buffer.alloc(1024 * 1024, "b")
      res.writeHead(200, { "content-type": "text/plain", "content-length": body.length })
      res.end(body)
      return
    }
    if (req.url === "/hold") {
      req.resume()
      held.push(res)
      return
    }
    req.resume()
    res.writeHead(200, { "content-type": "text/plain", "content-length": 5 })
    res.end("hello")
  })
  proxy = await startProxy([target("demo", "w1", "web", backend.port)], { https: { port: 0, ca } })
})

afterAll(async () => {
  for (const res of held) res.end()
  await proxy?.close()
  await backend?.close()
  rmSync(base, { recursive: true, force: true })
})

// -- a raw HTTP/2 client ------------------------------------------------------------------------------------------

interface Frame {
  readonly type: number
  readonly flags: number
  readonly id: number
  readonly payload: Buffer
}

const frame = (type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer => {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head[3] = type
  head[4] = flags
  head.writeUInt32BE(id, 5)
  return Buffer.concat([head, payload])
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1")
const HEADERS = 1
const RST_STREAM = 3
const SETTINGS = 4
const PING = 6
const GOAWAY = 7
const WINDOW_UPDATE = 8
const CONTINUATION = 9
const END_STREAM = 1
const END_HEADERS = 4

const requestBlock = (path: string, extra: ReadonlyArray<string> = [], method = "GET"): Buffer =>
  encodeHeaders([":method", method, ":scheme", "https", ":authority", web, ":path", path, ...extra])

class RawClient {
  readonly frames: Array<Frame> = []
  private buf = Buffer.alloc(0)
  private readonly decoder = new HpackDecoder()
  private waiters: Array<() => void> = []
  closed = false

  constructor(readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buf = Buffer.concat([this.buf, chunk])
      while (this.buf.length >= 9) {
        const length = this.buf.readUIntBE(0, 3)
        if (this.buf.length < 9 + length) break
        this.frames.push({
          type: this.buf[3]!,
          flags: this.buf[4]!,
          id: this.buf.readUInt32BE(5) & 0x7fffffff,
          payload: this.buf.subarray(9, 9 + length)
        })
        this.buf = this.buf.subarray(9 + length)
      }
      this.wake()
    })
    socket.on("close", () => {
      this.closed = true
      this.wake()
    })
    socket.on("error", () => {})
  }

  private wake(): void {
    const waiters = this.waiters
    this.waiters = []
    for (const w of waiters) w()
  }

  send(...frames: Array<Buffer>): void {
    this.socket.write(Buffer.concat(frames))
  }

  /** Waits until `test` holds of the frames read so far (or the connection closed). */
  async until(test: (frames: ReadonlyArray<Frame>) => boolean, ms = 5_000): Promise<void> {
    const deadline = Date.now() + ms
    while (!test(this.frames)) {
      if (this.closed) return
      if (Date.now() > deadline) throw new Error(`timed out; frames: ${JSON.stringify(this.summary())}`)
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve)
        setTimeout(resolve, 50)
      })
    }
  }

  summary(): Array<[number, number, number]> {
    return this.frames.map((f) => [f.type, f.flags, f.id])
  }

  /** The response head of stream `id`, decoded (HEADERS frames are decoded in order, as HPACK requires). */
  headersOf(id: number): Array<string> {
    const out: Array<string> = []
    for (const f of this.frames) {
      if (f.type !== HEADERS) continue
      const pairs: Array<string> = []
      this.decoder.decode(f.payload, pairs, 1 << 20)
      if (f.id === id) out.push(...pairs)
    }
    return out
  }

  resetOf(id: number): number | undefined {
    const f = this.frames.find((x) => x.type === RST_STREAM && x.id === id)
    return f?.payload.readUInt32BE(0)
  }

  goAway(): number | undefined {
    const f = this.frames.find((x) => x.type === GOAWAY)
    return f?.payload.readUInt32BE(4)
  }

  close(): void {
    this.socket.destroy()
  }
}

const rawClient = async (): Promise<RawClient> => {
  const socket = tls.connect({
    host: "127.0.0.1",
    port: proxy.httpsPort!,
    servername: web,
    ca: ca.certPem,
    ALPNProtocols: ["h2"]
  })
  await new Promise<void>((resolve, reject) => {
    socket.once("secureConnect", () => resolve())
    socket.once("error", reject)
  })
  expect(socket.alpnProtocol).toBe("h2")
  const client = new RawClient(socket)
  client.send(PREFACE, frame(SETTINGS, 0, 0))
  return client
}

/** A connection served by H2Connection over plain TCP, its streams handed to `onStream` and nothing else. */
const directClient = async (
  onStream: (stream: H2Stream) => void,
  preface = true
): Promise<{ client: RawClient; served: Array<net.Socket>; close: () => void }> => {
  const served: Array<net.Socket> = []
  const server = net.createServer((socket) => {
    served.push(socket)
    new H2Connection(socket, { idleMs: 10_000, onStream })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const socket = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1")
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
  const client = new RawClient(socket)
  if (preface) client.send(PREFACE, frame(SETTINGS, 0, 0))
  return {
    client,
    served,
    close: () => {
      socket.destroy()
      server.close()
    }
  }
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 150))

describe("berth's HTTP/2: what could become two requests on the backend's connection is refused", () => {
  it("resets a stream whose header value holds CR or LF, and the backend sees nothing of it", async () => {
    const client = await rawClient()
    try {
      const before = seen.length
      client.send(
        frame(HEADERS, END_STREAM | END_HEADERS, 1, requestBlock("/a", ["x-evil", "1\r\n\r\nGET /smuggled HTTP/1.1"])),
        frame(HEADERS, END_STREAM | END_HEADERS, 3, requestBlock("/b", ["x-name\r\nx-other", "1"])),
        frame(HEADERS, END_STREAM | END_HEADERS, 5, requestBlock("/c", ["X-Upper", "1"])),
        frame(HEADERS, END_STREAM | END_HEADERS, 7, requestBlock("/d", ["transfer-encoding", "chunked"])),
        frame(HEADERS, END_STREAM | END_HEADERS, 9, requestBlock("/e\r\nx: y", []))
      )
      await client.until((f) => [1, 3, 5, 7, 9].every((id) => f.some((x) => x.type === RST_STREAM && x.id === id)))
      for (const id of [1, 3, 5, 7, 9]) expect(client.resetOf(id)).toBe(1)
      // the connection goes on
      client.send(frame(HEADERS, END_STREAM | END_HEADERS, 11, requestBlock("/fine")))
      await client.until((f) => f.some((x) => x.id === 11 && (x.flags & END_STREAM) !== 0))
      expect(client.headersOf(11).slice(0, 2)).toEqual([":status", "200"])
      await settled()
      expect(seen.slice(before)).toEqual(["GET /fine"])
    } finally {
      client.close()
    }
  })

  it("resets a body longer or shorter than its Content-Length before the backend could take it for more", async () => {
    const client = await rawClient()
    try {
      const before = seen.length
      client.send(
        frame(HEADERS, END_HEADERS, 1, requestBlock("/echo", ["content-length", "5"], "POST")),
        frame(0, 0, 1, Buffer.from("hello")),
        frame(0, END_STREAM, 1, Buffer.from("GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n"))
      )
      await client.until((f) => f.some((x) => x.type === RST_STREAM && x.id === 1))
      expect(client.resetOf(1)).toBe(1)
      client.send(
        frame(HEADERS, END_HEADERS, 3, requestBlock("/echo", ["content-length", "10"], "POST")),
        frame(0, END_STREAM, 3, Buffer.from("short"))
      )
      await client.until((f) => f.some((x) => x.type === RST_STREAM && x.id === 3))
      expect(client.resetOf(3)).toBe(1)
      await settled()
      expect(seen.slice(before).filter((r) => r.includes("smuggled"))).toEqual([])
    } finally {
      client.close()
    }
  })

  it("resets a HEAD or GET that names a body it does not send, and a body cut short by trailers", async () => {
    const client = await rawClient()
    try {
      const before = seen.length
      client.send(
        frame(HEADERS, END_STREAM | END_HEADERS, 1, requestBlock("/head", ["content-length", "36"], "HEAD")),
        frame(HEADERS, END_STREAM | END_HEADERS, 3, requestBlock("/get", ["content-length", "36"])),
        frame(HEADERS, END_HEADERS, 5, requestBlock("/echo", ["content-length", "10"], "POST")),
        frame(0, 0, 5, Buffer.from("abc")),
        frame(HEADERS, END_STREAM | END_HEADERS, 5, encodeHeaders(["x-trailer", "t"])),
        frame(HEADERS, END_STREAM | END_HEADERS, 7, requestBlock("/smuggled"))
      )
      await client.until((f) => f.some((x) => x.id === 7 && (x.flags & END_STREAM) !== 0))
      for (const id of [1, 3, 5]) expect(client.resetOf(id)).toBe(1)
      await settled()
      // the POST's head went out before its body fell short; its backend connection was closed with the reset
      expect(seen.slice(before).sort()).toEqual(["GET /smuggled", "POST /echo"])
    } finally {
      client.close()
    }
  })

  it("resets a request whose method is not a token or whose path is not origin-form", async () => {
    const client = await rawClient()
    try {
      const before = seen.length
      const cases: Array<[string, string]> = [
        ["GET /admin HTTP/1.0\tx", "/public"],
        ["GE\u0001T", "/"],
        ["GET", "http://internal.example/secret"],
        ["GET", "admin"],
        ["GET", "*"],
        ["OPTIONS", "*x"]
      ]
      cases.forEach(([method, path], i) => {
        client.send(frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, requestBlock(path, [], method)))
      })
      await client.until((f) => f.filter((x) => x.type === RST_STREAM).length === cases.length)
      for (let i = 0; i < cases.length; i++) expect(client.resetOf(1 + 2 * i)).toBe(1)
      // OPTIONS * is the one asterisk-form a backend may take
      const id = 1 + 2 * cases.length
      client.send(frame(HEADERS, END_STREAM | END_HEADERS, id, requestBlock("*", [], "OPTIONS")))
      await client.until((f) => f.some((x) => x.id === id && (x.flags & END_STREAM) !== 0))
      expect(client.resetOf(id)).toBeUndefined()
      await settled()
      expect(seen.slice(before)).toEqual(["OPTIONS *"])
    } finally {
      client.close()
    }
  })

  it("passes header names that an object's prototype has (constructor, __proto__) as they are", async () => {
    const client = await rawClient()
    try {
      client.send(
        frame(HEADERS, END_STREAM | END_HEADERS, 1, requestBlock("/headers", ["constructor", "abc", "__proto__", "x"]))
      )
      await client.until((f) => f.some((x) => x.id === 1 && x.type === 0 && (x.flags & END_STREAM) !== 0))
      const body = Buffer.concat(client.frames.filter((x) => x.id === 1 && x.type === 0).map((x) => x.payload))
      const raw: Array<string> = JSON.parse(body.toString())
      const pairs = new Map<string, string>()
      for (let i = 0; i < raw.length; i += 2) pairs.set(raw[i]!, raw[i + 1]!)
      expect(pairs.get("constructor")).toBe("abc")
      expect(pairs.get("__proto__")).toBe("x")
    } finally {
      client.close()
    }
  })

  it("refuses pseudo-headers out of place and requests missing theirs", async () => {
    const client = await rawClient()
    try {
      const cases = [
        encodeHeaders([":method", "GET", ":scheme", "https", ":path", "/", "x-a", "1", ":authority", web]),
        encodeHeaders([":method", "GET", ":authority", web, ":path", "/"]),
        encodeHeaders([":method", "GET", ":scheme", "https", ":authority", web, ":path", "/", ":status", "200"]),
        encodeHeaders([":method", "GET", ":method", "GET", ":scheme", "https", ":authority", web, ":path", "/"])
      ]
      for (const [i, block] of cases.entries()) client.send(frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, block))
      await client.until((f) => f.filter((x) => x.type === RST_STREAM).length === cases.length)
      for (let i = 0; i < cases.length; i++) expect(client.resetOf(1 + 2 * i)).toBe(1)
    } finally {
      client.close()
    }
  })
})

describe("berth's HTTP/2: flow control", () => {
  it("sends a 1 MiB response through a client window of 1,000 bytes, and a 4 MiB upload to a slow backend", async () => {
    const s = http2.connect(`https://127.0.0.1:${proxy.httpsPort}`, {
      ca: ca.certPem,
      servername: web,
      settings: { initialWindowSize: 1_000 }
    })
    s.on("error", () => {})
    try {
      const big = await new Promise<Buffer>((resolve, reject) => {
        const stream = s.request({ ":path": "/big", ":authority": web })
        const chunks: Array<Buffer> = []
        stream.on("data", (c: Buffer) => chunks.push(c))
        stream.on("end", () => resolve(Buffer.concat(chunks)))
        stream.on("error", reject)
      })
      expect(big.length).toBe(1024 * 1024)
      expect(big.every((b) => b === 98)).toBe(true)
      const body = crypto.randomBytes(4 * 1024 * 1024)
      const answer = await new Promise<string>((resolve, reject) => {
        const stream = s.request({
          ":method": "POST",
          ":path": "/slow-echo",
          ":authority": web,
          "content-length": String(body.length)
        })
        const chunks: Array<Buffer> = []
        stream.on("data", (c: Buffer) => chunks.push(c))
        stream.on("end", () => resolve(Buffer.concat(chunks).toString()))
        stream.on("error", reject)
        stream.end(body)
      })
      expect(JSON.parse(answer)).toEqual({
        length: body.length,
        sha256: crypto.createHash("sha256").update(body).digest("hex")
      })
    } finally {
      s.close()
    }
  })
})

describe("berth's HTTP/2: a stream's request body", () => {
  it("keeps what comes before anyone reads, hands it on in order with its end, and refuses more than the window", async () => {
    const streams: Array<H2Stream> = []
    const { client, close } = await directClient((stream) => streams.push(stream))
    try {
      const piece = (n: number) => Buffer.alloc(16_384, n)
      client.send(frame(HEADERS, END_HEADERS, 1, requestBlock("/up", [], "POST")), frame(0, 0, 1, piece(1)))
      client.send(frame(0, END_STREAM, 1, piece(2)))
      // nobody read stream 1; stream 3 sends past its 256 KiB window
      const past: Array<Buffer> = [frame(HEADERS, END_HEADERS, 3, requestBlock("/up", [], "POST"))]
      for (let i = 0; i < 17; i++) past.push(frame(0, 0, 3, piece(3)))
      client.send(...past)
      await client.until((f) => f.some((x) => x.type === RST_STREAM && x.id === 3))
      expect(client.resetOf(3)).toBe(3)
      expect(streams.length).toBe(2)
      const got: Array<number> = []
      const ended = new Promise<void>((resolve) => {
        streams[0]!.on("data", (chunk: Buffer) => got.push(chunk[0]!, chunk.length))
        streams[0]!.on("end", () => resolve())
      })
      await ended
      expect(got).toEqual([1, 16_384, 2, 16_384])
      // paused, then resumed: the WINDOW_UPDATE waits for the reading
      streams[0]!.respond({ ":status": 200 }, { endStream: true })
      await client.until((f) => f.some((x) => x.id === 1 && x.type === HEADERS))
      expect(client.headersOf(1)).toEqual([":status", "200"])
    } finally {
      close()
    }
  })

  it("gives the window back only as a paused stream is read", async () => {
    const streams: Array<H2Stream> = []
    const { client, close } = await directClient((stream) => {
      streams.push(stream)
      stream.pause()
    })
    try {
      const frames: Array<Buffer> = [frame(HEADERS, END_HEADERS, 1, requestBlock("/up", [], "POST"))]
      for (let i = 0; i < 10; i++) frames.push(frame(0, 0, 1, Buffer.alloc(16_384)))
      client.send(...frames)
      await settled()
      const updates = () => client.frames.filter((x) => x.type === WINDOW_UPDATE && x.id === 1).length
      expect(updates()).toBe(0)
      let read = 0
      streams[0]!.on("data", (chunk: Buffer) => {
        read += chunk.length
      })
      streams[0]!.resume()
      await client.until(() => updates() > 0)
      expect(read).toBe(10 * 16_384)
    } finally {
      close()
    }
  })
})

describe("berth's HTTP/2: windows", () => {
  it("ends a stream whose send window the client made negative without looping, and waits to send its data", async () => {
    const streams = new Map<number, H2Stream>()
    const { client, close } = await directClient((stream) => {
      streams.set(stream.id, stream)
      stream.respond({ ":status": 200 })
      stream.write(Buffer.alloc(1_000, 97))
    })
    try {
      client.send(
        frame(HEADERS, END_STREAM | END_HEADERS, 1, requestBlock("/")),
        frame(HEADERS, END_STREAM | END_HEADERS, 3, requestBlock("/"))
      )
      await client.until((f) => f.filter((x) => x.type === 0).length >= 2)
      // each stream's window: 65,535 - 1,000 - 65,535 = -1,000 (RFC 9113 §6.9.2)
      const zero = Buffer.alloc(6)
      zero.writeUInt16BE(0x4, 0)
      client.send(frame(SETTINGS, 0, 0, zero))
      await client.until((f) => f.filter((x) => x.type === SETTINGS && x.flags === 1).length >= 2)
      const data = (id: number) => client.frames.filter((x) => x.type === 0 && x.id === id)
      // an end with nothing to send needs no window
      streams.get(3)!.end()
      await client.until((f) => f.some((x) => x.type === 0 && x.id === 3 && (x.flags & END_STREAM) !== 0))
      expect(data(3).map((x) => x.payload.length)).toEqual([1_000, 0])
      expect(streams.get(1)!.write(Buffer.alloc(10, 98))).toBe(false)
      streams.get(1)!.end()
      await settled()
      expect(data(1).length).toBe(1)
      // the window comes back above zero: the 10 bytes go, then the end
      const grow = Buffer.alloc(4)
      grow.writeUInt32BE(1_010)
      client.send(frame(WINDOW_UPDATE, 0, 1, grow))
      await client.until((f) => f.some((x) => x.type === 0 && x.id === 1 && (x.flags & END_STREAM) !== 0))
      expect(Buffer.concat(data(1).map((x) => x.payload)).toString("latin1")).toBe("a".repeat(1_000) + "b".repeat(10))
    } finally {
      close()
    }
  })

  it("gives the connection's window back only as request bodies are read", async () => {
    const streams: Array<H2Stream> = []
    const { client, close } = await directClient((stream) => {
      streams.push(stream)
      stream.pause()
    })
    try {
      const frames: Array<Buffer> = []
      for (let k = 0; k < 8; k++) {
        frames.push(frame(HEADERS, END_HEADERS, 1 + 2 * k, requestBlock("/up", [], "POST")))
        for (let i = 0; i < 15; i++) frames.push(frame(0, 0, 1 + 2 * k, Buffer.alloc(16_384)))
      }
      client.send(...frames)
      await settled()
      const connectionUpdates = () => client.frames.filter((x) => x.type === WINDOW_UPDATE && x.id === 0).length
      // the one in the opening flight only
      expect(connectionUpdates()).toBe(1)
      for (const stream of streams) {
        stream.on("data", () => {})
        stream.resume()
      }
      await client.until(() => connectionUpdates() > 1)
    } finally {
      close()
    }
  })
})

describe("berth's HTTP/2: the proxy closing", () => {
  it("ends its open h2 connections and cancels their backend requests", async () => {
    const own = await startProxy([target("demo", "w1", "web", backend.port)], { https: { port: 0, ca } })
    const s = http2.connect(`https://127.0.0.1:${own.httpsPort}`, { ca: ca.certPem, servername: web })
    s.on("error", () => {})
    const sessionClosed = new Promise<void>((resolve) => s.on("close", () => resolve()))
    const before = held.length
    const stream = s.request({ ":path": "/hold", ":authority": web })
    stream.on("error", () => {})
    const deadline = Date.now() + 5_000
    while (held.length === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    const res = held.at(-1)!
    const cancelled = new Promise<void>((resolve) => res.on("close", () => resolve()))
    await own.close()
    await Promise.all([sessionClosed, cancelled])
    expect(res.writableFinished).toBe(false)
  })
})

describe("berth's HTTP/2: the connection", () => {
  it("answers PING and acknowledges SETTINGS, ignores unknown frames, and takes trailers as a request's end", async () => {
    const client = await rawClient()
    try {
      client.send(frame(PING, 0, 0, Buffer.from("12345678")), frame(0xfa, 0, 0, Buffer.from("??")))
      await client.until((f) => f.some((x) => x.type === PING && x.flags === 1))
      expect(client.frames.find((x) => x.type === PING)!.payload.toString()).toBe("12345678")
      expect(client.frames.some((x) => x.type === SETTINGS && x.flags === 1)).toBe(true)
      client.send(
        frame(HEADERS, END_HEADERS, 1, requestBlock("/echo", [], "POST")),
        frame(0, 0, 1, Buffer.from("body")),
        frame(HEADERS, END_STREAM | END_HEADERS, 1, encodeHeaders(["x-trailer", "t"]))
      )
      await client.until((f) => f.some((x) => x.id === 1 && x.type === 0 && (x.flags & END_STREAM) !== 0))
      const data = Buffer.concat(client.frames.filter((x) => x.id === 1 && x.type === 0).map((x) => x.payload))
      expect(JSON.parse(data.toString()).length).toBe(4)
    } finally {
      client.close()
    }
  })

  it("ends the connection with GOAWAY on a bad preface, a broken header block, and a CONTINUATION flood", async () => {
    const bad = await rawClient()
    bad.socket.write(Buffer.from("GET / HTTP/1.1\r\n\r\n"))
    // after the preface these bytes read as a frame 4.6 MB long: past the frame size allowed
    await bad.until(() => false, 3_000).catch(() => {})
    expect(bad.goAway()).toBe(6)
    expect(bad.closed).toBe(true)

    const broken = await rawClient()
    // an index past both tables
    broken.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, Buffer.from([0xff, 0x80, 0x01])))
    await broken.until(() => false, 3_000).catch(() => {})
    expect(broken.goAway()).toBe(9)
    expect(broken.closed).toBe(true)

    const flood = await rawClient()
    const pieces = [frame(HEADERS, 0, 1, requestBlock("/"))]
    for (let i = 0; i < 20; i++) pieces.push(frame(CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x40)))
    flood.send(...pieces)
    await flood.until(() => false, 3_000).catch(() => {})
    expect(flood.goAway()).toBe(11)
    expect(flood.closed).toBe(true)
  })

  it("ends a connection flooded with empty CONTINUATION frames", async () => {
    const client = await rawClient()
    const pieces = [frame(HEADERS, 0, 1, requestBlock("/"))]
    for (let i = 0; i < 50_000; i++) pieces.push(frame(CONTINUATION, 0, 1))
    client.send(...pieces)
    await client.until(() => false, 5_000).catch(() => {})
    expect(client.goAway()).toBe(11)
    expect(client.closed).toBe(true)
  })

  it("stops reading a client that sends PINGs and reads none of the answers", async () => {
    const { client, served, close } = await directClient(() => {})
    try {
      client.socket.pause()
      const pings = Buffer.concat(Array.from({ length: 1_000 }, () => frame(PING, 0, 0, Buffer.alloc(8))))
      for (let i = 0; i < 300; i++) {
        if (!client.socket.write(pings)) {
          await new Promise((resolve) => {
            client.socket.once("drain", resolve)
            setTimeout(resolve, 200)
          })
        }
      }
      await settled()
      // what waits to be written is bounded by what the proxy lets pile up, not by what the client sent
      expect(served[0]!.writableLength).toBeLessThan(256 * 1024)
    } finally {
      close()
    }
  })

  it("hands 'end' to a stream whose request ended with its headers, once it is read", async () => {
    const events: Array<string> = []
    const { client, close } = await directClient((stream) => {
      stream.on("data", () => events.push("data"))
      stream.on("end", () => events.push("end"))
      stream.on("close", () => events.push("close"))
      stream.respond({ ":status": 204 }, { endStream: true })
    })
    try {
      client.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, requestBlock("/")))
      await client.until((f) => f.some((x) => x.id === 1))
      await settled()
      expect(events).toEqual(["end", "close"])
    } finally {
      close()
    }
  })

  it("answers headers past the limit with a whole 431, and a stream's second HEADERS without END_STREAM", async () => {
    const client = await rawClient()
    try {
      const big = requestBlock("/", ["x-big", "y".repeat(16_000), "x-big2", "y".repeat(16_000)])
      const bigger = requestBlock("/", [
        "x-a",
        "y".repeat(16_000),
        "x-b",
        "y".repeat(16_000),
        "x-c",
        "y".repeat(16_000),
        "x-d",
        "y".repeat(16_000),
        "x-e",
        "y".repeat(8_000)
      ])
      const parts: Array<Buffer> = []
      for (let o = 0; o < bigger.length; o += 16_384) {
        const last = o + 16_384 >= bigger.length
        parts.push(
          frame(
            o === 0 ? HEADERS : CONTINUATION,
            (o === 0 ? END_STREAM : 0) | (last ? END_HEADERS : 0),
            3,
            bigger.subarray(o, o + 16_384)
          )
        )
      }
      expect(big.length).toBeLessThan(64 * 1024)
      client.send(...parts)
      await client.until((f) => f.some((x) => x.id === 3 && x.type === 0 && (x.flags & END_STREAM) !== 0))
      expect(client.headersOf(3).slice(0, 2)).toEqual([":status", "431"])
      const body = Buffer.concat(client.frames.filter((x) => x.id === 3 && x.type === 0).map((x) => x.payload))
      expect(body.toString()).toBe("the request's headers are too large\n")
      // headers again on a stream whose request already ended: that stream's error, not the connection's
      client.send(
        frame(HEADERS, END_HEADERS, 5, requestBlock("/hold", [], "POST")),
        frame(0, END_STREAM, 5, Buffer.alloc(0)),
        frame(HEADERS, END_HEADERS, 5, encodeHeaders(["x-late", "1"])),
        frame(HEADERS, END_STREAM | END_HEADERS, 7, requestBlock("/"))
      )
      await client.until((f) => f.some((x) => x.id === 7 && (x.flags & END_STREAM) !== 0))
      expect(client.resetOf(5)).toBe(5)
      expect(client.goAway()).toBeUndefined()
    } finally {
      client.close()
    }
  })

  it("takes a connection's frames however the reads split them, a byte at a time included", async () => {
    const { client, close } = await directClient((stream) => {
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      stream.on("end", () => {
        stream.respond({ ":status": 200 })
        stream.end(Buffer.concat(chunks))
      })
    }, false)
    try {
      const bytes = Buffer.concat([
        PREFACE,
        frame(SETTINGS, 0, 0),
        frame(HEADERS, END_HEADERS, 1, requestBlock("/up", [], "POST")),
        frame(0, 8, 1, Buffer.concat([Buffer.from([3]), Buffer.from("one"), Buffer.alloc(3)])),
        frame(PING, 0, 0, Buffer.from("abcdefgh")),
        frame(0, 0, 1, Buffer.alloc(16_000, 120)),
        frame(0, 0, 1, Buffer.alloc(3_616, 121)),
        frame(0, END_STREAM, 1, Buffer.from("two"))
      ])
      for (const b of bytes) {
        client.socket.write(Buffer.from([b]))
        if (Math.random() < 0.01) await new Promise((resolve) => setImmediate(resolve))
      }
      await client.until((f) => f.some((x) => x.id === 1 && x.type === 0 && (x.flags & END_STREAM) !== 0))
      const body = Buffer.concat(client.frames.filter((x) => x.id === 1 && x.type === 0).map((x) => x.payload))
      expect(body.length).toBe(3 + 19_616 + 3)
      expect(client.frames.some((x) => x.type === PING && x.flags === 1)).toBe(true)
    } finally {
      close()
    }
  })

  it("ends a connection whose first frame is not SETTINGS", async () => {
    const { client, close } = await directClient(() => {}, false)
    try {
      client.send(PREFACE, frame(PING, 0, 0, Buffer.alloc(8)))
      await client.until(() => false, 2_000).catch(() => {})
      expect(client.goAway()).toBe(1)
    } finally {
      close()
    }
  })

  it("ends a connection whose streams mostly end in a reset (a rapid-reset flood)", async () => {
    const client = await rawClient()
    try {
      const before = seen.length
      const frames: Array<Buffer> = []
      const reset = Buffer.alloc(4)
      reset.writeUInt32BE(8)
      for (let id = 1; id < 2 * 1_200; id += 2) {
        frames.push(frame(HEADERS, END_STREAM | END_HEADERS, id, requestBlock("/hold")))
        frames.push(frame(RST_STREAM, 0, id, reset))
      }
      client.send(...frames)
      await client.until(() => false, 5_000).catch(() => {})
      expect(client.goAway()).toBe(11)
      expect(client.closed).toBe(true)
      // a backend request was begun for at most the streams before the flood was seen
      await settled()
      expect(seen.length - before).toBeLessThanOrEqual(1_200)
    } finally {
      client.close()
    }
  })

  it("refuses streams past the 256 it allows at once, and serves on", async () => {
    for (const res of held.splice(0)) res.end()
    const client = await rawClient()
    try {
      const frames: Array<Buffer> = []
      for (let i = 0; i < 258; i++)
        frames.push(frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * i, requestBlock("/hold")))
      client.send(...frames)
      await client.until((f) => f.filter((x) => x.type === RST_STREAM).length >= 2)
      expect(client.resetOf(1 + 2 * 256)).toBe(7)
      expect(client.resetOf(1 + 2 * 257)).toBe(7)
      expect(client.resetOf(1)).toBeUndefined()
      const deadline = Date.now() + 10_000
      while (held.length < 256 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
      expect(held.length).toBe(256)
      for (const res of held.splice(0)) res.end()
      // each answered (an empty 200: HEADERS ending the stream)
      await client.until((f) => f.filter((x) => (x.flags & END_STREAM) !== 0).length >= 256, 10_000)
      client.send(frame(HEADERS, END_STREAM | END_HEADERS, 1 + 2 * 258, requestBlock("/")))
      await client.until((f) => f.some((x) => x.id === 1 + 2 * 258 && (x.flags & END_STREAM) !== 0))
    } finally {
      client.close()
    }
  })
})
