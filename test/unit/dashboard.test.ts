import { describe, expect, it } from "@effect/vitest"
import {
  applyMessage,
  diffWorlds,
  emptyModel,
  formatBytes,
  machineLine,
  type MachineView,
  matchesFilter,
  parseUsage,
  reselect,
  rowKey,
  rowsOf,
  sampleUsage,
  usageBetween,
  type WatchedWorldView
} from "../../src/domain/dashboard.js"

const world = (
  id: number,
  name: string,
  state = "running",
  extra: Partial<WatchedWorldView["status"]> = {}
): WatchedWorldView => ({
  id,
  mainRoot: "/repo",
  selection: { services: [], groups: [] },
  status: {
    project: "app",
    name,
    path: `/repo/${name}`,
    main: name === "main",
    desired: "up",
    state,
    reason: null,
    services: [
      {
        name: "web",
        kind: "process",
        state: "healthy",
        pid: 10 + id,
        port: 4000 + id,
        url: null,
        restarts: 0,
        reason: null
      }
    ],
    events: [],
    ...extra
  }
})

const keyed = (ws: ReadonlyArray<WatchedWorldView>) => ws.map((w) => ({ text: JSON.stringify(w), world: w }))

const machine: MachineView = {
  memTotalBytes: 8 * 1024 ** 3,
  memAvailableBytes: 4 * 1024 ** 3,
  memAvailablePercent: 50,
  disks: [{ path: "/home", freeBytes: 20 * 1024 ** 3 }],
  running: 2,
  reserves: { maxParallel: 20, ramPercent: 10, diskBytes: 2 * 1024 ** 3, resumeFactor: 1.5, recovering: false }
}

describe("the state stream's diff", () => {
  it("sends a changed world whole, a gone world by id, nothing for an unchanged one", () => {
    const before = new Map(keyed([world(1, "one"), world(2, "two"), world(3, "three")]).map((r) => [r.world.id, r]))
    const after = keyed([world(1, "one"), world(2, "two", "stopped"), world(4, "four")])
    const out = diffWorlds(before, after)
    expect(
      out.map((m) =>
        m._tag === "WorldGone"
          ? `gone ${m.id}`
          : m._tag === "WorldChanged"
            ? `${m.world.status.name} ${m.world.status.state}`
            : m._tag
      )
    ).toEqual(["two stopped", "four running", "gone 3"])
  })

  it("tells each new event once, oldest first; a new world's history is not news", () => {
    const e = (at: number, kind: string) => ({ service: null, kind, message: kind, at })
    const before = new Map(keyed([world(1, "one", "running", { events: [e(1, "a")] })]).map((r) => [r.world.id, r]))
    // events come newest first in a status
    const after = keyed([
      world(1, "one", "running", { events: [e(3, "c"), e(2, "b"), e(1, "a")] }),
      world(2, "two", "running", { events: [e(1, "x")] })
    ])
    const events = diffWorlds(before, after).filter((m) => m._tag === "EventAdded")
    expect(events.map((m) => (m._tag === "EventAdded" ? `${m.world} ${m.event.kind}` : ""))).toEqual(["one b", "one c"])
  })
})

describe("a world's CPU and memory", () => {
  const stat = (pid: number, comm: string, pgrp: number, utime: number, stime: number, rss: number) =>
    `${pid} (${comm}) S 1 ${pgrp} ${pgrp} 0 -1 4194560 100 0 0 0 ${utime} ${stime} 0 0 20 0 1 0 12345 1000000 ${rss} 18446744073709551615`

  it("reads pid, group, ticks and pages from /proc/<pid>/stat, even with a comm holding ') ('", () => {
    expect(parseUsage(stat(42, "we) (ird", 40, 150, 50, 300))).toEqual({ pid: 42, pgrp: 40, ticks: 200, rssPages: 300 })
    expect(parseUsage("garbage")).toBeUndefined()
    expect(parseUsage("1 (x) S 1")).toBeUndefined()
  })

  it("sums the processes of each world's groups and turns two samples into percent of a core", () => {
    const groups = new Map([
      [100, 1],
      [200, 1],
      [300, 2]
    ])
    const procs = (t: number) =>
      [
        stat(100, "sh", 100, t, 0, 100),
        stat(101, "node", 100, t, t, 200),
        stat(200, "sh", 200, 0, 0, 50),
        stat(300, "node", 300, 2 * t, 0, 10),
        stat(999, "other", 999, 5000, 0, 9999)
      ].map((s) => parseUsage(s)!)
    const first = sampleUsage(1_000, procs(100), groups)
    expect(first.worlds.get(1)).toEqual({ ticks: 300, rssPages: 350, processes: 3 })
    expect(usageBetween(undefined, first)[0]!.cpuPercent).toBeNull()
    // two seconds later: world 1 used 150 more ticks (0.75 s a second), world 2 100 more (0.5 s a second)
    const second = sampleUsage(3_000, procs(150), groups)
    const usage = usageBetween(first, second, 100, 4096)
    expect(usage).toEqual([
      { worldId: 1, cpuPercent: 75, rssBytes: 350 * 4096, processes: 3 },
      { worldId: 2, cpuPercent: 50, rssBytes: 10 * 4096, processes: 1 }
    ])
    // a process replaced by a newer one (fewer ticks than before) never gives a negative share
    expect(usageBetween(second, sampleUsage(5_000, procs(10), groups))[0]!.cpuPercent).toBe(0)
  })
})

