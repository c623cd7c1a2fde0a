/**
 * The h2 path stream by stream (`h2.ts`): request bodies both ways of framing, response framings (length, chunked,
 * until close, none), interim answers, headers both ways, resets in either direction, a pooled connection the backend
 * closed, broken backends, and the route table's counters. Real backends: node:http, and raw `net` servers for what
 * node:http would not send.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as crypto from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import * as http2 from "node:http2"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { makeRouteTable, type RouteTarget } from "../../src/domain/routes.js"
import { type CertificateAuthority, loadOrCreateCa } from "../../src/services/proxy/ca.js"
import { type Backend, onBody, type StartedProxy, startBackend, startProxy, target } from "./proxy-helpers.js"

const base = mkdtempSync(join(tmpdir(), "berth-proxy-h2-streams-"))
const host = (service: string) => `${service}.w1.demo.localhost`
const web = host("web")

let ca: CertificateAuthority
let backend: Backend
let proxy: StartedProxy
/** the node:http backend's requests to `/slow` whose connection closed before the answer ended */
let slowClosed = 0
let slowStarted = 0
const raw: Array<net.Server> = []
const counted = { seen: new Map<string, number>(), answered: new Map<string, number>(), woken: [] as Array<number> }

/** A raw backend: `answer` gets each connection's bytes as they come. */
const rawBackend = async (answer: (socket: net.Socket, data: Buffer, nth: number) => void) => {
  let connections = 0
  const server = net.createServer((socket) => {
    const nth = ++connections
    socket.on("error", () => {})
    socket.on("data", (data) => answer(socket, data, nth))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  raw.push(server)
  return { port: (server.address() as net.AddressInfo).port, connections: () => connections }
}

/** Each connection answers its first request and closes when a second comes (a keep-alive time that ran out). */
let once: Awaited<ReturnType<typeof rawBackend>>
let unusedPort: number

beforeAll(async () => {
  ca = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
  backend = await startBackend((req, res) => {
    const url = req.url ?? "/"
    if (url === "/echo") {
      onBody(req, (length, sha256) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ method: req.method, headers: req.headers, length, sha256 }))
      })
      return
    }
    req.resume()
    if (url === "/chunked") {
      // no Content-Length: chunked, with a trailer the proxy reads past
      res.writeHead(200, { "content-type": "text/plain", trailer: "x-sum" })
      res.write("first;")
      setTimeout(() => {
        for (let i = 0; i < 64; i++) res.write(Buffer.alloc(32 * 1024, 97 + (i % 26)))
        res.addTrailers({ "x-sum": "done" })
        res.end("last")
      }, 200)
      return
    }
    if (url === "/slow") {
      slowStarted++
      res.writeHead(200, { "content-type": "text/plain" })
      res.write("a little, then nothing")
      res.on("close", () => {
        if (!res.writableFinished) slowClosed++
      })
      return
    }
    if (url === "/cut") {
      res.writeHead(200, { "content-type": "text/plain", "content-length": 1000 })
      res.write(Buffer.alloc(100, "c"))
      setTimeout(() => res.socket?.destroy(), 50)
      return
    }
    if (url === "/headers") {
      res.setHeader("set-cookie", ["a=1", "b=2"])
      res.setHeader("x-dup", ["one", "two"])
      res.setHeader("connection", "x-hop")
      res.setHeader("x-hop", "dropped")
      res.setHeader("keep-alive", "timeout=5")
      res.setHeader("content-length", 2)
      res.end("hi")
      return
    }
    if (url === "/empty") {
      res.writeHead(204)
      res.end()
      return
    }
    if (url === "/teapot") {
      res.writeHead(418, { "content-length": 0 })
      res.end()
      return
    }
    if (url === "/broken") {
      res.writeHead(500, { "content-length": 0 })
      res.end()
      return
    }
    res.writeHead(200, { "content-type": "text/plain", "content-length": 5 })
    res.end("hello")
  })
  once = await rawBackend((socket, data, _nth) => {
    const requests = (socket as net.Socket & { requests?: number }).requests ?? 0
    const heads = data.toString("latin1").split("\r\n\r\n").length - 1
    ;(socket as net.Socket & { requests?: number }).requests = requests + heads
    if (requests === 0) socket.write("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nonce")
    else socket.destroy()
  })
  const untilClose = await rawBackend((socket) => {
    socket.end("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the connection closes")
  })
  const garbage = await rawBackend((socket) => socket.end("SPDY/9 what\r\n\r\n"))
  const interim = await rawBackend((socket) => {
    socket.write("HTTP/1.1 100 Continue\r\n\r\n")
    setTimeout(() => socket.write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Case: Kept\r\n\r\nyes"), 20)
  })
  const split = await rawBackend((socket) => {
    // the head in three pieces, the body in two
    const parts = ["HTTP/1.1 200 OK\r\nContent-", "Length: 10\r\nX-Split: y", "es\r\n\r\n01234", "56789"]
    for (const [i, p] of parts.entries()) setTimeout(() => socket.write(p), i * 20)
  })
  const targets: Array<RouteTarget> = [
    target("demo", "w1", "web", backend.port),
    target("demo", "w1", "once", once.port),
    target("demo", "w1", "close", untilClose.port),
    target("demo", "w1", "garbage", garbage.port),
    target("demo", "w1", "interim", interim.port),
    target("demo", "w1", "split", split.port),
    target("demo", "w2", "asleep", undefined, {
      worldState: "suspended",
      serviceState: "stopped",
      ready: false,
      worldId: 42
    })
  ]
  proxy = await startProxy(targets, { https: { port: 0, ca } })
  // a port let go only once the proxy holds both of its own: freed earlier, the kernel may hand it to the proxy
  const probe = net.createServer()
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", () => resolve()))
  unusedPort = (probe.address() as net.AddressInfo).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  targets.push(target("demo", "w1", "refused", unusedPort))
  const bump = (map: Map<string, number>, t: RouteTarget) => map.set(t.service, (map.get(t.service) ?? 0) + 1)
  proxy.handle.setRoutes({
    ...makeRouteTable(targets),
    seen: (t) => bump(counted.seen, t),
    answered: (t) => bump(counted.answered, t),
    wake: (id) => counted.woken.push(id)
  })
})

