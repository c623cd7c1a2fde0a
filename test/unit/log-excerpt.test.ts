import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { currentRun, failureExcerpt, runMarker } from "../../src/domain/log-excerpt.js"

const filler = (n: number, prefix = "line") => Array.from({ length: n }, (_, i) => `${prefix} ${i + 1}`)

describe("what a failure quotes of a log", () => {
  it("quotes only the current run: lines after the last start marker", () => {
    const old = ["Error: the old run's crash", runMarker("api", new Date(0)), "listening"]
    expect(currentRun(old)).toEqual(["listening"])
    expect(currentRun(["no marker"])).toEqual(["no marker"])
    expect(failureExcerpt(old)).toEqual(["listening"])
  })

  it("quotes a short run whole, without its trailing blank lines", () => {
    expect(failureExcerpt(["a", "b", "", ""])).toEqual(["a", "b"])
  })

  it("puts the lines around the first error first when the last lines would miss it (a pg error object)", () => {
    const lines = [
      "> migrate",
      "connecting",
      'error: relation "users" does not exist',
      ...filler(30, "    at Parser.parseErrorMessage"),
      "}"
    ]
    const excerpt = failureExcerpt(lines, 20)
    expect(excerpt).toHaveLength(20)
    expect(excerpt.slice(0, 3)).toEqual(["> migrate", "connecting", 'error: relation "users" does not exist'])
    expect(excerpt).toContain("…")
    expect(excerpt.at(-1)).toBe("}")
  })

  it("quotes the last lines when the error is among them (or there is none)", () => {
    const late = [...filler(40), "npm ERR! code ELIFECYCLE"]
    expect(failureExcerpt(late, 10)).toEqual(late.slice(-10))
    expect(failureExcerpt(filler(40), 10)).toEqual(filler(40).slice(-10))
  })

  it("never quotes more than asked, and every line it quotes is the log's or the gap", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(FastCheck.oneof(FastCheck.string(), FastCheck.constant("Error: boom")), { maxLength: 80 }),
        FastCheck.integer({ min: 1, max: 30 }),
        (lines, max) => {
          const excerpt = failureExcerpt(lines, max)
          expect(excerpt.length).toBeLessThanOrEqual(max)
          for (const line of excerpt) expect(line === "…" || lines.includes(line)).toBe(true)
        }
      )
    )
  })
})
