import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import {
  ANYWHERE_GROUP,
  currentCopies,
  ownedPlacements,
  placerLoad,
  MOVE_WAITING_AFTER_MS,
  moveWaiting,
  GIVE_UP_AFTER_MS,
  PLACE_ON_HEARD_MS,
  type PlacerMachine,
  parseRoom,
  placeAnywhere,
  placerStep,
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
import { BEAT_HOLD_MS, FENCE_GRACE_MS } from "../../src/domain/fence.js"

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
  it("have entity ids in their owner's group, never taken for a pinned world's", () => {
    const id = anywhereEntityId(3, "shop", "feat-a")
    expect(parseAnywhereEntityId(id)).toEqual({ slot: 3, project: "shop", slug: "feat-a" })
    expect(parseWorldEntityId(id)).toBeUndefined()
    expect(shardGroupOf(id)).toBe(groupOfSlot(3))
    expect(parseAnywhereEntityId(worldEntityId(2, "shop", "feat-a"))).toBeUndefined()
  })

  it("property: an anywhere id reads back, and is in its owner's group", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.integer({ min: 1, max: MAX_MACHINES }), label, label, (slot, project, slug) => {
        const id = anywhereEntityId(slot, project, slug)
        expect(parseAnywhereEntityId(id)).toEqual({ slot, project, slug })
        expect(shardGroupOf(id)).toBe(groupOfSlot(slot))
      })
    )
  })

  it("are started, stopped, removed or only reported, as the shared table wants", () => {
    const owned = true
    expect(ensureStep({ desired: undefined, owned, started: true, asked: false })).toBe("remove")
    expect(ensureStep({ desired: "removed", owned, started: false, asked: true })).toBe("remove")
    expect(ensureStep({ desired: "down", owned, started: true, asked: false })).toBe("stop")
    expect(ensureStep({ desired: "up", owned, started: false, asked: false })).toBe("start")
    // the placer's round leaves a started world alone (a failed one waits for its user, as on one machine)
    expect(ensureStep({ desired: "up", owned, started: true, asked: false })).toBe("report")
    // a user's up applies its selection and environment again
    expect(ensureStep({ desired: "up", owned, started: true, asked: true })).toBe("start")
    // given to another machine: stopped here, whoever asks
    expect(ensureStep({ desired: "up", owned: false, started: true, asked: true })).toBe("stop")
    expect(ensureStep({ desired: "up", owned: false, started: false, asked: false })).toBe("stop")
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

describe("placing worlds that run anywhere (cluster-wide admission)", () => {
  const room = (running: number, admits = true, waiting = 0, draining = false) => ({
    admits,
    running,
    waiting,
    anywhere: 0,
    draining
  })
  const m = (name: string, r = room(0), heartbeatAgeMs = 500): PlacerMachine => ({ name, heartbeatAgeMs, room: r })

  it("goes to a machine whose gate admits a world now, the least busy first", () => {
    expect(placeAnywhere([m("h1", room(3)), m("h2", room(1)), m("h3", room(2))], null)).toBe("h2")
    // the busiest machine with room beats an idle one without
    expect(placeAnywhere([m("h1", room(0, false)), m("h2", room(5))], null)).toBe("h2")
  })

  it("counts a machine's worlds that run anywhere as the table gives them now, its own as its room said", () => {
    const rows = [
      { owner: "h1", desired: "up" as const },
      { owner: "h1", desired: "up" as const },
      { owner: "h2", desired: "down" as const },
      { owner: null, desired: "up" as const }
    ]
    const owned = ownedPlacements(rows)
    expect(owned.get("h1")).toBe(2)
    expect(owned.get("h2")).toBeUndefined()
    // h1 runs 3 of its own and 1 that runs anywhere, and was just given a second: 5
    expect(placerLoad({ ...m("h1", { ...room(4), anywhere: 1 }), owned: 2 })).toBe(5)
    // a burst of ups spreads out before the heartbeats catch up
    expect(
      placeAnywhere(
        [
          { ...m("h1"), owned: 1 },
          { ...m("h2"), owned: 0 }
        ],
        null
      )
    ).toBe("h2")
  })

  it("waits in the shortest line when no machine has room", () => {
    expect(placeAnywhere([m("h1", room(2, false, 3)), m("h2", room(2, false, 1))], null)).toBe("h2")
  })

  it("never goes to a machine that is stopping or not heard from, and nowhere when none is left", () => {
    expect(placeAnywhere([m("h1", room(0, true, 0, true)), m("h2", room(4))], null)).toBe("h2")
    expect(placeAnywhere([m("h1", room(0), PLACE_ON_HEARD_MS + 1), m("h2", room(4))], null)).toBe("h2")
    expect(placeAnywhere([m("h1", room(0, true, 0, true))], null)).toBeUndefined()
    expect(placeAnywhere([], null)).toBeUndefined()
  })

  it("breaks ties toward the machine it ran on before, then by name, so every placer decides alike", () => {
    expect(placeAnywhere([m("h1"), m("h2"), m("h3")], "h3")).toBe("h3")
    expect(placeAnywhere([m("h3"), m("h2"), m("h1")], null)).toBe("h1")
  })

  it("property: the choice is usable, admits when any usable machine admits, and ignores the list's order", () => {
    const machine = FastCheck.record({
      name: FastCheck.constantFrom("h1", "h2", "h3", "h4", "h5"),
      heartbeatAgeMs: FastCheck.integer({ min: 0, max: 20_000 }),
      room: FastCheck.option(
        FastCheck.record({
          admits: FastCheck.boolean(),
          running: FastCheck.nat(10),
          waiting: FastCheck.nat(10),
          anywhere: FastCheck.nat(3),
          draining: FastCheck.boolean()
        }),
        { nil: undefined }
      )
    })
    const unique = FastCheck.uniqueArray(machine, { selector: (x) => x.name, maxLength: 5 })
    FastCheck.assert(
      FastCheck.property(unique, FastCheck.constantFrom(null, "h1", "h4"), (machines, previous) => {
        const usable = machines.filter((x) => x.heartbeatAgeMs <= PLACE_ON_HEARD_MS && x.room?.draining !== true)
        const chosen = machines.find((x) => x.name === placeAnywhere(machines, previous))
        if (usable.length === 0) {
          expect(chosen).toBeUndefined()
        } else {
          expect(usable).toContain(chosen)
          if (usable.some((x) => x.room?.admits === true)) expect(chosen?.room?.admits).toBe(true)
        }
        expect(placeAnywhere([...machines].reverse(), previous)).toBe(chosen?.name)
      })
    )
  })

  it("moves a world that has waited a moment in this machine's line once another machine has room, not before", () => {
    const full = m("h1", room(1, false, 2))
    const roomy = m("h2", room(0))
    expect(moveWaiting(MOVE_WAITING_AFTER_MS, [full, roomy], "h1")).toBe(true)
    expect(moveWaiting(MOVE_WAITING_AFTER_MS - 1, [full, roomy], "h1")).toBe(false)
    // no other machine with room: it stays in line here
    expect(moveWaiting(60_000, [full, m("h2", room(3, false))], "h1")).toBe(false)
    // nor for one that is stopping or silent
    expect(moveWaiting(60_000, [full, m("h2", room(0, true, 0, true))], "h1")).toBe(false)
    expect(moveWaiting(60_000, [full, m("h2", room(0), PLACE_ON_HEARD_MS + 1)], "h1")).toBe(false)
    // this machine's own room does not count
    expect(moveWaiting(60_000, [m("h1", room(0))], "h1")).toBe(false)
  })

  it("reads a machine's room, and nothing else is taken for one", () => {
    expect(parseRoom(room(2, true, 1))).toEqual(room(2, true, 1))
    expect(parseRoom({ admits: "yes", running: 1, waiting: 0, draining: false })).toBeUndefined()
    expect(parseRoom({ admits: true, running: -1, waiting: 0, draining: false })).toBeUndefined()
    expect(parseRoom(null)).toBeUndefined()
  })

  it("places a world with no live owner, lets a gone owner go, forgets what is removed, else asks the owner", () => {
    const live = m("h2")
    const gone = m("h2", room(0), GIVE_UP_AFTER_MS + 1)
    expect(placerStep({ desired: "up", owner: null }, undefined)).toBe("place")
    expect(placerStep({ desired: "up", owner: "h2" }, live)).toBe("ensure")
    expect(placerStep({ desired: "up", owner: "h2" }, gone)).toBe("place")
    // its row is gone: it left the cluster
    expect(placerStep({ desired: "up", owner: "h2" }, undefined)).toBe("place")
    // only a heartbeat older than the fence's deadline gives an owner up: its watchdog has stopped its copy by then
    expect(placerStep({ desired: "up", owner: "h2" }, m("h2", room(0), GIVE_UP_AFTER_MS))).toBe("ensure")
    expect(placerStep({ desired: "down", owner: "h2" }, live)).toBe("ensure")
    expect(placerStep({ desired: "down", owner: "h2" }, gone)).toBe("release")
    expect(placerStep({ desired: "down", owner: null }, undefined)).toBe("nothing")
    expect(placerStep({ desired: "removed", owner: "h2" }, live)).toBe("ensure")
    expect(placerStep({ desired: "removed", owner: null }, undefined)).toBe("forget")
  })

  it("gives an owner up only after its fence has stopped its copy", () => {
    // the fence stops a copy BEAT_HOLD_MS after its last heartbeat started, taking at most its grace and a look more
    expect(GIVE_UP_AFTER_MS).toBeGreaterThan(BEAT_HOLD_MS + FENCE_GRACE_MS + 200)
    // and a machine given up is never the one a world is placed on
    expect(PLACE_ON_HEARD_MS).toBeLessThan(GIVE_UP_AFTER_MS)
  })
})

describe("copies of worlds that run anywhere", () => {
  const copy = (machine: string, slug: string) => ({ machine, status: { project: "shop", slug } })
  it("count only on the machine the row gives the world to; pinned worlds and unplaced ones are kept", () => {
    const copies = [copy("h1", "feat-a"), copy("h2", "feat-a"), copy("h3", "pinned"), copy("h3", "feat-b")]
    const rows = [
      { project: "shop", slug: "feat-a", owner: "h2" },
      { project: "shop", slug: "feat-b", owner: null }
    ]
    expect(currentCopies(copies, rows)).toEqual([copy("h2", "feat-a"), copy("h3", "pinned"), copy("h3", "feat-b")])
    expect(currentCopies(copies, [])).toEqual(copies)
  })

  it("of a world that ran anywhere and was removed (its row gone) are no longer listed, even from a silent machine", () => {
    const removed = { machine: "h1", status: { project: "shop", slug: "feat-z", placement: "anywhere" } }
    const copies = [copy("h3", "pinned"), removed]
    expect(currentCopies(copies, [])).toEqual([copy("h3", "pinned")])
    expect(currentCopies(copies, [{ project: "shop", slug: "feat-b", owner: null }])).toEqual([copy("h3", "pinned")])
    expect(currentCopies(copies, [{ project: "shop", slug: "feat-z", owner: "h1" }])).toEqual(copies)
  })
})
