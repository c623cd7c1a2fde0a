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
      {
        // a slice's address is no route: a sqlite file (file://) once gave an empty `127.0.0.1 ` line
        "berth.toml": `[project]\nname = "hst"\n\n[services.db]\nadapter = "sqlite"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n`
      },
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

    // --daemon: the daemon keeps the block itself, at every change of the routes and across its own restarts
    const kept = await box.run(["hosts", "sync", "--daemon", "--json"], { env })
    expect(kept.code, kept.stderr).toBe(0)
    expect(JSON.parse(kept.stdout)).toEqual({
      schema: 1,
      file,
      // the web dashboard is a route like any other
      names: ["api.one.hst.localhost", "api.three.hst.localhost", "berth.localhost"]
    })
    expect((await box.run(["up", "four"], { timeoutMs: 60_000 })).code).toBe(0)
    const added = await eventually(
      async () => readFileSync(file, "utf8"),
      (t) => t.includes("four")
    )
    expect(added).toContain("127.0.0.1 api.four.hst.localhost")
    const config = await box.run(["config"])
    expect(config.stdout).toMatch(new RegExp(`hosts_file +${file}, kept by the daemon +\\(set\\)`))
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    // a new daemon (started by this command) keeps it still: the world removed leaves the block
    expect((await box.run(["remove", "four", "--force"])).code).toBe(0)
    const left = await eventually(
      async () => readFileSync(file, "utf8"),
      (t) => !t.includes("four")
    )
    expect(left).toContain("127.0.0.1 api.three.hst.localhost")
    expect(left).not.toContain("four")
    // clean stops the daemon keeping it: a world brought up afterwards stays out of the file
    expect((await box.run(["hosts", "clean"], { env })).code).toBe(0)
    expect((await box.run(["up", "five"], { timeoutMs: 60_000 })).code).toBe(0)
    expect(readFileSync(file, "utf8")).toBe("127.0.0.1 localhost\n::1 localhost\n")
    // a relative path is made absolute by the CLI; the daemon refuses one given otherwise
    expect((await box.run(["hosts", "sync", "--daemon", "--watch"], { env })).code).toBe(2)

    // a file berth may not write: the exact line that does it as root (not when running as root, which may write it)
    if (process.getuid?.() !== 0) {
      chmodSync(file, 0o444)
      const refused = await box.run(["hosts", "sync"], { env })
      expect(refused.code).toBe(1)
      expect(refused.stderr).toMatch(/hint: sudo env BERTH_HOME=.* hosts sync/)
    }
  })
})
