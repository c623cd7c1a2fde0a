/**
 * HTTP/2 through the proxy under many concurrent connections: every stream of every session is answered in full.
 *
 * Guards the h2 path (node:http2 in front, the keep-alive pool of HTTP/1.1 connections behind) against a stream left
 * unanswered when many sessions share the pool. (A hang seen with `h2load -c200 -m1 -D3` was h2load's own: see the
 * h2load note in bench/proxy.mjs.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mkdtempSync, rmSync } from "node:fs"
import * as http2 from "node:http2"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { type CertificateAuthority, loadOrCreateCa } from "../../src/services/proxy/ca.js"
import { type Backend, type StartedProxy, startBackend, startProxy, target } from "./proxy-helpers.js"

const base = mkdtempSync(join(tmpdir(), "berth-proxy-h2-"))
const web = "web.w1.demo.localhost"
const BODY = Buffer.alloc(1024, "x")
/** More than a stream's window and the pipe's buffers hold: a client that does not read stalls the backend socket. */
const BIG = Buffer.alloc(1024 * 1024, "y")

let ca: CertificateAuthority
let backend: Backend
let proxy: StartedProxy

beforeAll(async () => {
  ca = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
  backend = await startBackend((req, res) => {
    const body = req.url === "/big" ? BIG : BODY
    res.writeHead(200, { "content-type": "text/plain", "content-length": body.length })
    res.end(body)
  })
  proxy = await startProxy([target("demo", "w1", "web", backend.port)], { https: { port: 0, ca } })
})

afterAll(async () => {
  await proxy?.close()
  await backend?.close()
  rmSync(base, { recursive: true, force: true })
})

/** One stream: its body's length once it ends, or -1 when it fails. */
const get = (session: http2.ClientHttp2Session, path = "/") =>
  new Promise<number>((resolve) => {
    const stream = session.request({ ":path": path, ":method": "GET", ":authority": web })
    let length = 0
    stream.on("data", (c: Buffer) => {
      length += c.length
    })
    stream.on("end", () => resolve(length))
    stream.on("error", () => resolve(-1))
    stream.end()
  })

describe("HTTP/2 through the proxy under many connections", () => {
  it("answers every stream of 200 concurrent sessions in full", async () => {
    const sessions = 200
    const perSession = 10
    const lengths: Array<number> = []
    const one = async () => {
      const session = http2.connect(`https://127.0.0.1:${proxy.httpsPort}`, { ca: ca.certPem, servername: web })
      session.on("error", () => {})
      try {
        // one stream at a time, as `h2load -m1` does
        for (let i = 0; i < perSession; i++) lengths.push(await get(session))
      } finally {
        session.close()
      }
    }
    await Promise.all(Array.from({ length: sessions }, one))
    expect(lengths.filter((n) => n !== BODY.length)).toEqual([])
    expect(lengths.length).toBe(sessions * perSession)
  }, 60_000)

  it("answers every stream after streams that stalled their backend connection were cancelled", async () => {
    const open = (settings?: http2.Settings) => {
      const session = http2.connect(`https://127.0.0.1:${proxy.httpsPort}`, {
        ca: ca.certPem,
        servername: web,
        ...(settings === undefined ? {} : { settings })
      })
      session.on("error", () => {})
      return session
    }
    // clients that read nothing of a big body: the proxy stops reading those backend connections
    const stalled = Array.from({ length: 20 }, () => open({ initialWindowSize: 1024 }))
    const streams = stalled.map((session) => {
      const stream = session.request({ ":path": "/big", ":method": "GET", ":authority": web })
      stream.on("error", () => {})
      stream.pause()
      stream.end()
      return stream
    })
    await Promise.all(streams.map((stream) => new Promise((resolve) => stream.once("response", resolve))))
    // give up on them: those connections must not serve anyone again
    for (const stream of streams) stream.close(http2.constants.NGHTTP2_CANCEL)
    for (const session of stalled) session.close()
    const lengths: Array<number> = []
    const one = async () => {
      const session = open()
      try {
        for (let i = 0; i < 10; i++) lengths.push(await get(session))
      } finally {
        session.close()
      }
    }
    await Promise.all(Array.from({ length: 50 }, one))
    expect(lengths.filter((n) => n !== BODY.length)).toEqual([])
    expect(lengths.length).toBe(500)
    // and a big body still comes whole
    const session = open()
    try {
      expect(await get(session, "/big")).toBe(BIG.length)
    } finally {
      session.close()
    }
  }, 60_000)
})
