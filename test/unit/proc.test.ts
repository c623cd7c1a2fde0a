import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import { isDefunct, parseStat } from "../../src/domain/proc.js"

/** A real line of this shape, with the comm replaced: fields 3 to 52 after it. */
const line = (comm: string, pid = 4242) =>
  `${pid} (${comm}) S 100 4242 4242 0 -1 4194560 281 0 0 0 0 0 0 0 20 0 1 0 987654321 2265088 185 ` +
  "18446744073709551615 1 1 0 0 0 0 0 0 65536 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

describe("parseStat", () => {
  it("reads the fields berth needs", () => {
    expect(parseStat(line("sleep"))).toEqual({
      pid: 4242,
      comm: "sleep",
      state: "S",
      ppid: 100,
      pgrp: 4242,
      session: 4242,
      startTime: "987654321"
    })
  })

  it.each([
    ["a space", "tmux: server"],
    ["a closing parenthesis", "evil) R 1 1 1"],
    ["only parentheses", ")()("],
    ["a fake stat line", "x) Z 1 2 3 4 5"],
    ["a newline", "a\nb) S 1"],
    ["nothing", ""]
  ])("splits at the last ) when the comm holds %s", (_, comm) => {
    const stat = parseStat(line(comm))
    expect(stat?.comm).toBe(comm)
    expect(stat?.state).toBe("S")
    expect(stat?.pgrp).toBe(4242)
    expect(stat?.startTime).toBe("987654321")
  })

  it("keeps a start time too large for a double exactly", () => {
    const text = line("x").replace("987654321", "123456789012345678901")
    expect(parseStat(text)?.startTime).toBe("123456789012345678901")
  })

  it.each([
    ["empty text", ""],
    ["no parentheses", "42 sleep S 1 2 3"],
    ["a truncated line", "42 (sleep) S 1 42 42 0"],
    ["a pid that is not a number", "x (sleep) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5 0 0"],
    ["a state that is not a letter", line("sleep").replace(") S ", ") 7 ")]
  ])("rejects %s", (_, text) => {
    expect(parseStat(text)).toBeUndefined()
  })

  it("tells zombies and dead entries apart from living processes", () => {
    const at = (state: string) => parseStat(line("x").replace(") S ", `) ${state} `))!
    expect(isDefunct(at("Z"))).toBe(true)
    expect(isDefunct(at("X"))).toBe(true)
    expect(isDefunct(at("S"))).toBe(false)
    expect(isDefunct(at("R"))).toBe(false)
    expect(isDefunct(at("D"))).toBe(false)
  })

  it.runIf(process.platform === "linux")("reads this very process", () => {
    const stat = parseStat(fs.readFileSync("/proc/self/stat", "utf8"))
    expect(stat?.pid).toBeGreaterThan(0)
    expect(stat?.state).toMatch(/^[A-Za-z]$/)
    expect(stat?.startTime).toMatch(/^\d+$/)
  })
})
