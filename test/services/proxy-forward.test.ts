/**
 * Two proxies in one process, as two machines of a cluster: A on loopback (127.0.0.1, its cluster listener on
 * 127.0.0.3) and B, whose cluster listener is on 127.0.0.2 (Linux routes all of 127/8 to lo), with a real backend
 * behind B. Requests for B's world reach A and go on to B with Host kept.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { spawn } from "node:child_process"
import * as crypto from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import * as http2 from "node:http2"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import { makeRouteTable, type RouteTarget, withDashboardRoute } from "../../src/domain/routes.js"
import { type CertificateAuthority, loadOrCreateCa } from "../../src/services/proxy/ca.js"
import { ProxyError } from "../../src/services/proxy/Proxy.js"
import {
  acceptWebSockets,
  type Backend,
  connect,
  request,
  type StartedProxy,
  startBackend,
  startProxy,
  target,
  wsConnect,
  wsFrame,
  wsReader,
  onBody
} from "./proxy-helpers.js"

const base = mkdtempSync(join(tmpdir(), "berth-proxy-forward-"))
const web = "web.w1.demo.localhost"
const local = "web.here.demo.localhost"
const A_CLUSTER = "127.0.0.3"
const B_CLUSTER = "127.0.0.2"

let ca: CertificateAuthority
let backend: Backend
let aLocal: Backend
let b: StartedProxy
let bCluster: number
/** A with the fast path, and A with plain HTTP through node:http too */
let aFast: StartedProxy
let aSlow: StartedProxy
let closedPort: number

const remoteOf = (port: number, address = B_CLUSTER, machine = "machine-b") => ({ machine, address, port })

/** A's routes: B's world, a world of A's own, and worlds whose owner is gone or moving. */
const aTargets = (): ReadonlyArray<RouteTarget> => [
  target("demo", "w1", "web", undefined, { remote: remoteOf(bCluster) }),
  target("demo", "w1", "gone", undefined, { remote: remoteOf(closedPort, B_CLUSTER, "machine-gone") }),
  target("demo", "w1", "moving", undefined, { ready: false, remote: remoteOf(bCluster) }),
  target("demo", "here", "web", aLocal.port)
]

const echoHandler: http.RequestListener = (req, res) => {
  onBody(req, (length, sha256) => {
    res.writeHead(200, { "content-type": "application/json", "x-backend": "b" })
    res.end(JSON.stringify({ url: req.url, method: req.method, headers: req.headers, length, sha256 }))
  })
}

const json = (a: { body: Buffer }) =>
  JSON.parse(a.body.toString()) as {
    url: string
    method: string
    headers: Record<string, string>
    length: number
    sha256: string
  }

beforeAll(async () => {
  ca = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
  backend = await startBackend(echoHandler)
  acceptWebSockets(backend.server)
  aLocal = await startBackend((_req, res) => res.end("a's own"))
  b = await startProxy([target("demo", "w1", "web", backend.port)], {
    cluster: { host: B_CLUSTER, port: 0, peers: [A_CLUSTER] }
  })
  bCluster = b.handle.cluster()!.port
  aFast = await startProxy([], { https: { port: 0, ca }, cluster: { host: A_CLUSTER, port: 0, peers: [B_CLUSTER] } })
  aSlow = await startProxy([], { fastPath: false, cluster: { host: A_CLUSTER, port: 0, peers: [B_CLUSTER] } })
  // let go only once every listener here holds its port: freed earlier, the kernel may hand it to one of them
  const closed = await startBackend(() => {}, B_CLUSTER)
  closedPort = closed.port
  await closed.close()
  for (const a of [aFast, aSlow]) a.setRoutes(aTargets())
})

afterAll(async () => {
  for (const p of [aFast, aSlow, b]) await p?.close()
  await backend?.close()
  await aLocal?.close()
  rmSync(base, { recursive: true, force: true })
})

