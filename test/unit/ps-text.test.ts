import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  availableFromVmStat,
  parseLsofListen,
  parseLstart,
  parseMemsize,
  parsePsRows,
  parseVmStat,
  psDefunct
} from "../../src/domain/psText.js"

/** A fixture's text without its header (the `#` lines saying where it came from): what the command printed. */
const fixture = (name: string) =>
  fs
    .readFileSync(path.join(import.meta.dirname, "../fixtures", name), "utf8")
    .split("\n")
    .filter((line) => !line.startsWith("#"))
    .join("\n")

describe("parseLstart", () => {
  it("reads ps's lstart in the C locale as UTC seconds", () => {
    expect(parseLstart("Sat Dec  5 12:06:14 2026")).toBe(Date.UTC(2026, 11, 5, 12, 6, 14) / 1000)
    expect(parseLstart("Mon Jan 12 09:03:04 2026")).toBe(Date.UTC(2026, 0, 12, 9, 3, 4) / 1000)
  })
  it("refuses what is not one", () => {
    expect(parseLstart("")).toBeUndefined()
    expect(parseLstart("Sat Foo  5 12:06:14 2026")).toBeUndefined()
    expect(parseLstart("5 Dec 2026 12:06:14")).toBeUndefined()
  })
})

describe("parsePsRows on Linux (procps)", () => {
  it("reads every row of a recorded table and skips what is not a row", () => {
    const rows = parsePsRows(fixture("linux/ps-lstart.txt"))
    expect(rows).toHaveLength(6)
    expect(rows[0]).toEqual({
      pid: 1,
      ppid: 0,
      pgid: 0,
      stat: "S<Ll",
      startSeconds: Date.UTC(2026, 11, 5, 12, 6, 14) / 1000
    })
    expect(rows[3]).toMatchObject({ pid: 4, ppid: 2, stat: "I<" })
  })
  it("tells a zombie", () => {
    const [row] = parsePsRows("  812   1  812 Z    Sat Dec  5 12:06:14 2026\n")
    expect(row === undefined ? undefined : psDefunct(row.stat)).toBe(true)
    expect(psDefunct("Ss")).toBe(false)
  })
})

describe("parseLsofListen on Linux", () => {
  it("reads IPv4 and IPv6 listeners of a recorded output", () => {
    expect(parseLsofListen(fixture("linux/lsof-listen.txt"))).toEqual([
      { command: "python3", pid: 23656, address: "127.0.0.1", port: 35811 },
      { command: "python3", pid: 23657, address: "[::1]", port: 43191 }
    ])
  })
  it("skips a socket with no port and a line that is not a listener", () => {
    expect(
      parseLsofListen(
        "a 1 u 3u IPv4 0x1 0t0 TCP *:* (LISTEN)\nb 2 u 3u IPv4 0x1 0t0 TCP 1.2.3.4:5->6.7.8.9:10 (ESTABLISHED)\n"
      )
    ).toEqual([])
  })
})

describe("macOS (test/fixtures/darwin: see each file's header for where it came from)", () => {
  it("lsof: every listener of a recorded output, IPv4 and IPv6, a command with an escaped space", () => {
    const listeners = parseLsofListen(fixture("darwin/lsof-listen.txt"))
    expect(listeners).toHaveLength(18)
    expect(listeners[0]).toEqual({ command: "rapportd", pid: 621, address: "*", port: 61119 })
    expect(listeners.filter((l) => l.pid === 18884).map((l) => l.port)).toEqual([16607, 49788, 49789])
    expect(listeners.find((l) => l.pid === 19097)).toEqual({
      command: "Code\\x20H",
      pid: 19097,
      address: "127.0.0.1",
      port: 52399
    })
    expect(new Set(listeners.filter((l) => l.pid === 67297).map((l) => l.port))).toEqual(new Set([5000, 7000]))
  })

  it("vm_stat: the page size and every count of a recorded output; available is free + inactive + speculative", () => {
    const text = fixture("darwin/vm_stat.txt")
    const parsed = parseVmStat(text)
    expect(parsed?.pageSize).toBe(16384)
    expect(parsed?.pages.get("Pages free")).toBe(10069)
    expect(parsed?.pages.get("Translation faults")).toBe(1935466161)
    expect(parsed?.pages.get("Tagged decompressions")).toBe(888026)
    expect(availableFromVmStat(text)).toBe((10069 + 426177 + 5899) * 16384)
    expect(availableFromVmStat("Pages free: 12.\n")).toBeUndefined()
    expect(availableFromVmStat("Mach Virtual Memory Statistics: (page size of 4096 bytes)\nPages free: 12.\n")).toBe(
      undefined
    )
  })

  it("sysctl hw.memsize: a recorded output with its name, and the bare number -n prints", () => {
    expect(parseMemsize(fixture("darwin/sysctl-hw-memsize.txt"))).toBe(17179869184)
    expect(parseMemsize("17179869184\n")).toBe(17179869184)
    expect(parseMemsize("sysctl: unknown oid 'hw.memsize'\n")).toBeUndefined()
    expect(parseMemsize("")).toBeUndefined()
  })

  it("ps: rows in the layout of BSD ps (constructed, not recorded: see the fixture), a zombie among them", () => {
    const rows = parsePsRows(fixture("darwin/ps-lstart.txt"))
    expect(rows.map((r) => r.pid)).toEqual([1, 387, 5120, 5121, 5133])
    expect(rows[0]).toEqual({
      pid: 1,
      ppid: 0,
      pgid: 1,
      stat: "Ss",
      startSeconds: Date.UTC(2026, 10, 30, 8, 1, 12) / 1000
    })
    expect(rows.filter((r) => r.pgid === 5120 && !psDefunct(r.stat)).map((r) => r.pid)).toEqual([5120, 5121])
  })
})
