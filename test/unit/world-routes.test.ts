import * as fc from "effect/FastCheck"
import { describe, expect, it } from "vitest"
import { dashboardHost, makeRouteTable, type RouteTable, type RouteTarget } from "../../src/domain/routes.js"
import {
  compareCodePoints,
  compareWorldOrder,
  emptyBook,
  keepSame,
  patchWorlds,
  type RouteBook,
  tableOf,
  withDashboard,
  withRemote,
  type WorldRoutes,
  worldTargets
} from "../../src/domain/world-routes.js"

const target = (id: number, world: string, service: string, extra: Partial<RouteTarget> = {}): RouteTarget => ({
  project: "demo",
  world,
  service,
  worldState: "running",
  serviceState: "running",
  port: 4000 + id,
  ready: true,
  worldId: id,
  ...extra
})

const routes = (project: string, createdAt: number, id: number, targets: ReadonlyArray<RouteTarget>): WorldRoutes => ({
  order: { project, createdAt, id },
  targets
})

/** A table as plain data, in order: what any two tables made of the same routes share. */
const plain = (table: RouteTable) => ({
  domain: table.domain,
  byHost: [...table.byHost.entries()],
  byProject: [...table.byProject.entries()]
})

describe("a world's routes", () => {
  it("has one route per service with a url, its state and its main lease's port", () => {
    const made = worldTargets({
      id: 7,
      project: "shop",
      slug: "feature-x",
      name: "feature/x",
      observed: "running",
      states: new Map([
        ["web", "healthy"],
        ["api", "starting"]
      ]),
      ports: new Map([["web", 4100]]),
      routed: [
        { name: "web", url: "www" },
        { name: "api", url: "api" },
        { name: "worker", url: undefined },
        { name: "docs", url: "docs" }
      ],
      domain: "test"
    })
    expect(made).toEqual([
      {
        project: "shop",
        world: "feature-x",
        worldName: "feature/x",
        service: "www",
        worldState: "running",
        worldId: 7,
        serviceState: "healthy",
        port: 4100,
        ready: true,
        domain: "test"
      },
      expect.objectContaining({ service: "api", serviceState: "starting", port: undefined, ready: false }),
      expect.objectContaining({ service: "docs", serviceState: "stopped", ready: false })
    ])
  })
})

describe("the order of worlds", () => {
  it("is SQLite's: project name by code point (as UTF-8 bytes), then creation, then id", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), fc.string({ unit: "grapheme" }), (a, b) => {
        expect(Math.sign(compareCodePoints(a, b))).toBe(Math.sign(Buffer.compare(Buffer.from(a), Buffer.from(b))))
      })
    )
    // JavaScript's own comparison puts U+FFFD after U+1F600; SQLite does not
    expect(compareCodePoints("\u{1F600}", "\uFFFD")).toBeGreaterThan(0)
    expect(
      compareWorldOrder({ project: "a", createdAt: 9, id: 9 }, { project: "b", createdAt: 1, id: 1 })
    ).toBeLessThan(0)
    expect(
      compareWorldOrder({ project: "a", createdAt: 1, id: 9 }, { project: "a", createdAt: 2, id: 1 })
    ).toBeLessThan(0)
    expect(
      compareWorldOrder({ project: "a", createdAt: 1, id: 2 }, { project: "a", createdAt: 1, id: 1 })
    ).toBeGreaterThan(0)
  })
})

describe("keeping routes that did not change", () => {
  it("keeps the very objects of equal routes, and the old list when nothing differs", () => {
    const before = [target(1, "w", "web"), target(1, "w", "api")]
    const same = keepSame(before, [target(1, "w", "web"), target(1, "w", "api")])
    expect(same).toBe(before)
    const next = keepSame(before, [
      target(1, "w", "web"),
      target(1, "w", "api", { serviceState: "failed", ready: false })
    ])
    expect(next).not.toBe(before)
    expect(next[0]).toBe(before[0])
    expect(next[1]).not.toBe(before[1])
    expect(next[1]?.serviceState).toBe("failed")
    // a route of a remote world that moved elsewhere is another route
    const remote = [target(1, "w", "web", { remote: { machine: "a", address: "10.0.0.1", port: 1 } })]
    expect(keepSame(remote, [target(1, "w", "web", { remote: { machine: "a", address: "10.0.0.1", port: 1 } })])).toBe(
      remote
    )
    expect(
      keepSame(remote, [target(1, "w", "web", { remote: { machine: "b", address: "10.0.0.2", port: 1 } })])[0]
    ).not.toBe(remote[0])
  })
})