describe.each([
  { name: "fast path", a: () => aFast },
  { name: "node:http path", a: () => aSlow }
])("forwarding to the owner's proxy ($name)", ({ a }) => {
  it("reaches B's backend with Host kept and X-Forwarded-* set", async () => {
    const host = `${web}:${a().port}`
    const answer = await request(a().port, host, { path: "/p?q=1" })
    expect(answer.status).toBe(200)
    expect(answer.headers["x-backend"]).toBe("b")
    const got = json(answer)
    expect(got.url).toBe("/p?q=1")
    expect(got.headers.host).toBe(host)
    expect(got.headers["x-forwarded-host"]).toBe(host)
    expect(got.headers["x-forwarded-proto"]).toBe("http")
    // the client, then A as B saw it (A's dials leave from its cluster address)
    expect(got.headers["x-forwarded-for"]).toBe(`127.0.0.1, ${A_CLUSTER}`)
    // one hop through A, one through B
    expect(got.headers["x-berth-hops"]).toBe("2")
  })

  it("passes request bodies, by length and chunked", async () => {
    const body = crypto.randomBytes(3 * 1024 * 1024)
    const sha = crypto.createHash("sha256").update(body).digest("hex")
    const sized = json(await request(a().port, web, { method: "POST", body }))
    expect(sized.length).toBe(body.length)
    expect(sized.sha256).toBe(sha)
    const chunked = json(
      await request(a().port, web, { method: "PUT", body, headers: { "transfer-encoding": "chunked" } })
    )
    expect(chunked.method).toBe("PUT")
    expect(chunked.sha256).toBe(sha)
  })

  it("keeps a client's connection across remote and local routes", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const sockets = new Set<net.Socket>()
      for (const host of [web, local, web, web, local]) {
        const answer = await request(a().port, host, { agent })
        expect(answer.status).toBe(200)
        if (host === local) expect(answer.body.toString()).toBe("a's own")
        else expect(json(answer).headers.host).toBe(host)
        sockets.add(answer.socket)
      }
      expect(sockets.size).toBe(1)
    } finally {
      agent.destroy()
    }
  })

  it("echoes WebSocket messages both ways through A and B", async () => {
    const socket = await connect(a().port)
    try {
      const ws = await wsConnect(socket, web)
      ws.send("hello")
      expect(await ws.next()).toBe("echo:hello")
      ws.send("again")
      expect(await ws.next()).toBe("echo:again")
    } finally {
      socket.destroy()
    }
  })

  it("answers 503 with Retry-After at once when the owner's proxy is down: a page for browsers, text for the rest", async () => {
    const started = Date.now()
    const plain = await request(a().port, `gone.w1.demo.localhost`)
    expect(plain.status).toBe(503)
    expect(plain.headers["retry-after"]).toBe("2")
    expect(plain.headers["content-type"]).toContain("text/plain")
    expect(plain.body.toString()).toContain("machine-gone")
    const page = await request(a().port, `gone.w1.demo.localhost`, { headers: { accept: "text/html" } })
    expect(page.status).toBe(503)
    expect(page.headers["retry-after"]).toBe("2")
    const html = page.body.toString()
    expect(html).toContain('<meta http-equiv="refresh" content="2">')
    expect(html).toContain("machine-gone")
    expect(html).toContain("World w1 of project demo")
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("answers 503 while the world moves, without dialling", async () => {
    const answer = await request(a().port, "moving.w1.demo.localhost", { headers: { accept: "text/html" } })
    expect(answer.status).toBe(503)
    expect(answer.headers["retry-after"]).toBe("2")
    expect(answer.body.toString()).toContain("moving to machine machine-b")
  })

  it("passes B's own answers back: a service B cannot reach is B's 502", async () => {
    b.setRoutes([target("demo", "w1", "web", closedPort)])
    try {
      const answer = await request(a().port, web)
      expect(answer.status).toBe(502)
      expect(answer.body.toString()).toContain("nothing accepts connections")
    } finally {
      b.setRoutes([target("demo", "w1", "web", backend.port)])
    }
  })

  it("leaves waking and counting a remote world to its owner", async () => {
    const woken: Array<number> = []
    const seen: Array<string> = []
    const table = makeRouteTable([
      ...aTargets(),
      target("demo", "w2", "web", undefined, {
        ready: false,
        worldState: "suspended",
        worldId: 1,
        remote: remoteOf(bCluster)
      }),
      target("demo", "w3", "web", undefined, { worldId: 1, remote: remoteOf(bCluster) })
    ])
    a().handle.setRoutes({ ...table, wake: (id) => woken.push(id), seen: (t) => seen.push(t.world) })
    try {
      expect((await request(a().port, "web.w2.demo.localhost")).status).toBe(503)
      expect((await request(a().port, "web.w3.demo.localhost")).status).toBe(404)
      expect((await request(a().port, web)).status).toBe(200)
      expect((await request(a().port, local)).status).toBe(200)
      expect(woken).toEqual([])
      expect(seen).toEqual(["here"])
    } finally {
      a().setRoutes(aTargets())
    }
  })

  it("gets B's own pages with links the client can follow (A's port, not B's cluster listener)", async () => {
    a().setRoutes([...aTargets(), target("demo", "w9", "web", undefined, { remote: remoteOf(bCluster) })])
    try {
      const answer = await request(a().port, `web.w9.demo.localhost:${a().port}`)
      expect(answer.status).toBe(404)
      expect(answer.body.toString()).toContain(`http://web.w1.demo.localhost:${a().port}/`)
    } finally {
      a().setRoutes(aTargets())
    }
  })

  it("stops at the hop limit with 508", async () => {
    const answer = await request(a().port, web, { headers: { "x-berth-hops": "10" } })
    expect(answer.status).toBe(508)
  })
})