afterAll(async () => {
  await proxy?.close()
  await backend?.close()
  for (const server of raw) server.close()
  rmSync(base, { recursive: true, force: true })
})

const session = () => {
  const s = http2.connect(`https://127.0.0.1:${proxy.httpsPort}`, { ca: ca.certPem, servername: web })
  s.on("error", () => {})
  return s
}

interface Got {
  readonly status: number
  readonly headers: http2.IncomingHttpHeaders
  readonly body: Buffer
  /** the stream failed (reset) rather than ended */
  readonly error: Error | undefined
}

const exchange = (
  s: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: Buffer | ReadonlyArray<Buffer>
): Promise<Got> =>
  new Promise((resolve) => {
    const endStream = body === undefined
    const stream = s.request({ ":method": "GET", ":authority": web, ...headers }, { endStream })
    const chunks: Array<Buffer> = []
    let status = 0
    let responseHeaders: http2.IncomingHttpHeaders = {}
    stream.on("response", (h) => {
      responseHeaders = h
      status = Number(h[":status"])
    })
    stream.on("data", (c: Buffer) => chunks.push(c))
    stream.on("end", () => resolve({ status, headers: responseHeaders, body: Buffer.concat(chunks), error: undefined }))
    stream.on("error", (error) => resolve({ status, headers: responseHeaders, body: Buffer.concat(chunks), error }))
    if (Array.isArray(body)) {
      for (const piece of body) stream.write(piece)
      stream.end()
    } else if (body !== undefined) stream.end(body)
  })

const sha = (b: Buffer) => crypto.createHash("sha256").update(b).digest("hex")

