import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as crypto from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import type * as http from "node:http"
import * as http2 from "node:http2"
import * as https from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import { type CertificateAuthority, loadOrCreateCa } from "../../src/services/proxy/ca.js"
import {
  acceptWebSockets,
  clientHello,
  type Backend,
  type StartedProxy,
  startBackend,
  startProxy,
  target,
  connect,
  drip,
  h2PartialHeaders,
  h2Preface,
  wsConnect,
  wsFrame,
  wsReader,
  onBody
} from "./proxy-helpers.js"

const base = mkdtempSync(join(tmpdir(), "berth-proxy-https-"))
const web = "web.w1.demo.localhost"
const api = "api.w1.demo.localhost"

let ca: CertificateAuthority
let backend: Backend
let proxy: StartedProxy
let port: number

beforeAll(async () => {
  ca = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
  backend = await startBackend((req, res) => {
    onBody(req, (length, sha256) => {
      res.writeHead(200, { "content-type": "application/json", connection: "keep-alive" })
      res.end(JSON.stringify({ url: req.url, headers: req.headers, length, sha256 }))
    })
  })
  acceptWebSockets(backend.server)
  proxy = await startProxy(
    [
      target("demo", "w1", "web", backend.port),
      target("demo", "w1", "api", backend.port),
      target("demo", "w1", "down", 1, { ready: false, serviceState: "failed" })
    ],
    { https: { port: 0, ca: ca } }
  )
  port = proxy.httpsPort!
})

afterAll(async () => {
  await proxy?.close()
  await backend?.close()
  rmSync(base, { recursive: true, force: true })
})

/** A TLS connection to the proxy for `servername`, verified against berth's CA only. */
const tlsTo = (servername: string, alpn: ReadonlyArray<string>) =>
  new Promise<tls.TLSSocket>((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, servername, ca: ca.certPem, ALPNProtocols: [...alpn] })
    socket.once("secureConnect", () => resolve(socket))
    socket.once("error", reject)
  })

const h2Session = async (servername: string) => {
  const socket = await tlsTo(servername, ["h2"])
  expect(socket.alpnProtocol).toBe("h2")
  const session = http2.connect(`https://${servername}:${port}`, { createConnection: () => socket })
  await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()))
  return session
}

const h2Get = (session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer) =>
  new Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
    const stream = session.request(headers)
    const chunks: Array<Buffer> = []
    let responseHeaders: http2.IncomingHttpHeaders = {}
    stream.on("response", (h) => (responseHeaders = h))
    stream.on("data", (c: Buffer) => chunks.push(c))
    stream.on("end", () =>
      resolve({ status: Number(responseHeaders[":status"]), headers: responseHeaders, body: Buffer.concat(chunks) })
    )
    stream.on("error", reject)
    stream.end(body)
  })

