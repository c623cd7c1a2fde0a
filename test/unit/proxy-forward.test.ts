import { describe, expect, it } from "vitest"
import {
  choose,
  forwardedOrigin,
  lookup,
  machineOnlyPage,
  makeRouteTable,
  REMOTE_RETRY_AFTER,
  remotePage,
  type RouteTarget,
  unavailablePage,
  withDashboardRoute
} from "../../src/domain/routes.js"
import { parseRequestHead, rewriteRequestHead } from "../../src/services/proxy/http1.js"
import { rawResponse, renderPage } from "../../src/services/proxy/pages.js"
import { clusterHost, isPeer, peerList } from "../../src/services/proxy/Proxy.js"
import { originForm } from "../../src/services/proxy/slow.js"

const remote = { machine: "machine-b", address: "10.77.0.2", port: 7355 }

const t = (extra: Partial<RouteTarget> = {}): RouteTarget => ({
  project: "demo",
  world: "feature-x",
  worldName: "feature/x",
  service: "web",
  worldState: "running",
  serviceState: "healthy",
  port: 4100,
  ready: true,
  ...extra
})

const origin = { scheme: "http", port: 7355 } as const

describe("choosing where a request goes", () => {
  it("sends a ready local target to its port, and pages the rest", () => {
    expect(choose(t(), false)).toBe("local")
    expect(choose(t(), true)).toBe("local")
    expect(choose(t({ ready: false }), false)).toBe("not-ready")
    expect(choose(t({ port: undefined }), false)).toBe("not-ready")
  })

  it("forwards a remote target that is ready, whatever its port here", () => {
    expect(choose(t({ remote, port: undefined }), false)).toBe("forward")
    expect(choose(t({ remote, ready: false }), false)).toBe("moving")
  })

  it("never forwards again what a peer sent (the cluster listener)", () => {
    expect(choose(t({ remote }), true)).toBe("elsewhere")
    expect(choose(t({ remote, ready: false }), true)).toBe("elsewhere")
  })
})

describe("berth's dashboard in a cluster", () => {
  it("is a route for this machine only", () => {
    const table = withDashboardRoute(makeRouteTable([t()]), 41234)
    const found = lookup(table, "berth.localhost")
    expect(found._tag === "Found" && found.target.machineOnly).toBe(true)
    expect(machineOnlyPage("berth.localhost").status).toBe(404)
  })
})

describe("pages for a world another machine runs", () => {
  const table = makeRouteTable([t({ remote })])

  it("are 503 with Retry-After, naming the world and the machine", () => {
    for (const trouble of ["moving", "unreachable", "elsewhere"] as const) {
      const page = remotePage(table, "web.feature-x.demo.localhost", t({ remote }), remote, trouble, origin)
      expect(page.status).toBe(503)
      expect(page.retryAfter).toBe(REMOTE_RETRY_AFTER)
      expect(page.message).toContain("feature/x (feature-x)")
      expect(page.message).toContain("machine-b")
      expect(page.worlds[0]?.world).toBe("feature-x")
    }
  })

  it("take the place of the 502s for a remote target", () => {
    const host = "web.feature-x.demo.localhost"
    expect(unavailablePage(table, host, t({ remote }), "refused", origin)).toMatchObject({
      status: 503,
      title: "Machine unreachable"
    })
    expect(unavailablePage(table, host, t({ remote }), "closed", origin).status).toBe(503)
    expect(unavailablePage(table, host, t({ remote, ready: false }), "not-ready", origin).title).toBe("Moving")
    // a local one is as before
    expect(unavailablePage(table, host, t(), "refused", origin).status).toBe(502)
  })

  it("reload themselves in a browser; API clients get text", () => {
    const page = remotePage(table, "web.feature-x.demo.localhost", t({ remote }), remote, "unreachable", origin)
    const html = renderPage(page, "text/html,application/xhtml+xml")
    expect(html.contentType).toContain("text/html")
    expect(html.body.toString()).toContain('<meta http-equiv="refresh" content="2">')
    const text = renderPage(page, "application/json")
    expect(text.contentType).toContain("text/plain")
    expect(text.body.toString()).toMatch(/^503 Machine unreachable\n/)
    const raw = rawResponse(text, { close: false, head: false }).toString("latin1")
    expect(raw).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/)
    expect(raw).toContain("\r\nRetry-After: 2\r\n")
  })
})