describe("the dashboard's view model", () => {
  const snapshot = {
    _tag: "Snapshot" as const,
    worlds: [
      world(2, "zeta"),
      world(1, "main"),
      { ...world(3, "alpha"), status: { ...world(3, "alpha").status, project: "another" } }
    ],
    line: [],
    machine,
    usage: [{ worldId: 1, cpuPercent: 3, rssBytes: 1024, processes: 1 }],
    dashboard: "http://berth.localhost:7355/",
    at: 0
  }

  it("folds a snapshot and the changes after it: sorted by project, main first, then by name", () => {
    let model = applyMessage(emptyModel(), snapshot)
    expect(model.ready).toBe(true)
    expect(model.worlds.map((w) => w.status.name)).toEqual(["alpha", "main", "zeta"])
    model = applyMessage(model, { _tag: "WorldChanged", world: world(2, "zeta", "stopped") })
    expect(model.worlds.find((w) => w.id === 2)?.status.state).toBe("stopped")
    model = applyMessage(model, { _tag: "WorldChanged", world: world(4, "beta") })
    expect(model.worlds.map((w) => w.status.name)).toEqual(["alpha", "main", "beta", "zeta"])
    model = applyMessage(model, { _tag: "WorldGone", id: 1 })
    expect(model.worlds.map((w) => w.status.name)).toEqual(["alpha", "beta", "zeta"])
    expect(model.usage.has(1)).toBe(false)
    model = applyMessage(model, {
      _tag: "Readings",
      machine,
      usage: [{ worldId: 2, cpuPercent: 50, rssBytes: 1, processes: 1 }]
    })
    expect(model.usage.get(2)?.cpuPercent).toBe(50)
    model = applyMessage(model, {
      _tag: "EventAdded",
      worldId: 2,
      world: "zeta",
      event: { service: null, kind: "k", message: "m", at: 5 }
    })
    expect(model.events.at(-1)?.world).toBe("zeta")
    model = applyMessage(model, {
      _tag: "LineChanged",
      line: [{ worldId: 2, project: "app", world: "zeta", position: 1, waitingFor: "memory" }]
    })
    expect(model.line).toHaveLength(1)
  })

  it("filters on project, name, state and service names; every word must match", () => {
    expect(matchesFilter(world(1, "login-fix"), "login")).toBe(true)
    expect(matchesFilter(world(1, "login-fix"), "APP web")).toBe(true)
    expect(matchesFilter(world(1, "login-fix"), "login stopped")).toBe(false)
    expect(matchesFilter(world(1, "login-fix"), "  ")).toBe(true)
  })

  it("lists a row per world and per service, and keeps the selection on the same row as rows move", () => {
    const model = applyMessage(emptyModel(), snapshot)
    const rows = rowsOf(model, "")
    expect(rows.map(rowKey)).toEqual(["3/", "3/web", "1/", "1/web", "2/", "2/web"])
    expect(rowsOf(model, "zeta").map(rowKey)).toEqual(["2/", "2/web"])
    const fewer = rowsOf(applyMessage(model, { _tag: "WorldGone", id: 3 }), "")
    expect(reselect(fewer, "1/web", 3)).toBe(1)
    // the selected row went away: the nearest one
    expect(reselect(fewer, "3/web", 5)).toBe(3)
    expect(reselect([], "x", 2)).toBe(0)
  })

  it("says the machine's readings against the reserves", () => {
    expect(formatBytes(1536)).toBe("1.5 KiB")
    expect(formatBytes(200 * 1024 ** 2)).toBe("200 MiB")
    expect(machineLine(machine)).toBe(
      "2/20 running · memory 50% free (reserve 10%) · disk 20.0 GiB free on /home (reserve 2.0 GiB)"
    )
    expect(machineLine({ ...machine, reserves: { ...machine.reserves, recovering: true } })).toContain("back at 15%")
  })
})
