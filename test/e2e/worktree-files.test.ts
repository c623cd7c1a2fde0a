/**
 * `[project] copy` and `link` through the built binary: gitignored files of the main checkout reach each new
 * worktree before its `setup`, never over a file the worktree has, and only once.
 */
import { lstatSync, mkdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { sandboxes, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const toml = `[project]
copy = [".env.local", "config/*.local.json", "../outside"]
link = ["shared"]
setup = "cat .env.local > setup-saw.txt"

[services.api]
cmd = "node server.mjs"
url = "api"
`

describe("[project] copy and link", () => {
  it("brings the main checkout's ignored files into a new worktree before setup, never over its own", async () => {
    const box = await boxes.project({
      "berth.toml": toml,
      ".gitignore": ".env.local\n*.local.json\n!config/tracked.local.json\nshared/\nsetup-saw.txt\n",
      "config/tracked.local.json": '{"from":"git"}\n'
    })
    // what only the main checkout has, as a developer's machine would
    writeFileSync(join(box.dir, ".env.local"), "SECRET_KEY=main-checkout\n")
    writeFileSync(join(box.dir, "config", "db.local.json"), '{"db":"local"}\n')
    writeFileSync(join(box.dir, "config", "tracked.local.json"), '{"from":"an edit in the main checkout"}\n')
    mkdirSync(join(box.dir, "shared"))
    writeFileSync(join(box.dir, "shared", "big.bin"), "cache")

    const check = await box.run(["check"])
    expect(check.stderr).toMatch(/\[project\] copy "\.\.\/outside" reaches outside the repository/)

    const r = await box.run(["up", "feature", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    const path = worldFrom(r.stdout).path
    expect(readFileSync(join(path, ".env.local"), "utf8")).toBe("SECRET_KEY=main-checkout\n")
    expect(readFileSync(join(path, "config", "db.local.json"), "utf8")).toBe('{"db":"local"}\n')
    // the worktree's own (committed) file is kept
    expect(readFileSync(join(path, "config", "tracked.local.json"), "utf8")).toBe('{"from":"git"}\n')
    // setup ran after the copy
    expect(readFileSync(join(path, "setup-saw.txt"), "utf8")).toBe("SECRET_KEY=main-checkout\n")
    expect(lstatSync(join(path, "shared")).isSymbolicLink()).toBe(true)
    expect(readlinkSync(join(path, "shared"))).toBe(join(box.dir, "shared"))
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ name: string; events: Array<{ kind: string; message: string }> }>
    }
    const said = status.worlds.find((w) => w.name === "feature")!.events.find((e) => e.kind === "worktree_files")
    expect(said?.message).toBe("copied .env.local, config/db.local.json; linked shared from the main checkout")

    // once only: a file the user deleted in the worktree stays deleted on the next up
    rmSync(join(path, ".env.local"))
    expect((await box.run(["down", "feature"])).code).toBe(0)
    expect((await box.run(["up", "feature"], { timeoutMs: 60_000 })).code).toBe(0)
    expect(() => lstatSync(join(path, ".env.local"))).toThrow()
  })
})

describe("env_file", () => {
  it("writes the service's own variables into a marked block before it starts, keeps the user's lines, and takes it back", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.files]\nadapter = "dir"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\nenv = { FILES_DIR = "\${files.url}", MODE = "dev mode" }\nenv_file = [".env", "made.env"]\n`,
      ".env": "# the user's own\nAPI_KEY=kept\nMODE=from-the-user\n",
      ".gitignore": "made.env\n"
    })
    // a new worktree: .env comes from git, made.env is berth's
    const r = await box.run(["up", "feature", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    const w = worldFrom(r.stdout)
    const port = w.services.find((s) => s.name === "api")!.port!
    const env = readFileSync(join(w.path, ".env"), "utf8")
    const files = w.services.find((s) => s.name === "files")!.url!
    expect(env).toBe(
      [
        "# the user's own",
        "API_KEY=kept",
        "# berth set this aside while its block stands: MODE=from-the-user",
        "# >>> berth: world feature, written at every start",
        `FILES_DIR=${files}`,
        'MODE="dev mode"',
        `PORT=${port}`,
        "# <<< berth",
        ""
      ].join("\n")
    )
    const made = readFileSync(join(w.path, "made.env"), "utf8")
    expect(made.split("\n")[0]).toBe("# >>> berth: world feature, written at every start (berth created this file)")
    expect(lstatSync(join(w.path, "made.env")).mode & 0o777).toBe(0o600)
    // neither change is the user's: .env differs from git's only by berth's block (its set-aside line put back), and
    // berth made made.env, so remove needs no --force (test/e2e/everyday.test.ts refuses a user's own edit)
    const removed = await box.run(["remove", "feature"])
    expect(removed.code, removed.stderr).toBe(0)

    // the main checkout keeps its files: remove takes back berth's block, and the file berth made
    expect((await box.run(["up", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    expect(readFileSync(join(box.dir, ".env"), "utf8")).toContain("# >>> berth: world main")
    expect((await box.run(["remove", "--force"])).code).toBe(0)
    expect(readFileSync(join(box.dir, ".env"), "utf8")).toBe("# the user's own\nAPI_KEY=kept\nMODE=from-the-user\n")
    expect(() => lstatSync(join(box.dir, "made.env"))).toThrow()
  })
})