describe("request heads forwarded to a peer", () => {
  const head = (lines: string) => {
    const parsed = parseRequestHead(`GET /x HTTP/1.1\r\n${lines}`)
    if (!parsed.ok) throw new Error(parsed.reason)
    return parsed
  }

  it("keep Host as sent and append to X-Forwarded-For", () => {
    const parsed = head("Host: Web.Feature-X.demo.localhost:7355\r\nX-Forwarded-For: 10.0.0.9\r\nX-Berth-Hops: 1")
    const out = rewriteRequestHead(parsed, "127.0.0.1", "http", parsed.hops + 1)
    expect(out).toContain("\r\nHost: Web.Feature-X.demo.localhost:7355\r\n")
    expect(out).toContain("\r\nX-Forwarded-For: 10.0.0.9, 127.0.0.1\r\n")
    expect(out).toContain("\r\nX-Forwarded-Host: Web.Feature-X.demo.localhost:7355\r\n")
    expect(out).toContain("\r\nX-Berth-Hops: 2\r\n")
  })

  it("read X-Forwarded-Proto (believed only on the cluster listener) and never pass it on as received", () => {
    const parsed = head("Host: a.b.c.localhost\r\nX-Forwarded-Proto: https")
    expect(parsed.forwardedProto).toBe("https")
    expect(parsed.kept).not.toContain("X-Forwarded-Proto")
    const out = rewriteRequestHead(parsed, "10.77.0.1", "https", 2)
    expect(out.match(/X-Forwarded-Proto/g)).toHaveLength(1)
    expect(out).toContain("\r\nX-Forwarded-Proto: https\r\n")
    expect(head("Host: a.b.c.localhost").forwardedProto).toBeUndefined()
  })

  it("tell a peer how the client came in, so its pages link back there", () => {
    expect(forwardedOrigin("web.w.p.localhost:7355", "http")).toEqual({ scheme: "http", port: 7355 })
    expect(forwardedOrigin("web.w.p.localhost", "https")).toEqual({ scheme: "https", port: 443 })
    expect(forwardedOrigin("web.w.p.localhost", undefined)).toEqual({ scheme: "http", port: 80 })
    expect(forwardedOrigin("[::1]:8443", "https")).toEqual({ scheme: "https", port: 8443 })
    expect(forwardedOrigin("[::1]", "gopher")).toEqual({ scheme: "http", port: 80 })
    expect(forwardedOrigin("web.w.p.localhost:99999", "http")).toEqual({ scheme: "http", port: 80 })
    expect(forwardedOrigin(undefined, "http")).toEqual({ scheme: "http", port: 80 })
  })

  it("use origin-form targets", () => {
    expect(originForm("/a?b=1")).toBe("/a?b=1")
    expect(originForm("http://web.w.p.localhost:7355/a?b=1")).toBe("/a?b=1")
    expect(originForm("*")).toBe("*")
    expect(originForm(undefined)).toBe("/")
  })
})

describe("the cluster listener's addresses", () => {
  it("takes one IP address, never a wildcard or a name", () => {
    expect(clusterHost("10.77.0.2")).toBe("10.77.0.2")
    expect(clusterHost("fd00::2")).toBe("fd00::2")
    expect(clusterHost("0.0.0.0")).toBeUndefined()
    expect(clusterHost("::")).toBeUndefined()
    expect(clusterHost("0:0::0")).toBeUndefined()
    expect(clusterHost("berth-b.lan")).toBeUndefined()
    expect(clusterHost("")).toBeUndefined()
  })

  it("knows peers by address, in any spelling, and nobody else", () => {
    const peers = peerList(["10.77.0.1", "fd00:0:0::1", "not-an-address"])
    expect(peers.list).toEqual(["10.77.0.1", "fd00:0:0::1"])
    expect(isPeer(peers.allowed, "10.77.0.1")).toBe(true)
    expect(isPeer(peers.allowed, "::ffff:10.77.0.1")).toBe(true)
    expect(isPeer(peers.allowed, "fd00::1")).toBe(true)
    expect(isPeer(peers.allowed, "10.77.0.3")).toBe(false)
    expect(isPeer(peers.allowed, "not-an-address")).toBe(false)
    expect(isPeer(peers.allowed, undefined)).toBe(false)
    expect(isPeer(peerList([]).allowed, "10.77.0.1")).toBe(false)
  })
})
