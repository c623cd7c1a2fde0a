/**
 * Dev servers that ignore PORT, through the built binary: a real Vite (the one this repository installs) started by
 * `npm run dev` in two worlds at once, and a real Astro (not on Vite's flags: its own `--port`/`--host`) named
 * directly in cmd. berth reads the script, gives each server the leased port (and Vite a strict port) and the
 * loopback host, and routes each world's name to its own server.
 */
import * as http from "node:http"
import { symlinkSync } from "node:fs"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { type Sandbox, sandboxes, type WorldJson, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const bin = resolve(import.meta.dirname, "../../node_modules/.bin")
const withVite = { PATH: `${bin}:${process.env.PATH}` }

const files = {
  "berth.toml": `[project]\nname = "vt"\n\n[services.web]\ncmd = "npm run dev"\nurl = "web"\n\n[services.plain]\ncmd = "npm run dev"\nurl = "plain"\ninject = false\nhealth = { tcp = true, timeout = "4s" }\n`,
  "package.json": JSON.stringify({ name: "vt", private: true, type: "module", scripts: { dev: "vite" } }),
  "index.html": "<!doctype html><title>vt</title><h1>hello from vite</h1>\n",
  ".gitignore": "node_modules\n"
}

const viaProxy = (port: number, host: string, path = "/") =>
  new Promise<{ status: number; body: string }>((done, fail) => {
    const req = http.request({ host: "127.0.0.1", port, path, headers: { host } }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => {
        body += c
      })
      res.on("end", () => done({ status: res.statusCode ?? 0, body }))
    })
    req.on("error", fail)
    req.end()
  })

const up = async (box: Sandbox, name: string, services: ReadonlyArray<string>): Promise<WorldJson> => {
  const r = await box.run(["up", name, ...services.flatMap((s) => ["-s", s]), "--json"], {
    env: withVite,
    timeoutMs: 90_000
  })
  expect(r.code, r.stderr).toBe(0)
  return worldFrom(r.stdout)
}

describe("dev servers that ignore PORT", () => {
  it("gives Vite, run through npm run dev, its leased port in two worlds at once, each routed to its own", async () => {
    const box = await boxes.project(files, { proxy: true })
    const [one, two] = await Promise.all([up(box, "one", ["web"]), up(box, "two", ["web"])])
    const ports = [one, two].map((w) => w.services.find((s) => s.name === "web")!.port!)
    expect(new Set(ports).size).toBe(2)
    const proxy = Number(box.env.BERTH_PROXY_PORT)
    for (const world of ["one", "two"]) {
      const page = await viaProxy(proxy, `web.${world}.vt.localhost:${proxy}`)
      expect(page.status).toBe(200)
      expect(page.body).toContain("hello from vite")
      // Vite's own client: the page is served by the dev server, not a static copy
      expect(page.body).toContain("/@vite/client")
    }
    // status tells what was started
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ name: string; events: Array<{ kind: string; message: string }> }>
    }
    const said = status.worlds.find((w) => w.name === "one")!.events.find((e) => e.kind === "dev_server")
    expect(said?.message).toContain(
      `vite: started as \`npm run dev -- --port ${ports[0]} --strictPort --host 127.0.0.1\``
    )
    // so do status and env, for the service itself
    const started = `npm run dev -- --port ${ports[0]} --strictPort --host 127.0.0.1`
    expect(one.services.find((s) => s.name === "web")?.command).toBe(started)
    const env = JSON.parse((await box.run(["env", "one", "--json"])).stdout) as { commands: Record<string, string> }
    expect(env.commands).toEqual({ web: started })
    // Vite found nothing to move away from: the port it was given is the one it took
    const log = await box.run(["logs", "one", "-s", "web", "-n", "50"])
    expect(log.stdout).toContain(`127.0.0.1:${ports[0]}`)
  })

  it("starts cmd as written with inject = false (and Vite, ignoring PORT, never answers on the leased port)", async () => {
    const box = await boxes.project(files, { proxy: true })
    const r = await box.run(["up", "raw", "-s", "plain"], {
      env: withVite,
      timeoutMs: 90_000
    })
    // the default check waits for the leased port: Vite is on its own 5173 (or the next free one) instead
    expect(r.code).toBe(1)
    // the failure says where it listens instead
    expect(r.stderr).toMatch(/plain not healthy .*it is listening on \d+, expected \d+: does its command ignore PORT\?/)
    const log = await box.run(["logs", "raw", "-s", "plain", "-n", "50"])
    expect(log.stdout).toMatch(/Local:\s+http:\/\/localhost:\d+/)
  }, 120_000)

  it("gives Astro, named directly in cmd, its leased port and the loopback host in two worlds at once", async () => {
    const box = await boxes.project(
      {
        // Astro loads itself from the project's node_modules: the main checkout's (this repository's) is linked into
        // each new worktree by [project] link
        "berth.toml": `[project]\nname = "as"\nlink = ["node_modules"]\n\n[services.site]\ncmd = "astro dev"\nurl = "site"\nenv = { ASTRO_TELEMETRY_DISABLED = "1" }\n`,
        "package.json": JSON.stringify({ name: "as", private: true, type: "module" }),
        "src/pages/index.astro": "---\n---\n<h1>hello from astro</h1>\n",
        ".gitignore": "node_modules\n.astro\n"
      },
      { proxy: true }
    )
    symlinkSync(resolve(bin, ".."), join(box.dir, "node_modules"))
    const [one, two] = await Promise.all([up(box, "one", ["site"]), up(box, "two", ["site"])])
    const ports = [one, two].map((w) => w.services.find((s) => s.name === "site")!.port!)
    expect(new Set(ports).size).toBe(2)
    const proxy = Number(box.env.BERTH_PROXY_PORT)
    for (const world of ["one", "two"]) {
      const page = await viaProxy(proxy, `site.${world}.as.localhost:${proxy}`)
      expect(page.status).toBe(200)
      expect(page.body).toContain("hello from astro")
    }
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ name: string; events: Array<{ kind: string; message: string }> }>
    }
    const said = status.worlds.find((w) => w.name === "one")!.events.find((e) => e.kind === "dev_server")
    expect(said?.message).toContain(`astro: started as \`astro dev --port ${ports[0]} --host 127.0.0.1\``)
    const log = await box.run(["logs", "one", "-s", "site", "-n", "50"])
    expect(log.stdout).toContain(`127.0.0.1:${ports[0]}`)
  }, 180_000)
})
