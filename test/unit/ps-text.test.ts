import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  availableFromVmStat,
  parseLsofListen,
  parseLstart,
  parseMemsize,
  parsePortRange,
  parsePsCost,
  parsePsEnvironRows,
  parsePsRows,
  parsePsTime,
  parseVmStat,
  psDefunct,
  psEnvironValue
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
      { command: "python3", pid: 23656, socket: "599097", address: "127.0.0.1", port: 35811 },
      { command: "python3", pid: 23657, socket: "599093", address: "[::1]", port: 43191 }
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

describe("environments from ps eww", () => {
  it("reads a recorded Linux table: each variable's value, a value with spaces, a zombie's row", () => {
    const rows = parsePsEnvironRows(fixture("linux/ps-environ.txt"))
    expect(rows.map((r) => r.pid)).toEqual([14967, 14974, 15254, 15255, 15261, 15262])
    const leader = rows.find((r) => r.pid === 15254)
    expect(leader).toMatchObject({ pgid: 15254, stat: "Ss" })
    expect(psEnvironValue(leader?.text ?? "", "BERTH_MARK")).toBe("k3x9 7 web /home/ada/My Projects/.berth")
    expect(psEnvironValue(leader?.text ?? "", "BERTH_PROJECT")).toBe("shop")
    expect(psEnvironValue(leader?.text ?? "", "BERTH_WORLD")).toBe("feature-x")
    expect(psEnvironValue(leader?.text ?? "", "BERTH_ONESHOT")).toBeUndefined()
    expect(psEnvironValue(rows.find((r) => r.pid === 15261)?.text ?? "", "BERTH_ONESHOT")).toBe("7f3a")
    expect(psDefunct(rows.find((r) => r.pid === 15255)?.stat ?? "")).toBe(true)
  })

  it("takes the environment's value over the arguments' mention, and no longer name ending in it", () => {
    expect(psEnvironValue("env BERTH_MARK=x sh BERTH_MARK=a 1 b /h PATH=/bin", "BERTH_MARK")).toBe("a 1 b /h")
    expect(psEnvironValue("sh NOT_BERTH_MARK=a", "BERTH_MARK")).toBeUndefined()
    expect(psEnvironValue("BERTH_MARK=last", "BERTH_MARK")).toBe("last")
    expect(psEnvironValue("sh X=1", "BAD NAME")).toBeUndefined()
  })
})

describe("cost from ps -o time=,rss=", () => {
  it("reads procps's [DD-]HH:MM:SS and macOS's MM:SS.cc", () => {
    expect(parsePsTime("00:04:18")).toBe(258_000)
    expect(parsePsTime("2-01:00:05")).toBe((49 * 3600 + 5) * 1000)
    expect(parsePsTime("123:45.67")).toBe((123 * 60 + 45.67) * 1000)
    expect(parsePsTime("0:00.52")).toBe(520)
    expect(parsePsTime("")).toBeUndefined()
    expect(parsePsTime("1:2:3:4")).toBeUndefined()
  })

  it("reads a recorded Linux table", () => {
    expect(parsePsCost(fixture("linux/ps-cost.txt"))).toEqual([
      { pid: 1, pgid: 0, cpuMs: 39_000, rssBytes: 13412 * 1024 },
      { pid: 83, pgid: 0, cpuMs: 258_000, rssBytes: 0 },
      { pid: 2230, pgid: 2230, cpuMs: 0, rssBytes: 29784 * 1024 },
      { pid: 2250, pgid: 2250, cpuMs: 4_000, rssBytes: 7288 * 1024 },
      { pid: 15254, pgid: 15254, cpuMs: 0, rssBytes: 1480 * 1024 },
      { pid: 15261, pgid: 15261, cpuMs: 0, rssBytes: 1508 * 1024 }
    ])
  })
})

describe("the local port range from sysctl", () => {
  it("reads Linux's recorded range and refuses what is not one", () => {
    expect(parsePortRange(fixture("linux/sysctl-port-range.txt"))).toEqual({ from: 32768, to: 60999 })
    expect(parsePortRange("60999 32768")).toBeUndefined()
    expect(parsePortRange("32768")).toBeUndefined()
    expect(parsePortRange("sysctl: cannot stat /proc/sys/net/ipv4/ip_local_port_range")).toBeUndefined()
  })
})

