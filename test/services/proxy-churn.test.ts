import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as http from "node:http"
import type { RouteTarget } from "../../src/domain/routes.js"
import { type Backend, request, type StartedProxy, startBackend, startProxy, target } from "./proxy-helpers.js"

const REQUESTS = 10_000
const CONNECTIONS = 50

describe.each([
  { name: "fast path", fastPath: true },
  { name: "node:http path", fastPath: false }
])("churn ($name)", ({ fastPath }) => {
  let a: Backend
  let b: Backend
  let proxy: StartedProxy

  beforeAll(async () => {
    const answer =
      (who: string): http.RequestListener =>
      (req, res) => {
        req.resume()
        req.on("end", () => res.end(who))
      }
    a = await startBackend(answer("a"))
    b = await startBackend(answer("b"))
    proxy = await startProxy([target("demo", "w1", "web", a.port)], { fastPath })
  })

  afterAll(async () => {
    await proxy.close()
    await a.close()
    await b.close()
  })

  it(`serves ${REQUESTS} requests on ${CONNECTIONS} connections while routes flip and a backend restarts`, async () => {
    let flips = 0
    let running = true
    // w1's web moves between a and b; world w2 comes and goes, and is sometimes not ready
    const flipper = setInterval(() => {
      flips++
      const targets: Array<RouteTarget> = [target("demo", "w1", "web", flips % 2 === 0 ? a.port : b.port)]
      if (flips % 3 !== 0) {
        targets.push(
          target("demo", "w2", "web", b.port, flips % 3 === 1 ? {} : { ready: false, serviceState: "starting" })
        )
      }
      proxy.setRoutes(targets)
    }, 3)
    // b goes down and up again, over and over
    const restarts = (async () => {
      let n = 0
      while (running) {
        await new Promise((r) => setTimeout(r, 40))
        await b.stop()
        await new Promise((r) => setTimeout(r, 15))
        await b.restart()
        n++
      }
      return n
    })()

    const statuses = new Map<string, number>()
    const failures: Array<string> = []
    let next = 0
    const worker = async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      try {
        while (next < REQUESTS) {
          const i = next++
          const host = i % 4 === 0 ? "web.w2.demo.localhost" : "web.w1.demo.localhost"
          try {
            const answer = await request(proxy.port, host, {
              agent,
              path: `/${i}`,
              ...(i % 7 === 0 ? { method: "POST", body: "payload ".repeat(100) } : {})
            })
            const body = answer.body.toString()
            const key =
              answer.status === 200 ? `200 ${body}` : `${answer.status} ${answer.headers["content-type"] ?? ""}`
            statuses.set(key, (statuses.get(key) ?? 0) + 1)
            if (answer.status === 200 && body !== "a" && body !== "b") failures.push(`odd body ${body}`)
            if (![200, 404, 502].includes(answer.status)) failures.push(`status ${answer.status}`)
          } catch (e) {
            failures.push(`${host} ${i}: ${(e as Error).message}`)
          }
        }
      } finally {
        agent.destroy()
      }
    }
    await Promise.all(Array.from({ length: CONNECTIONS }, worker))
    running = false
    clearInterval(flipper)
    const restarted = await restarts

    expect(failures.slice(0, 10)).toEqual([])
    const total = [...statuses.values()].reduce((n, c) => n + c, 0)
    expect(total).toBe(REQUESTS)
    expect(statuses.get("200 a") ?? 0).toBeGreaterThan(0)
    expect(statuses.get("200 b") ?? 0).toBeGreaterThan(0)
    expect(restarted).toBeGreaterThan(0)
    // and the proxy is still fine
    proxy.setRoutes([target("demo", "w1", "web", a.port)])
    const after = await request(proxy.port, "web.w1.demo.localhost")
    expect(after.body.toString()).toBe("a")
  })
})
