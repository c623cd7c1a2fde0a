import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import {
  elsewhereReason,
  isDefunct,
  judgeListener,
  type ListenerFacts,
  leadingListeners,
  listeningInodes,
  listeningSockets,
  parseStat,
  socketInode,
  startedBefore
} from "../../src/domain/proc.js"

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

/** The header and rows of /proc/net/tcp as the kernel writes them (trailing blanks included). */
const TCP = [
  "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode      ",
  "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 6454 1 0000000000000000 100 0 0 10 0   ",
  "   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 6455 1 0000000000000000 100 0 0 10 0",
  // an established connection to the port, and one from it: not listeners
  "   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 7001 1 0000000000000000 20 4 30 10 -1",
  "   3: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 7002 1 0000000000000000 20 4 30 10 -1",
  // another port that ends in the same hex digits, and a listener whose inode the kernel does not show
  "   4: 0100007F:11F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7003 1 0000000000000000 100 0 0 10 0",
  "   5: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0",
  ""
].join("\n")

const TCP6 = [
  "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
  "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 9001 1 0000000000000000 100 0 0 10 0",
  "   1: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 9002 1 0000000000000000 100 0 0 10 0",
  ""
].join("\n")

describe("listeningSockets", () => {
  it("lists every LISTEN socket with its port, and agrees with listeningInodes", () => {
    const all = [...listeningSockets(TCP), ...listeningSockets(TCP6)]
    for (const port of [8080, 3000]) {
      expect(all.filter((s) => s.port === port).map((s) => s.inode)).toEqual([
        ...listeningInodes(TCP, port),
        ...listeningInodes(TCP6, port)
      ])
    }
    expect(all.every((s) => s.inode !== "0")).toBe(true)
    expect(listeningSockets("")).toEqual([])
  })
})

describe("leadingListeners", () => {
  // as the kernel writes it: every listener, then the connections
  const table = [
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode      ",
    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 6454 1 0000000000000000 100 0 0 10 0   ",
    "   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 6455 1 0000000000000000 100 0 0 10 0",
    "   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 7001 1 0000000000000000 20 4 30 10 -1",
    ""
  ].join("\n")

  it("reads the listeners of a start of the table, and tells when a connection ended them", () => {
    expect(leadingListeners(table)).toEqual({
      sockets: [
        { inode: "6454", port: 8080 },
        { inode: "6455", port: 3000 }
      ],
      complete: true
    })
  })

  it("reads only whole lines: a line cut off by the read is not taken, nor taken for the end", () => {
    const cut = table.slice(0, table.indexOf("0A 00000000", table.indexOf("   1:")))
    expect(leadingListeners(cut)).toEqual({ sockets: [{ inode: "6454", port: 8080 }], complete: false })
    const beforeConnection = table.slice(0, table.indexOf("   2:") + 20)
    expect(leadingListeners(beforeConnection).complete).toBe(false)
    expect(leadingListeners(beforeConnection).sockets).toHaveLength(2)
    expect(leadingListeners("")).toEqual({ sockets: [], complete: false })
  })

  it("agrees with listeningSockets on a whole table of listeners", () => {
    const listenersOnly = table.split("\n").slice(0, 3).join("\n")
    expect(leadingListeners(`${listenersOnly}\n`)).toEqual({
      sockets: listeningSockets(listenersOnly),
      complete: false
    })
  })
})

describe("elsewhereReason", () => {
  it("says where a service listens when it is not its port, and nothing otherwise", () => {
    expect(elsewhereReason(4123, [5173, 5173])).toBe(
      "it is listening on 5173, expected 4123: does its command ignore PORT? pass ${self.port} to it"
    )
    expect(elsewhereReason(4123, [9229, 5173])).toMatch(/^it is listening on 5173, 9229, expected 4123/)
    expect(elsewhereReason(4123, [4123, 9229])).toBeUndefined()
    expect(elsewhereReason(4123, [])).toBeUndefined()
  })
})

