/**
 * `berth reload` through the built binary: it waits until the world runs or its start fails, as `up` does (progress,
 * `--no-wait`, exit codes, the StartFailed document), and `-s`/`-g` restart some services and what depends on them.
 */
import { spawnSync } from "node:child_process"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, eventually, type Sandbox, sandboxes, type WorldJson, worldFrom } from "./harness.js"

const boxes = sandboxes()
const tmuxServer = `berth-reload-${process.pid}`
const tmux = (...args: ReadonlyArray<string>) => spawnSync("tmux", ["-L", tmuxServer, ...args], { encoding: "utf8" })
const hasTmux = spawnSync("sh", ["-c", "command -v tmux"]).status === 0
afterAll(() => {
  if (hasTmux) tmux("kill-server")
  boxes.cleanup()
})

/** The web service answers only after a moment, so that a waiting reload has something to report. */
const slowServer = `await new Promise((r) => setTimeout(r, 800))\nawait import("./server.mjs")\n`

const working = `[services.api]
cmd = "node server.mjs"
url = "api"
groups = ["back"]
health = { http = "/healthz" }

[services.web]
cmd = "node slow.mjs"
url = "web"
groups = ["front"]
depends_on = ["api"]
health = { http = "/healthz" }

[services.docs]
cmd = "node server.mjs"
url = "docs"
groups = ["front"]
health = { http = "/healthz" }
`

/** The same world, but web now exits 3 at once, saying why. */
const broken = working.replace('cmd = "node slow.mjs"', `cmd = "echo web cannot start here; exit 3"`)

const project = () => boxes.project({ "berth.toml": working, "slow.mjs": slowServer, ".gitignore": "*.log\n" })

const upJson = async (box: Sandbox): Promise<WorldJson> => {
  const r = await box.run(["up", "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
  return worldFrom(r.stdout)
}

const pids = (w: WorldJson) => Object.fromEntries(w.services.map((s) => [s.name, s.pid]))

describe("berth reload", () => {
  it("waits until the world runs again, telling what it waits for, and answers it running", async () => {
    const box = await project()
    const before = await upJson(box)
    const r = await box.run(["reload", "--progress"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^main +running/)
    // piped, a line per change of what it waits for, as `up --progress` prints them
    expect(r.stderr).toMatch(/^main: starting; waiting for .*web/m)
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: ReadonlyArray<WorldJson> }
    const after = status.worlds[0]!
    expect(after.state).toBe("running")
    expect(after.services.every((s) => s.state === "healthy")).toBe(true)
    for (const name of ["api", "web", "docs"]) expect(pids(after)[name]).not.toBe(pids(before)[name])

    // --json --progress: up-progress documents, then the reload's own, one line each
    const j = await box.run(["reload", "--json", "--progress"], { timeoutMs: 60_000 })
    expect(j.code, j.stderr).toBe(0)
    const lines = j.stdout.trimEnd().split("\n")
    expect(lines.length).toBeGreaterThan(1)
    for (const line of lines.slice(0, -1)) {
      expect(JSON.parse(line)).toMatchObject({ schema: 1, progress: { world: "main" } })
    }
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ schema: 1, world: { name: "main", state: "running" } })
  })

  it("fails like up when the world then fails: exit 1, StartFailed with the service's last log lines", async () => {
    const box = await project()
    await upJson(box)
    box.write("berth.toml", broken)
    const r = await box.run(["reload"], { timeoutMs: 60_000 })
    expect(r.code).toBe(1)
    expect(r.stdout).toBe("")
    expect(r.stderr).toMatch(/world main: web .*3/)
    expect(r.stderr).toContain("web cannot start here")

    const j = await box.run(["reload", "--json"], { timeoutMs: 60_000 })
    expect(j.code).toBe(1)
    expect(j.stdout).toBe("")
    const error = (JSON.parse(j.stderr.trimEnd().split("\n").at(-1)!) as { error: Record<string, unknown> }).error
    expect(error.tag).toBe("StartFailed")
    expect(error.message).toContain("web cannot start here")
  })

  it("-g restarts the services of a group and what depends on them, the rest untouched", async () => {
    const box = await project()
    const before = pids(await upJson(box))
    // api is in back; web depends on api; docs is in front only
    const back = await box.run(["reload", "-g", "back", "--json"], { timeoutMs: 60_000 })
    expect(back.code, back.stderr).toBe(0)
    const afterBack = pids(worldFrom(back.stdout))
    expect(afterBack.api).not.toBe(before.api)
    expect(afterBack.web).not.toBe(before.web)
    expect(afterBack.docs).toBe(before.docs)
    expect(worldFrom(back.stdout).services.every((s) => s.state === "healthy")).toBe(true)

    const front = await box.run(["reload", "--group", "front", "--json"], { timeoutMs: 60_000 })
    expect(front.code, front.stderr).toBe(0)
    const afterFront = pids(worldFrom(front.stdout))
    expect(afterFront.api).toBe(afterBack.api)
    expect(afterFront.web).not.toBe(afterBack.web)
    expect(afterFront.docs).not.toBe(afterBack.docs)

    const unknown = await box.run(["reload", "-g", "frnt"])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/no service is in group "frnt".*groups: back, front/)
  })

  it("--no-wait answers at once, while the world starts", async () => {
    const box = await project()
    await upJson(box)
    box.write("berth.toml", broken)
    const r = await box.run(["reload", "--no-wait", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(["queued", "starting", "failed"]).toContain(worldFrom(r.stdout).state)
  })
})

describe.skipIf(!hasTmux)("the dashboard's r", () => {
  it("reloads the selected world and says how its start ended: running, or why it failed", async () => {
    const box = await project()
    await upJson(box)
    const env = [`BERTH_HOME=${box.home}`, "BERTH_PROXY_PORT=off", "BERTH_HTTPS_PORT=off", "NO_COLOR=1"]
    const started = tmux(
      "new-session",
      "-d",
      "-s",
      "dash",
      "-x",
      "120",
      "-y",
      "30",
      "-c",
      box.dir,
      `env ${env.join(" ")} ${berthBin} dash; sleep 600`
    )
    expect(started.status, started.stderr).toBe(0)
    const pane = async () => tmux("capture-pane", "-p", "-t", "dash").stdout
    expect(await eventually(pane, (s) => /^▸ main +running/m.test(s))).toMatch(/^▸ main +running/m)

    tmux("send-keys", "-t", "dash", "r")
    expect(await eventually(pane, (s) => s.includes("main: running"), 30_000)).toContain("main: running")

    box.write("berth.toml", broken)
    tmux("send-keys", "-t", "dash", "r")
    const failed = await eventually(pane, (s) => s.includes("main: world main: web"), 30_000)
    expect(failed).toMatch(/main: world main: web .*3/)
    tmux("send-keys", "-t", "dash", "q")
  })
})
