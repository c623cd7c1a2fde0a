/**
 * A real Vite dev server (the one this repository installs) in two worlds, in Chromium through berth's proxy: berth
 * gives each Vite its leased port, and an edit in one world's worktree reaches that world's page as a hot update over
 * Vite's WebSocket — on the page's own host and port (the proxy's), not Vite's port behind it — while the other world's
 * page stays as it was.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Sandbox, sandboxes, worldFrom } from "../e2e/harness.js"
import { browserHome, goto, hasChromium, launch } from "./chromium.js"

const boxes = sandboxes()
const base = mkdtempSync(join(tmpdir(), "berth-browser-vite-"))
afterAll(() => {
  boxes.cleanup()
  rmSync(base, { recursive: true, force: true })
})

const withVite = { PATH: `${resolve(import.meta.dirname, "../../node_modules/.bin")}:${process.env.PATH}` }

const files = {
  "berth.toml": `[project]\nname = "hmr"\n\n[services.web]\ncmd = "npm run dev"\nurl = "web"\n`,
  "package.json": JSON.stringify({ name: "hmr", private: true, type: "module", scripts: { dev: "vite" } }),
  "index.html": '<!doctype html><p id="out">loading</p><script type="module" src="/main.js"></script>\n',
  "main.js": [
    'import { msg } from "./msg.js"',
    'const show = (m) => { document.getElementById("out").textContent = m }',
    "show(msg)",
    'if (import.meta.hot) import.meta.hot.accept("./msg.js", (next) => show(next.msg))',
    ""
  ].join("\n"),
  "msg.js": 'export const msg = "first"\n',
  ".gitignore": "node_modules\n"
}

const up = async (box: Sandbox, world: string) => {
  const r = await box.run(["up", world, "--json"], { env: withVite, timeoutMs: 90_000 })
  expect(r.code, r.stderr).toBe(0)
  return worldFrom(r.stdout)
}

describe.skipIf(!hasChromium)("Vite in Chromium through the proxy", () => {
  it("hot-updates the edited world's page over the proxied WebSocket, and only that world's", async () => {
    const box = await boxes.project(files, { proxy: true })
    const [one, two] = await Promise.all([up(box, "one"), up(box, "two")])
    const urlOf = (w: typeof one) => w.services.find((s) => s.name === "web")!.url!
    const context = await launch(join(base, "hmr"), browserHome(join(base, "hmr")))
    try {
      const open = async (url: string) => {
        const tab = await context.newPage()
        const sockets: Array<string> = []
        // what the page saw, for a failure to tell: Vite's client logs a lost socket and its reload
        const seen: Array<string> = []
        tab.on("websocket", (ws) => {
          sockets.push(ws.url())
          ws.on("close", () => seen.push(`socket ${ws.url()} closed`))
        })
        tab.on("console", (m) => seen.push(`console: ${m.text()}`))
        tab.on("requestfailed", (r) => seen.push(`failed: ${r.url()} ${r.failure()?.errorText ?? ""}`))
        tab.on("framenavigated", (f) => seen.push(`navigated: ${f.url()}`))
        const response = await goto(tab, url)
        expect(response?.status()).toBe(200)
        await tab.waitForFunction('document.getElementById("out").textContent === "first"', undefined, {
          timeout: 20_000
        })
        // a mark a full reload would wipe: the update must be hot
        await tab.evaluate("window.__mark = 1")
        return { tab, sockets, seen }
      }
      const a = await open(urlOf(one))
      const b = await open(urlOf(two))
      // Vite's client connected back through the page's own origin: the proxy's host and port
      for (const [page, w] of [
        [a, one],
        [b, two]
      ] as const) {
        const origin = new URL(urlOf(w))
        expect(page.sockets.length).toBeGreaterThan(0)
        expect(page.sockets.map((s) => new URL(s).host)).toContain(origin.host)
        expect(page.sockets.every((s) => new URL(s).port === origin.port)).toBe(true)
      }
      // saved again when Chromium dropped the hot update's request because the machine's network changed (the
      // cluster tests beside these churn network namespaces), as a user would save again; never for another failure
      const dropped = () => a.seen.filter((line) => line.includes("net::ERR_NETWORK_CHANGED")).length
      const deadline = Date.now() + 20_000
      let saved = -1
      for (let saves = 1; ; ) {
        if (dropped() !== saved) {
          saved = dropped()
          writeFileSync(join(one.path, "msg.js"), `export const msg = "edited in one"\n// save ${saves++}\n`)
        }
        const shown = await a.tab
          .waitForFunction('document.getElementById("out").textContent === "edited in one"', undefined, {
            timeout: Math.max(1, Math.min(1_000, deadline - Date.now()))
          })
          .then(() => true)
          .catch(() => false)
        if (shown) break
        if (Date.now() >= deadline) {
          const vite = await box.run(["logs", "one", "-s", "web"])
          throw new Error(
            `the edit never showed in 20 s\nthe page saw: ${JSON.stringify(a.seen)}\nVite said: ${vite.stdout.slice(-2_000)}`
          )
        }
      }
      expect(await a.tab.evaluate("window.__mark")).toBe(1)
      // world two never saw the edit
      await new Promise((r) => setTimeout(r, 500))
      expect(await b.tab.textContent("#out")).toBe("first")
      await a.tab.screenshot({ path: join(base, "hmr-one.png") })
    } finally {
      await context.close()
    }
  }, 120_000)
})