describe("the table made world by world", () => {
  const a1 = routes("alpha", 1, 1, [target(1, "main", "web", { project: "alpha" })])
  const b2 = routes("beta", 2, 2, [target(2, "main", "web", { project: "beta" })])
  // the same host as a1's, from a world made later: a1 keeps it
  const a3 = routes("alpha", 3, 3, [target(3, "main", "web", { project: "alpha", port: 9999 })])

  it("lets the first world in the registry's order keep a host two claim, then this machine's worlds before remote ones", () => {
    // read one by one, in any order: placed by the registry's order
    let book = patchWorlds(
      emptyBook,
      new Map([
        [3, a3],
        [2, b2],
        [1, a1]
      ]),
      false
    )
    expect(book.order).toEqual([1, 3, 2])
    // a full read comes in the registry's order, taken as it is
    expect(
      patchWorlds(
        book,
        new Map([
          [1, a1],
          [3, a3],
          [2, b2]
        ]),
        true
      )
    ).toBe(book)
    const remote = [
      target(0, "main", "web", {
        project: "beta",
        worldId: undefined,
        remote: { machine: "m", address: "10.0.0.9", port: 1 }
      }),
      target(0, "other", "web", {
        project: "beta",
        worldId: undefined,
        remote: { machine: "m", address: "10.0.0.9", port: 1 }
      })
    ]
    book = withRemote(book, remote)
    const table = tableOf(book, "localhost")
    expect(table.byHost.get("web.main.alpha.localhost")).toBe(a1.targets[0])
    expect(table.byHost.get("web.main.beta.localhost")).toBe(b2.targets[0])
    expect(table.byHost.get("web.other.beta.localhost")).toBe(remote[1])
    expect(plain(table)).toEqual(plain(makeRouteTable([...a1.targets, ...a3.targets, ...b2.targets, ...remote])))
    // a1 gone: a3 has the host now
    const without = patchWorlds(book, new Map([[1, undefined]]), false)
    expect(without.order).toEqual([3, 2])
    expect(tableOf(without, "localhost").byHost.get("web.main.alpha.localhost")).toBe(a3.targets[0])
  })

  it("drops the worlds a full read did not find, and answers the same book when nothing differs", () => {
    const book = patchWorlds(
      emptyBook,
      new Map([
        [1, a1],
        [2, b2]
      ]),
      true
    )
    expect(
      patchWorlds(book, new Map([[2, routes("beta", 2, 2, [target(2, "main", "web", { project: "beta" })])]]), false)
    ).toBe(book)
    expect(patchWorlds(book, new Map([[9, undefined]]), false)).toBe(book)
    const full = patchWorlds(book, new Map([[2, b2]]), true)
    expect([...full.worlds.keys()]).toEqual([2])
    expect(full.order).toEqual([2])
  })

  it("replaces the remote routes, keeping those that did not change", () => {
    const r = (world: string, ready: boolean) =>
      target(0, world, "web", { worldId: undefined, ready, remote: { machine: "m", address: "10.0.0.9", port: 1 } })
    const book = withRemote(emptyBook, [r("x", true), r("y", true)])
    expect(withRemote(book, [r("x", true), r("y", true)])).toBe(book)
    const moved = withRemote(book, [r("x", true), r("y", false)])
    expect(moved.remote[0]).toBe(book.remote[0])
    expect(moved.remote[1]?.ready).toBe(false)
    expect(tableOf(withRemote(moved, []), "localhost").byHost.size).toBe(0)
  })

  it("routes the dashboard last, and only while it runs", () => {
    const book = withDashboard(patchWorlds(emptyBook, new Map([[1, a1]]), true), 8123)
    expect(withDashboard(book, 8123)).toBe(book)
    const table = tableOf(book, "localhost")
    expect([...table.byHost.keys()]).toEqual(["web.main.alpha.localhost", dashboardHost("localhost")])
    expect(table.byHost.get(dashboardHost("localhost"))).toMatchObject({ port: 8123, machineOnly: true })
    expect(tableOf(withDashboard(book, undefined), "localhost").byHost.has(dashboardHost("localhost"))).toBe(false)
  })

  it("equals the table of every world at once, whatever the worlds were read again in (property)", () => {
    // a world: project, creation, and its routes (a few services, some hosts shared with other worlds)
    const world = fc.record({
      project: fc.constantFrom("a", "b", "é", "\u{1F600}"),
      createdAt: fc.nat(5),
      slug: fc.constantFrom("main", "x"),
      services: fc.uniqueArray(fc.constantFrom("web", "api", "db"), { maxLength: 3 }),
      state: fc.constantFrom("running", "stopped", "failed"),
      port: fc.nat(3)
    })
    const step = fc.record({
      changes: fc.array(fc.tuple(fc.integer({ min: 1, max: 8 }), fc.option(world, { nil: undefined })), {
        maxLength: 6
      }),
      all: fc.boolean(),
      remote: fc.option(fc.array(fc.tuple(fc.constantFrom("a", "b"), fc.constantFrom("main", "y")), { maxLength: 3 }), {
        nil: undefined
      }),
      dashboard: fc.option(fc.constantFrom(undefined, 8000, 8001), { nil: null })
    })
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 12 }), (steps) => {
        const truth = new Map<number, WorldRoutes>()
        let remote: ReadonlyArray<RouteTarget> = []
        let dashboard: number | undefined
        let book: RouteBook = emptyBook
        for (const s of steps) {
          const changed = new Map<number, WorldRoutes | undefined>()
          for (const [id, w] of s.changes) {
            const made =
              w === undefined
                ? undefined
                : routes(
                    w.project,
                    w.createdAt,
                    id,
                    w.services.map((service) =>
                      target(id, w.slug, service, {
                        project: w.project === "a" || w.project === "é" ? "a" : "b",
                        serviceState: w.state === "running" ? "running" : "stopped",
                        ready: w.state === "running",
                        port: 4000 + w.port
                      })
                    )
                  )
            if (made === undefined) truth.delete(id)
            else truth.set(id, made)
            changed.set(id, made)
          }
          if (s.all) {
            // a full read: every world there is, as it is now, in the registry's order
            book = patchWorlds(
              book,
              new Map([...truth].sort(([, x], [, y]) => compareWorldOrder(x.order, y.order))),
              true
            )
          } else {
            book = patchWorlds(book, changed, false)
          }
          if (s.remote !== undefined) {
            remote = s.remote.map(([project, world]) =>
              target(0, world, "web", {
                project,
                worldId: undefined,
                remote: { machine: "m", address: "10.0.0.9", port: 1 }
              })
            )
            book = withRemote(book, remote)
          }
          if (s.dashboard !== null) {
            dashboard = s.dashboard
            book = withDashboard(book, dashboard)
          }
          const everyWorld = [...truth.values()].sort((x, y) => compareWorldOrder(x.order, y.order))
          const expected = makeRouteTable([...everyWorld.flatMap((w) => w.targets), ...remote], "localhost")
          const table = tableOf(book, "localhost")
          const withoutDashboard = new Map(table.byHost)
          withoutDashboard.delete(dashboardHost("localhost"))
          expect([...withoutDashboard.entries()]).toEqual([...expected.byHost.entries()])
          expect([...table.byProject.entries()]).toEqual([...expected.byProject.entries()])
          expect(table.byHost.get(dashboardHost("localhost"))?.port).toBe(dashboard)
        }
      })
    )
  })
})
