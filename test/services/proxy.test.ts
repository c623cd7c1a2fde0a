import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as crypto from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Readable } from "node:stream"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { makeRouteTable, type RouteTarget } from "../../src/domain/routes.js"
import { loadOrCreateCa } from "../../src/services/proxy/ca.js"
import { makeProxy, ProxyError } from "../../src/services/proxy/Proxy.js"
import {
  type Backend,
  connect,
  drip,
  hasIpv6Loopback,
  rawExchange,
  request,
  type StartedProxy,
  startBackend,
  startProxy,
  target,
  wsConnect,
  acceptWebSockets,
  onBody
} from "./proxy-helpers.js"

const caBase = mkdtempSync(join(tmpdir(), "berth-proxy-ca-"))
afterAll(() => rmSync(caBase, { recursive: true, force: true }))

/** A backend that says who it is and what it got: method, url, headers, and the body's length and SHA-256. */
const echo = (who: string): http.RequestListener => {
  let held: Array<() => void> = []
  return (req, res) => {
    if (req.url === "/release") {
      for (const f of held) f()
      held = []
      res.end("released")
      return
    }
    // how many requests it holds now: a test waits for its request to arrive rather than for a time
    if (req.url === "/holding") {
      res.end(String(held.length))
      return
    }
    onBody(req, (length, sha256) => {
      const send = () => {
        const body = JSON.stringify({
          who,
          method: req.method,
          url: req.url,
          headers: req.headers,
          length,
          sha256
        })
        if (req.url === "/chunked") {
          res.writeHead(200, { "content-type": "application/json" })
          res.write(body.slice(0, 10))
          res.write(body.slice(10))
          res.end()
        } else if (req.url === "/nocontent") {
          res.writeHead(204)
          res.end()
        } else {
          res.writeHead(200, { "content-type": "application/json", "x-backend": who })
          res.end(body)
        }
      }
      if (req.url === "/hold") held.push(send)
      else send()
    })
  }
}

/** Server-sent events, one per `next()` call from the test: a buffering proxy would make the test hang. */
const sse = () => {
  let response: http.ServerResponse | undefined
  let count = 0
  const handler: http.RequestListener = (_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
    response = res
    res.write(`data: event ${count++}\n\n`)
  }
  return {
    handler,
    next: () => response?.write(`data: event ${count++}\n\n`),
    end: () => response?.end()
  }
}

const json = (a: { body: Buffer }) =>
  JSON.parse(a.body.toString()) as {
    who: string
    method: string
    url: string
    headers: Record<string, string>
    length: number
    sha256: string
  }

const modes = [
  { name: "fast path", fastPath: true },
  { name: "node:http path", fastPath: false }
] as const

