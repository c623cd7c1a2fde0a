import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { forgetPlan, GOLDENS_KEPT, type GcRow, gcInFlightKey, gcPlan } from "../../src/domain/gc.js"

const row = (over: Partial<GcRow> & Pick<GcRow, "id" | "name">): GcRow => ({
  worldId: 1,
  project: "shop",
  service: "db",
  server: "pg",
  golden: false,
  spare: false,
  key: null,
  state: "ready",
  usedAt: 0,
  ...over
})

describe("gcPlan", () => {
  it("drops slices whose world is gone and half-provisioned ones, keeps ready ones of live worlds", () => {
    const plan = gcPlan({
      rows: [
        row({ id: 1, name: "live" }),
        row({ id: 2, name: "orphan", worldId: null }),
        row({ id: 3, name: "half", state: "provisioning" })
      ],
      listings: [],
      inFlight: new Set()
    })
    expect(plan.map((a) => [a.name, a.reason, a.rowId])).toEqual([
      ["orphan", "world gone", 2],
      ["half", "half-provisioned", 3]
    ])
  })

  it("never touches a slice being made right now", () => {
    const plan = gcPlan({
      rows: [row({ id: 3, name: "half", state: "provisioning" })],
      listings: [{ server: "pg", names: ["half", "making"] }],
      inFlight: new Set([gcInFlightKey("pg", "half"), gcInFlightKey("pg", "making")])
    })
    expect(plan).toEqual([])
  })

  it("drops what a server lists as ours but no registry row names", () => {
    const plan = gcPlan({
      rows: [row({ id: 1, name: "a" }), row({ id: 2, name: "b", server: "other" })],
      listings: [
        { server: "pg", names: ["a", "b", "c"] },
        { server: "other", names: ["b"] }
      ],
      inFlight: new Set()
    })
    // `b` is recorded on another server key (an admin URL written another way, say): named, so never an orphan
    expect(plan.map((a) => [a.server, a.name, a.reason])).toEqual([["pg", "c", "unrecorded"]])
  })

  it("names a slice whose service left berth.toml for what it is", () => {
    const plan = gcPlan({
      rows: [row({ id: 4, name: "old_db", worldId: null, detached: true })],
      listings: [{ server: "pg", names: ["old_db"] }],
      inFlight: new Set()
    })
    expect(plan.map((a) => [a.name, a.reason])).toEqual([["old_db", "no longer in berth.toml"]])
  })

  it("never drops a slice of a world that still exists, recorded or not", () => {
    const plan = gcPlan({
      rows: [],
      listings: [{ server: "pg", names: ["lit_w2_db", "lit_gone_db"] }],
      inFlight: new Set(),
      livePrefixes: ["lit_w2_"]
    })
    expect(plan.map((a) => a.name)).toEqual(["lit_gone_db"])
  })

  it(`keeps the ${GOLDENS_KEPT} most recently used goldens of a service on a server`, () => {
    const goldens = [1, 2, 3, 4, 5].map((i) =>
      row({ id: i, name: `g${i}`, golden: true, worldId: null, usedAt: i * 10 })
    )
    const plan = gcPlan({ rows: goldens, listings: [], inFlight: new Set() })
    expect(plan.map((a) => [a.name, a.reason])).toEqual([
      ["g2", "superseded golden"],
      ["g1", "superseded golden"]
    ])
  })

  it("keeps one ready spare per golden that is kept, and drops spares whose golden is gone", () => {
    const golden = row({ id: 1, name: "g", golden: true, worldId: null, key: "k1" })
    const spare = (id: number, key: string) => row({ id, name: `s${id}`, spare: true, worldId: null, key })
    const plan = gcPlan({
      rows: [golden, spare(2, "k1"), spare(3, "k1"), spare(4, "k0")],
      listings: [],
      inFlight: new Set()
    })
    expect(plan.map((a) => [a.name, a.reason])).toEqual([
      ["s3", "orphan spare"],
      ["s4", "orphan spare"]
    ])
  })

  it("only ever proposes recorded rows or listed names, each at most once", () => {
    const name = FastCheck.constantFrom("a", "b", "c", "d")
    const arbRow = FastCheck.record({
      id: FastCheck.integer({ min: 1, max: 50 }),
      name,
      worldId: FastCheck.option(FastCheck.constant(1), { nil: null }),
      golden: FastCheck.boolean(),
      state: FastCheck.constantFrom("provisioning" as const, "ready" as const),
      usedAt: FastCheck.nat(100)
    })
    FastCheck.assert(
      FastCheck.property(
        FastCheck.uniqueArray(arbRow, { selector: (r) => r.id, maxLength: 8 }),
        FastCheck.array(name, { maxLength: 4 }),
        FastCheck.array(name, { maxLength: 2 }),
        (rows, listed, busy) => {
          const full = rows.map((r) => row(r))
          const plan = gcPlan({
            rows: full,
            listings: [{ server: "pg", names: listed }],
            inFlight: new Set(busy.map((n) => gcInFlightKey("pg", n)))
          })
          const recorded = new Set(full.map((r) => r.name))
          for (const a of plan) {
            if (busy.includes(a.name)) return false
            if (
              a.rowId === undefined
                ? !listed.includes(a.name) || recorded.has(a.name)
                : !full.some((r) => r.id === a.rowId)
            )
              return false
          }
          const ids = plan.flatMap((a) => (a.rowId === undefined ? [] : [a.rowId]))
          return new Set(ids).size === ids.length
        }
      )
    )
  })
})