describe("the proxy over HTTPS", () => {
  it("serves HTTP/2 verified against berth's CA, with X-Forwarded-Proto https", async () => {
    const session = await h2Session(web)
    try {
      const answer = await h2Get(session, { ":path": "/h2", ":method": "GET", ":authority": `${web}:${port}` })
      expect(answer.status).toBe(200)
      const got = JSON.parse(answer.body.toString())
      expect(got.url).toBe("/h2")
      expect(got.headers.host).toBe(`${web}:${port}`)
      expect(got.headers["x-forwarded-proto"]).toBe("https")
      expect(got.headers["x-forwarded-host"]).toBe(`${web}:${port}`)
      expect(got.headers["x-berth-hops"]).toBe("1")
      // connection-specific headers never reach an h2 client
      expect(answer.headers.connection).toBeUndefined()
      // a 3 MB upload streams through
      const body = crypto.randomBytes(3 * 1024 * 1024)
      const upload = await h2Get(session, { ":path": "/up", ":method": "POST", ":authority": `${web}:${port}` }, body)
      expect(JSON.parse(upload.body.toString()).sha256).toBe(crypto.createHash("sha256").update(body).digest("hex"))
    } finally {
      session.close()
    }
  })

  it("serves HTTP/1.1 over TLS when the client does not offer h2", async () => {
    const answer = await new Promise<{ status: number; body: string; alpn: string | false | null }>(
      (resolve, reject) => {
        const req = https.request(
          {
            host: "127.0.0.1",
            port,
            servername: web,
            ca: ca.certPem,
            path: "/h1",
            headers: { host: `${web}:${port}` },
            agent: false
          },
          (res: http.IncomingMessage) => {
            let body = ""
            res.on("data", (c: Buffer) => (body += c.toString()))
            res.on("end", () =>
              resolve({ status: res.statusCode ?? 0, body, alpn: (res.socket as tls.TLSSocket).alpnProtocol })
            )
          }
        )
        req.on("error", reject)
        req.end()
      }
    )
    expect(answer.status).toBe(200)
    expect(answer.alpn).not.toBe("h2")
    const got = JSON.parse(answer.body)
    expect(got.url).toBe("/h1")
    expect(got.headers["x-forwarded-proto"]).toBe("https")
  })

  it("keeps an HTTP/1.1 connection over TLS across requests and hosts, with https in pages and X-Forwarded-Proto", async () => {
    const socket = await tlsTo(web, ["http/1.1"])
    expect(socket.alpnProtocol).toBe("http/1.1")
    const received: Array<Buffer> = []
    socket.on("data", (c: Buffer) => received.push(c))
    const ended = new Promise<void>((resolve) => socket.once("end", () => resolve()))
    // pipelined: one host, another, an unknown one, and an absolute-form target (node:http's to answer), which closes
    socket.write(
      `GET /one HTTP/1.1\r\nHost: ${web}:${port}\r\n\r\n` +
        `GET /two HTTP/1.1\r\nHost: ${api}:${port}\r\nX-Forwarded-Proto: http\r\n\r\n` +
        `GET / HTTP/1.1\r\nHost: nope.w1.demo.localhost:${port}\r\nAccept: text/html\r\n\r\n` +
        `GET https://${web}:${port}/abs HTTP/1.1\r\nHost: ${web}:${port}\r\nConnection: close\r\n\r\n`
    )
    await ended
    const text = Buffer.concat(received).toString("latin1")
    const statuses = [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => m[1])
    expect(statuses).toEqual(["200", "200", "404", "200"])
    const bodies = [...text.matchAll(/\{"url".*?"sha256":"[0-9a-f]+"\}/g)].map((m) => JSON.parse(m[0]))
    // node:http passes an absolute-form target on as it came
    expect(bodies.map((b) => b.url)).toEqual(["/one", "/two", `https://${web}:${port}/abs`])
    for (const b of bodies) expect(b.headers["x-forwarded-proto"]).toBe("https")
    expect(bodies[1].headers.host).toBe(`${api}:${port}`)
    expect(text).toContain(`https://web.w1.demo.localhost:${port}/`)
  })

  it("sends the CA in the chain and a leaf per host name", async () => {
    const socket = await tlsTo(api, ["http/1.1"])
    try {
      const leaf = socket.getPeerCertificate(true)
      expect(leaf.subjectaltname).toBe(`DNS:${api}`)
      expect(leaf.issuerCertificate.fingerprint256).toBe(ca.cert.fingerprint256)
    } finally {
      socket.destroy()
    }
  })

  it("gives no certificate for a name outside the domain", async () => {
    const failure = await tlsTo("example.com", ["http/1.1"]).then(
      (s) => {
        s.destroy()
        return undefined
      },
      (e: NodeJS.ErrnoException) => e
    )
    expect(failure?.code).toBe("ERR_TLS_CERT_ALTNAME_INVALID")
  })

  it("serves the bare proxy host with its own certificate", async () => {
    const socket = await tlsTo("localhost", ["http/1.1"])
    try {
      expect(socket.getPeerCertificate().subjectaltname).toBe("DNS:localhost")
    } finally {
      socket.destroy()
    }
  })

  it("mints nothing for names it does not route: 500 of them get the bare host's certificate", async () => {
    await tlsTo(web, ["http/1.1"]).then((s) => s.destroy())
    const before = ca.cachedLeaves()
    const failures = new Set<string>()
    for (let i = 0; i < 500; i += 50) {
      const batch = Array.from({ length: 50 }, (_, k) =>
        tlsTo(`n${i + k}.nowhere.localhost`, ["http/1.1"]).then(
          (s) => {
            s.destroy()
            return "verified"
          },
          (e: NodeJS.ErrnoException) => e.code ?? e.message
        )
      )
      for (const outcome of await Promise.all(batch)) failures.add(outcome)
    }
    // the client is told the name does not match: no fresh leaf, and none cached
    expect([...failures]).toEqual(["ERR_TLS_CERT_ALTNAME_INVALID"])
    expect(ca.cachedLeaves()).toBe(before)
  })

  it("answers pages over h2 too", async () => {
    const session = await h2Session(web)
    try {
      const missing = await h2Get(session, { ":path": "/", ":authority": `nope.w1.demo.localhost:${port}` })
      expect(missing.status).toBe(404)
      expect(missing.body.toString()).toContain(`https://web.w1.demo.localhost:${port}/`)
      const down = await h2Get(session, { ":path": "/", ":authority": `down.w1.demo.localhost:${port}` })
      expect(down.status).toBe(502)
      expect(down.body.toString()).toContain("it is failed")
    } finally {
      session.close()
    }
  })

  it("echoes a WebSocket over HTTPS + HTTP/1.1", async () => {
    const socket = await tlsTo(api, ["http/1.1"])
    try {
      const ws = await wsConnect(socket, `${api}:${port}`)
      ws.send("over tls")
      expect(await ws.next()).toBe("echo:over tls")
      ws.send("twice")
      expect(await ws.next()).toBe("echo:twice")
    } finally {
      socket.destroy()
    }
  })

  it("echoes a WebSocket over HTTPS + HTTP/2 (RFC 8441 extended CONNECT)", async () => {
    const session = await h2Session(api)
    try {
      expect(session.remoteSettings.enableConnectProtocol).toBe(true)
      const stream = session.request(
        {
          ":method": "CONNECT",
          ":protocol": "websocket",
          ":scheme": "https",
          ":path": "/ws",
          ":authority": `${api}:${port}`,
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
      const big = "y".repeat(100_000)
      stream.write(wsFrame(big, true))
      expect((await reader.next()).toString()).toBe(`echo:${big}`)
      stream.close()
    } finally {
      session.close()
    }
  })
})

describe("HTTPS timeouts", () => {
  const timeouts = { headMs: 600, idleMs: 1_200 }
  let timed: StartedProxy
  let timedPort: number

  beforeAll(async () => {
    timed = await startProxy([target("demo", "w1", "web", backend.port)], { https: { port: 0, ca }, timeouts })
    timedPort = timed.httpsPort!
  })
  afterAll(async () => {
    await timed?.close()
  })

  const secure = (alpn: ReadonlyArray<string>) =>
    new Promise<tls.TLSSocket>((resolve, reject) => {
      const socket = tls.connect({
        host: "127.0.0.1",
        port: timedPort,
        servername: web,
        ca: ca.certPem,
        ALPNProtocols: [...alpn]
      })
      socket.once("secureConnect", () => resolve(socket))
      socket.once("error", reject)
    })
  // Generous upper bounds: a loaded 2-core CI machine can lag by seconds; what matters is that the proxy cuts at all.
  const slack = 4_000
  const limit = timeouts.idleMs + slack

  it("cuts a TLS handshake sent one byte at a time", async () => {
    const hello = await clientHello(web)
    const cut = await drip(await connect(timedPort), hello, { everyMs: 20, giveUpMs: 6_000 })
    expect(cut.closedAfterMs).toBeDefined()
    expect(cut.closedAfterMs!).toBeLessThan(timeouts.headMs + slack)
  })

  it("cuts an HTTP/1.1 request head dripped over TLS", async () => {
    const head = `GET / HTTP/1.1\r\nHost: ${web}\r\nX-Slow: ${"a".repeat(200)}\r\n\r\n`
    const cut = await drip(await secure(["http/1.1"]), head, { everyMs: 50, giveUpMs: 6_000 })
    expect(cut.closedAfterMs).toBeDefined()
    expect(cut.closedAfterMs!).toBeLessThan(timeouts.headMs + slack)
  })

  it("cuts an HTTP/2 HEADERS frame dripped byte by byte", async () => {
    const socket = await secure(["h2"])
    expect(socket.alpnProtocol).toBe("h2")
    const cut = await drip(socket, h2PartialHeaders, { prefix: h2Preface, everyMs: 50, giveUpMs: 6_000 })
    expect(cut.closedAfterMs).toBeDefined()
    expect(cut.closedAfterMs!).toBeLessThan(limit)
  })

  it("closes idle connections: an HTTP/2 session with no stream, a kept-alive HTTP/1.1 one", async () => {
    const socket = await secure(["h2"])
    const session = http2.connect(`https://${web}:${timedPort}`, { createConnection: () => socket })
    const answer = await h2Get(session, { ":path": "/", ":authority": `${web}:${timedPort}` })
    expect(answer.status).toBe(200)
    // Idle counts from the end of the last stream, so the clock starts once the answer is in.
    const t0 = Date.now()
    await new Promise<void>((resolve) => session.once("close", () => resolve()))
    expect(Date.now() - t0).toBeLessThan(limit)
    const h1 = await secure(["http/1.1"])
    h1.resume()
    const closed = new Promise<number>((resolve) => h1.once("close", () => resolve(Date.now() - t1)))
    const t1 = Date.now()
    h1.write(`GET / HTTP/1.1\r\nHost: ${web}\r\n\r\n`)
    expect(await closed).toBeLessThan(limit)
  })
})
