import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import {
  ANYWHERE_GROUP,
  addressProblem,
  anywhereEntityId,
  anywhereIds,
  ensureStep,
  parseAnywhereEntityId,
  allGroups,
  clusterUrlProblem,
  freeSlot,
  groupOfSlot,
  MAX_MACHINES,
  machineNameProblem,
  machineState,
  parseWorldEntityId,
  remoteTargets,
  remoteWorldId,
  shardGroupOf,
  timings,
  worldEntityId
} from "../../src/domain/cluster.js"

const label = FastCheck.stringMatching(/^[a-z0-9][a-z0-9-]{0,20}$/)

describe("cluster ids and groups", () => {
  it("a world's entity id names its slot, project and slug, and back", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.integer({ min: 1, max: MAX_MACHINES }), label, label, (slot, project, slug) => {
        const id = worldEntityId(slot, project, slug)
        expect(parseWorldEntityId(id)).toEqual({ slot, project, slug })
        // only that machine's runner is assigned the group its worlds live in
        expect(shardGroupOf(id)).toBe(groupOfSlot(slot))
      }),
      { numRuns: 300 }
    )
  })

  it("anything else is no world's id, and lands in the shared group", () => {
    for (const id of ["", "7", "0/shop/a", `${MAX_MACHINES + 1}/shop/a`, "1/shop", "1/shop/a/b", "x/shop/a"]) {
      expect(parseWorldEntityId(id)).toBeUndefined()
      expect(shardGroupOf(id)).toBe(ANYWHERE_GROUP)
    }
  })

  it("every runner lists the same groups: the shared one, then one per slot", () => {
    expect(allGroups).toHaveLength(MAX_MACHINES + 1)
    expect(allGroups[0]).toBe(ANYWHERE_GROUP)
    expect(new Set(allGroups).size).toBe(allGroups.length)
  })

  it("a new machine takes the lowest free slot, none when all are taken", () => {
    expect(freeSlot([])).toBe(1)
    expect(freeSlot([1, 2, 4])).toBe(3)
    expect(freeSlot(Array.from({ length: MAX_MACHINES }, (_, i) => i + 1))).toBeUndefined()
  })

  it("a watcher's id for another machine's world is negative and stable, and tells worlds apart", () => {
    FastCheck.assert(
      FastCheck.property(label, label, label, (machine, project, slug) => {
        const id = remoteWorldId(machine, project, slug)
        expect(id).toBeLessThan(0)
        expect(Number.isSafeInteger(id)).toBe(true)
        expect(remoteWorldId(machine, project, slug)).toBe(id)
      }),
      { numRuns: 300 }
    )
    expect(remoteWorldId("h1", "shop", "a")).not.toBe(remoteWorldId("h2", "shop", "a"))
  })
})

describe("cluster settings", () => {
  it("checks a machine's name, the database's address and the machine's address", () => {
    expect(machineNameProblem("h1")).toBeUndefined()
    expect(machineNameProblem("build-box-2")).toBeUndefined()
    for (const bad of ["", "-a", "a-", "A", "a_b", "a.b", "x".repeat(64)]) expect(machineNameProblem(bad)).toBeDefined()
    expect(clusterUrlProblem("postgres://berth@db/berth")).toBeUndefined()
    expect(clusterUrlProblem("postgresql:///berth?host=/var/run/postgresql")).toBeUndefined()
    expect(clusterUrlProblem("mysql://db/berth")).toContain("PostgreSQL")
    expect(addressProblem("10.77.0.2")).toBeUndefined()
    expect(addressProblem("fd00::2")).toBeUndefined()
    expect(addressProblem("127.0.0.1")).toContain("not reachable from another machine")
    expect(addressProblem("::1")).toContain("not reachable")
    expect(addressProblem("300.1.1.1")).toContain("not an IPv4 address")
    expect(addressProblem("db.local")).toContain("not an IP address")
  })

  it("a machine is unreachable once its heartbeat is older than its locks last", () => {
    expect(machineState(0)).toBe("up")
    expect(machineState(timings.lockExpirationMs)).toBe("up")
    expect(machineState(timings.lockExpirationMs + 1)).toBe("unreachable")
  })
})

describe("worlds that run anywhere", () => {
  it("have entity ids in the group every machine takes, never taken for a pinned world's", () => {
    const id = anywhereEntityId("shop", "feat-a")
    expect(parseAnywhereEntityId(id)).toEqual({ project: "shop", slug: "feat-a" })
    expect(parseWorldEntityId(id)).toBeUndefined()
    expect(shardGroupOf(id)).toBe(ANYWHERE_GROUP)
    expect(parseAnywhereEntityId(worldEntityId(2, "shop", "feat-a"))).toBeUndefined()
  })

  it("property: an anywhere id reads back, and is in the shared group", () => {
    FastCheck.assert(
      FastCheck.property(label, label, (project, slug) => {
        const id = anywhereEntityId(project, slug)
        expect(parseAnywhereEntityId(id)).toEqual({ project, slug })
        expect(shardGroupOf(id)).toBe(ANYWHERE_GROUP)
      })
    )
  })

  it("are started, stopped, removed or only reported, as the shared table wants", () => {
    expect(ensureStep({ desired: undefined, started: true, asked: false })).toBe("remove")
    expect(ensureStep({ desired: "removed", started: false, asked: true })).toBe("remove")
    expect(ensureStep({ desired: "down", started: true, asked: false })).toBe("stop")
    expect(ensureStep({ desired: "up", started: false, asked: false })).toBe("start")
    // the reconciler's round leaves a started world alone (a failed one waits for its user, as on one machine)
    expect(ensureStep({ desired: "up", started: true, asked: false })).toBe("report")
    // a user's up applies its selection and environment again
    expect(ensureStep({ desired: "up", started: true, asked: true })).toBe("start")
  })

  it("are listed in the machine's own setting by id; anything else there is ignored", () => {
    expect(anywhereIds([3, "x", 5, null])).toEqual([3, 5])
    expect(anywhereIds(undefined)).toEqual([])
    expect(anywhereIds({ 1: 2 })).toEqual([])
  })
})

describe("remoteTargets", () => {
  const world = (machine: string, state: string) => ({
    machine,
    status: {
      project: "shop",
      name: "feat-a",
      slug: "feat-a",
      state,
      services: [
        { state: state === "running" ? "healthy" : "stopped", port: 4000, url: "http://api.feat-a.shop.localhost" }
      ]
    }
  })
  const machines = [
    { name: "h1", address: "10.0.0.1", proxyPort: 7358, heartbeatAgeMs: 20_000 },
    { name: "h2", address: "10.0.0.2", proxyPort: 7358, heartbeatAgeMs: 100 }
  ]

  it("routes a world that moved to the machine that serves it, not to the stale copy of the one it left", () => {
    for (const order of [
      [world("h1", "running"), world("h2", "running")],
      [world("h2", "running"), world("h1", "running")]
    ]) {
      const routes = remoteTargets(order, machines)
      expect(routes).toHaveLength(1)
      expect(routes[0]?.remote?.machine).toBe("h2")
      expect(routes[0]?.ready).toBe(true)
    }
  })
})