describe("HTTPS to A, plain HTTP on to B", () => {
  const tlsTo = (servername: string, alpn: ReadonlyArray<string>) =>
    new Promise<tls.TLSSocket>((resolve, reject) => {
      const socket = tls.connect({
        host: "127.0.0.1",
        port: aFast.httpsPort!,
        servername,
        ca: ca.certPem,
        ALPNProtocols: [...alpn]
      })
      socket.once("secureConnect", () => resolve(socket))
      socket.once("error", reject)
    })

  it("serves an h2 client, and B's backend sees X-Forwarded-Proto https", async () => {
    const socket = await tlsTo(web, ["h2"])
    const session = http2.connect(`https://${web}:${aFast.httpsPort}`, { createConnection: () => socket })
    try {
      const authority = `${web}:${aFast.httpsPort}`
      const body = crypto.randomBytes(256 * 1024)
      const answer = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
        const stream = session.request({ ":path": "/tls", ":method": "POST", ":authority": authority })
        const chunks: Array<Buffer> = []
        let status = 0
        stream.on("response", (h) => (status = Number(h[":status"])))
        stream.on("data", (c: Buffer) => chunks.push(c))
        stream.on("end", () => resolve({ status, body: Buffer.concat(chunks) }))
        stream.on("error", reject)
        stream.end(body)
      })
      expect(answer.status).toBe(200)
      const got = json(answer)
      expect(got.url).toBe("/tls")
      expect(got.headers.host).toBe(authority)
      expect(got.headers["x-forwarded-proto"]).toBe("https")
      expect(got.headers["x-forwarded-host"]).toBe(authority)
      expect(got.sha256).toBe(crypto.createHash("sha256").update(body).digest("hex"))
    } finally {
      session.close()
    }
  })

  it("upgrades a WebSocket over TLS (HTTP/1.1) through A and B", async () => {
    const socket = await tlsTo(web, ["http/1.1"])
    try {
      const ws = await wsConnect(socket, web)
      ws.send("secure")
      expect(await ws.next()).toBe("echo:secure")
    } finally {
      socket.destroy()
    }
  })

  it("echoes a WebSocket from an h2 client (RFC 8441) through A and B", async () => {
    const socket = await tlsTo(web, ["h2"])
    const session = http2.connect(`https://${web}:${aFast.httpsPort}`, { createConnection: () => socket })
    try {
      await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()))
      const stream = session.request(
        {
          ":method": "CONNECT",
          ":protocol": "websocket",
          ":scheme": "https",
          ":path": "/ws",
          ":authority": `${web}:${aFast.httpsPort}`,
          "sec-websocket-version": "13"
        },
        { endStream: false }
      )
      const status = await new Promise<number>((resolve, reject) => {
        stream.once("response", (h) => resolve(Number(h[":status"])))
        stream.once("error", reject)
      })
      expect(status).toBe(200)
      const reader = wsReader(stream)
      stream.write(wsFrame("over h2", true))
      expect((await reader.next()).toString()).toBe("echo:over h2")
      stream.close()
    } finally {
      session.close()
    }
  })

  it("answers 503 over h2 when the owner is down", async () => {
    const name = "gone.w1.demo.localhost"
    const socket = await tlsTo(name, ["h2"])
    const session = http2.connect(`https://${name}:${aFast.httpsPort}`, { createConnection: () => socket })
    try {
      const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const stream = session.request({ ":path": "/", ":authority": name })
        stream.on("response", resolve)
        stream.on("error", reject)
        stream.resume()
        stream.end()
      })
      expect(headers[":status"]).toBe(503)
      expect(headers["retry-after"]).toBe("2")
    } finally {
      session.close()
    }
  })
})

