import { execFileSync } from "node:child_process"
import { tmpdir } from "node:os"
import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { branchNameProblem } from "../../src/domain/branch.js"

/** git's own verdict, for names berth does not refuse for reasons of its own. */
const gitAccepts = (name: string): boolean => {
  try {
    return (
      execFileSync("git", ["check-ref-format", "--branch", name], {
        cwd: tmpdir(),
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"]
      }) === `${name}\n`
    )
  } catch {
    return false
  }
}

const berthOwnRules = (name: string) => name.startsWith("-") || name === "@" || name === "HEAD" || name.includes("@{")

describe("branch names", () => {
  it("accepts branch names with shell metacharacters and non-ASCII letters", () => {
    for (const name of ["main", "feat/x", "a;b", `q'uo"te`, "b`id`c", "p|i&p<e>s", "d$o(l)lar", "ünï", "v1.2"]) {
      expect(branchNameProblem(name)).toBeUndefined()
    }
  })

  it("refuses what git refuses, a leading '-', and what --branch would expand", () => {
    for (const name of [
      "",
      "-x",
      "a b",
      "a..b",
      "a.lock",
      "a/b.lock/c",
      "a/",
      "/a",
      "a//b",
      ".a",
      "a/.b",
      "a.",
      "@",
      "HEAD",
      "@{-1}",
      "x@{1}",
      "a\tb",
      "a~1",
      "a^",
      "a:b",
      "a?",
      "a*",
      "a[",
      "a\\b",
      "a\u007f"
    ]) {
      expect(branchNameProblem(name)).toBeDefined()
    }
  })

  it("refuses a part longer than git can keep as a file, and says the limit and why", () => {
    // git keeps refs/heads/<name> as a file and writes <part>.lock beside it: 255 bytes - ".lock"
    expect(branchNameProblem("a".repeat(250))).toBeUndefined()
    expect(branchNameProblem(`x/${"a".repeat(250)}/y`)).toBeUndefined()
    const problem = branchNameProblem("a".repeat(300))
    expect(problem).toContain("300 bytes")
    expect(problem).toContain("250")
    expect(problem).toContain("255 bytes")
    expect(branchNameProblem(`ok/${"a".repeat(251)}`)).toContain("251 bytes")
    // bytes, not characters: "é" is two
    expect(branchNameProblem("é".repeat(125))).toBeUndefined()
    expect(branchNameProblem("é".repeat(126))).toContain("252 bytes")
  })

  it("agrees with git check-ref-format --branch", () => {
    const alphabet = FastCheck.constantFrom(
      "a",
      "b",
      "/",
      ".",
      "-",
      "@",
      "{",
      "~",
      " ",
      ":",
      "l",
      "o",
      "c",
      "k",
      "é",
      "\\"
    )
    FastCheck.assert(
      FastCheck.property(FastCheck.array(alphabet, { minLength: 1, maxLength: 9 }), (chars) => {
        const name = chars.join("")
        if (berthOwnRules(name)) return branchNameProblem(name) !== undefined
        return (branchNameProblem(name) === undefined) === gitAccepts(name)
      }),
      { numRuns: 300 }
    )
  })
})