describe.each(modes)("proxy over HTTP ($name)", ({ fastPath }) => {
  let a: Backend
  let b: Backend
  let v4: Backend
  let v6: Backend | undefined
  let events: ReturnType<typeof sse>
  let eventsBackend: Backend
  let proxy: StartedProxy
  let targets: Array<RouteTarget>
  const host = (svc: string, world = "w1") => `${svc}.${world}.demo.localhost`

  beforeAll(async () => {
    a = await startBackend(echo("a"))
    b = await startBackend(echo("b"))
    acceptWebSockets(a.server)
    v4 = await startBackend(echo("v4-only"), "127.0.0.1")
    v6 = hasIpv6Loopback ? await startBackend(echo("v6-only"), "::1") : undefined
    events = sse()
    eventsBackend = await startBackend(events.handler)
    targets = [
      target("demo", "w1", "web", a.port),
      target("demo", "w2", "web", b.port),
      target("demo", "w1", "api", a.port),
      target("demo", "w1", "events", eventsBackend.port),
      target("demo", "w1", "v4", v4.port),
      target("demo", "w1", "v6", v6?.port),
      target("demo", "w1", "starting", 1, { ready: false, serviceState: "starting" }),
      target("demo", "w3", "web", 1, {
        ready: false,
        worldState: "stopped",
        serviceState: "stopped",
        worldName: "feature/w3"
      })
    ]
    proxy = await startProxy(targets, { fastPath })
    // a port let go only once the proxy holds its own: freed earlier, the kernel may hand it to the proxy (a loop, 508)
    const refused = await startBackend(echo("gone"))
    await refused.close()
    targets.push(
      target("demo", "w1", "refused", refused.port, { serviceState: "healthy" }),
      target("demo", "w1", "loop", proxy.port)
    )
    proxy.setRoutes(targets)
  })

  afterAll(async () => {
    await proxy.close()
    for (const backend of [a, b, v4, v6, eventsBackend]) await backend?.close()
  })

  it("routes two worlds at once, each to its own backend", async () => {
    const [one, two] = await Promise.all([request(proxy.port, host("web")), request(proxy.port, host("web", "w2"))])
    expect(one.status).toBe(200)
    expect(json(one).who).toBe("a")
    expect(two.status).toBe(200)
    expect(json(two).who).toBe("b")
    // Host is matched without its port, case and trailing dot
    const odd = await request(proxy.port, `WEB.W2.Demo.LOCALHOST.:${proxy.port}`)
    expect(json(odd).who).toBe("b")
  })

  it("sets X-Forwarded-For, -Host and -Proto and counts the hop", async () => {
    const plain = json(await request(proxy.port, `${host("web")}:${proxy.port}`))
    expect(plain.headers["x-forwarded-for"]).toBe("127.0.0.1")
    expect(plain.headers["x-forwarded-host"]).toBe(`${host("web")}:${proxy.port}`)
    expect(plain.headers["x-forwarded-proto"]).toBe("http")
    expect(plain.headers["x-berth-hops"]).toBe("1")
    expect(plain.headers.host).toBe(`${host("web")}:${proxy.port}`)
    const chained = json(
      await request(proxy.port, host("web"), {
        headers: { "x-forwarded-for": "10.1.2.3", "x-forwarded-proto": "https", "x-berth-hops": "2" }
      })
    )
    expect(chained.headers["x-forwarded-for"]).toBe("10.1.2.3, 127.0.0.1")
    expect(chained.headers["x-forwarded-proto"]).toBe("http")
    expect(chained.headers["x-berth-hops"]).toBe("3")
  })

  it("drops hop-by-hop headers and the ones Connection names", async () => {
    const got = json(
      await request(proxy.port, host("web"), {
        headers: {
          connection: "keep-alive, x-secret",
          "x-secret": "hop",
          "x-kept": "end-to-end",
          "keep-alive": "timeout=5",
          "proxy-authorization": "Basic Zm9vOmJhcg==",
          "proxy-connection": "keep-alive",
          te: "trailers",
          upgrade: "websocket"
        }
      })
    )
    expect(got.headers["x-kept"]).toBe("end-to-end")
    for (const name of ["x-secret", "keep-alive", "proxy-authorization", "proxy-connection", "te", "upgrade"]) {
      expect(got.headers[name], name).toBeUndefined()
    }
  })

  it("streams server-sent events one at a time", async () => {
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ port: proxy.port, host: "127.0.0.1", path: "/", headers: { host: host("events") } })
      req.on("response", resolve)
      req.on("error", reject)
      req.end()
    })
    expect(res.headers["content-type"]).toBe("text/event-stream")
    const received: Array<string> = []
    let pending = ""
    let wake: (() => void) | undefined
    res.on("data", (c: Buffer) => {
      pending += c.toString()
      let end = pending.indexOf("\n\n")
      while (end !== -1) {
        received.push(pending.slice(0, end))
        pending = pending.slice(end + 2)
        end = pending.indexOf("\n\n")
      }
      wake?.()
    })
    const nextEvent = async (n: number) => {
      while (received.length < n) await new Promise<void>((r) => (wake = r))
      return received[n - 1]
    }
    // each event arrives before the backend sends the next one
    expect(await nextEvent(1)).toBe("data: event 0")
    events.next()
    expect(await nextEvent(2)).toBe("data: event 1")
    events.next()
    expect(await nextEvent(3)).toBe("data: event 2")
    events.end()
    await new Promise((r) => res.on("end", r))
  })

  it("passes a 50 MB upload intact", async () => {
    const size = 50 * 1024 * 1024
    const block = crypto.randomBytes(1024 * 1024)
    const expected = crypto.createHash("sha256")
    const chunks: Array<Buffer> = []
    for (let i = 0; i < size / block.length; i++) {
      const c = Buffer.from(block)
      c.writeUInt32BE(i, 0)
      expected.update(c)
      chunks.push(c)
    }
    const answer = await new Promise<Buffer>((resolve, reject) => {
      const req = http.request({
        port: proxy.port,
        host: "127.0.0.1",
        method: "POST",
        path: "/upload",
        headers: { host: host("web"), "content-length": String(size) }
      })
      req.on("response", (res) => {
        const got: Array<Buffer> = []
        res.on("data", (c: Buffer) => got.push(c))
        res.on("end", () => resolve(Buffer.concat(got)))
      })
      req.on("error", reject)
      Readable.from(chunks).pipe(req)
    })
    const got = json({ body: answer })
    expect(got.length).toBe(size)
    expect(got.sha256).toBe(expected.digest("hex"))
  })

  it("passes a chunked upload, with Expect: 100-continue", async () => {
    const parts = Array.from({ length: 20 }, (_, i) => crypto.randomBytes(1000 + i * 997))
    const expected = crypto.createHash("sha256")
    for (const p of parts) expected.update(p)
    const answer = await new Promise<Buffer>((resolve, reject) => {
      const req = http.request({
        port: proxy.port,
        host: "127.0.0.1",
        method: "PUT",
        path: "/chunked-upload",
        headers: { host: host("web"), expect: "100-continue" }
      })
      req.on("continue", () => {
        for (const p of parts) req.write(p)
        req.end()
      })
      req.on("response", (res) => {
        const got: Array<Buffer> = []
        res.on("data", (c: Buffer) => got.push(c))
        res.on("end", () => resolve(Buffer.concat(got)))
      })
      req.on("error", reject)
    })
    const got = json({ body: answer })
    expect(got.headers["transfer-encoding"]).toBe("chunked")
    expect(got.length).toBe(parts.reduce((n, p) => n + p.length, 0))
    expect(got.sha256).toBe(expected.digest("hex"))
  })

  it("keeps a connection alive across requests, HEAD, 204, chunked responses and a change of host", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const sequence = [
        { host: host("web"), path: "/1", who: "a" },
        { host: host("web"), path: "/chunked", who: "a" },
        { host: host("web", "w2"), path: "/3", who: "b" },
        { host: host("web"), path: "/nocontent", who: "a" },
        { host: host("api"), path: "/5", who: "a" },
        { host: host("web", "w2"), path: "/6", who: "b", method: "POST", body: "x".repeat(5000) },
        // last: node's client does not reuse a connection after HEAD, with or without a proxy
        { host: host("web"), path: "/7", who: "a", method: "HEAD" }
      ]
      const ports = new Set<number>()
      for (const step of sequence) {
        const answer = await request(proxy.port, step.host, {
          path: step.path,
          agent,
          ...(step.method === undefined ? {} : { method: step.method }),
          ...(step.body === undefined ? {} : { body: step.body })
        })
        ports.add(answer.socket.localPort ?? -1)
        if (step.method === "HEAD") {
          expect(answer.status).toBe(200)
          expect(answer.body.length).toBe(0)
          expect(answer.headers["x-backend"]).toBe(step.who)
        } else if (step.path === "/nocontent") {
          expect(answer.status).toBe(204)
        } else {
          const got = json(answer)
          expect(got.who).toBe(step.who)
          expect(got.url).toBe(step.path)
          if (step.body !== undefined) expect(got.length).toBe(step.body.length)
        }
      }
      // one client connection carried them all
      expect(ports.size).toBe(1)
    } finally {
      agent.destroy()
    }
  })

  it("echoes a WebSocket over HTTP/1.1, in both directions", async () => {
    const socket = await connect(proxy.port)
    try {
      const ws = await wsConnect(socket, host("api"))
      ws.send("hello")
      expect(await ws.next()).toBe("echo:hello")
      const big = "x".repeat(70_000)
      ws.send(big)
      expect(await ws.next()).toBe(`echo:${big}`)
      ws.send("again")
      expect(await ws.next()).toBe("echo:again")
    } finally {
      socket.destroy()
    }
  })

  // node:http gives an upgrade's socket away, so only the fast path can go back to reading requests
  it.skipIf(!fastPath)("answers an upgrade the backend does not take, then serves the next request", async () => {
    // b has no upgrade handler, so node answers the upgrade request as a plain one
    const answer = await rawExchange(
      proxy.port,
      `GET /ws HTTP/1.1\r\nHost: ${host("web", "w2")}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" +
        `GET /after HTTP/1.1\r\nHost: ${host("web", "w2")}\r\nConnection: close\r\n\r\n`
    )
    expect(answer.match(/HTTP\/1\.1 200 OK/g)?.length).toBe(2)
    expect(answer).toContain('"url":"/after"')
  })

  it("stops a proxy loop with 508", async () => {
    const looped = await request(proxy.port, host("loop"))
    expect(looped.status).toBe(508)
    expect(looped.body.toString()).toContain("went through berth's proxy 10 times")
  })

  it("answers an unknown host with a 404 listing the project's worlds: HTML for browsers, text for curl", async () => {
    const html = await request(proxy.port, host("nope"), { headers: { accept: "text/html,*/*" } })
    expect(html.status).toBe(404)
    expect(html.headers["content-type"]).toContain("text/html")
    const page = html.body.toString()
    expect(page).toContain("<h1>404 Not found</h1>")
    expect(page).toContain(`href="http://web.w1.demo.localhost:${proxy.port}/"`)
    expect(page).toContain("feature/w3 (w3)")
    const text = await request(proxy.port, host("nope"), { headers: { accept: "*/*" } })
    expect(text.status).toBe(404)
    expect(text.headers["content-type"]).toContain("text/plain")
    const body = text.body.toString()
    expect(body).toContain("No service of project demo answers to nope.w1.demo.localhost.")
    expect(body).toContain("Worlds of demo:")
    expect(body).toContain(`http://web.w2.demo.localhost:${proxy.port}/`)
    const other = await request(proxy.port, "x.y.other.localhost")
    expect(other.body.toString()).toContain("berth knows no project named other")
    const outside = await request(proxy.port, "example.com")
    expect(outside.status).toBe(404)
    expect(outside.body.toString()).toContain("not one")
  })

  it("answers 502 for a service that is not ready, a stopped world, and a backend that refuses", async () => {
    const starting = await request(proxy.port, host("starting"))
    expect(starting.status).toBe(502)
    expect(starting.body.toString()).toContain(
      "service starting of world w1 (project demo) is not ready: it is starting"
    )
    const stopped = await request(proxy.port, host("web", "w3"), { headers: { accept: "text/html" } })
    expect(stopped.status).toBe(502)
    expect(stopped.body.toString()).toContain("World feature/w3 (w3) of project demo is stopped.")
    expect(stopped.body.toString()).toContain("<code>berth up feature/w3</code>")
    const refused = await request(proxy.port, host("refused"))
    expect(refused.status).toBe(502)
    expect(refused.body.toString()).toContain("nothing accepts connections on port")
  })

  it("reaches backends that listen only on 127.0.0.1 or only on ::1", async () => {
    expect(json(await request(proxy.port, host("v4"))).who).toBe("v4-only")
    if (v6 !== undefined) expect(json(await request(proxy.port, host("v6"))).who).toBe("v6-only")
    // and the proxy answers on ::1 too
    if (hasIpv6Loopback) expect(json(await request(proxy.port, host("v4"), { address: "::1" })).who).toBe("v4-only")
  })

  it("lets requests in flight finish on the old target while new ones go to the new one", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      // pin a keep-alive connection to a
      expect(json(await request(proxy.port, host("web"), { agent })).who).toBe("a")
      const held = request(proxy.port, host("web"), { path: "/hold" })
      // until a holds it
      while ((await request(a.port, "holding", { path: "/holding" })).body.toString() === "0") {
        await new Promise((r) => setTimeout(r, 5))
      }
      proxy.setRoutes(targets.map((t) => (t.world === "w1" && t.service === "web" ? { ...t, port: b.port } : t)))
      expect(json(await request(proxy.port, host("web"))).who).toBe("b")
      // the pinned connection moves too, at the next request
      expect(json(await request(proxy.port, host("web"), { agent })).who).toBe("b")
      await request(a.port, "release", { path: "/release" })
      const old = await held
      expect(json(old).who).toBe("a")
      expect(json(old).url).toBe("/hold")
    } finally {
      proxy.setRoutes(targets)
      agent.destroy()
    }
  })

  it("hands unusual requests to node:http: an absolute-form target, CONNECT", async () => {
    const absolute = await rawExchange(
      proxy.port,
      `GET http://${host("web")}/abs HTTP/1.1\r\nHost: ${host("web")}\r\nConnection: close\r\n\r\n`
    )
    expect(absolute).toMatch(/^HTTP\/1\.1 200 /)
    expect(absolute).toContain('"who":"a"')
    const tunnel = await rawExchange(proxy.port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    expect(tunnel).toMatch(/^HTTP\/1\.1 405 /)
  })
})