/**
 * A listener that never accepts, its queue full: Linux drops further SYNs, so a connection there neither succeeds
 * nor fails — a machine that vanished. Node accepts everything itself, so python holds the socket.
 */
const silentListener = async (): Promise<{ port: number; stop: () => void } | undefined> => {
  const script = [
    "import socket, sys, time",
    "s = socket.socket(); s.bind(('127.0.0.6', 0)); s.listen(0)",
    "port = s.getsockname()[1]",
    "held = []",
    "for _ in range(4):",
    "    c = socket.socket(); c.setblocking(False)",
    "    try: c.connect(('127.0.0.6', port))",
    "    except BlockingIOError: pass",
    "    held.append(c)",
    "time.sleep(0.3); print(port, flush=True); time.sleep(60)"
  ].join("\n")
  const child = spawn("python3", ["-c", script], { stdio: ["ignore", "pipe", "ignore"] })
  return new Promise((resolve) => {
    child.on("error", () => resolve(undefined))
    child.stdout.once("data", (c: Buffer) => resolve({ port: Number(c.toString().trim()), stop: () => child.kill() }))
    child.on("exit", () => resolve(undefined))
  })
}

describe("a peer that takes no connection", () => {
  it("is answered 503 within the connect limit, on both paths", async () => {
    const silent = await silentListener()
    if (silent === undefined) return // no python3 here: nothing to hold the queue
    try {
      for (const a of [aFast, aSlow]) {
        a.setRoutes([
          ...aTargets(),
          target("demo", "w1", "silent", undefined, { remote: remoteOf(silent.port, "127.0.0.6", "machine-silent") })
        ])
      }
      const started = Date.now()
      const answers = await Promise.all([aFast, aSlow].map((a) => request(a.port, "silent.w1.demo.localhost")))
      for (const answer of answers) {
        expect(answer.status).toBe(503)
        expect(answer.headers["retry-after"]).toBe("2")
        expect(answer.body.toString()).toContain("machine-silent")
      }
      const took = Date.now() - started
      // the peer's time is waited out (the contract), and the wait ends (a bound far from a hang, not a window)
      expect(took).toBeGreaterThanOrEqual(1_900)
      expect(took).toBeLessThan(10_000)
    } finally {
      silent.stop()
      // let go only once every listener here holds its port: freed earlier, the kernel may hand it to one of them
      const closed = await startBackend(() => {}, B_CLUSTER)
      closedPort = closed.port
      await closed.close()
      for (const a of [aFast, aSlow]) a.setRoutes(aTargets())
    }
  })
})

