import { describe, expect, it } from "vitest"
import {
  hostOf,
  isUnderDomain,
  lookup,
  loopPage,
  makeRouteTable,
  normalizeHost,
  notFoundPage,
  projectOfHost,
  type RouteTarget,
  unavailablePage,
  urlOf
} from "../../src/domain/routes.js"
import { renderHtml, renderPage, renderText, wantsHtml } from "../../src/services/proxy/pages.js"

const t = (
  world: string,
  service: string,
  port: number | undefined,
  extra: Partial<RouteTarget> = {}
): RouteTarget => ({
  project: "demo",
  world,
  service,
  worldState: "running",
  serviceState: "healthy",
  port,
  ready: true,
  ...extra
})

const table = makeRouteTable([
  t("w1", "web", 4001),
  t("w1", "api", 4002),
  t("w2", "web", 4003, { worldName: "feature/login" }),
  t("w3", "web", 4004, { worldState: "stopped", serviceState: "stopped", ready: false }),
  t("gone", "web", 4005, { worldState: "removing" }),
  { ...t("w1", "web", 5001), project: "shop" }
])
const origin = { scheme: "http", port: 8080 } as const

describe("route table", () => {
  it("keys targets by their lower-case host and groups them by project", () => {
    expect(table.byHost.get("web.w1.demo.localhost")?.port).toBe(4001)
    expect(table.byHost.get("web.w1.shop.localhost")?.port).toBe(5001)
    expect(table.byProject.get("demo")?.length).toBe(5)
    // the first target claiming a host keeps it
    const dup = makeRouteTable([t("w1", "web", 1), t("w1", "web", 2)])
    expect(dup.byHost.get("web.w1.demo.localhost")?.port).toBe(1)
    expect(makeRouteTable([t("w1", "web", 1)], ".Test.").byHost.has("web.w1.demo.test")).toBe(true)
    // a project with a domain of its own is routed under it
    const own = makeRouteTable([t("w1", "web", 1, { domain: "dev.test" }), t("w1", "api", 2)])
    expect(own.byHost.get("web.w1.demo.dev.test")?.port).toBe(1)
    expect(own.byHost.get("api.w1.demo.localhost")?.port).toBe(2)
  })

  it("reads a Host header: no port, lower case, no trailing dot", () => {
    expect(normalizeHost("Web.W1.Demo.Localhost:8080")).toBe("web.w1.demo.localhost")
    expect(normalizeHost("web.w1.demo.localhost.")).toBe("web.w1.demo.localhost")
    expect(normalizeHost("web.w1.demo.localhost.:80")).toBe("web.w1.demo.localhost")
    expect(normalizeHost("[::1]:8080")).toBe("[::1]")
    expect(normalizeHost(undefined)).toBe("")
    // a port that is not one: the whole is the name, which no route has (a Host a URL parser reads as evil.example)
    expect(normalizeHost("web.w1.demo.localhost:@evil.example")).toBe("web.w1.demo.localhost:@evil.example")
    expect(normalizeHost("web.w1.demo.localhost:80x")).toBe("web.w1.demo.localhost:80x")
    expect(normalizeHost("web.w1.demo.localhost:")).toBe("web.w1.demo.localhost")
    expect(normalizeHost("  ")).toBe("")
  })

  it("finds a target, or names the project an unknown host points into", () => {
    const found = lookup(table, "WEB.w2.demo.localhost:8080")
    expect(found._tag).toBe("Found")
    if (found._tag === "Found") expect(found.target.port).toBe(4003)
    expect(lookup(table, "nope.w1.demo.localhost")).toEqual({
      _tag: "UnknownHost",
      host: "nope.w1.demo.localhost",
      project: "demo"
    })
    expect(lookup(table, "demo.localhost")).toMatchObject({ project: "demo" })
    expect(lookup(table, "example.com")).toMatchObject({ _tag: "UnknownHost", project: undefined })
    expect(lookup(table, undefined)).toMatchObject({ _tag: "UnknownHost", host: "" })
    expect(projectOfHost("localhost", "localhost")).toBeUndefined()
  })

  it("writes URLs with the port only when it is not the scheme's default", () => {
    expect(urlOf(t("w1", "web", 1), "localhost", "http", 80)).toBe("http://web.w1.demo.localhost/")
    expect(urlOf(t("w1", "web", 1), "localhost", "https", 443)).toBe("https://web.w1.demo.localhost/")
    expect(urlOf(t("w1", "web", 1), "localhost", "http", 443)).toBe("http://web.w1.demo.localhost:443/")
    expect(hostOf(t("w1", "web", 1), "Test")).toBe("web.w1.demo.test")
  })

  it("mints certificates only for names under the domain", () => {
    expect(isUnderDomain("web.w1.demo.localhost", "localhost")).toBe(true)
    expect(isUnderDomain("localhost", "localhost")).toBe(true)
    expect(isUnderDomain("example.com", "localhost")).toBe(false)
    expect(isUnderDomain("evil-localhost", "localhost")).toBe(false)
    expect(isUnderDomain("a..localhost", "localhost")).toBe(false)
    expect(isUnderDomain("a b.localhost", "localhost")).toBe(false)
  })
})

