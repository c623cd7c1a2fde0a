/** `berth hooks` through the built binary: `git worktree add` brings the new worktree's world up by itself. */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { eventually, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

interface Worlds {
  readonly worlds: ReadonlyArray<{ name: string; path: string; state: string }>
}

describe("berth hooks", () => {
  it("brings up the world of a worktree git makes, keeps the user's own hook, and goes again on uninstall", async () => {
    const box = await boxes.project({ "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\n` })
    const file = box.git("rev-parse", "--path-format=absolute", "--git-path", "hooks/post-checkout").trim()
    writeFileSync(file, '#!/bin/sh\necho mine >> "$(git rev-parse --git-common-dir)/mine.log"\n', { mode: 0o755 })
    const installed = await box.run(["hooks", "install", "--json"])
    expect(installed.code, installed.stderr).toBe(0)
    expect(JSON.parse(installed.stdout)).toEqual({ schema: 1, file, installed: true })
    expect((await box.run(["hooks", "install"])).code).toBe(0)
    const hook = readFileSync(file, "utf8")
    expect(hook.split("# >>> berth").length).toBe(2)
    expect(hook).toContain("echo mine")

    // git runs the hook with the environment it was given (BERTH_HOME and the sandbox's ports among it)
    const env = { ...process.env, ...box.env, BERTH_HOME: box.home, BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off" }
    const { execFileSync } = await import("node:child_process")
    const wt = join(box.dir, "..", "wt-feature")
    execFileSync("git", ["worktree", "add", "-q", "-b", "feature", wt], { cwd: box.dir, env })
    const status = async () => JSON.parse((await box.run(["status", "--json"])).stdout) as Worlds
    const seen = await eventually(status, (s) => s.worlds.some((w) => w.path === wt && w.state === "running"), 60_000)
    expect(seen.worlds.find((w) => w.path === wt)?.state).toBe("running")
    expect(readFileSync(join(box.dir, ".git", "mine.log"), "utf8")).toBe("mine\n")

    // BERTH_NO_UP=1 skips it
    const quiet = join(box.dir, "..", "wt-quiet")
    execFileSync("git", ["worktree", "add", "-q", "-b", "quiet", quiet], {
      cwd: box.dir,
      env: { ...env, BERTH_NO_UP: "1" }
    })
    await new Promise((r) => setTimeout(r, 1_500))
    expect((await status()).worlds.some((w) => w.path === quiet)).toBe(false)

    const removed = await box.run(["hooks", "uninstall"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(readFileSync(file, "utf8")).not.toContain("berth")
    expect(readFileSync(file, "utf8")).toContain("echo mine")
    expect(JSON.parse((await box.run(["hooks", "status", "--json"])).stdout).installed).toBe(false)
    // a hook file holding only berth's block goes with it
    writeFileSync(file, "#!/bin/sh\n")
    await box.run(["hooks", "install"])
    await box.run(["hooks", "uninstall"])
    expect(existsSync(file)).toBe(false)

    // --shared: the hook lives in the repository's .githooks/ (to commit), and this clone's git looks there
    expect((await box.run(["hooks", "install", "--shared"])).code).toBe(0)
    expect(box.git("config", "core.hooksPath").trim()).toBe(".githooks")
    expect(readFileSync(join(box.dir, ".githooks", "post-checkout"), "utf8")).toContain("# >>> berth")
    expect(JSON.parse((await box.run(["hooks", "status", "--json"])).stdout)).toMatchObject({
      file: join(box.dir, ".githooks", "post-checkout"),
      installed: true
    })
  })
})
