/**
 * Hostile repositories, through the built binary: what a repository commits (links, folders, hooks, names) never
 * makes berth write or run anything outside the worktree. Each test reproduces one way that was broken.
 */
import { execFileSync, spawnSync } from "node:child_process"
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, type RunResult, type Sandbox, sandboxes } from "./harness.js"

const boxes = sandboxes()
const outsides: Array<string> = []
afterAll(() => {
  boxes.cleanup()
  for (const dir of outsides) rmSync(dir, { recursive: true, force: true })
})

/** A folder outside every repository, standing for the user's home. */
const outside = (): string => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "berth-outside-")))
  outsides.push(dir)
  return dir
}

const commit = (box: Sandbox, message: string) => {
  box.git("add", "-A")
  box.git("commit", "-q", "-m", message)
}

/** The `{ error }` document a failing `--json` command prints on stderr. */
const failure = (r: RunResult): { tag: string; message: string; hint: string | null } => {
  expect(r.code, r.stdout).toBe(1)
  return (JSON.parse(r.stderr) as { error: { tag: string; message: string; hint: string | null } }).error
}

describe("links a repository commits", () => {
  it("never writes an env_file through a link that leaves the worktree, nor takes a block back there", async () => {
    const home = outside()
    const bashrc = join(home, ".bashrc")
    writeFileSync(bashrc, "export FOO=1\n")
    const box = await boxes.project({
      "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\nenv_file = ".env"\n`
    })
    symlinkSync(bashrc, join(box.dir, ".env"))
    commit(box, "a link to the user's shell profile")

    const check = await box.run(["check"])
    expect(check.stderr).toContain(`env_file ".env" is a link to ${bashrc}, outside the worktree`)

    const up = failure(await box.run(["up", "--json"], { timeoutMs: 60_000 }))
    expect(up.tag).toBe("PathOutsideWorktree")
    expect(up.message).toContain(`services.web.env_file ".env" is a link to ${bashrc}, outside the worktree`)
    expect(up.hint).not.toBeNull()
    expect(readFileSync(bashrc, "utf8")).toBe("export FOO=1\n")

    // a block an older berth wrote there is not berth's to take back now: the file is not the worktree's
    const older =
      "# berth set this aside while its block stands: export FOO=1\n# >>> berth: world main\nPORT=1\n# <<< berth\n"
    writeFileSync(bashrc, older)
    const removed = await box.run(["remove", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(readFileSync(bashrc, "utf8")).toBe(older)
  })

  it("never runs a service in, nor writes its env_file to, a dir that is a link out of the worktree", async () => {
    const elsewhere = outside()
    const box = await boxes.project({
      "berth.toml": `[services.web]\ncmd = "touch ran-here && sleep 30"\ndir = "sub"\nenv_file = ".env"\n`
    })
    symlinkSync(elsewhere, join(box.dir, "sub"))
    commit(box, "a link to another folder")

    const check = await box.run(["check"])
    expect(check.stderr).toContain(`dir "sub" is a link to ${elsewhere}, outside the worktree`)

    const up = failure(await box.run(["up", "--json"], { timeoutMs: 60_000 }))
    expect(up.tag).toBe("PathOutsideWorktree")
    expect(up.message).toContain(`services.web.dir "sub" is a link to ${elsewhere}, outside the worktree`)
    expect(readdirSync(elsewhere)).toEqual([])
  })

  it("never copies or links [project] files through a branch's links that leave the worktree", async () => {
    const secrets = outside()
    const shared = outside()
    const box = await boxes.project({
      "berth.toml": `[project]\ncopy = ["cfg/key.txt"]\nlink = ["lnk/x"]\n\n[services.web]\ncmd = "node server.mjs"\nurl = "web"\n`,
      ".gitignore": "cfg/key.txt\nlnk/x\n"
    })
    // the branch replaces cfg/ and lnk/ with links to folders outside
    const scratch = join(outside(), "wt")
    box.git("worktree", "add", "-q", "-b", "feat", scratch)
    symlinkSync(secrets, join(scratch, "cfg"))
    symlinkSync(shared, join(scratch, "lnk"))
    execFileSync("git", ["add", "-A"], { cwd: scratch })
    execFileSync("git", ["-c", "user.name=b", "-c", "user.email=b@l", "commit", "-q", "-m", "links"], { cwd: scratch })
    box.git("worktree", "remove", scratch)
    // what the main checkout keeps out of git, as a developer's machine would
    mkdirSync(join(box.dir, "cfg"))
    writeFileSync(join(box.dir, "cfg", "key.txt"), "the main checkout's key\n")
    mkdirSync(join(box.dir, "lnk"))
    writeFileSync(join(box.dir, "lnk", "x"), "x\n")

    const up = failure(await box.run(["up", "feat", "--json"], { timeoutMs: 60_000 }))
    expect(up.tag).toBe("PathOutsideWorktree")
    expect(up.message).toContain(
      `[project] copy "cfg/key.txt" goes through the link cfg to ${join(secrets, "key.txt")}`
    )
    expect(readdirSync(secrets)).toEqual([])
    expect(readdirSync(shared)).toEqual([])

    const worktree = `${box.dir}.worktrees/feat`
    const check = await box.run(["check"], { cwd: worktree })
    expect(check.stderr).toContain(
      `[project] copy "cfg/key.txt" goes through the link cfg to ${join(secrets, "key.txt")}`
    )
    expect(check.stderr).toContain(`[project] link "lnk/x" goes through the link lnk to ${join(shared, "x")}`)

    const removed = await box.run(["remove", "feat", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(readdirSync(secrets)).toEqual([])
    expect(readdirSync(shared)).toEqual([])
  })
})

describe("a folder already at a world's worktree path", () => {
  it("is never taken for the world: up refuses it, with or without a berth.toml in it, and runs nothing there", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const folder = `${box.dir}.worktrees/feat`
    mkdirSync(folder, { recursive: true })
    const bare = failure(await box.run(["up", "feat", "--json"], { timeoutMs: 60_000 }))
    expect(bare.message).toContain(`${folder} is not a worktree of ${box.dir}`)
    expect(bare.hint).toMatch(/move that folder away.*or name another branch/)

    writeFileSync(join(folder, "berth.toml"), `[services.evil]\ncmd = "touch ran-here && sleep 30"\n`)
    const planted = failure(await box.run(["up", "feat", "--json"], { timeoutMs: 60_000 }))
    expect(planted.message).toContain(`${folder} is not a worktree of ${box.dir}`)
    expect(readdirSync(folder).sort()).toEqual(["berth.toml"])
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ name: string; state: string }>
    }
    expect(status.worlds.find((w) => w.name === "feat")?.state).not.toBe("running")

    // the folder is not berth's: remove forgets the world and leaves it
    const removed = await box.run(["remove", "feat", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(readdirSync(folder).sort()).toEqual(["berth.toml"])
  })

  it("a world whose worktree was replaced by a plain folder (as an older berth left it) is removed, the folder kept", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const up = await box.run(["up", "feat", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    expect((await box.run(["down", "feat"])).code).toBe(0)
    const folder = `${box.dir}.worktrees/feat`
    // git's worktree goes; a folder that is no worktree stands where it was
    rmSync(folder, { recursive: true, force: true })
    box.git("worktree", "prune")
    mkdirSync(folder)
    writeFileSync(join(folder, "berth.toml"), `[services.evil]\ncmd = "touch ran-here && sleep 30"\n`)

    const again = failure(await box.run(["up", "feat", "--json"], { timeoutMs: 60_000 }))
    expect(again.message).toContain(`${folder} is not a worktree of ${box.dir}`)
    expect(readdirSync(folder)).toEqual(["berth.toml"])

    const removed = await box.run(["remove", "feat", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<{ name: string }> }
    expect(status.worlds.map((w) => w.name)).not.toContain("feat")
    expect(readdirSync(folder)).toEqual(["berth.toml"])
  })
})

describe("berth hooks install --shared", () => {
  const canary = `#!/bin/sh\necho ran >> "$(git rev-parse --git-common-dir)/canary.log"\n`
  const withCommittedHooks = async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    mkdirSync(join(box.dir, ".githooks"))
    writeFileSync(join(box.dir, ".githooks", "pre-commit"), canary, { mode: 0o755 })
    writeFileSync(join(box.dir, ".githooks", "pre-push"), canary, { mode: 0o755 })
    // not executable, so git would not run it; and not a hook at all
    writeFileSync(join(box.dir, ".githooks", "commit-msg"), canary, { mode: 0o644 })
    writeFileSync(join(box.dir, ".githooks", "README"), "our hooks\n")
    commit(box, "the repository's own hooks")
    return box
  }
  const commitSomething = (box: Sandbox) => {
    writeFileSync(join(box.dir, "touched.txt"), `${Date.now()}\n`)
    commit(box, "something")
  }
  const hooksPath = (box: Sandbox) => {
    try {
      return box.git("config", "core.hooksPath").trim()
    } catch {
      return undefined
    }
  }

  it("without a terminal and without --yes, refuses to activate the repository's other hooks, naming them", async () => {
    const box = await withCommittedHooks()
    const r = await box.run(["hooks", "install", "--shared", "--json"])
    const error = failure(r)
    expect(error.message).toContain("pre-commit, pre-push")
    expect(error.message).not.toMatch(/commit-msg|README/)
    expect(error.hint).toContain("--yes")
    expect(hooksPath(box)).toBeUndefined()
    expect(readdirSync(join(box.dir, ".githooks")).sort()).toEqual(["README", "commit-msg", "pre-commit", "pre-push"])
    commitSomething(box)
    expect(readdirSync(join(box.dir, ".git"))).not.toContain("canary.log")
  })

  it("with --yes, installs berth's block and says which other hooks it activated", async () => {
    const box = await withCommittedHooks()
    const r = await box.run(["hooks", "install", "--shared", "--yes"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain("pre-commit, pre-push")
    expect(hooksPath(box)).toBe(".githooks")
    expect(readFileSync(join(box.dir, ".githooks", "post-checkout"), "utf8")).toContain("# >>> berth")
  })

  it("asks at a terminal, and a no changes nothing", async () => {
    const box = await withCommittedHooks()
    const r = spawnSync("script", ["-qec", `${berthBin} hooks install --shared`, "/dev/null"], {
      cwd: box.dir,
      input: "n\n",
      encoding: "utf8",
      env: { ...process.env, BERTH_HOME: box.home, NO_COLOR: "1", BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off" },
      timeout: 30_000
    })
    expect(r.stdout).toMatch(/pre-commit, pre-push[\s\S]*\[y\/N\]/)
    expect(r.status).toBe(1)
    expect(hooksPath(box)).toBeUndefined()
  })

  it("asks nothing when the repository commits no other hook", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const r = await box.run(["hooks", "install", "--shared"])
    expect(r.code, r.stderr).toBe(0)
    expect(hooksPath(box)).toBe(".githooks")
  })
})

describe("what a world's commands and names are given", () => {
  it("runs the project's setup with the world's identity, as a service gets it", async () => {
    const box = await boxes.project({
      "berth.toml": `[project]\nsetup = "echo \\"$BERTH_WORLD $BERTH_PROJECT\\" > setup-saw.txt"\n\n[services.web]\ncmd = "node server.mjs"\nurl = "web"\n`,
      ".gitignore": "setup-saw.txt\n"
    })
    const r = await box.run(["up", "feat", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(readFileSync(join(`${box.dir}.worktrees/feat`, "setup-saw.txt"), "utf8")).toBe("feat app\n")
  })

  it("refuses a 300-character world name up front, saying the limit and why", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const error = failure(await box.run(["up", "a".repeat(300), "--json"], { timeoutMs: 60_000 }))
    expect(error.tag).toBe("InvalidWorldName")
    expect(error.message).toContain("300 bytes")
    expect(error.message).toContain("255 bytes")
    expect(error.message).not.toContain("fatal")
  })
})