describe("a peer that drops off while requests wait", () => {
  it("keeps slow answers, and answers 503 once the peer takes no more connections", async () => {
    const held: Array<http.ServerResponse> = []
    const slowBackend = await startBackend((req, res) => {
      if (req.url === "/slow") setTimeout(() => res.end("slow but alive"), 1_200)
      else held.push(res)
    })
    const owner = await startProxy([target("demo", "w1", "web", slowBackend.port)], {
      cluster: { host: "127.0.0.8", port: 0, peers: ["127.0.0.9"] }
    })
    const remote = remoteOf(owner.handle.cluster()!.port, "127.0.0.8", "machine-c")
    const fronts = await Promise.all(
      [true, false].map((fastPath) =>
        startProxy([target("demo", "w1", "web", undefined, { remote })], {
          fastPath,
          timeouts: { remoteProbeMs: 200 },
          cluster: { host: "127.0.0.9", port: 0, peers: [] }
        })
      )
    )
    try {
      // probes succeed all along: a slow answer is no failure
      for (const slow of await Promise.all(fronts.map((f) => request(f.port, web, { path: "/slow" })))) {
        expect(slow.status).toBe(200)
        expect(slow.body.toString()).toBe("slow but alive")
      }
      const waiting = fronts.map((f) => request(f.port, web, { path: "/hold" }))
      while (held.length < fronts.length) await new Promise((r) => setTimeout(r, 20))
      // the owner's listener goes (its open connections stay, and would wait for ever)
      const gone = Date.now()
      await Effect.runPromise(owner.handle.closeCluster)
      for (const answer of await Promise.all(waiting)) {
        expect(answer.status).toBe(503)
        expect(answer.headers["retry-after"]).toBe("2")
        expect(answer.body.toString()).toContain("machine-c")
      }
      // they would wait for ever: a bound far from a hang, not a window a loaded machine overruns
      expect(Date.now() - gone).toBeLessThan(10_000)
    } finally {
      for (const f of fronts) await f.close()
      await owner.close()
      await slowBackend.close()
    }
  })
})