describe("macOS (test/fixtures/darwin: see each file's header for where it came from)", () => {
  it("lsof: every listener of a recorded output, IPv4 and IPv6, a command with an escaped space", () => {
    const listeners = parseLsofListen(fixture("darwin/lsof-listen.txt"))
    expect(listeners).toHaveLength(18)
    expect(listeners[0]).toEqual({
      command: "rapportd",
      pid: 621,
      socket: "0xf234b11f7adef2b",
      address: "*",
      port: 61119
    })
    expect(listeners.filter((l) => l.pid === 18884).map((l) => l.port)).toEqual([16607, 49788, 49789])
    // lsof's `\x20` is a space in the name
    expect(listeners.find((l) => l.pid === 19097)).toEqual({
      command: "Code H",
      pid: 19097,
      socket: "0x1adc25a246ee8fb3",
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

  it("ps fields as Macs printed them (recorded values: see the fixture) read as the constructed rows assume", () => {
    const fields = fixture("darwin/ps-fields.txt")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => line.split("\t"))
    const values = (column: string) => fields.filter((f) => f[0] === column).map((f) => f[1] ?? "")
    expect(values("lstart").map(parseLstart)).toEqual([Date.UTC(2026, 7, 21, 16, 12, 33) / 1000])
    expect(values("time").map(parsePsTime)).toEqual([23_190, 9_820, 3_444_250, 8_357_710])
    // the columns of berth's `ps -o pid=,pgid=,time=,rss=`, with each recorded time and rss in turn
    const rss = values("rss")
    expect(
      parsePsCost(
        values("time")
          .map((time, i) => `${i + 1} 1 ${time} ${rss[i % rss.length]}`)
          .join("\n")
      )
    ).toEqual([
      { pid: 1, pgid: 1, cpuMs: 23_190, rssBytes: 91276 * 1024 },
      { pid: 2, pgid: 1, cpuMs: 9_820, rssBytes: 15788 * 1024 },
      { pid: 3, pgid: 1, cpuMs: 3_444_250, rssBytes: 91276 * 1024 },
      { pid: 4, pgid: 1, cpuMs: 8_357_710, rssBytes: 15788 * 1024 }
    ])
    // and of `ps -o pid=,ppid=,pgid=,stat=,lstart=`, with each recorded state
    const lstart = values("lstart")[0] ?? ""
    const rows = parsePsRows(
      values("stat")
        .map((stat, i) => `${i + 10} 1 ${i + 10} ${stat} ${lstart}`)
        .join("\n")
    )
    expect(rows.map((r) => [r.stat, psDefunct(r.stat)])).toEqual([
      ["Ss", false],
      ["Us", false]
    ])
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

  it("sysctl port range: a recorded output with the names, and the bare numbers -n prints", () => {
    expect(parsePortRange(fixture("darwin/sysctl-portrange.txt"))).toEqual({ from: 49152, to: 65535 })
    expect(parsePortRange("49152\n65535\n")).toEqual({ from: 49152, to: 65535 })
  })

  it("ps time and rss: rows in the layout of BSD ps (constructed, not recorded: see the fixture)", () => {
    expect(parsePsCost(fixture("darwin/ps-cost.txt"))).toEqual([
      { pid: 1, pgid: 1, cpuMs: 723_410, rssBytes: 14336 * 1024 },
      { pid: 387, pgid: 387, cpuMs: 520, rssBytes: 6208 * 1024 },
      { pid: 5120, pgid: 5120, cpuMs: 7_425_670, rssBytes: 412800 * 1024 },
      { pid: 5121, pgid: 5120, cpuMs: 0, rssBytes: 1024 * 1024 }
    ])
  })

  it("ps eww: rows in the layout of BSD ps (constructed, not recorded: see the fixture)", () => {
    const rows = parsePsEnvironRows(fixture("darwin/ps-environ.txt"))
    expect(rows.map((r) => r.pid)).toEqual([1, 5120, 5121, 5133, 6001])
    const mark = (pid: number) => psEnvironValue(rows.find((r) => r.pid === pid)?.text ?? "", "BERTH_MARK")
    expect(mark(5120)).toBe("k3x9 7 web /Users/ada/My Projects/.berth")
    expect(mark(5121)).toBe("k3x9 7 web /Users/ada/My Projects/.berth")
    expect(mark(1)).toBeUndefined()
    expect(psEnvironValue(rows.find((r) => r.pid === 6001)?.text ?? "", "BERTH_ONESHOT")).toBe("7f3a")
    expect(psDefunct(rows.find((r) => r.pid === 5133)?.stat ?? "")).toBe(true)
  })
})
