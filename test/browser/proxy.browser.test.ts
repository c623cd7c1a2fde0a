/**
 * A real browser through the proxy: Debian's Chromium, headless, driven by playwright-core, opens a page on
 * `web.w1.demo.localhost` that calls its api on `api.w1.demo.localhost` (CORS) and opens a WebSocket to it —
 * over plain HTTP, and over HTTPS with berth's CA trusted in the browser's NSS database (no certificate flags).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { type CertificateAuthority, loadOrCreateCa } from "../../src/services/proxy/ca.js"
import { planTrust, runTrust } from "../../src/services/proxy/trust.js"
import {
  acceptWebSockets,
  type Backend,
  type StartedProxy,
  startBackend,
  startProxy,
  target
} from "../services/proxy-helpers.js"
import { goto, hasChromium, relaunching, render } from "./chromium.js"

const page = `<!doctype html>
<html><body><p id="out">loading</p><script>
(async () => {
  const out = document.getElementById("out")
  try {
    const api = location.protocol + "//api.w1.demo.localhost:" + location.port
    const data = await (await fetch(api + "/data")).json()
    const protocol = performance.getEntriesByType("navigation")[0].nextHopProtocol
    const ws = new WebSocket(api.replace(/^http/, "ws") + "/ws")
    ws.onopen = () => ws.send("from the browser")
    ws.onmessage = (e) => {
      out.textContent = "api says " + data.message + " via " + data.proto + "; page over " + protocol + "; ws " + e.data
      ws.close()
    }
    ws.onerror = () => (out.textContent = "websocket failed")
  } catch (e) {
    out.textContent = "failed: " + e
  }
})()
</script></body></html>`

const base = mkdtempSync(join(tmpdir(), "berth-browser-"))
let web: Backend
let api: Backend
let proxy: StartedProxy
let ca: CertificateAuthority
let browser: ReturnType<typeof relaunching>

beforeAll(async () => {
  if (!hasChromium) return
  ca = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
  web = await startBackend((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" })
    res.end(page)
  })
  api = await startBackend((req, res) => {
    res.writeHead(200, { "content-type": "application/json", "access-control-allow-origin": "*" })
    res.end(JSON.stringify({ message: "hello", proto: req.headers["x-forwarded-proto"] }))
  })
  acceptWebSockets(api.server)
  proxy = await startProxy([target("demo", "w1", "web", web.port), target("demo", "w1", "api", api.port)], {
    https: { port: 0, ca }
  })

  // a fresh HOME whose NSS database trusts berth's CA, put there by berth's own trust code
  const home = join(base, "home")
  const nssdb = join(home, ".pki", "nssdb")
  mkdirSync(nssdb, { recursive: true })
  execFileSync("certutil", ["-N", "--empty-password", "-d", `sql:${nssdb}`])
  const plan = planTrust(
    {
      platform: "linux",
      osRelease: undefined,
      commands: new Set(["certutil"]),
      home,
      nssDatabases: [{ path: nssdb, reader: "Chromium" }],
      isRoot: false
    },
    { certPath: ca.certPath, commonName: ca.commonName, fingerprint: ca.fingerprint, sha1: "" },
    "install"
  )
  const report = await Effect.runPromise(runTrust(plan, { isRoot: false }))
  expect(report.failed).toEqual([])

  // one browser for the file's tests; one that ended on its own (why goes to stderr) is started again for the next
  browser = relaunching(base, home)
  await browser.context()
}, 60_000)

afterAll(async () => {
  await browser?.close()
  await proxy?.close()
  await web?.close()
  await api?.close()
  rmSync(base, { recursive: true, force: true })
})

describe.skipIf(!hasChromium)("Chromium through the proxy", () => {
  it("loads a page over HTTP that calls its api and opens a WebSocket through the proxy", async () => {
    const text = await browser.run((context) => render(context, `http://web.w1.demo.localhost:${proxy.port}/`))
    expect(text).toBe("api says hello via http; page over http/1.1; ws echo:from the browser")
  })

  it("does the same over HTTPS (h2) with berth's CA trusted in the browser's NSS database", async () => {
    const text = await browser.run((context) => render(context, `https://web.w1.demo.localhost:${proxy.httpsPort}/`))
    expect(text).toBe("api says hello via https; page over h2; ws echo:from the browser")
  })

  it("shows the 404 page for an unknown host", async () => {
    const seen = await browser.run(async (context) => {
      const tab = await context.newPage()
      try {
        const response = await goto(tab, `http://nope.w1.demo.localhost:${proxy.port}/`)
        return {
          status: response?.status(),
          h1: await tab.textContent("h1"),
          href: await tab.getAttribute("a", "href")
        }
      } finally {
        await tab.close()
      }
    })
    expect(seen).toEqual({ status: 404, h1: "404 Not found", href: `http://api.w1.demo.localhost:${proxy.port}/` })
  })
})