describe("malformed and smuggling requests (fast path)", () => {
  let backend: Backend
  let seen = 0
  let proxy: StartedProxy
  const web = "web.w1.demo.localhost"

  beforeAll(async () => {
    backend = await startBackend((req, res) => {
      seen++
      req.resume()
      req.on("end", () => res.end("ok"))
    })
    proxy = await startProxy([target("demo", "w1", "web", backend.port)])
  })
  afterAll(async () => {
    await proxy.close()
    await backend.close()
  })

  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ["a garbled request line", "GARBAGE\r\n\r\n", "400"],
    ["HTTP/1.1 without Host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", "400"],
    ["two Host headers", `GET / HTTP/1.1\r\nHost: ${web}\r\nHost: other.localhost\r\n\r\n`, "400"],
    [
      "Content-Length with Transfer-Encoding",
      `POST / HTTP/1.1\r\nHost: ${web}\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: ${web}\r\n\r\n`,
      "400"
    ],
    [
      "conflicting Content-Lengths",
      `POST / HTTP/1.1\r\nHost: ${web}\r\nContent-Length: 3\r\nContent-Length: 30\r\n\r\nabc`,
      "400"
    ],
    ["a non-numeric Content-Length", `POST / HTTP/1.1\r\nHost: ${web}\r\nContent-Length: +3\r\n\r\nabc`, "400"],
    [
      "a Transfer-Encoding that is not chunked",
      `POST / HTTP/1.1\r\nHost: ${web}\r\nTransfer-Encoding: chunked, gzip\r\n\r\n`,
      "400"
    ],
    ["a folded header", `GET / HTTP/1.1\r\nHost: ${web}\r\nX-A: 1\r\n  continued\r\n\r\n`, "400"],
    ["a space before the colon", `GET / HTTP/1.1\r\nHost: ${web}\r\nX-A : 1\r\n\r\n`, "400"],
    ["a bare LF inside a header", `GET / HTTP/1.1\r\nHost: ${web}\r\nX-A: 1\nX-B: 2\r\n\r\n`, "400"],
    ["a head over 64 KiB", `GET / HTTP/1.1\r\nHost: ${web}\r\nX-Big: ${"a".repeat(70_000)}\r\n\r\n`, "431"]
  ]

  it.each(cases)("refuses %s", async (_name, bytes, status) => {
    const before = seen
    const answer = await rawExchange(proxy.port, bytes)
    expect(answer.startsWith(`HTTP/1.1 ${status} `), answer.slice(0, 200)).toBe(true)
    expect(answer).toContain("Connection: close")
    expect(seen).toBe(before)
  })

  it("cuts a chunked body whose framing is broken, and never forwards what follows", async () => {
    const before = seen
    const answer = await rawExchange(
      proxy.port,
      `POST / HTTP/1.1\r\nHost: ${web}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /smuggled HTTP/1.1\r\nHost: ${web}\r\n\r\n`
    )
    expect(answer).not.toContain("200")
    // the first request reached the backend with a broken body; the smuggled one never did
    expect(seen - before).toBeLessThanOrEqual(1)
  })

  it("serves a pipelined pair in order", async () => {
    const answer = await rawExchange(
      proxy.port,
      `GET /1 HTTP/1.1\r\nHost: ${web}\r\n\r\nGET /2 HTTP/1.1\r\nHost: ${web}\r\nConnection: close\r\n\r\n`
    )
    expect(answer.match(/HTTP\/1\.1 200 OK/g)?.length).toBe(2)
  })

  it("answers HTTP/1.0 and closes", async () => {
    const answer = await rawExchange(proxy.port, `GET / HTTP/1.0\r\nHost: ${web}\r\n\r\n`)
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK/)
    expect(answer.endsWith("ok")).toBe(true)
  })
})