describe("the cluster listener", () => {
  it("closes a connection from an address that is no peer at once, and counts it", async () => {
    const before = b.handle.cluster()!.refused
    const received = await new Promise<{ bytes: number; closed: boolean }>((resolve) => {
      // from 127.0.0.1: B's only peer is 127.0.0.3
      const socket = net.connect({ host: B_CLUSTER, port: bCluster, localAddress: "127.0.0.1" })
      let bytes = 0
      socket.on("connect", () => socket.write(`GET / HTTP/1.1\r\nHost: ${web}\r\n\r\n`))
      socket.on("data", (c: Buffer) => {
        bytes += c.length
      })
      socket.on("error", () => {})
      socket.on("close", () => resolve({ bytes, closed: true }))
      setTimeout(() => {
        socket.destroy()
        resolve({ bytes, closed: false })
      }, 3_000)
    })
    expect(received).toEqual({ bytes: 0, closed: true })
    expect(b.handle.cluster()!.refused).toBe(before + 1)
    // a peer's connection is served
    const peer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect({ host: B_CLUSTER, port: bCluster, localAddress: A_CLUSTER })
      const chunks: Array<Buffer> = []
      socket.on("connect", () => socket.write(`GET / HTTP/1.1\r\nHost: ${web}\r\nConnection: close\r\n\r\n`))
      socket.on("data", (c: Buffer) => chunks.push(c))
      socket.on("error", reject)
      socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")))
    })
    expect(peer).toMatch(/^HTTP\/1\.1 200 /)
  })

  it("never serves berth's dashboard to a peer: its page carries the token that acts on this machine", async () => {
    b.handle.setRoutes(withDashboardRoute(makeRouteTable([target("demo", "w1", "web", backend.port)]), backend.port))
    try {
      expect((await request(b.port, "berth.localhost")).status).toBe(200)
      const fromPeer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect({ host: B_CLUSTER, port: bCluster, localAddress: A_CLUSTER })
        const chunks: Array<Buffer> = []
        socket.on("connect", () => socket.write("GET / HTTP/1.1\r\nHost: berth.localhost\r\nConnection: close\r\n\r\n"))
        socket.on("data", (c: Buffer) => chunks.push(c))
        socket.on("error", reject)
        socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")))
      })
      expect(fromPeer).toMatch(/^HTTP\/1\.1 404 /)
      expect(fromPeer).toContain("served only to its own machine")
    } finally {
      b.setRoutes([target("demo", "w1", "web", backend.port)])
    }
  })

  it("listens only on its address: B's loopback listener is not it, and it is not on 127.0.0.1", async () => {
    expect(b.handle.cluster()!.host).toBe(B_CLUSTER)
    await expect(connect(bCluster, "127.0.0.1")).rejects.toMatchObject({ code: "ECONNREFUSED" })
  })

  it("ends a forwarding loop (A's route names B, B's names A) in 503, never a hang", async () => {
    const aCluster = aFast.handle.cluster()!.port
    b.setRoutes([target("demo", "w1", "web", undefined, { remote: remoteOf(aCluster, A_CLUSTER, "machine-a") })])
    try {
      const started = Date.now()
      const answer = await request(aFast.port, web)
      expect(answer.status).toBe(503)
      expect(answer.headers["retry-after"]).toBe("2")
      expect(answer.body.toString()).toContain("machine-a")
      // a loop would never end: a bound far from a hang
      expect(Date.now() - started).toBeLessThan(10_000)
    } finally {
      b.setRoutes([target("demo", "w1", "web", backend.port)])
    }
  })

  it("does not believe X-Forwarded-Proto from a client of an ordinary listener", async () => {
    const got = json(await request(aFast.port, web, { headers: { "x-forwarded-proto": "https" } }))
    expect(got.headers["x-forwarded-proto"]).toBe("http")
  })

  it("refuses wildcard and foreign addresses, and a failed move leaves it serving", async () => {
    const before = b.handle.cluster()!
    const wildcard = await Effect.runPromise(
      Effect.flip(b.handle.listenCluster({ host: "0.0.0.0", port: 0, peers: [A_CLUSTER] }))
    )
    expect(wildcard).toBeInstanceOf(ProxyError)
    expect(wildcard.code).toBe("EINVAL")
    const name = await Effect.runPromise(
      Effect.flip(b.handle.listenCluster({ host: "localhost", port: 0, peers: [A_CLUSTER] }))
    )
    expect(name.code).toBe("EINVAL")
    // TEST-NET-1: no interface here has it
    const foreign = await Effect.runPromise(
      Effect.flip(b.handle.listenCluster({ host: "192.0.2.10", port: 0, peers: [A_CLUSTER] }))
    )
    expect(foreign.scheme).toBe("cluster")
    expect(foreign.code).toBe("EADDRNOTAVAIL")
    expect(b.handle.cluster()).toEqual(before)
    const answer = await request(aFast.port, web)
    expect(answer.status).toBe(200)
  })

  it("moves to another port and closes the old one; closing stops it", async () => {
    const spare = await startProxy([target("demo", "w1", "web", backend.port)], {
      cluster: { host: B_CLUSTER, port: 0, peers: ["127.0.0.1"] }
    })
    try {
      const first = spare.handle.cluster()!.port
      const same = await Effect.runPromise(spare.handle.listenCluster({ host: B_CLUSTER, port: 0, peers: [] }))
      expect(same).toBe(first)
      // the peers changed at once: 127.0.0.1 is no longer one
      expect(spare.handle.cluster()!.peers).toEqual([])
      const moved = await Effect.runPromise(
        spare.handle.listenCluster({ host: "127.0.0.4", port: 0, peers: ["127.0.0.1"] })
      )
      expect(spare.handle.cluster()).toMatchObject({ host: "127.0.0.4", port: moved })
      await expect(connect(first, B_CLUSTER)).rejects.toMatchObject({ code: "ECONNREFUSED" })
      const served = await new Promise<string>((resolve, reject) => {
        const socket = net.connect({ host: "127.0.0.4", port: moved, localAddress: "127.0.0.1" })
        const chunks: Array<Buffer> = []
        socket.on("connect", () => socket.write(`GET / HTTP/1.1\r\nHost: ${web}\r\nConnection: close\r\n\r\n`))
        socket.on("data", (c: Buffer) => chunks.push(c))
        socket.on("error", reject)
        socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")))
      })
      expect(served).toMatch(/^HTTP\/1\.1 200 /)
      await Effect.runPromise(spare.handle.closeCluster)
      expect(spare.handle.cluster()).toBeUndefined()
      await expect(connect(moved, "127.0.0.4")).rejects.toMatchObject({ code: "ECONNREFUSED" })
    } finally {
      await spare.close()
    }
  })
})