describe("forgetPlan", () => {
  it("forgets unfinished rows of gone worlds and servers no row is on, only where nothing serves the adapter", () => {
    const plan = forgetPlan({
      rows: [
        row({ id: 1, name: "gone-unfinished", worldId: null, state: "provisioning", server: "typo" }),
        row({ id: 2, name: "live", state: "provisioning", server: "typo2" }),
        row({ id: 3, name: "gone-ready", worldId: null, server: "typo3" }),
        row({ id: 4, name: "known", worldId: null, state: "provisioning", server: "pg" })
      ],
      unknown: new Set(["typo", "typo2", "typo3", "empty"]),
      servers: ["typo", "typo2", "typo3", "empty", "pg", "empty"]
    })
    expect(plan.rows.map((r) => r.id)).toEqual([1])
    // a live world's row, or one that may hold data, keeps its server known (gc keeps saying it cannot reach it)
    expect(plan.servers).toEqual(["typo", "empty"])
  })
})

describe("gcPlan: goldens of a project with no world", () => {
  const rows = [
    row({ id: 1, name: "golden_shop", worldId: null, golden: true, key: "k", usedAt: 100 }),
    row({ id: 2, name: "spare_shop", worldId: null, spare: true, key: "k", usedAt: 100 }),
    row({ id: 3, name: "golden_blog", project: "blog", worldId: null, golden: true, key: "k", usedAt: 100 })
  ]
  const idle = (over: Partial<Parameters<typeof gcPlan>[0]["idle"] & object>) => ({
    projectsWithWorlds: new Set(["blog"]),
    idleSince: new Map<string, number>(),
    now: 1_000,
    graceMs: 500,
    force: false,
    ...over
  })
  const dropped = (i: ReturnType<typeof idle>) =>
    gcPlan({ rows, listings: [], inFlight: new Set(), idle: i }).map((a) => [a.name, a.reason])

  it("waits for the grace from when gc first found the project without a world", () => {
    // first found so now: nothing yet
    expect(dropped(idle({}))).toEqual([])
    expect(dropped(idle({ idleSince: new Map([["shop", 600]]) }))).toEqual([])
    expect(dropped(idle({ idleSince: new Map([["shop", 400]]) }))).toEqual([
      ["golden_shop", "no world of the project"],
      ["spare_shop", "no world of the project"]
    ])
  })

  it("counts from the golden's last use when that is later, and never drops a project's with a world", () => {
    expect(dropped(idle({ idleSince: new Map([["shop", 0]]), now: 550 }))).toEqual([])
    expect(dropped(idle({ force: true, idleSince: new Map([["blog", 0]]) })).map(([name]) => name)).toEqual([
      "golden_shop",
      "spare_shop"
    ])
  })
})