describe("request bodies over h2", () => {
  it("passes a body with Content-Length as it is, and one without it chunked", async () => {
    const s = session()
    try {
      const body = crypto.randomBytes(300 * 1024)
      const sized = await exchange(
        s,
        { ":method": "POST", ":path": "/echo", "content-length": String(body.length) },
        body
      )
      const got = JSON.parse(sized.body.toString())
      expect(got.sha256).toBe(sha(body))
      expect(got.headers["content-length"]).toBe(String(body.length))
      expect(got.headers["transfer-encoding"]).toBeUndefined()
      const pieces = [crypto.randomBytes(1000), crypto.randomBytes(70_000), crypto.randomBytes(3)]
      const streamed = await exchange(s, { ":method": "PUT", ":path": "/echo" }, pieces)
      const got2 = JSON.parse(streamed.body.toString())
      expect(got2.method).toBe("PUT")
      expect(got2.sha256).toBe(sha(Buffer.concat(pieces)))
      expect(got2.headers["transfer-encoding"]).toBe("chunked")
    } finally {
      s.close()
    }
  })

  it("sends an empty POST with Content-Length: 0, and a GET with neither", async () => {
    const s = session()
    try {
      const post = JSON.parse((await exchange(s, { ":method": "POST", ":path": "/echo" })).body.toString())
      expect(post).toMatchObject({ method: "POST", length: 0 })
      expect(post.headers["content-length"]).toBe("0")
      const get = JSON.parse((await exchange(s, { ":path": "/echo" })).body.toString())
      expect(get.headers["content-length"]).toBeUndefined()
      expect(get.headers["transfer-encoding"]).toBeUndefined()
    } finally {
      s.close()
    }
  })

  it("adds to X-Forwarded-For, joins cookies, and drops hop-by-hop and proxy headers", async () => {
    const s = session()
    try {
      const answer = await exchange(s, {
        ":path": "/echo",
        "x-forwarded-for": "10.1.2.3",
        "x-forwarded-proto": "gopher",
        "proxy-authorization": "Basic x",
        te: "trailers",
        cookie: ["a=1", "b=2"],
        "x-berth-hops": "2"
      })
      const got = JSON.parse(answer.body.toString()).headers
      expect(got["x-forwarded-for"]).toBe("10.1.2.3, 127.0.0.1")
      expect(got["x-forwarded-proto"]).toBe("https")
      expect(got["x-berth-hops"]).toBe("3")
      expect(got.cookie).toBe("a=1; b=2")
      expect(got["proxy-authorization"]).toBeUndefined()
      expect(got.te).toBeUndefined()
      expect(got.host).toBe(web)
    } finally {
      s.close()
    }
  })

  it("answers 100 Continue to a client that asks for it", async () => {
    const s = session()
    try {
      const stream = s.request(
        { ":method": "POST", ":path": "/echo", ":authority": web, expect: "100-continue" },
        { endStream: false }
      )
      await new Promise<void>((resolve) => stream.once("continue", () => resolve()))
      const chunks: Array<Buffer> = []
      stream.on("data", (c: Buffer) => chunks.push(c))
      const ended = new Promise<void>((resolve) => stream.once("end", () => resolve()))
      stream.end("after continue")
      await ended
      expect(JSON.parse(Buffer.concat(chunks).toString()).length).toBe("after continue".length)
    } finally {
      s.close()
    }
  })
})

describe("responses over h2", () => {
  it("streams a chunked response as it comes, whole", async () => {
    const s = session()
    try {
      const stream = s.request({ ":path": "/chunked", ":authority": web })
      const chunks: Array<Buffer> = []
      const first = new Promise<number>((resolve) => {
        const t0 = Date.now()
        stream.once("data", () => resolve(Date.now() - t0))
      })
      stream.on("data", (c: Buffer) => chunks.push(c))
      const ended = new Promise<void>((resolve) => stream.once("end", () => resolve()))
      // the first piece is not held back until the body ends (the backend waits 200 ms before the rest)
      expect(await first).toBeLessThan(180)
      await ended
      const body = Buffer.concat(chunks)
      const expected = Buffer.concat([
        Buffer.from("first;"),
        ...Array.from({ length: 64 }, (_, i) => Buffer.alloc(32 * 1024, 97 + (i % 26))),
        Buffer.from("last")
      ])
      expect(body.length).toBe(expected.length)
      expect(sha(body)).toBe(sha(expected))
    } finally {
      s.close()
    }
  })

  it("passes a body that runs until the backend closes, and heads split across reads", async () => {
    const s = session()
    try {
      const closing = await exchange(s, { ":path": "/", ":authority": host("close") })
      expect(closing.status).toBe(200)
      expect(closing.body.toString()).toBe("until the connection closes")
      const split = await exchange(s, { ":path": "/", ":authority": host("split") })
      expect(split.status).toBe(200)
      expect(split.headers["x-split"]).toBe("yes")
      expect(split.body.toString()).toBe("0123456789")
    } finally {
      s.close()
    }
  })

  it("skips interim answers, and lower-cases names", async () => {
    const s = session()
    try {
      const answer = await exchange(s, { ":path": "/", ":authority": host("interim") })
      expect(answer.status).toBe(200)
      expect(answer.headers["x-case"]).toBe("Kept")
      expect(answer.body.toString()).toBe("yes")
    } finally {
      s.close()
    }
  })

  it("keeps repeated headers, drops hop-by-hop ones and what Connection names", async () => {
    const s = session()
    try {
      const answer = await exchange(s, { ":path": "/headers" })
      expect(answer.body.toString()).toBe("hi")
      expect(answer.headers["set-cookie"]).toEqual(["a=1", "b=2"])
      expect(answer.headers["x-dup"]).toBe("one, two")
      expect(answer.headers["x-hop"]).toBeUndefined()
      expect(answer.headers["keep-alive"]).toBeUndefined()
      expect(answer.headers.connection).toBeUndefined()
    } finally {
      s.close()
    }
  })

  it("answers HEAD and 204 without a body, and the connection serves on", async () => {
    const s = session()
    try {
      const head = await exchange(s, { ":method": "HEAD", ":path": "/" })
      expect(head.status).toBe(200)
      expect(head.headers["content-length"]).toBe("5")
      expect(head.body.length).toBe(0)
      const empty = await exchange(s, { ":path": "/empty" })
      expect(empty.status).toBe(204)
      expect(empty.body.length).toBe(0)
      for (let i = 0; i < 5; i++) expect((await exchange(s, { ":path": "/" })).body.toString()).toBe("hello")
    } finally {
      s.close()
    }
  })
})

