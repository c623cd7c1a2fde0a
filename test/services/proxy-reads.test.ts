/**
 * The fast path reads each backend into a buffer of its own connection and uses it again for the next read, and
 * counts requests without allocating: what must not break because of that.
 */
import { describe, expect, it } from "vitest"
import * as crypto from "node:crypto"
import * as net from "node:net"
import { makeRouteTable } from "../../src/domain/routes.js"
import { Traffic } from "../../src/services/proxy/traffic.js"
import { connect, startBackend, startProxy, target } from "./proxy-helpers.js"

const WEB = "web.w1.demo.localhost"

/** Reads one response with a Content-Length from `socket`: its head and body. */
const readResponse = (socket: net.Socket, ms = 20_000): Promise<{ head: string; body: Buffer }> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let length = 0
    let total = -1
    let headLength = 0
    const timer = setTimeout(() => reject(new Error(`only ${length} bytes after ${ms} ms`)), ms)
    const onData = (c: Buffer) => {
      chunks.push(c)
      length += c.length
      if (total === -1) {
        const received = Buffer.concat(chunks)
        const end = received.indexOf("\r\n\r\n")
        if (end === -1) return
        headLength = end + 4
        total = headLength + Number(/content-length: (\d+)/i.exec(received.toString("latin1", 0, end))?.[1])
      }
      if (length < total) return
      clearTimeout(timer)
      socket.removeListener("data", onData)
      const all = Buffer.concat(chunks)
      resolve({ head: all.toString("latin1", 0, headLength), body: all.subarray(headLength, total) })
    }
    socket.on("data", onData)
  })

const sha256 = (data: Buffer): string => crypto.createHash("sha256").update(data).digest("hex")

