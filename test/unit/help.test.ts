import { describe, expect, it } from "@effect/vitest"
import { helpFor, helpPages, undocumented } from "../../src/cli/help.js"
import { berth } from "../../src/cli/main.js"

describe("help", () => {
  it("describes every argument and option of every command in berth's words", () => {
    expect(undocumented(berth)).toEqual([])
  })

  it("lays out a command: usage with the berth prefix, arguments, options, examples, no generic filler", () => {
    const up = helpFor(berth, ["up", "--help"])!
    expect(up.split("\n")[0]).toBe("Usage: berth up [<name>] [options]")
    expect(up).toContain("  -s, --service <text>  only this service and its dependencies (repeatable)")
    expect(up).toContain("$ berth up login-fix")
    expect(up).not.toMatch(/A user-defined piece of text|This setting is optional/)
    expect(helpFor(berth, ["daemon", "-h"])).toMatch(/^Usage: berth daemon <command>[\s\S]*Commands:\n {2}start /)
    expect(helpFor(berth, ["up", "--", "--help"])).toBeUndefined()
  })

  it("lists every command and the aliases at the top", () => {
    const top = helpFor(berth, ["--help"])!
    for (const command of ["up", "down", "status", "env", "exec", "verify", "mcp"]) {
      expect(top).toMatch(new RegExp(`^ {2}${command} +\\S`, "m"))
    }
    expect(top).toContain("Aliases: ls → status, list → status, stop → down, restart → reload")
  })

  it("gives every command's help, parents before children, as --help prints it (for docs/commands.md)", () => {
    const pages = helpPages(berth)
    const paths = pages.map((p) => p.path)
    expect(paths.indexOf("golden")).toBeLessThan(paths.indexOf("golden rebuild"))
    expect(paths).toContain("cluster join")
    const up = pages.find((p) => p.path === "up")!
    expect(up.help).toBe(helpFor(berth, ["up", "--help"]))
    expect(up.summary).toBe("Start a world: its worktree, ports, services and routes")
  })
})
