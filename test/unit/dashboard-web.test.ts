import { describe, expect, it } from "@effect/vitest"
import { lookup, makeRouteTable, withDashboardRoute } from "../../src/domain/routes.js"
import { dashboardPage, escapeHtml } from "../../src/services/dashboard/page.js"
import { fromOwnOrigin, parseAction, sameSecret } from "../../src/services/dashboard/web.js"

describe("the web dashboard's rules", () => {
  it("routes berth.localhost to the dashboard's port, beside the worlds' routes, and nothing when it does not run", () => {
    const table = makeRouteTable([
      {
        project: "app",
        world: "main",
        service: "web",
        worldState: "running",
        serviceState: "healthy",
        port: 4000,
        ready: true
      }
    ])
    const routed = withDashboardRoute(table, 41234)
    const found = lookup(routed, "berth.localhost:7355")
    expect(found._tag === "Found" && found.target.port).toBe(41234)
    expect(lookup(routed, "web.main.app.localhost")._tag).toBe("Found")
    // no project's 404 page lists it
    expect([...routed.byProject.keys()]).toEqual(["app"])
    expect(lookup(withDashboardRoute(table, undefined), "berth.localhost")._tag).toBe("UnknownHost")
  })

  it("acts only for the dashboard's own origin, exactly", () => {
    const origins = ["http://berth.localhost:7355", "https://berth.localhost:7356"]
    expect(fromOwnOrigin("http://berth.localhost:7355", origins)).toBe(true)
    expect(fromOwnOrigin("https://berth.localhost:7356", origins)).toBe(true)
    expect(fromOwnOrigin("http://berth.localhost:7356", origins)).toBe(false)
    expect(fromOwnOrigin("http://berth.localhost", origins)).toBe(false)
    expect(fromOwnOrigin("http://evil.example", origins)).toBe(false)
    expect(fromOwnOrigin("null", origins)).toBe(false)
    expect(fromOwnOrigin(undefined, origins)).toBe(false)
  })

  it("compares the token whole: a prefix, a longer value or nothing is not it", () => {
    const token = "ab".repeat(32)
    expect(sameSecret(token, token)).toBe(true)
    expect(sameSecret(token.slice(0, 10), token)).toBe(false)
    expect(sameSecret(`${token}0`, token)).toBe(false)
    expect(sameSecret("", token)).toBe(false)
    expect(sameSecret(undefined, token)).toBe(false)
  })

  it("reads an action's body, refusing anything else", () => {
    expect(parseAction('{"world":3,"action":"down"}')).toEqual({ world: 3, action: "down", service: undefined })
    expect(parseAction('{"world":3,"action":"restart","service":"api"}')).toEqual({
      world: 3,
      action: "restart",
      service: "api"
    })
    expect(parseAction('{"world":3,"action":"restart"}')).toBeUndefined()
    expect(parseAction('{"world":"3","action":"down"}')).toBeUndefined()
    expect(parseAction('{"world":3,"action":"exec"}')).toBeUndefined()
    expect(parseAction("not json")).toBeUndefined()
    expect(parseAction("null")).toBeUndefined()
  })

  it("escapes what it puts into HTML, and draws the page's values as text only", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
    const page = dashboardPage('"><script>alert(1)</script>', "n<once")
    expect(page).toContain('data-token="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"')
    expect(page).toContain('nonce="n&lt;once"')
    expect(page).not.toContain("innerHTML")
    expect(page).not.toContain("<script>alert")
  })
})
