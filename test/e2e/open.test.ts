/** `berth open` through the built binary, with $BROWSER a script that writes down the URL it was given. */
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { eventually, sandboxes, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

describe("berth open", () => {
  it("opens the first routed service (or the one named) with $BROWSER, and prints its URL", async () => {
    const box = await boxes.project(
      {
        "berth.toml": `[services.worker]\ncmd = "sleep 1000"\n\n[services.web]\ncmd = "node server.mjs"\nurl = "web"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n`
      },
      { proxy: true }
    )
    const seen = join(box.dir, "..", "opened.txt")
    const browser = join(box.dir, "..", "browser.sh")
    writeFileSync(browser, `#!/bin/sh\necho "$1" >> "${seen}"\n`)
    chmodSync(browser, 0o755)
    const w = worldFrom((await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })).stdout)
    const urlOf = (name: string) => w.services.find((s) => s.name === name)!.url!

    const r = await box.run(["open", "one"], { env: { BROWSER: browser } })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe(`${urlOf("web")}\n`)
    await eventually(
      async () => (existsSync(seen) ? readFileSync(seen, "utf8") : ""),
      (t) => t === `${urlOf("web")}\n`
    )
    const api = await box.run(["open", "one", "api", "--json"], { env: { BROWSER: browser } })
    expect(JSON.parse(api.stdout)).toEqual({ schema: 1, world: "one", service: "api", url: urlOf("api"), opened: true })

    // a service with no url, and a browser that cannot be started
    const worker = await box.run(["open", "one", "worker"], { env: { BROWSER: browser } })
    expect(worker.code).toBe(1)
    expect(worker.stderr).toMatch(/no service "worker" with a url; those are: web, api/)
    const none = await box.run(["open", "one"], { env: { BROWSER: "/nonexistent/browser" } })
    expect(none.code).toBe(1)
    expect(none.stdout).toBe(`${urlOf("web")}\n`)
    expect(none.stderr).toMatch(/the browser could not be opened \(\/nonexistent\/browser could not be started/)
  })

  it("says the browser could not be opened, and exits 1, when the opener fails (xdg-open on a headless machine exits 3)", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const headless = join(box.dir, "..", "xdg-open")
    writeFileSync(headless, `#!/bin/sh\necho "xdg-open: no method available for opening '$1'" >&2\nexit 3\n`)
    chmodSync(headless, 0o755)
    const w = worldFrom((await box.run(["up", "--json"], { timeoutMs: 60_000 })).stdout)
    const url = w.services.find((s) => s.name === "web")!.url!
    const r = await box.run(["open"], { env: { BROWSER: headless } })
    expect(r.code).toBe(1)
    expect(r.stdout).toBe(`${url}\n`)
    expect(r.stderr).toBe(
      `error: the browser could not be opened (${headless} exited with code 3): open ${url} yourself, or set BROWSER to the command that opens one\n`
    )
    const json = await box.run(["open", "--json"], { env: { BROWSER: headless } })
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toEqual({ schema: 1, world: "main", service: "web", url, opened: false })
  })
})