/** A backend that speaks raw bytes: for framings node:http never sends. */
const rawBackend = async (onRequest: (socket: net.Socket, head: string) => void) => {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
    socket.on("error", () => socket.destroy())
    let buf = ""
    socket.on("data", (c: Buffer) => {
      buf += c.toString("latin1")
      for (let end = buf.indexOf("\r\n\r\n"); end !== -1; end = buf.indexOf("\r\n\r\n")) {
        const head = buf.slice(0, end)
        buf = buf.slice(end + 4)
        onRequest(socket, head)
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy()
      server.close()
    }
  }
}

describe("backend framing and connection edge cases (fast path)", () => {
  it("passes a response that ends with the connection, then closes the client's", async () => {
    const backend = await rawBackend((socket) =>
      socket.end("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
    )
    const proxy = await startProxy([target("demo", "w1", "web", backend.port)])
    try {
      const answer = await rawExchange(proxy.port, "GET / HTTP/1.1\r\nHost: web.w1.demo.localhost\r\n\r\n")
      expect(answer.endsWith("\r\n\r\nuntil close")).toBe(true)
    } finally {
      await proxy.close()
      backend.close()
    }
  })

  it("follows chunked responses with trailers, informational responses, and pipelined requests across hosts", async () => {
    const one = await rawBackend((socket, head) => {
      const path = head.split(" ")[1]
      socket.write(
        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" +
          `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n4;ext=1\r\none:\r\n${(path ?? "").length.toString(16)}\r\n${path}\r\n0\r\nX-Sum: 1\r\n\r\n`
      )
    })
    const two = await rawBackend((socket) => socket.write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo"))
    const proxy = await startProxy([target("demo", "w1", "one", one.port), target("demo", "w1", "two", two.port)])
    try {
      const answer = await rawExchange(
        proxy.port,
        "GET /first HTTP/1.1\r\nHost: one.w1.demo.localhost\r\n\r\n" +
          "GET /x HTTP/1.1\r\nHost: two.w1.demo.localhost\r\n\r\n" +
          "GET /third HTTP/1.1\r\nHost: one.w1.demo.localhost\r\nConnection: close\r\n\r\n"
      )
      // the chunks pass as they are: "one:" then the path
      const second = answer.indexOf("\r\n\r\ntwo")
      expect(answer.indexOf("\r\none:\r\n6\r\n/first\r\n")).toBeGreaterThan(0)
      expect(answer.indexOf("/first")).toBeLessThan(second)
      expect(answer.indexOf("\r\none:\r\n6\r\n/third\r\n")).toBeGreaterThan(second)
      expect(answer.match(/HTTP\/1\.1 103 /g)?.length).toBe(2)
      expect(answer.match(/X-Sum: 1/g)?.length).toBe(2)
    } finally {
      await proxy.close()
      one.close()
      two.close()
    }
  })

  it("dials again when the backend closes an idle pinned connection", async () => {
    let connections = 0
    let closed = 0
    const backend = await rawBackend((socket) => {
      connections++
      socket.once("close", () => closed++)
      // answers, then closes the connection without saying so, as an idle timeout would
      socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", () => setTimeout(() => socket.destroy(), 20))
    })
    const proxy = await startProxy([target("demo", "w1", "web", backend.port)])
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const clientPorts = new Set<number | undefined>()
      for (let i = 0; i < 3; i++) {
        const answer = await request(proxy.port, "web.w1.demo.localhost", { agent })
        expect(answer.body.toString()).toBe("ok")
        clientPorts.add(answer.socket.localPort)
        // the backend has closed it (and the proxy has had a moment to hear so), however long its timer took
        while (closed <= i) await new Promise((r) => setTimeout(r, 5))
        await new Promise((r) => setTimeout(r, 20))
      }
      // one client connection, three backend connections
      expect(clientPorts.size).toBe(1)
      expect(connections).toBe(3)
    } finally {
      agent.destroy()
      await proxy.close()
      backend.close()
    }
  })

  it("answers 502 when the backend closes without answering, and cuts a response cut short", async () => {
    const silent = await rawBackend((socket) => socket.destroy())
    const cut = await rawBackend((socket) => {
      socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
      setTimeout(() => socket.destroy(), 20)
    })
    const proxy = await startProxy([target("demo", "w1", "silent", silent.port), target("demo", "w1", "cut", cut.port)])
    try {
      const answer = await rawExchange(proxy.port, "GET / HTTP/1.1\r\nHost: silent.w1.demo.localhost\r\n\r\n")
      expect(answer).toMatch(/^HTTP\/1\.1 502 /)
      expect(answer).toContain("closed the connection without answering")
      const partial = await rawExchange(proxy.port, "GET / HTTP/1.1\r\nHost: cut.w1.demo.localhost\r\n\r\n")
      // the client sees the truncation as a closed connection, never a made-up ending
      expect(partial.endsWith("partial")).toBe(true)
    } finally {
      await proxy.close()
      silent.close()
      cut.close()
    }
  })
})

describe.each(modes)("timeouts ($name)", ({ fastPath }) => {
  let backend: Backend
  let proxy: StartedProxy
  const web = "web.w1.demo.localhost"
  const timeouts = { headMs: 600, idleMs: 1_200 }
  // Generous upper bounds: a loaded 2-core CI machine can lag by seconds; the lower bounds say it was the timer that cut.
  const slack = 4_000

  beforeAll(async () => {
    backend = await startBackend((req, res) => {
      req.resume()
      // /slow answers after the idle time has passed twice: a request in flight is not idleness
      req.on("end", () => setTimeout(() => res.end("ok"), req.url === "/slow" ? 3 * timeouts.idleMs : 0))
    })
    proxy = await startProxy([target("demo", "w1", "web", backend.port)], { fastPath, timeouts })
  })
  afterAll(async () => {
    await proxy.close()
    await backend.close()
  })

  it("cuts a request head sent one byte at a time once the head time is up", async () => {
    const head = `GET / HTTP/1.1\r\nHost: ${web}\r\nX-Slow: ${"a".repeat(200)}\r\n\r\n`
    const cut = await drip(await connect(proxy.port), head, { everyMs: 50, giveUpMs: 6_000 })
    expect(cut.closedAfterMs).toBeDefined()
    expect(cut.closedAfterMs!).toBeGreaterThanOrEqual(timeouts.headMs - 50)
    expect(cut.closedAfterMs!).toBeLessThan(timeouts.headMs + slack)
    expect(cut.received).toMatch(/^HTTP\/1\.1 408 /)
  })

  it("cuts a second head dripped on a kept-alive connection, and empty lines dripped before one", async () => {
    const socket = await connect(proxy.port)
    const first = `GET / HTTP/1.1\r\nHost: ${web}\r\n\r\n`
    const cut = await drip(socket, `GET / HTTP/1.1\r\nHost: ${web}\r\nX-Slow: ${"a".repeat(200)}\r\n\r\n`, {
      prefix: Buffer.from(first),
      everyMs: 50,
      giveUpMs: 6_000
    })
    expect(cut.received).toMatch(/^HTTP\/1\.1 200 OK/)
    expect(cut.closedAfterMs).toBeLessThan(timeouts.headMs + slack)
    const blank = await drip(await connect(proxy.port), "\r\n".repeat(200), { everyMs: 50, giveUpMs: 6_000 })
    expect(blank.closedAfterMs).toBeLessThan(timeouts.headMs + slack)
  })

  it("times every head of a connection, after one that came in pieces and one that kept it waiting", async () => {
    const socket = await connect(proxy.port)
    let received = ""
    socket.on("data", (c: Buffer) => {
      received += c.toString("latin1")
    })
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
    // a head in two pieces, well within its time
    socket.write(`GET / HTTP/1.1\r\nHost: ${web}\r\n`)
    await sleep(100)
    socket.write("\r\n")
    // longer than the head time, with nothing pending: idleness, not a slow head
    await sleep(timeouts.headMs + 200)
    expect(received).toMatch(/^HTTP\/1\.1 200 OK/)
    expect(socket.destroyed).toBe(false)
    const cut = await drip(socket, `GET / HTTP/1.1\r\nHost: ${web}\r\nX-Slow: ${"a".repeat(200)}\r\n\r\n`, {
      everyMs: 50,
      giveUpMs: 6_000
    })
    expect(cut.closedAfterMs).toBeDefined()
    expect(cut.closedAfterMs!).toBeLessThan(timeouts.headMs + slack)
  })

  it("closes a kept-alive connection left idle, but not one waiting for its response", async () => {
    // a raw socket: node's own client would close first, going by the Keep-Alive hint
    const idleAfter = async (path: string) => {
      const socket = await connect(proxy.port)
      let received = ""
      socket.on("data", (c: Buffer) => {
        received += c.toString("latin1")
      })
      const t0 = Date.now()
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${web}\r\n\r\n`)
      await new Promise<void>((resolve) => socket.once("close", () => resolve()))
      return { ms: Date.now() - t0, received }
    }
    const idle = await idleAfter("/")
    expect(idle.received).toMatch(/^HTTP\/1\.1 200 OK/)
    expect(idle.ms).toBeGreaterThanOrEqual(timeouts.idleMs - 100)
    // node:http adds a second of slack to its keep-alive time
    expect(idle.ms).toBeLessThan(timeouts.idleMs + slack)
    const slow = await idleAfter("/slow")
    expect(slow.received).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*\r\n\r\nok$/)
    expect(slow.ms).toBeGreaterThanOrEqual(3 * timeouts.idleMs + timeouts.idleMs - 100)
  })
})

describe("binding", () => {
  it("keeps the HTTP listener when HTTPS cannot bind, and moves or stops either alone", async () => {
    const ca = await Effect.runPromise(loadOrCreateCa(join(caBase, "binding")))
    const blocker = net.createServer()
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()))
    const taken = (blocker.address() as net.AddressInfo).port
    const backend = await startBackend((_req, res) => res.end("ok"))
    const scope = Effect.runSync(Scope.make())
    try {
      const handle = await Effect.runPromise(
        makeProxy({ routes: makeRouteTable([target("demo", "w1", "web", backend.port)]) }).pipe(Scope.extend(scope))
      )
      expect(handle.ports).toEqual({ http: undefined, https: undefined })
      const port = await Effect.runPromise(handle.listen({ scheme: "http", port: 0 }))
      const failed = await Effect.runPromise(Effect.flip(handle.listen({ scheme: "https", port: taken, ca })))
      expect(failed).toBeInstanceOf(ProxyError)
      expect(failed.message).toContain(`port ${taken} (127.0.0.1) for the HTTPS proxy is already in use`)
      expect(handle.ports).toEqual({ http: port, https: undefined })
      expect((await request(port, "web.w1.demo.localhost")).body.toString()).toBe("ok")
      // the port it holds is no conflict: nothing is rebound
      expect(await Effect.runPromise(handle.listen({ scheme: "http", port }))).toBe(port)
      // a move to a taken port fails and leaves the listener where it was
      const moved = await Effect.runPromise(Effect.flip(handle.listen({ scheme: "http", port: taken })))
      expect(moved.code).toBe("EADDRINUSE")
      expect((await request(port, "web.w1.demo.localhost")).body.toString()).toBe("ok")
      // berth's own other listener is named as such, not as "another program"
      const own = await Effect.runPromise(Effect.flip(handle.listen({ scheme: "https", port, ca })))
      expect(own.message).toContain("berth's own HTTP proxy")
      const httpsPort = await Effect.runPromise(handle.listen({ scheme: "https", port: 0, ca }))
      expect(handle.ports).toEqual({ http: port, https: httpsPort })
      // stopping HTTP leaves HTTPS listening
      await Effect.runPromise(handle.close("http"))
      expect(handle.ports).toEqual({ http: undefined, https: httpsPort })
      await expect(request(port, "web.w1.demo.localhost")).rejects.toThrow(/ECONNREFUSED/)
      const tlsAnswer = await new Promise<boolean>((resolve) => {
        const socket = tls.connect({ host: "127.0.0.1", port: httpsPort, servername: "localhost", ca: ca.certPem })
        socket.once("secureConnect", () => {
          socket.destroy()
          resolve(true)
        })
        socket.once("error", () => resolve(false))
      })
      expect(tlsAnswer).toBe(true)
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      blocker.close()
      await backend.close()
    }
  })

  it("fails with a ProxyError naming the port when it is taken", async () => {
    const blocker = net.createServer()
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()))
    const port = (blocker.address() as net.AddressInfo).port
    try {
      const exit = await Effect.runPromiseExit(Effect.scoped(makeProxy({ http: { port } })))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit) && exit.cause._tag === "Fail") {
        const error = exit.cause.error
        expect(error).toBeInstanceOf(ProxyError)
        expect(error.code).toBe("EADDRINUSE")
        expect(error.message).toContain(`port ${port} (127.0.0.1) for the HTTP proxy is already in use`)
        expect(error.message).toContain("berth port --proxy P")
      } else {
        throw new Error("expected a failure")
      }
    } finally {
      blocker.close()
    }
  })

  it("binds loopback only, on both families, and frees the port when its scope closes", async () => {
    const scope = Effect.runSync(Scope.make())
    const handle = await Effect.runPromise(makeProxy({ http: { port: 0 } }).pipe(Scope.extend(scope)))
    const port = handle.ports.http!
    const lines = readFileSync("/proc/net/tcp", "utf8") + readFileSync("/proc/net/tcp6", "utf8")
    const hex = port.toString(16).toUpperCase().padStart(4, "0")
    const listening = lines
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((c) => c[1]?.endsWith(`:${hex}`) && c[3] === "0A")
      .map((c) => c[1]!.split(":")[0])
    expect(listening).toContain("0100007F")
    if (hasIpv6Loopback) expect(listening).toContain("00000000000000000000000001000000")
    expect(listening.every((a) => a === "0100007F" || a === "00000000000000000000000001000000")).toBe(true)
    // an open connection and an idle pinned backend connection are closed with the scope
    const backend = await startBackend((_req, res) => res.end("ok"))
    handle.setRoutes(makeRouteTable([target("demo", "w1", "web", backend.port)]))
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const answer = await request(port, "web.w1.demo.localhost", { agent })
    expect(answer.body.toString()).toBe("ok")
    const closed = new Promise<void>((resolve) => answer.socket.once("close", () => resolve()))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await closed
    agent.destroy()
    await backend.close()
    // the port is free again
    const again = net.createServer()
    await new Promise<void>((resolve, reject) => {
      again.once("error", reject)
      again.listen(port, "127.0.0.1", () => resolve())
    })
    again.close()
  })
})
