import { describe, expect, it } from "@effect/vitest"
import { candidateLines, complete } from "../../src/cli/completion.js"
import { berth } from "../../src/cli/main.js"

/** What `berth __complete` would print for these words, with the project's names given. */
const offered = (words: ReadonlyArray<string>, names: Partial<Record<string, ReadonlyArray<string>>> = {}) => {
  const found = complete(berth, words)
  return candidateLines([...found.values, ...found.lookup.flatMap((kind) => names[kind] ?? [])], found.prefix)
}

const project = {
  world: ["main", "feature-a", "feature-b"],
  branch: ["main", "feature-a", "feature-b", "old-spike"],
  service: ["api", "db", "web"],
  group: ["backend"],
  slice: ["db"]
}

describe("shell completion", () => {
  it("completes commands, and the aliases people reach for, at the top", () => {
    expect(offered([""])).toEqual(expect.arrayContaining(["up", "down", "status", "ls", "stop", "restart", "mcp"]))
    expect(offered(["re"])).toEqual(["reload", "remove", "reserve", "reset", "restart"])
    expect(offered(["golden", ""])).toEqual(["rebuild"])
  })

  it("completes world names where a command takes one, and any local branch for up", () => {
    expect(offered(["down", ""], project)).toEqual(["feature-a", "feature-b", "main"])
    expect(offered(["stop", "feat"], project)).toEqual(["feature-a", "feature-b"])
    expect(offered(["up", "o"], project)).toEqual(["old-spike"])
    expect(offered(["env", "--json", "f"], project)).toEqual(["feature-a", "feature-b"])
    // a world named already: nothing more to name
    expect(offered(["env", "main", ""], project)).toEqual([])
  })

  it("completes services after -s and --service, groups after -g, and the services of curl, open and golden rebuild", () => {
    expect(offered(["up", "-s", ""], project)).toEqual(["api", "db", "web"])
    expect(offered(["reload", "feature-a", "--service", "w"], project)).toEqual(["web"])
    expect(offered(["up", "-g", ""], project)).toEqual(["backend"])
    expect(offered(["curl", "main", ""], project)).toEqual(["api", "db", "web"])
    expect(offered(["open", "main", "a"], project)).toEqual(["api"])
    expect(offered(["golden", "rebuild", "main", "d"], project)).toEqual(["db"])
    // a value is not taken for the world: the world comes after it
    expect(offered(["up", "-s", "api", ""], project)).toEqual(["feature-a", "feature-b", "main", "old-spike"])
  })

  it("completes every slice after the world for reset", () => {
    expect(offered(["reset", "main", ""], project)).toEqual(["db"])
    expect(offered(["reset", "main", "db", ""], project)).toEqual(["db"])
  })

  it("completes options from the command's own, and shells after --completions", () => {
    expect(offered(["up", "--"])).toEqual(
      expect.arrayContaining(["--all", "--json", "--no-wait", "--service", "--help"])
    )
    expect(offered(["up", "--no"])).toEqual(["--no-wait"])
    expect(offered(["--completions", ""])).toEqual(["bash", "fish", "powershell", "zsh"])
    expect(offered(["completion", ""])).toEqual(["bash", "fish", "powershell", "zsh"])
    expect(offered(["completion", "p"])).toEqual(["powershell"])
    expect(offered(["comp"])).toEqual(["completion"])
  })

  it("offers nothing after -- (the command exec runs is the shell's to complete)", () => {
    expect(offered(["exec", "main", "--", "np"], project)).toEqual([])
  })
})