describe("pages", () => {
  it("404: lists the project's worlds and services (not the ones being removed), with links", () => {
    const result = lookup(table, "nope.w1.demo.localhost")
    if (result._tag !== "UnknownHost") throw new Error("expected unknown")
    const page = notFoundPage(table, result, origin)
    expect(page.status).toBe(404)
    expect(page.worlds.map((w) => w.world)).toEqual(["w1", "w2", "w3"])
    expect(page.worlds[0]?.services.map((s) => s.service)).toEqual(["api", "web"])
    expect(page.worlds[0]?.services[1]?.url).toBe("http://web.w1.demo.localhost:8080/")
    const text = renderText(page)
    expect(text).toContain("No service of project demo answers to nope.w1.demo.localhost.")
    expect(text).toContain("feature/login (w2) — running")
    expect(text).toContain("w3 — stopped")
    const html = renderHtml(page)
    expect(html).toContain('<a href="http://web.w1.demo.localhost:8080/">web</a>')
    // a service that is not ready is listed without a link
    expect(html).not.toContain('<a href="http://web.w3.demo.localhost:8080/">')
  })

  it("404 for an unknown project and for a host outside the domain", () => {
    const other = lookup(table, "x.y.other.localhost")
    if (other._tag !== "UnknownHost") throw new Error("expected unknown")
    expect(notFoundPage(table, other, origin).message).toBe(
      "berth knows no project named other (host x.y.other.localhost)."
    )
    const outside = lookup(table, "example.com")
    if (outside._tag !== "UnknownHost") throw new Error("expected unknown")
    expect(notFoundPage(table, outside, origin).message).toContain("only names under .localhost")
  })

  it("502: a service not ready, a stopped or suspended world, a refusal, a closed connection", () => {
    const starting = t("w1", "api", 4002, { ready: false, serviceState: "starting" })
    expect(unavailablePage(table, "h", starting, "not-ready", origin).message).toBe(
      "The service api of world w1 (project demo) is not ready: it is starting."
    )
    const failed = t("w2", "web", 1, { ready: false, serviceState: "failed", worldName: "feature/login" })
    expect(unavailablePage(table, "h", failed, "not-ready", origin).hint).toBe("See `berth logs feature/login web`.")
    const stopped = t("w3", "web", 4004, { worldState: "stopped", ready: false })
    const page = unavailablePage(table, "h", stopped, "not-ready", origin)
    expect(page.title).toBe("World stopped")
    expect(page.message).toBe("World w3 of project demo is stopped.")
    expect(page.hint).toBe("Run `berth up w3` in the project to start it.")
    const suspended = t("w3", "web", 4004, { worldState: "suspended", ready: false })
    // a suspended world is being woken by the request: 503, retry soon, a page that reloads itself
    const waking = unavailablePage(table, "h", suspended, "not-ready", origin)
    expect(waking).toMatchObject({ status: 503, retryAfter: 2, title: "Waking up" })
    expect(waking.message).toContain("suspended to free memory")
    expect(unavailablePage(table, "h", t("w1", "web", 4001), "refused", origin).message).toContain(
      "nothing accepts connections on port 4001"
    )
    expect(unavailablePage(table, "h", t("w1", "web", 4001), "closed", origin).message).toContain(
      "closed the connection without answering"
    )
    expect(loopPage("web.w1.demo.localhost", 10).status).toBe(508)
  })

  it("renders HTML for browsers and text otherwise, escaping what it shows", () => {
    expect(wantsHtml("text/html,application/xhtml+xml,*/*;q=0.8")).toBe(true)
    expect(wantsHtml("*/*")).toBe(false)
    expect(wantsHtml(undefined)).toBe(false)
    const nasty = makeRouteTable([t("w1", "web", 1, { worldName: "<script>alert(1)</script>" })])
    const result = lookup(nasty, "x.w1.demo.localhost")
    if (result._tag !== "UnknownHost") throw new Error("expected unknown")
    const html = renderPage(notFoundPage(nasty, result, origin), "text/html")
    expect(html.contentType).toBe("text/html; charset=utf-8")
    expect(html.body.toString()).not.toContain("<script>")
    expect(html.body.toString()).toContain("&lt;script&gt;")
    expect(renderPage(notFoundPage(nasty, result, origin), "*/*").contentType).toBe("text/plain; charset=utf-8")
  })
})
