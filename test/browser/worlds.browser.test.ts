/**
 * berth end to end in a real browser: two services of a world brought up by the built binary, a page on
 * `web.<world>.demo.localhost` that calls its api on `api.<world>.demo.localhost` through the proxy (CORS) and opens a
 * WebSocket to it — over HTTP, and over HTTPS (h2) with berth's own CA trusted in the browser's NSS database.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Sandbox, sandboxes, varsFrom } from "../e2e/harness.js"
import { browserHome, hasChromium, launch, render } from "./chromium.js"

const boxes = sandboxes()
const base = mkdtempSync(join(tmpdir(), "berth-browser-worlds-"))
afterAll(() => {
  boxes.cleanup()
  rmSync(base, { recursive: true, force: true })
})

/** web serves the page; api answers JSON (CORS) and echoes WebSocket text frames — no dependencies. */
const app = `
import http from "node:http"
import { createHash } from "node:crypto"
const page = \`<!doctype html><p id="out">loading</p><script>
(async () => {
  const out = document.getElementById("out")
  try {
    const api = location.href.replace("//web.", "//api.").replace(/\\\\/$/, "")
    const data = await (await fetch(api + "/data")).json()
    const ws = new WebSocket(api.replace(/^http/, "ws") + "/ws")
    ws.onopen = () => ws.send("ping")
    ws.onmessage = (e) => { out.textContent = data.world + " via " + data.proto + "; ws " + e.data; ws.close() }
    ws.onerror = () => (out.textContent = "websocket failed")
  } catch (e) { out.textContent = "failed: " + e }
})()
</script>\`
const server = http.createServer((req, res) => {
  if (process.env.BERTH_SERVICE === "web") {
    res.writeHead(200, { "content-type": "text/html" })
    return res.end(page)
  }
  res.writeHead(200, { "content-type": "application/json", "access-control-allow-origin": "*" })
  res.end(JSON.stringify({ world: process.env.BERTH_WORLD, proto: req.headers["x-forwarded-proto"] }))
})
server.on("upgrade", (req, socket) => {
  const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64")
  socket.write("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + "\\r\\n\\r\\n")
  socket.on("data", (frame) => {
    if ((frame[0] & 0x0f) !== 1) return socket.end()
    const length = frame[1] & 0x7f
    const mask = frame.subarray(2, 6)
    const text = Buffer.from(frame.subarray(6, 6 + length).map((b, i) => b ^ mask[i % 4])).toString()
    const reply = Buffer.from("echo:" + text)
    socket.write(Buffer.concat([Buffer.from([0x81, reply.length]), reply]))
  })
})
server.listen(Number(process.env.PORT), "127.0.0.1")
`

const config = (https: boolean) => `
[project]
name = "demo"
https = ${https}

[services.api]
cmd = "node app.mjs"
url = "api"

[services.web]
cmd = "node app.mjs"
url = "web"
`

const up = async (box: Sandbox, world: string) => {
  const r = await box.run(["up", world, "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
  const env = varsFrom((await box.run(["env", world, "--json"])).stdout)
  return env.WEB_URL!
}

describe.skipIf(!hasChromium)("a world in Chromium", () => {
  it("loads the web page of two worlds over HTTP; each calls its own api and WebSocket through the proxy", async () => {
    const box = await boxes.project({ "berth.toml": config(false), "app.mjs": app }, { proxy: true })
    const one = await up(box, "one")
    const two = await up(box, "two")
    const context = await launch(join(base, "http"), browserHome(join(base, "http")))
    try {
      expect(await render(context, `${one}/`)).toBe("one via http; ws echo:ping")
      expect(await render(context, `${two}/`)).toBe("two via http; ws echo:ping")
    } finally {
      await context.close()
    }
  })

  it("does the same over HTTPS with berth's CA trusted in the browser's profile", async () => {
    const box = await boxes.project({ "berth.toml": config(true), "app.mjs": app }, { proxy: true })
    const url = await up(box, "secure")
    expect(url).toMatch(/^https:\/\/web\.secure\.demo\.localhost:\d+$/)
    const settings = JSON.parse((await box.run(["port", "--json"])).stdout) as { proxy: { caPath: string } }
    const context = await launch(join(base, "https"), browserHome(join(base, "https"), settings.proxy.caPath))
    try {
      expect(await render(context, `${url}/`)).toBe("secure via https; ws echo:ping")
    } finally {
      await context.close()
    }
  })
})
