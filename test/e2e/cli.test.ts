import { afterAll, describe, expect, it } from "@effect/vitest"
import { sandbox } from "./harness.js"

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
    expect(sub.stdout).toMatch(/--json/)
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

  it.each(["bash", "zsh", "fish"])("prints %s completions", async (shell) => {
    const r = await box.run(["--completions", shell])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/check/)
    expect(r.stdout).toMatch(/init/)
  })
})