describe("backend reads (fast path)", () => {
  it("passes big responses intact to a client that stops reading for a while, then goes on", async () => {
    // larger than any read buffer, and than what the sockets hold, so that writes to the client wait
    const data = crypto.randomBytes(8 * 1024 * 1024)
    const backend = await startBackend((req, res) => {
      req.resume()
      res.writeHead(200, { "content-length": data.length })
      res.end(data)
    })
    const proxy = await startProxy([target("demo", "w1", "web", backend.port)])
    const client = await connect(proxy.port)
    try {
      for (let round = 0; round < 2; round++) {
        client.pause()
        client.write(`GET /${round} HTTP/1.1\r\nHost: ${WEB}\r\n\r\n`)
        await new Promise((r) => setTimeout(r, 300))
        const received = readResponse(client)
        // then reads in sips, so that the proxy's writes are often taken only in part
        let sipping = true
        const sip = () => {
          client.pause()
          setTimeout(() => sipping && client.resume(), 1)
        }
        client.on("data", sip)
        client.resume()
        const got = (await received).body
        sipping = false
        client.removeListener("data", sip)
        expect(got.length).toBe(data.length)
        expect(sha256(got)).toBe(sha256(data))
      }
    } finally {
      client.destroy()
      await proxy.close()
      await backend.close()
    }
  })

  it("passes a body that comes in small pieces intact to a client that stops reading", async () => {
    // small reads written to a client whose socket fills up: a write taken in part, or queued, still holds its bytes
    const data = crypto.randomBytes(12 * 1024 * 1024)
    let sent: () => void = () => {}
    const allSent = new Promise<void>((r) => {
      sent = r
    })
    const sockets = new Set<net.Socket>()
    const server = net.createServer((socket) => {
      sockets.add(socket)
      socket.on("error", () => socket.destroy())
      socket.once("data", async () => {
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${data.length}\r\n\r\n`)
        for (let i = 0; i < data.length; i += 2048) {
          if (!socket.write(data.subarray(i, i + 2048))) await new Promise((r) => socket.once("drain", r))
          // one piece per turn of the loop, so that the proxy reads them one or a few at a time
          await new Promise((r) => setImmediate(r))
        }
        sent()
      })
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
    const proxy = await startProxy([target("demo", "w1", "web", (server.address() as net.AddressInfo).port)])
    const client = await connect(proxy.port)
    try {
      client.pause()
      client.write(`GET / HTTP/1.1\r\nHost: ${WEB}\r\n\r\n`)
      await Promise.race([allSent, new Promise((r) => setTimeout(r, 1_500))])
      const received = readResponse(client)
      client.resume()
      const got = (await received).body
      expect(got.length).toBe(data.length)
      expect(sha256(got)).toBe(sha256(data))
    } finally {
      client.destroy()
      await proxy.close()
      for (const s of sockets) s.destroy()
      server.close()
    }
  })

  it("reads a response head that arrives a few bytes at a time, twice on one connection", async () => {
    const head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Padding: abcdefghijklmnopqrstuvwxyz\r\nContent-Length: 5\r\n\r\n"
    const sockets = new Set<net.Socket>()
    const server = net.createServer((socket) => {
      sockets.add(socket)
      socket.on("error", () => socket.destroy())
      let pending = ""
      socket.on("data", async (c: Buffer) => {
        pending += c.toString("latin1")
        while (pending.includes("\r\n\r\n")) {
          pending = pending.slice(pending.indexOf("\r\n\r\n") + 4)
          // each piece is its own read on the proxy's side
          for (let i = 0; i < head.length; i += 7) {
            socket.write(head.slice(i, i + 7))
            await new Promise((r) => setTimeout(r, 2))
          }
          socket.write("hello")
        }
      })
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
    const proxy = await startProxy([target("demo", "w1", "web", (server.address() as net.AddressInfo).port)])
    const client = await connect(proxy.port)
    try {
      for (let round = 0; round < 2; round++) {
        const received = readResponse(client)
        client.write(`GET / HTTP/1.1\r\nHost: ${WEB}\r\n\r\n`)
        const answer = await received
        expect(answer.head + answer.body.toString("latin1")).toBe(`${head}hello`)
      }
    } finally {
      client.destroy()
      await proxy.close()
      for (const s of sockets) s.destroy()
      server.close()
    }
  })

  it("counts each request once on both paths: a connection's first too, though its head is read again", async () => {
    const backend = await startBackend((_req, res) => res.end("ok"))
    for (const fastPath of [true, false]) {
      const traffic = new Traffic()
      const table = makeRouteTable([target("demo", "w1", "web", backend.port), target("demo", "w1", "down", 1)])
      const proxy = await startProxy([], { fastPath })
      proxy.handle.setRoutes({ ...table, seen: traffic.seen })
      const client = await connect(proxy.port)
      try {
        for (let i = 0; i < 3; i++) {
          client.write(`GET /${i} HTTP/1.1\r\nHost: ${WEB}\r\n\r\n`)
          await readResponse(client)
        }
        // refused by its backend: counted too (the world was asked for)
        const other = await connect(proxy.port)
        other.write("GET / HTTP/1.1\r\nHost: down.w1.demo.localhost\r\n\r\n")
        await readResponse(other)
        other.destroy()
        expect(traffic.requests()).toEqual(
          new Map([
            ["web.w1.demo", 3],
            ["down.w1.demo", 1]
          ])
        )
      } finally {
        client.destroy()
        await proxy.close()
      }
    }
    await backend.close()
  })

  it("notes a service's answer below 500 as a passed probe, on both paths; a 5xx or a refused backend is none", async () => {
    let status = 200
    const backend = await startBackend((_req, res) => {
      res.statusCode = status
      res.end("ok")
    })
    for (const fastPath of [true, false]) {
      const traffic = new Traffic()
      const table = makeRouteTable([
        target("demo", "w1", "web", backend.port, { worldId: 7 }),
        target("demo", "w1", "down", 1, { worldId: 7 })
      ])
      const proxy = await startProxy([], { fastPath })
      proxy.handle.setRoutes({ ...table, seen: traffic.seen, answered: traffic.answered })
      const client = await connect(proxy.port)
      const ask = async (host: string) => {
        client.write(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`)
        return (await readResponse(client)).head
      }
      try {
        status = 503
        expect(await ask(WEB)).toMatch(/^HTTP\/1\.1 503/)
        expect(traffic.lastAnswer(7, "web")).toBeUndefined()
        const before = Date.now()
        status = 404
        expect(await ask(WEB)).toMatch(/^HTTP\/1\.1 404/)
        expect(traffic.lastAnswer(7, "web")).toBeGreaterThanOrEqual(before)
        // a backend that refuses: berth's own page answers, the service did not
        const other = await connect(proxy.port)
        other.write("GET / HTTP/1.1\r\nHost: down.w1.demo.localhost\r\n\r\n")
        await readResponse(other)
        other.destroy()
        expect(traffic.lastAnswer(7, "down")).toBeUndefined()
        expect(traffic.lastAnswer(8, "web")).toBeUndefined()
      } finally {
        client.destroy()
        await proxy.close()
      }
    }
    await backend.close()
  })
})

describe("Traffic", () => {
  const web = target("demo", "w1", "web", 4000, { worldId: 7 })
  const api = target("demo", "w1", "api", 4001, { worldId: 7 })
  const other = target("demo", "w2", "web", 4002, { worldId: 8 })

  it("counts requests per route and when each world last saw one, across tables", () => {
    const traffic = new Traffic()
    const first = makeRouteTable([web, api, other])
    traffic.prepare(first.byHost.values())
    expect(traffic.lastRequest(7)).toBeUndefined()
    const before = Date.now()
    traffic.seen(first.byHost.get(WEB)!)
    traffic.seen(first.byHost.get(WEB)!)
    traffic.seen(first.byHost.get("api.w1.demo.localhost")!)
    expect(traffic.lastRequest(7)).toBeGreaterThanOrEqual(before)
    expect(traffic.lastRequest(8)).toBeUndefined()
    // a rebuilt table has new target objects: the counts go on
    const second = makeRouteTable([{ ...web }, { ...other }])
    traffic.prepare(second.byHost.values())
    traffic.seen(second.byHost.get(WEB)!)
    traffic.seen(second.byHost.get("web.w2.demo.localhost")!)
    expect(traffic.requests()).toEqual(
      new Map([
        ["web.w1.demo", 3],
        ["api.w1.demo", 1],
        ["web.w2.demo", 1]
      ])
    )
    expect(traffic.lastRequest(8)).toBeGreaterThanOrEqual(before)
  })

  it("counts a target it was not prepared for, and one without a world id", () => {
    const traffic = new Traffic()
    traffic.seen(target("demo", "w3", "web", 4003))
    traffic.seen(other)
    expect(traffic.requests()).toEqual(
      new Map([
        ["web.w3.demo", 1],
        ["web.w2.demo", 1]
      ])
    )
    expect(traffic.lastRequest(8)).toBeDefined()
  })
})
