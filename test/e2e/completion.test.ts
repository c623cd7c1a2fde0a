/**
 * Shell completion through the built binary, in real shells: the script `berth --completions <shell>` prints, sourced
 * into bash, zsh and fish, completes world names from the repository's worktrees and services from its berth.toml,
 * without a daemon (a completion never starts one).
 */
import { execFileSync, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { berthBin, processesOf, type Sandbox, sandbox } from "./harness.js"

let box: Sandbox
beforeAll(() => {
  box = sandbox({
    "berth.toml": `[project]\nname = "cpl"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n\n[services.web]\ncmd = "node server.mjs"\nurl = "web"\ngroups = ["front"]\n`
  })
  box.git("branch", "feature-a")
  box.git("branch", "feature-b")
  box.git("branch", "spike")
  box.git("worktree", "add", "-q", join(dirname(box.dir), "wt-a"), "feature-a")
  box.git("worktree", "add", "-q", join(dirname(box.dir), "wt-b"), "feature-b")
})
afterAll(() => box.cleanup())

const env = () => ({ ...process.env, PATH: `${dirname(berthBin)}:${process.env.PATH}`, BERTH_HOME: box.home })

const shell = (program: string, args: ReadonlyArray<string>) =>
  execFileSync(program, args, { cwd: box.dir, env: env(), encoding: "utf8", timeout: 20_000 })
    .split("\n")
    .filter((line) => line !== "")

/** bash: the completion function run on COMP_WORDS as the shell would set them. */
const bash = (words: ReadonlyArray<string>) =>
  shell("bash", [
    "-c",
    `source <(berth --completions bash); COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _berth; printf '%s\\n' "\${COMPREPLY[@]}"`
  ])

describe("shell completion", () => {
  it("completes commands, worlds and services in bash", () => {
    expect(bash(["berth", "sta"])).toEqual(["status"])
    expect(bash(["berth", "down", "feat"])).toEqual(["feature-a", "feature-b"])
    // up takes any local branch: it makes the world
    expect(bash(["berth", "up", "sp"])).toEqual(["spike"])
    expect(bash(["berth", "reload", "main", "-s", ""])).toEqual(["api", "web"])
    expect(bash(["berth", "up", "-g", ""])).toEqual(["front"])
    // from inside a worktree, the same project
    expect(
      execFileSync(
        "bash",
        [
          "-c",
          "source <(berth --completions bash); COMP_WORDS=(berth env ''); COMP_CWORD=2; _berth; printf '%s\\n' \"${COMPREPLY[@]}\""
        ],
        {
          cwd: join(dirname(box.dir), "wt-a"),
          env: env(),
          encoding: "utf8"
        }
      )
        .split("\n")
        .filter((l) => l !== "")
    ).toEqual(["feature-a", "feature-b", "main"])
    // nothing asked a daemon
    expect(existsSync(join(box.home, "daemon.sock"))).toBe(false)
    expect(processesOf(box.home)).toEqual([])
  })

  it("completes in zsh (the script's function, with compadd standing in for the completion system)", () => {
    const words = ["berth", "down", "feat"]
    const out = shell("zsh", [
      "-c",
      `source <(berth --completions zsh); compadd() { shift; print -l -- "$@" }; words=(${words.map((w) => `'${w}'`).join(" ")}); CURRENT=${words.length}; _berth`
    ])
    expect(out).toEqual(["feature-a", "feature-b"])
    expect(shell("zsh", ["-n", "-c", "source <(berth --completions zsh)"])).toEqual([])
  })

  it("completes in fish", () => {
    const out = shell("fish", ["-c", "berth --completions fish | source; complete -C'berth curl main '"])
    expect(out).toEqual(["api", "web"])
  })

  it("berth completion <shell> prints what --completions <shell> does", () => {
    for (const name of ["bash", "zsh", "fish", "powershell"]) {
      expect(shell("berth", ["completion", name])).toEqual(shell("berth", ["--completions", name]))
    }
  })
})

const hasPwsh = spawnSync("sh", ["-c", "command -v pwsh"]).status === 0

describe("PowerShell completion", () => {
  const script = () => execFileSync(berthBin, ["completion", "powershell"], { encoding: "utf8", env: env() })

  it("registers a native argument completer for berth that asks berth __complete", () => {
    const text = script()
    expect(text).toMatch(/^Register-ArgumentCompleter -Native -CommandName berth -ScriptBlock \{$/m)
    expect(text).toContain("param($wordToComplete, $commandAst, $cursorPosition)")
    // the words up to the cursor, berth itself left out; an empty word when the cursor stands after a space
    expect(text).toContain("$_.Extent.StartOffset -lt $cursorPosition")
    expect(text).toContain("Select-Object -Skip 1")
    expect(text).toContain("& berth __complete @words 2>$null")
    // PowerShell before 7.3 drops an empty argument to a native command: it is passed quoted there
    expect(text).toContain(`[version]"$($v.Major).$($v.Minor)" -lt [version]'7.3') { '""' } else { '' }`)
    expect(text).toContain("[System.Management.Automation.CompletionResult]::new(")
  })

  // pwsh is not installed here (it is not in Debian's archive, and nothing else may be fetched onto this machine):
  // what the script relies on is tested instead — the words it hands to `berth __complete` get the candidates, one a
  // line, the last word (empty after a space) the one being typed
  it.skipIf(hasPwsh)(
    "the protocol the script relies on: berth __complete <words…> answers one candidate a line",
    () => {
      expect(shell("berth", ["__complete", "curl", "main", ""])).toEqual(["api", "web"])
      expect(shell("berth", ["__complete", "down", "feat"])).toEqual(["feature-a", "feature-b"])
      expect(shell("berth", ["__complete", "up", "--no"])).toEqual(["--no-wait"])
      expect(shell("berth", ["__complete", "completion", "p"])).toEqual(["powershell"])
      // nothing to offer: no line at all, so PowerShell falls back to its own (file) completion
      expect(
        execFileSync(berthBin, ["__complete", "exec", "main", "--", "np"], { cwd: box.dir, env: env() }).length
      ).toBe(0)
    }
  )

  it.runIf(hasPwsh)("completes in PowerShell", () => {
    const complete = (line: string) =>
      shell("pwsh", [
        "-NoProfile",
        "-Command",
        `berth completion powershell | Out-String | Invoke-Expression; (TabExpansion2 -inputScript '${line}' -cursorColumn ${line.length}).CompletionMatches | ForEach-Object { $_.CompletionText }`
      ])
    expect(complete("berth curl main ")).toEqual(["api", "web"])
    expect(complete("berth down feat")).toEqual(["feature-a", "feature-b"])
  })
})