describe("failures over h2", () => {
  it("cancels the backend request when the client resets the stream mid-response", async () => {
    const s = session()
    try {
      const before = slowClosed
      const stream = s.request({ ":path": "/slow", ":authority": web })
      stream.on("error", () => {})
      await new Promise<void>((resolve) => stream.once("data", () => resolve()))
      expect(slowStarted).toBeGreaterThan(0)
      stream.close(http2.constants.NGHTTP2_CANCEL)
      for (let i = 0; i < 100 && slowClosed === before; i++) await new Promise((r) => setTimeout(r, 20))
      expect(slowClosed).toBe(before + 1)
      // the session and the pool serve on
      expect((await exchange(s, { ":path": "/" })).body.toString()).toBe("hello")
    } finally {
      s.close()
    }
  })

  it("resets the stream when the backend closes mid-response", async () => {
    const s = session()
    try {
      const answer = await exchange(s, { ":path": "/cut" })
      expect(answer.status).toBe(200)
      expect(answer.error).toBeDefined()
      expect(answer.body.length).toBeLessThan(1000)
      expect((await exchange(s, { ":path": "/" })).body.toString()).toBe("hello")
    } finally {
      s.close()
    }
  })

  it("sends a GET again on a new connection when a pooled one turns out closed, but not a POST", async () => {
    const s = session()
    try {
      const authority = host("once")
      expect((await exchange(s, { ":path": "/", ":authority": authority })).body.toString()).toBe("once")
      const before = once.connections()
      // the pooled connection answers nothing more: closed, and the GET goes once more on a new one
      const again = await exchange(s, { ":path": "/", ":authority": authority })
      expect(again.status).toBe(200)
      expect(again.body.toString()).toBe("once")
      expect(once.connections()).toBe(before + 1)
      const post = await exchange(
        s,
        { ":method": "POST", ":path": "/", ":authority": authority, "content-length": "1" },
        Buffer.from("x")
      )
      expect(post.status).toBe(502)
    } finally {
      s.close()
    }
  })

  it("answers 502 for a backend that refuses or speaks no HTTP/1.x", async () => {
    const s = session()
    try {
      const refused = await exchange(s, { ":path": "/", ":authority": host("refused"), accept: "text/html" })
      expect(refused.status).toBe(502)
      expect(refused.headers["content-type"]).toContain("text/html")
      const garbage = await exchange(s, { ":path": "/", ":authority": host("garbage") })
      expect(garbage.status).toBe(502)
      expect(garbage.headers["content-type"]).toContain("text/plain")
    } finally {
      s.close()
    }
  })
})

describe("the route table's counters over h2", () => {
  it("counts requests seen and answers below 500, and wakes a suspended world", async () => {
    const s = session()
    try {
      const seen = counted.seen.get("web") ?? 0
      const answered = counted.answered.get("web") ?? 0
      expect((await exchange(s, { ":path": "/" })).status).toBe(200)
      expect((await exchange(s, { ":path": "/teapot" })).status).toBe(418)
      expect((await exchange(s, { ":path": "/broken" })).status).toBe(500)
      expect(counted.seen.get("web")).toBe(seen + 3)
      expect(counted.answered.get("web")).toBe(answered + 2)
      const refusedSeen = counted.seen.get("refused") ?? 0
      await exchange(s, { ":path": "/", ":authority": host("refused") })
      expect(counted.seen.get("refused")).toBe(refusedSeen + 1)
      expect(counted.answered.get("refused")).toBeUndefined()
      const asleep = await exchange(s, { ":path": "/", ":authority": "asleep.w2.demo.localhost" })
      expect(asleep.status).toBeGreaterThanOrEqual(500)
      expect(counted.woken).toContain(42)
    } finally {
      s.close()
    }
  })
})
