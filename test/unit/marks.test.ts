import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import {
  formatMark,
  groupsOfWorlds,
  type Mark,
  MARK_VARIABLE,
  type MarkedProcess,
  markIn,
  parseMark,
  strayGroups,
  worldsNamed
} from "../../src/domain/marks.js"

const HOME = "/home/u/.berth"

const mark = (life: string, world = 1, service = "api", home = HOME): Mark => ({ life, world, service, home })
const proc = (pid: number, pgid: number, m: Mark): MarkedProcess => ({ pid, pgid, mark: m })

describe("marks", () => {
  it("read back what they write, a home with spaces included", () => {
    const m = mark("a1b2c3", 12, "web-ui", "/tmp/my home/.berth")
    expect(parseMark(formatMark(m))).toEqual(m)
  })

  it("are found in a /proc environ text, and nothing else is taken for one", () => {
    const m = mark("ff00", 3, "worker")
    expect(markIn(`PATH=/bin\u0000${MARK_VARIABLE}=${formatMark(m)}\u0000HOME=/root\u0000`)).toEqual(m)
    expect(markIn(`PATH=/bin\u0000X${MARK_VARIABLE}=${formatMark(m)}\u0000`)).toBeUndefined()
    expect(markIn(`${MARK_VARIABLE}=not a mark\u0000`)).toBeUndefined()
    expect(markIn("")).toBeUndefined()
  })

  it("property: any mark survives a round trip", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.stringMatching(/^[0-9a-f]{1,12}$/),
        FastCheck.nat(),
        FastCheck.stringMatching(/^[a-z][a-z0-9_-]{0,20}$/),
        FastCheck.stringMatching(/^\/[\w ./-]{0,30}$/),
        (life, world, service, home) => {
          const m = mark(life, world, service, home)
          expect(parseMark(formatMark(m))).toEqual(m)
        }
      )
    )
  })
})

describe("strayGroups", () => {
  it("keeps a recorded group and the forks of its life that left it; stops an unrecorded life", () => {
    const marked = [
      proc(100, 100, mark("live")),
      proc(101, 100, mark("live")),
      // a fork of the recorded life that called setsid: a group of its own, still the watched service's
      proc(150, 150, mark("live")),
      // spawned just before the crash, never recorded
      proc(200, 200, mark("lost", 1, "worker")),
      proc(201, 200, mark("lost", 1, "worker"))
    ]
    expect(strayGroups(marked, HOME, new Set([100]))).toEqual([200])
  })

  it("never touches another home's processes", () => {
    expect(strayGroups([proc(300, 300, mark("x", 1, "api", "/other/home"))], HOME, new Set())).toEqual([])
  })

  it("keeps a group a held life shares with an unheld one", () => {
    const marked = [proc(100, 100, mark("live")), proc(400, 400, mark("live")), proc(401, 400, mark("old"))]
    expect(strayGroups(marked, HOME, new Set([100]))).toEqual([])
  })

  it("property: a recorded group is never stray, and every stray group holds only unrecorded lives", () => {
    const processes = FastCheck.array(
      FastCheck.record({
        pid: FastCheck.integer({ min: 2, max: 60 }),
        pgid: FastCheck.integer({ min: 2, max: 20 }),
        life: FastCheck.constantFrom("a", "b", "c", "d"),
        home: FastCheck.constantFrom(HOME, "/elsewhere")
      }),
      { maxLength: 30 }
    )
    FastCheck.assert(
      FastCheck.property(processes, FastCheck.uniqueArray(FastCheck.integer({ min: 2, max: 20 })), (ps, groups) => {
        const marked = ps.map((p) => proc(p.pid, p.pgid, mark(p.life, 1, "api", p.home)))
        const recorded = new Set(groups)
        const stray = strayGroups(marked, HOME, recorded)
        const heldLives = new Set(
          marked.filter((p) => p.mark.home === HOME && recorded.has(p.pgid)).map((p) => p.mark.life)
        )
        for (const g of stray) {
          expect(recorded.has(g)).toBe(false)
          const members = marked.filter((p) => p.pgid === g && p.mark.home === HOME)
          expect(members.length).toBeGreaterThan(0)
          for (const m of members) expect(heldLives.has(m.mark.life)).toBe(false)
        }
      })
    )
  })
})

describe("down without a daemon", () => {
  const mark = (world: number, home = "/h") => ({ life: "a", world, service: "web", home })
  it("stops the groups of the worlds named, of this home only", () => {
    const marked = [
      { pid: 10, pgid: 10, mark: mark(1) },
      { pid: 11, pgid: 10, mark: mark(1) },
      { pid: 20, pgid: 20, mark: mark(2) },
      { pid: 30, pgid: 30, mark: mark(1, "/other") }
    ]
    expect(groupsOfWorlds(marked, "/h", new Set([1]))).toEqual([10])
    expect(groupsOfWorlds(marked, "/h", new Set([1, 2]))).toEqual([10, 20])
  })

  it("names the world of the worktree, one of its project, or all of them", () => {
    const worlds = [
      { id: 1, project: 1, name: "main", slug: "main", path: "/r/app" },
      { id: 2, project: 1, name: "feat/x", slug: "feat-x", path: "/r/app/.worktrees/feat-x" },
      { id: 3, project: 2, name: "main", slug: "main", path: "/r/other" }
    ]
    const ids = (ask: { cwd: string; name?: string; all?: boolean }) =>
      worldsNamed(worlds, { cwd: ask.cwd, name: ask.name, all: ask.all ?? false }).map((w) => w.id)
    expect(ids({ cwd: "/r/app/src" })).toEqual([1])
    expect(ids({ cwd: "/r/app/.worktrees/feat-x/src" })).toEqual([2])
    expect(ids({ cwd: "/r/app", name: "feat-x" })).toEqual([2])
    expect(ids({ cwd: "/r/app", all: true })).toEqual([1, 2])
    expect(ids({ cwd: "/r/application" })).toEqual([])
  })
})
