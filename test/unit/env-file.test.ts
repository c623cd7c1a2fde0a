import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { createdByBerth, dotenvValue, renderEnvFile, withoutEnvBlock } from "../../src/domain/env-file.js"

/** How dotenv readers take a line back (enough of dotenv's rules for the values berth writes). */
const readBack = (text: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const line of text.split("\n")) {
    const m = /^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$/.exec(line)
    if (m === null) continue
    const raw = m[2]!
    out[m[1]!] = raw.startsWith('"')
      ? raw.slice(1, -1).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c === "r" ? "\r" : c))
      : raw
  }
  return out
}

describe("env_file", () => {
  it("writes a marked block into a new file, saying berth created it", () => {
    const text = renderEnvFile(undefined, { PORT: "4123", DATABASE_URL: "postgres://u:p@127.0.0.1/shop_one" }, "one")
    expect(text).toBe(
      [
        "# >>> berth: world one, written at every start (berth created this file)",
        "DATABASE_URL=postgres://u:p@127.0.0.1/shop_one",
        "PORT=4123",
        "# <<< berth",
        ""
      ].join("\n")
    )
    expect(createdByBerth(text)).toBe(true)
    expect(withoutEnvBlock(text)).toBeUndefined()
  })

  it("keeps the user's lines, replaces its own block in place, and drops a user line for a key it manages", () => {
    const before = "# mine\nAPI_KEY=abc\nDATABASE_URL=postgres://localhost/dev\n\nLAST=1\n"
    const first = renderEnvFile(before, { DATABASE_URL: "postgres://x/one" }, "one")
    expect(first).toBe(
      "# mine\nAPI_KEY=abc\n# berth set this aside while its block stands: DATABASE_URL=postgres://localhost/dev\n\nLAST=1\n# >>> berth: world one, written at every start\nDATABASE_URL=postgres://x/one\n# <<< berth\n"
    )
    // taken back, the user's file is as it was
    expect(withoutEnvBlock(first)).toBe(before)
    expect(withoutEnvBlock(renderEnvFile(first, { DATABASE_URL: "postgres://x/two" }, "one"))).toBe(before)
    // again, with other values: the block is rewritten where it is, nothing else moves
    const moved = first.replace("LAST=1\n", "").replace("# mine\n", "# mine\n# >>> berth: old\nX=1\n# <<< berth\n")
    const again = renderEnvFile(moved, { DATABASE_URL: "postgres://x/two", PORT: "1" }, "two")
    expect(again.split("\n").filter((l) => l.startsWith("# >>> berth")).length).toBe(1)
    expect(again.startsWith("# mine\n# >>> berth: world two")).toBe(true)
    expect(createdByBerth(again)).toBe(false)
    expect(withoutEnvBlock(again)).toBe("# mine\nAPI_KEY=abc\nDATABASE_URL=postgres://localhost/dev\n\n")
  })

  it("writes any value so that a dotenv reader gets it back", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.string(), (value) => {
        expect(readBack(renderEnvFile(undefined, { V: value }, "w")).V).toBe(value)
      }),
      { numRuns: 500 }
    )
    expect(dotenvValue("a b")).toBe('"a b"')
    expect(dotenvValue("$HOME")).toBe('"\\$HOME"')
  })
})
