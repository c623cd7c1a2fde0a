/** `berth hosts` through the built binary, on a hosts file of the test's own (BERTH_HOSTS_FILE). */
import { chmodSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, eventually, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

describe("berth hosts", () => {
  it("keeps the live routes' names in a block of its own, leaves the rest, and says how to do it as root", async () => {
    const box = await boxes.project(
      { "berth.toml": `[project]\nname = "hst"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n` },
      { proxy: true }
    )
    const file = join(box.dir, "..", "hosts")
    writeFileSync(file, "127.0.0.1 localhost\n::1 localhost\n")
    const env = { BERTH_HOSTS_FILE: file }
    expect((await box.run(["up", "one"], { timeoutMs: 60_000 })).code).toBe(0)
    expect((await box.run(["up", "two"], { timeoutMs: 60_000 })).code).toBe(0)
    const r = await box.run(["hosts", "sync", "--json"], { env })
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual({ schema: 1, file, names: ["api.one.hst.localhost", "api.two.hst.localhost"] })
    expect(readFileSync(file, "utf8")).toBe(
      "127.0.0.1 localhost\n::1 localhost\n# >>> berth routes (berth hosts clean removes this)\n127.0.0.1 api.one.hst.localhost\n127.0.0.1 api.two.hst.localhost\n# <<< berth routes\n"
    )
    // a world removed leaves the block on the next sync
    expect((await box.run(["remove", "two", "--force"])).code).toBe(0)
    await box.run(["hosts", "sync"], { env })
    expect(readFileSync(file, "utf8")).not.toContain("two")
    // --watch follows the routes: a world brought up meanwhile appears
    const { spawn } = await import("node:child_process")
    const watcher = spawn(berthBin, ["hosts", "sync", "--watch"], {
      cwd: box.dir,
      env: { ...process.env, ...box.env, BERTH_HOME: box.home, NO_COLOR: "1", ...env },
      stdio: "ignore"
    })
    try {
      expect((await box.run(["up", "three"], { timeoutMs: 60_000 })).code).toBe(0)
      const seen = await eventually(
        async () => readFileSync(file, "utf8"),
        (t) => t.includes("api.three.hst.localhost")
      )
      expect(seen).toContain("127.0.0.1 api.three.hst.localhost")
    } finally {
      watcher.kill()
    }
    expect((await box.run(["hosts", "clean"], { env })).code).toBe(0)
    expect(readFileSync(file, "utf8")).toBe("127.0.0.1 localhost\n::1 localhost\n")

    // a file berth may not write: the exact line that does it as root (not when running as root, which may write it)
    if (process.getuid?.() !== 0) {
      chmodSync(file, 0o444)
      const refused = await box.run(["hosts", "sync"], { env })
      expect(refused.code).toBe(1)
      expect(refused.stderr).toMatch(/hint: sudo env BERTH_HOME=.* hosts sync/)
    }
  })
})