describe("listeningInodes", () => {
  it("finds the LISTEN sockets of one port in /proc/net/tcp and tcp6, nothing else", () => {
    expect(listeningInodes(TCP, 8080)).toEqual(["6454", "6455"])
    expect(listeningInodes(TCP6, 8080)).toEqual(["9001"])
    expect(listeningInodes(TCP6, 3000)).toEqual(["9002"])
    expect(listeningInodes(TCP, 54321)).toEqual([])
    // inode 0: a socket the kernel shows no inode for cannot be matched to a process
    expect(listeningInodes(TCP, 80)).toEqual([])
  })

  it("ignores text that is not a table", () => {
    expect(listeningInodes("", 8080)).toEqual([])
    expect(listeningInodes("garbage\n1: x y z\n", 8080)).toEqual([])
  })

  it.runIf(process.platform === "linux")("reads this machine's table", () => {
    expect(Array.isArray(listeningInodes(fs.readFileSync("/proc/net/tcp", "utf8"), 1))).toBe(true)
  })
})

describe("socketInode", () => {
  it("reads the inode of a socket fd's link, nothing of other links", () => {
    expect(socketInode("socket:[123456]")).toBe("123456")
    expect(socketInode("pipe:[123456]")).toBeUndefined()
    expect(socketInode("/tmp/socket:[1]")).toBeUndefined()
    expect(socketInode("anon_inode:[eventpoll]")).toBeUndefined()
  })
})

describe("judgeListener", () => {
  const facts = (overrides: Partial<ListenerFacts>): ListenerFacts => ({
    listening: ["6454"],
    groupSockets: ["6454"],
    groupUnreadable: false,
    holder: undefined,
    serviceStartTime: "5000",
    ...overrides
  })

  it("is ours when a process of the group holds one of the listening sockets", () => {
    expect(judgeListener(facts({}))).toEqual({ _tag: "Ours" })
    expect(judgeListener(facts({ listening: ["1", "6454"], groupSockets: ["9", "6454"] }))).toEqual({ _tag: "Ours" })
    // one member we may not read does not matter when another holds it
    expect(judgeListener(facts({ groupUnreadable: true }))).toEqual({ _tag: "Ours" })
  })

  it("is foreign when a process older than the service holds it", () => {
    const holder = { pid: 77, startTime: "4999", command: "node other.js" }
    expect(judgeListener(facts({ groupSockets: [], holder }))).toEqual({ _tag: "Foreign", holder })
  })

  it("cannot tell when the tables were unreadable, nothing listens, or the holder is unseen or younger", () => {
    expect(judgeListener(facts({ listening: undefined }))).toEqual({ _tag: "Unknown" })
    // a NAT rule or another network namespace answers: no listener to find
    expect(judgeListener(facts({ listening: [] }))).toEqual({ _tag: "Unknown" })
    // a member's fds could not be read (a setuid program in the group): it may be the holder
    const older = { pid: 76, startTime: "4000", command: "sudo thing" }
    expect(judgeListener(facts({ groupSockets: [], groupUnreadable: true, holder: older }))).toEqual({
      _tag: "Unknown"
    })
    // root's docker-proxy: nobody we can read holds it
    expect(judgeListener(facts({ groupSockets: [] }))).toEqual({ _tag: "Unknown" })
    // started after the service: a helper it daemonized (left the group) may hold it
    const younger = { pid: 78, startTime: "5001", command: "rootlessport" }
    expect(judgeListener(facts({ groupSockets: [], holder: younger }))).toEqual({ _tag: "Unknown" })
  })

  it("compares start times as integers, however long", () => {
    const holder = { pid: 1, startTime: "99999999999999999998", command: "x" }
    const verdict = judgeListener(facts({ groupSockets: [], holder, serviceStartTime: "99999999999999999999" }))
    expect(verdict._tag).toBe("Foreign")
    expect(startedBefore("9", "10")).toBe(true)
    expect(startedBefore("10", "9")).toBe(false)
    expect(startedBefore("10", "10")).toBe(false)
    expect(startedBefore("x", "10")).toBe(false)
  })
})
