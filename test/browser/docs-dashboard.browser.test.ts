/**
 * The picture in README.md: the web dashboard with three worlds of one project, in headless Chromium. With
 * BERTH_UPDATE_DOCS=1 it writes docs/img/dashboard.png; otherwise it only checks that the page renders the three
 * worlds running (the picture stays as committed).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { sandboxes } from "../e2e/harness.js"
import { browserHome, goto, hasChromium, launch } from "./chromium.js"

const boxes = sandboxes()
const base = mkdtempSync(join(tmpdir(), "berth-browser-docs-"))
afterAll(() => {
  boxes.cleanup()
  rmSync(base, { recursive: true, force: true })
})

const picture = resolve(import.meta.dirname, "../../docs/img/dashboard.png")
const worlds = ["main", "login-fix", "checkout-v2"]

const config = `
[project]
name = "shop"

[services.db]
adapter = "sqlite"

[services.api]
cmd = "node server.mjs"
url = "api"
health = { http = "/healthz" }
env = { DATABASE_URL = "\${db.url}" }

[services.web]
cmd = "node server.mjs"
url = "web"
depends_on = ["api"]
health = { http = "/healthz" }
env = { API_URL = "\${api.url}" }
`

describe.skipIf(!hasChromium)("the dashboard picture in README.md", () => {
  it("shows three worlds of one project running (and is rewritten with BERTH_UPDATE_DOCS=1)", async () => {
    const box = await boxes.project({ "berth.toml": config }, { proxy: true })
    for (const world of worlds) {
      const r = await box.run(world === "main" ? ["up"] : ["up", world], { timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
    }
    const port = Number(box.env.BERTH_PROXY_PORT)
    const context = await launch(base, browserHome(base))
    try {
      const page = await context.newPage()
      await page.setViewportSize({ width: 1200, height: 640 })
      expect((await goto(page, `http://berth.localhost:${port}/`))?.status()).toBe(200)
      for (const world of worlds) {
        await expect
          .poll(() => page.locator(`tr.world[data-world="${world}"] .state`).textContent(), { timeout: 15_000 })
          .toBe("running")
      }
      expect(await page.locator("tr.world").count()).toBe(3)
      if (process.env.BERTH_UPDATE_DOCS === "1") {
        mkdirSync(resolve(picture, ".."), { recursive: true })
        await page.screenshot({ path: picture, fullPage: true })
      }
      // the committed picture is a PNG
      expect(readFileSync(picture).subarray(0, 8)).toEqual(
        Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
      )
    } finally {
      await context.close()
    }
  })
})
