/**
 * What a person sees on a terminal: `berth up` run under a pseudo-terminal (util-linux `script`), as from a shell.
 */
import { spawnSync } from "node:child_process"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const hasScript = spawnSync("sh", ["-c", "command -v script"]).status === 0

describe.skipIf(!hasScript)("on a terminal", () => {
  it("a waiting up shows one live line of what it waits for, with the time, and clears it when done", async () => {
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
    expect(r.stdout).toContain(`${rewrite}tty  running`)
  })
})
