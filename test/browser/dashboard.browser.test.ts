/**
 * The web dashboard in headless Chromium: served by the daemon at `berth.localhost` through the proxy, live from the
 * state stream — a world brought down from the CLI shows as stopped within a second, without a reload; its up button
 * brings it back; a service's log streams into the page. Actions from anywhere but the page itself are refused.
 */
import * as http from "node:http"
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { sandboxes } from "../e2e/harness.js"
import { browserHome, goto, hasChromium, launch } from "./chromium.js"

const boxes = sandboxes()
const base = mkdtempSync(join(tmpdir(), "berth-browser-dashboard-"))
afterAll(() => {
  boxes.cleanup()
  rmSync(base, { recursive: true, force: true })
})

const config = `
[project]
name = "demo"

[services.web]
cmd = "echo web of \${world.name} says hello && node server.mjs"
url = "web"
`

/** A request to the dashboard through the proxy, as another program (or page) would send it. */
const send = (port: number, method: string, path: string, headers: Record<string, string>, body?: unknown) =>
  new Promise<number>((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        headers: { host: `berth.localhost:${port}`, "content-type": "application/json", ...headers }
      },
      (res) => {
        res.destroy()
        resolve(res.statusCode ?? 0)
      }
    )
    req.once("error", reject)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })
const post = (port: number, headers: Record<string, string>, body: unknown) =>
  send(port, "POST", "/actions", headers, body)

describe.skipIf(!hasChromium)("the web dashboard in Chromium", () => {
  it("lists the worlds live, shows a world brought down from the CLI within a second, brings it back by its button", async () => {
    const box = await boxes.project({ "berth.toml": config }, { proxy: true })
    for (const world of ["one", "two"]) {
      const r = await box.run(["up", world], { timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
    }
    const port = Number(box.env.BERTH_PROXY_PORT)
    const origin = `http://berth.localhost:${port}`
    const context = await launch(base, browserHome(base))
    try {
      const page = await context.newPage()
      const response = await goto(page, `${origin}/`)
      expect(response?.status()).toBe(200)
      const state = (world: string) => page.locator(`tr.world[data-world="${world}"] .state`)
      await expect.poll(() => state("one").textContent(), { timeout: 15_000 }).toBe("running")
      await expect.poll(() => state("two").textContent(), { timeout: 15_000 }).toBe("running")
      // each URL is a link to the world's service
      const link = page.locator('tr.service[data-world="one"][data-service="web"] a')
      expect(await link.getAttribute("href")).toMatch(/^http:\/\/web\.one\.demo\.localhost:\d+\/?$/)

      // down from the CLI: the page follows within a second, without a reload
      const down = await box.run(["down", "two"])
      expect(down.code, down.stderr).toBe(0)
      await expect.poll(() => state("two").textContent(), { timeout: 1_000, interval: 25 }).toBe("stopped")
      await page.locator('tr.world[data-world="two"] button[data-action="up"]').click()
      await expect.poll(() => state("two").textContent(), { timeout: 30_000 }).toBe("running")
      expect(await state("two").textContent()).toBe("running")
      const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
        worlds: ReadonlyArray<{ name: string; state: string }>
      }
      expect(status.worlds.find((w) => w.name === "two")?.state).toBe("running")

      // a service's log streams into the page
      await page.locator('tr.service[data-world="one"][data-service="web"] button[data-action="logs"]').click()
      await expect
        .poll(() => page.locator("#log-lines").textContent(), { timeout: 10_000 })
        .toContain("web of one says hello")

      const shot = join(base, "dashboard.png")
      await page.screenshot({ path: shot, fullPage: true })
      expect(statSync(shot).size).toBeGreaterThan(1000)
      // kept for a person (or CI) to look at
      if (process.env.BERTH_TEST_SCREENSHOT !== undefined) copyFileSync(shot, process.env.BERTH_TEST_SCREENSHOT)
      expect(readFileSync(shot).subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))

      // only the page itself may act: a foreign Origin, or no token, is refused
      const token = (await page.getAttribute("body", "data-token")) ?? ""
      expect(token).toMatch(/^[0-9a-f]{64}$/)
      const one = { world: 1, action: "down" }
      expect(await post(port, { origin: "http://evil.example", "x-berth-token": token }, one)).toBe(403)
      expect(await post(port, { origin, "x-berth-token": "0".repeat(64) }, one)).toBe(403)
      expect(await post(port, { origin }, one)).toBe(403)
      expect(await post(port, { "x-berth-token": token }, one)).toBe(403)
      // the page's own fetch without the token, too
      const own = await page.evaluate(
        async () =>
          (await fetch("/actions", { method: "POST", body: JSON.stringify({ world: 1, action: "down" }) })).status
      )
      expect(own).toBe(403)
      expect(await state("one").textContent()).toBe("running")
      // the streams need the token as well; and another Host (a rebound name) reaches nothing
      expect(await send(port, "GET", "/events", {})).toBe(403)
      expect(await send(port, "GET", `/events?token=${token}`, { host: `rebound.example:${port}` })).toBe(404)

      // the daemon replaced (a new token): the page finds it again by itself
      expect((await box.run(["daemon", "stop"])).code).toBe(0)
      await expect.poll(() => page.locator("#conn").textContent(), { timeout: 10_000 }).toBe("reconnecting…")
      expect((await box.run(["status"])).code).toBe(0)
      await expect.poll(() => page.locator("#conn").textContent(), { timeout: 20_000 }).toBe("live")
      await expect.poll(() => state("two").textContent(), { timeout: 10_000 }).toBe("running")
    } finally {
      await context.close()
    }
  })
})
