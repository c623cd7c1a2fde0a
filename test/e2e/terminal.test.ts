/**
 * What a person sees on a terminal: `berth up` run under a pseudo-terminal (util-linux `script`), as from a shell.
 */
import { spawn, spawnSync } from "node:child_process"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const hasScript = spawnSync("sh", ["-c", "command -v script"]).status === 0

describe.skipIf(!hasScript)("on a terminal", () => {
  it("a waiting up shows one live line of what it waits for, with the time, and clears it; states and errors in colour", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.slow]\ncmd = "node slow.mjs"\nurl = "slow"\n`,
      "slow.mjs": `setTimeout(async () => { await import("./server.mjs") }, 2500)\n`
    })
    // warm: the worktree and the daemon exist, so the wait is the service's own
    expect((await box.run(["up", "tty"], { timeoutMs: 60_000 })).code).toBe(0)
    expect((await box.run(["down", "tty"])).code).toBe(0)
    const r = spawnSync("script", ["-qec", `${berthBin} up tty`, "/dev/null"], {
      cwd: box.dir,
      env: { ...process.env, ...box.env, BERTH_HOME: box.home, BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off" },
      encoding: "utf8",
      timeout: 60_000
    })
    expect(r.status, r.stdout).toBe(0)
    // rewritten in place (carriage return, erase line), never a new line per update
    const rewrite = "\r\u001b[2K"
    expect(r.stdout).toMatch(/tty: starting; waiting for slow \(not ready yet\) \(\d+\.\d s\)/)
    expect(r.stdout.split(`${rewrite}tty: starting`).length - 1).toBeGreaterThan(1)
    // the world's state and its URLs in colour, on a terminal only, and never with NO_COLOR
    expect(r.stdout).toContain("\u001b[32mrunning\u001b[0m")
    expect(r.stdout).toContain("\u001b[32mhealthy\u001b[0m")
    const env = { ...process.env, ...box.env, BERTH_HOME: box.home, BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off" }
    const status = (extra: Record<string, string>) =>
      spawnSync("script", ["-qec", `${berthBin} status`, "/dev/null"], {
        cwd: box.dir,
        env: { ...env, ...extra },
        encoding: "utf8",
        timeout: 30_000
      }).stdout
    expect(status({})).toContain("\u001b[32mhealthy\u001b[0m")
    expect(status({ NO_COLOR: "1" })).not.toContain("\u001b[")
    expect((await box.run(["status"])).stdout).not.toContain("\u001b[")
    const missing = spawnSync("script", ["-qec", `${berthBin} env nosuch`, "/dev/null"], {
      cwd: box.dir,
      env,
      encoding: "utf8"
    })
    expect(missing.stdout).toContain("\u001b[31merror:\u001b[0m project")
  })

  it("a wait of more than 12 s says no MaxListenersExceededWarning, on a terminal or piped, lean or full CLI", async () => {
    // ready after 13 s: the live line looks at the world's status every second meanwhile
    const box = await boxes.project({
      "berth.toml": `[services.slow]\ncmd = "node slow.mjs"\nurl = "slow"\nhealth = { http = "/healthz" }\n`,
      "slow.mjs": `setTimeout(async () => { await import("./server.mjs") }, 13_000)\n`
    })
    const env = { ...process.env, ...box.env, BERTH_HOME: box.home, BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off" }
    const onTerminal = new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn("script", ["-qec", `${berthBin} up tty`, "/dev/null"], { cwd: box.dir, env })
      let output = ""
      child.stdout.on("data", (d: Buffer) => {
        output += d.toString()
      })
      child.on("close", (code) => resolve({ code, output }))
    })
    // piped: the lean path (`up`), and the full CLI (`--progress` is not the lean path's)
    const [tty, lean, full] = await Promise.all([
      onTerminal,
      box.run(["up", "lean"], { timeoutMs: 60_000 }),
      box.run(["up", "full", "--progress"], { timeoutMs: 60_000 })
    ])
    expect(tty.code, tty.output).toBe(0)
    expect(tty.output).not.toMatch(/Warning|listener/)
    // the wait was long enough to tell: the line was still shown after 12 s
    expect(tty.output).toMatch(/tty: starting; waiting for slow \(not ready yet\) \((1[2-9]|[2-9]\d)\.\d s\)/)
    expect(lean.code, lean.stderr).toBe(0)
    expect(lean.stderr).toBe("")
    expect(full.code, full.stderr).toBe(0)
    expect(full.stderr).not.toMatch(/Warning|listener/)
    expect(full.stderr).toMatch(/^full: starting; waiting for slow \(not ready yet\)$/m)
  }, 90_000)
})
