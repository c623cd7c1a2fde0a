import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseLsofListen, parseLstart, parsePsRows, psDefunct } from "../../src/domain/psText.js"

const fixture = (name: string) => fs.readFileSync(path.join(import.meta.dirname, "../fixtures", name), "utf8")

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
