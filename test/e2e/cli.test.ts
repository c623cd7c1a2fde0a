import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, type RunResult, sandbox } from "./harness.js"

const box = sandbox()
afterAll(() => box.cleanup())

// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for ANSI escapes
const ansi = /\u001b\[/

describe("berth (the binary)", () => {
  it("prints its version", async () => {
    const { version } = (await import("../../package.json", { with: { type: "json" } })).default
    const r = await box.run(["--version"])
    expect(r).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: "" })
  })

  it("berth version says what --version says; --json gives the version, the build and where it runs", async () => {
    const { version } = (await import("../../package.json", { with: { type: "json" } })).default
    expect(await box.run(["version"])).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: "" })
    const r = await box.run(["version", "--json"])
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual({
      schema: 1,
      version,
      build: expect.stringMatching(/^\S+$/),
      node: process.version,
      platform: `${process.platform}-${process.arch}`
    })
    expect((await box.run(["--help"])).stdout).toMatch(/^ {2}version +/m)
  })

  it("shows help without colour when piped, listing the commands", async () => {
    for (const args of [["--help"], []]) {
      const r = await box.run(args)
      expect(r.code).toBe(0)
      expect(r.stdout).toMatch(/check/)
      expect(r.stdout).toMatch(/init/)
      expect(r.stdout).not.toMatch(ansi)
    }
    const sub = await box.run(["check", "--help"])
    expect(sub.code).toBe(0)
    expect(sub.stdout).toMatch(/^Usage: berth check \[<path>\] \[options\]\n/)
    expect(sub.stdout).toMatch(/--json/)
    expect(sub.stdout).not.toMatch(/A user-defined piece of text/)
    expect(sub.stdout).not.toMatch(ansi)
  })

  it("suggests the closest command for a typo, exiting 2 with one line", async () => {
    const r = await box.run(["chek"])
    expect(r).toMatchObject({ code: 2, stdout: "" })
    expect(r.stderr).toBe('berth: unknown command "chek" for berth; did you mean "check"?\n')
  })

  it("rejects an unknown option with a suggestion and exit 2", async () => {
    const r = await box.run(["check", "--jsn"])
    expect(r.code).toBe(2)
    expect(r.stderr.trim().split("\n")).toEqual([
      'berth: unknown option "--jsn" for berth check; did you mean "--json"?'
    ])
  })

  it("reports errors as JSON on stderr in --json mode", async () => {
    const r = await box.run(["check", "--json"])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe("")
    const parsed = JSON.parse(r.stderr) as { error: { tag: string; message: string } }
    expect(parsed.error.tag).toBe("ConfigNotFound")
    expect(parsed.error.message).toMatch(/no berth\.toml/)
  })

  it("never prints a stack trace", async () => {
    for (const args of [
      ["check", "/nonexistent/berth.toml"],
      ["init", "/nonexistent"],
      ["check", "--json", "/x"]
    ]) {
      const r = await box.run(args)
      expect(r.code).not.toBe(0)
      expect(r.stderr).not.toMatch(/\n\s+at /)
    }
  })

  describe("run from a folder that was deleted under the shell", () => {
    const gone =
      "error: the current folder no longer exists (was it removed?): cd to a folder that exists and run berth again"
    /** A shell cds into a fresh folder, deletes it, then runs berth there: as after `berth remove` of its worktree. */
    const fromDeleted = (args: ReadonlyArray<string>) =>
      new Promise<RunResult>((resolve, reject) => {
        const folder = mkdtempSync(join(tmpdir(), "berth-gone-"))
        const child = spawn("/bin/sh", ["-c", 'cd "$0" && rmdir "$0" && exec "$BERTH" "$@"', folder, ...args], {
          env: { ...process.env, BERTH: berthBin, BERTH_HOME: box.home, NO_COLOR: "1", BERTH_PROXY_PORT: "off" },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let stdout = ""
        let stderr = ""
        child.stdout.on("data", (d: Buffer) => {
          stdout += d.toString()
        })
        child.stderr.on("data", (d: Buffer) => {
          stderr += d.toString()
        })
        child.on("error", reject)
        child.on("close", (code) => {
          rmSync(folder, { recursive: true, force: true })
          // the launcher is a /bin/sh script, and some shells (dash) say so themselves before berth runs
          resolve({ code, stdout, stderr: stderr.replace(/^.*getcwd\(\) failed.*\n/m, "") })
        })
      })

    const commands = [["up"], ["up", "x"], ["down"], ["env", "--json"], ["logs"], ["status", "."], ["check"], ["init"]]
    it.each(commands.map((args) => [args.join(" "), args] as const))(
      "berth %s fails with one line and exit 1",
      async (_, args) => {
        const r = await fromDeleted(args)
        expect(r.stdout).toBe("")
        if (args.includes("--json")) {
          expect(r.code).toBe(1)
          expect(JSON.parse(r.stderr)).toEqual({
            schema: 1,
            error: { tag: "WorkingDirectoryGone", message: gone.slice(7), hint: null }
          })
        } else expect(r).toMatchObject({ code: 1, stderr: `${gone}\n` })
      }
    )

    it("still answers what needs no folder: --version, status", async () => {
      const { version } = (await import("../../package.json", { with: { type: "json" } })).default
      expect(await fromDeleted(["--version"])).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: "" })
      for (const args of [["status"], ["status", "--json"]]) {
        const r = await fromDeleted(args)
        expect(r.code, r.stderr).toBe(0)
        expect(r.stderr).toBe("")
      }
    })
  })

  it.each(["bash", "zsh", "fish"])("prints %s completions, which ask berth for the commands", async (shell) => {
    const r = await box.run(["--completions", shell])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("berth __complete")
    const commands = await box.run(["__complete", ""])
    expect(commands.stdout.split("\n")).toEqual(expect.arrayContaining(["check", "init"]))
  })
})
