/**
 * The Router's table changes world by world, over a real registry (SQLite) and real config files: a write to one
 * world reads only that world again (its rows, and its config through ConfigFiles), the other worlds keep their very
 * routes, and after any writes the table is the one a Router reading every world at once makes.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { describe, expect, it } from "vitest"
import { dashboardHost, type RouteTable, type RouteTarget } from "../../src/domain/routes.js"
import { type WorldState, worldStates } from "../../src/domain/world-state.js"
import { ConfigFiles, ConfigFilesLive } from "../../src/services/ConfigFiles.js"
import { Home } from "../../src/services/Home.js"
import { serviceRow } from "./registry-helpers.js"
import { Router, RouterWithoutListeners } from "../../src/services/proxy/Router.js"
import { InternalError } from "../../src/domain/errors.js"
import {
  Registry,
  type RegistryError,
  RegistryLive,
  type RegistryService,
  type WorldRow
} from "../../src/services/Registry.js"

/** Calls of the registry's reads and of ConfigFiles.load, by method and argument ("*": every world's). */
class Reads {
  readonly calls = new Map<string, number>()
  /** reads that fail once, by the same key */
  readonly failOnce = new Set<string>()
  note(key: string): boolean {
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1)
    return this.failOnce.delete(key)
  }
  reset(): void {
    this.calls.clear()
  }
  of(prefix: string): ReadonlyArray<string> {
    return [...this.calls.keys()].filter((k) => k.startsWith(prefix)).sort()
  }
}

const counting = (reads: Reads) => {
  const registry = Layer.effect(
    Registry,
    Effect.map(Registry, (r): RegistryService => {
      const read =
        <A>(method: string, f: (id?: number) => Effect.Effect<A, RegistryError>) =>
        (id?: number) =>
          Effect.suspend(() =>
            reads.note(`${method}:${id ?? "*"}`)
              ? Effect.fail(new InternalError({ reason: "a read made to fail" }))
              : f(id)
          )
      return {
        ...r,
        worlds: read("worlds", r.worlds),
        world: (id: number) => read("world", (i) => r.world(i!))(id),
        services: read("services", r.services),
        leases: read("leases", r.leases)
      }
    })
  )
  const configs = Layer.effect(
    ConfigFiles,
    Effect.map(ConfigFiles, (c) => ({
      ...c,
      load: (start: string) =>
        Effect.suspend(() => {
          reads.note(`load:${start}`)
          return c.load(start)
        })
    }))
  )
  return Layer.merge(registry, configs)
}

const base = (home: string) =>
  Layer.mergeAll(RegistryLive, ConfigFilesLive).pipe(
    Layer.provideMerge(NodeContext.layer),
    Layer.provideMerge(Home.layerAt(home))
  )

/** Runs `body` with a Router (its reads counted) over a registry of its own. */
const withRouter = <A, E>(
  body: (
    reads: Reads,
    dir: string
  ) => Effect.Effect<A, E, Router | Registry | ConfigFiles | Home | Scope.Scope | NodeContext.NodeContext>
): Promise<A> => {
  const dir = mkdtempSync(join(tmpdir(), "berth-router-incremental-"))
  const reads = new Reads()
  const layer = RouterWithoutListeners.pipe(Layer.provide(counting(reads)), Layer.provideMerge(base(join(dir, "home"))))
  return Effect.runPromise(Effect.scoped(Effect.provide(body(reads, dir), layer))).finally(() =>
    rmSync(dir, { recursive: true, force: true })
  )
}

/** The table a Router that reads every world at once makes now (a fresh one, over the same registry). */
const fullTable = Effect.gen(function* () {
  const context = yield* Layer.build(Layer.fresh(RouterWithoutListeners))
  return yield* Context.get(context, Router).routes
})

/** A table as plain data, in order. */
const plain = (table: RouteTable) => ({
  domain: table.domain,
  byHost: [...table.byHost.entries()],
  byProject: [...table.byProject.entries()]
})

const CONFIG_A = `[project]
name = "shop"

[services.web]
cmd = "node web.js"
url = "web"

[services.api]
cmd = "node api.js"
url = "api"

[services.worker]
cmd = "node worker.js"
`

const CONFIG_B = `[project]
name = "shop"
domain = "test"

[services.web]
cmd = "node web.js"
url = "www"

[services.worker]
cmd = "node worker.js"
url = "jobs"
`

const folder = (dir: string, name: string, config: string) => {
  const path = join(dir, name)
  mkdirSync(path, { recursive: true })
  writeFileSync(join(path, "berth.toml"), config)
  return path
}

/** Lets the Router's own refreshes (on the registry's changes) finish, then refreshes once more. */
const settled = Effect.gen(function* () {
  const router = yield* Router
  yield* router.refresh
  yield* Effect.sleep("60 millis")
  yield* router.refresh
})

const leaseOf = (w: WorldRow, services: ReadonlyArray<string>) =>
  services.map((s, i) => ({ port: 20_000 + w.id * 10 + i, worldId: w.id, service: s, name: "" }))

describe("the Router's table, world by world", () => {
  it("reads only the world written (its rows and its config), and the other worlds keep their routes", () =>
    withRouter((reads, dir) =>
      Effect.gen(function* () {
        const registry = yield* Registry
        const router = yield* Router
        const mains = [folder(dir, "alpha", CONFIG_A), folder(dir, "beta", CONFIG_B)]
        const projects = [
          yield* registry.upsertProject({ name: "alpha", commonDir: join(mains[0]!, ".git"), mainRoot: mains[0]! }),
          yield* registry.upsertProject({ name: "beta", commonDir: join(mains[1]!, ".git"), mainRoot: mains[1]! })
        ]
        const worlds: Array<WorldRow> = []
        for (let i = 0; i < 50; i++) {
          const p = i % 2
          const w = yield* registry.createWorld({
            projectId: projects[p]!.id,
            name: `w${i}`,
            path: mains[p]!,
            branch: `w${i}`,
            isMain: false
          })
          worlds.push(w)
          yield* registry.saveService(serviceRow(w.id, "web", "running"))
          yield* registry.setLeases(w.id, leaseOf(w, ["web", "api", "worker"]))
          yield* registry.setObserved(w.id, "running", null)
        }
        yield* settled
        const before = yield* router.routes
        // alpha's worlds route web and api, beta's www and jobs
        expect(before.byHost.size).toBe(100)
        const target = worlds[16]!
        reads.reset()

        yield* registry.saveService(serviceRow(target.id, "api", "healthy"))
        yield* settled

        // its world row, services and leases, once each (whichever refresh came first read them), and its config
        expect([...reads.calls.entries()].sort()).toEqual([
          [`leases:${target.id}`, 1],
          [`load:${mains[0]}`, 1],
          [`services:${target.id}`, 1],
          [`world:${target.id}`, 1]
        ])
        const after = yield* router.routes
        expect(after).not.toBe(before)
        let kept = 0
        for (const [host, t] of before.byHost) {
          if (t.worldId === target.id) continue
          expect(after.byHost.get(host)).toBe(t)
          kept++
        }
        expect(kept).toBe(98)
        // in the world written, the route that did not change is kept too
        const web = "web.w16.alpha.localhost"
        const api = "api.w16.alpha.localhost"
        expect(after.byHost.get(web)).toBe(before.byHost.get(web))
        expect(after.byHost.get(api)).not.toBe(before.byHost.get(api))
        expect(after.byHost.get(api)).toMatchObject({
          serviceState: "healthy",
          ready: true,
          port: 20_000 + target.id * 10 + 1
        })

        // beta's config routes no api: a write to it reads its world again, and publishes no new table
        const other = worlds[17]!
        reads.reset()
        yield* registry.saveService(serviceRow(other.id, "api", "failed"))
        yield* settled
        expect(reads.of("world:")).toEqual([`world:${other.id}`])
        expect(reads.of("load:")).toEqual([`load:${mains[1]}`])
        expect(yield* router.routes).toBe(after)
        yield* registry.saveService(serviceRow(other.id, "worker", "running"))
        yield* router.refresh
        expect((yield* router.routes).byHost.get("jobs.w17.beta.test")).toMatchObject({ serviceState: "running" })
        expect(plain(yield* router.routes)).toEqual(plain(yield* fullTable))
      })
    ))

  it("drops a removed world's routes, reads a world's config again only once its file changed, follows a rename", () =>
    withRouter((reads, dir) =>
      Effect.gen(function* () {
        const registry = yield* Registry
        const router = yield* Router
        const main = folder(dir, "alpha", CONFIG_A)
        const project = yield* registry.upsertProject({ name: "alpha", commonDir: join(main, ".git"), mainRoot: main })
        const a = yield* registry.createWorld({
          projectId: project.id,
          name: "a",
          path: main,
          branch: "a",
          isMain: true
        })
        const b = yield* registry.createWorld({
          projectId: project.id,
          name: "b",
          path: main,
          branch: "b",
          isMain: false
        })
        yield* registry.saveService(serviceRow(a.id, "web", "running"))
        yield* router.refresh
        expect([...(yield* router.routes).byHost.keys()].sort()).toEqual([
          "api.a.alpha.localhost",
          "api.b.alpha.localhost",
          "web.a.alpha.localhost",
          "web.b.alpha.localhost"
        ])
        yield* registry.deleteWorld(b.id)
        yield* router.refresh
        expect([...(yield* router.routes).byHost.keys()].sort()).toEqual([
          "api.a.alpha.localhost",
          "web.a.alpha.localhost"
        ])
        expect(yield* SubscriptionRef.get(router.hostNames)).toEqual(["api.a.alpha.localhost", "web.a.alpha.localhost"])

        // the file changed: the next write to its world reads it again, and that world's routes follow it
        writeFileSync(join(main, "berth.toml"), CONFIG_B)
        yield* registry.setObserved(a.id, "running", null)
        yield* router.refresh
        expect([...(yield* router.routes).byHost.keys()].sort()).toEqual(["jobs.a.alpha.test", "www.a.alpha.test"])

        // a project renamed: its label changes every route of it, though no world was written
        yield* registry.upsertProject({ name: "omega", commonDir: join(main, ".git"), mainRoot: main })
        yield* router.refresh
        expect([...(yield* router.routes).byHost.keys()].sort()).toEqual(["jobs.a.omega.test", "www.a.omega.test"])
        expect(plain(yield* router.routes)).toEqual(plain(yield* fullTable))
        expect(reads.calls.get("worlds:*")).toBeGreaterThan(0)
      })
    ))

  it("reads every world again after a refresh failed, and misses nothing", () =>
    withRouter((reads, dir) =>
      Effect.gen(function* () {
        const registry = yield* Registry
        const router = yield* Router
        const main = folder(dir, "alpha", CONFIG_A)
        const project = yield* registry.upsertProject({ name: "alpha", commonDir: join(main, ".git"), mainRoot: main })
        const a = yield* registry.createWorld({
          projectId: project.id,
          name: "a",
          path: main,
          branch: "a",
          isMain: true
        })
        yield* settled
        reads.reset()
        reads.failOnce.add(`services:${a.id}`)
        yield* registry.saveService(serviceRow(a.id, "web", "running"))
        // the Router's own refresh may be the one that fails; either way, the next one reads everything
        yield* router.refresh.pipe(Effect.ignore)
        yield* settled
        expect(reads.calls.get(`services:${a.id}`)).toBe(1)
        expect(reads.calls.get("worlds:*")).toBe(1)
        expect((yield* router.routes).byHost.get("web.a.alpha.localhost")).toMatchObject({ serviceState: "running" })
      })
    ))

  it("puts remote routes after this machine's worlds, replaces them, and routes the dashboard, reading no world", () =>
    withRouter((reads, dir) =>
      Effect.gen(function* () {
        const registry = yield* Registry
        const router = yield* Router
        const main = folder(dir, "alpha", CONFIG_A)
        const project = yield* registry.upsertProject({ name: "alpha", commonDir: join(main, ".git"), mainRoot: main })
        const a = yield* registry.createWorld({
          projectId: project.id,
          name: "main",
          path: main,
          branch: "main",
          isMain: true
        })
        yield* registry.saveService(serviceRow(a.id, "web", "running"))
        yield* settled
        const local = (yield* router.routes).byHost.get("web.main.alpha.localhost")
        reads.reset()
        const remote = (world: string, ready: boolean): RouteTarget => ({
          project: "alpha",
          world,
          service: "web",
          worldState: "running",
          serviceState: "running",
          port: 5000,
          ready,
          remote: { machine: "other", address: "10.0.0.2", port: 7000 }
        })
        // another machine's world `main` of the same project: the person here means their own
        yield* router.setRemoteTargets([remote("main", true), remote("feature", true)])
        let table = yield* router.routes
        expect(table.byHost.get("web.main.alpha.localhost")).toBe(local)
        const feature = table.byHost.get("web.feature.alpha.localhost")
        expect(feature).toMatchObject({ remote: { machine: "other" } })
        expect(yield* SubscriptionRef.get(router.hostNames)).toContain("web.feature.alpha.localhost")

        // replaced: the one that did not change is kept, the one that moves is new
        yield* router.setRemoteTargets([remote("feature", true), remote("moving", false)])
        table = yield* router.routes
        expect(table.byHost.get("web.feature.alpha.localhost")).toBe(feature)
        expect(table.byHost.get("web.moving.alpha.localhost")).toMatchObject({ ready: false })
        expect(table.byHost.get("web.main.alpha.localhost")).toBe(local)

        yield* router.setDashboard(8123)
        table = yield* router.routes
        expect(table.byHost.get(dashboardHost())).toMatchObject({ port: 8123, machineOnly: true })
        expect(table.byHost.get("web.main.alpha.localhost")).toBe(local)
        expect(yield* router.dashboardOrigins).toEqual([])
        yield* router.setDashboard(undefined)
        expect((yield* router.routes).byHost.has(dashboardHost())).toBe(false)

        // this machine's world gone: the remote one of the same host is routed
        yield* router.setRemoteTargets([remote("main", true)])
        yield* registry.deleteWorld(a.id)
        yield* router.refresh
        expect((yield* router.routes).byHost.get("web.main.alpha.localhost")).toMatchObject({
          remote: { machine: "other" }
        })
        expect(reads.calls.get("worlds:*")).toBeUndefined()
        expect(reads.of("load:")).toEqual([])
      })
    ))

  it("after any writes, is the table of every world read at once (property)", async () => {
    const pick = fc.nat(40)
    const services = fc.subarray(["web", "api", "worker"])
    const create = fc.record({
      _tag: fc.constant("create" as const),
      project: fc.nat(2),
      name: fc.constantFrom("main", "feat/a", "b", "c")
    })
    const write = fc.oneof(
      create,
      fc.record({ _tag: fc.constant("delete" as const), pick }),
      fc.record({ _tag: fc.constant("observe" as const), pick, state: fc.constantFrom<WorldState>(...worldStates) }),
      fc.record({
        _tag: fc.constant("service" as const),
        pick,
        service: fc.constantFrom("web", "api", "worker"),
        state: fc.constantFrom("running", "healthy", "unhealthy", "failed", "stopped", "starting")
      }),
      fc.record({ _tag: fc.constant("drop" as const), pick, keep: services }),
      fc.record({ _tag: fc.constant("lease" as const), pick, services }),
      fc.record({ _tag: fc.constant("release" as const), pick }),
      fc.record({ _tag: fc.constant("path" as const), pick, variant: fc.nat(2) }),
      fc.record({ _tag: fc.constant("rename" as const), project: fc.nat(2) }),
      // checks between writes, so that some refreshes see one write and others many
      fc.record({ _tag: fc.constant("check" as const) }),
      fc.record({ _tag: fc.constant("check" as const) })
    )
    // worlds made first, so that most writes have a world to touch
    const writes = fc
      .tuple(fc.array(create, { minLength: 1, maxLength: 6 }), fc.array(write, { minLength: 8, maxLength: 40 }))
      .map(([first, then]) => [...first, { _tag: "check" as const }, ...then])
    await fc.assert(
      fc.asyncProperty(writes, (writes) =>
        withRouter((_reads, dir) =>
          Effect.gen(function* () {
            const registry = yield* Registry
            const router = yield* Router
            // three projects, two of the same name (another label); each a main checkout and another folder
            const names = ["alpha", "beta", "alpha"]
            const folders = names.map((_, p) => [
              folder(dir, `p${p}`, CONFIG_A),
              folder(dir, `p${p}-other`, CONFIG_B),
              join(dir, `p${p}-gone`)
            ])
            const projects = yield* Effect.forEach(names, (name, p) =>
              registry.upsertProject({ name, commonDir: join(folders[p]![0]!, ".git"), mainRoot: folders[p]![0]! })
            )
            const renamed = names.map(() => false)
            const check = Effect.gen(function* () {
              yield* router.refresh
              expect(plain(yield* router.routes)).toEqual(plain(yield* fullTable))
            })
            for (const w of writes) {
              const all = yield* registry.worlds()
              const chosen = "pick" in w && all.length > 0 ? all[w.pick % all.length] : undefined
              switch (w._tag) {
                case "create": {
                  if ((yield* registry.findWorld(projects[w.project]!.id, w.name)) !== undefined) break
                  yield* registry.createWorld({
                    projectId: projects[w.project]!.id,
                    name: w.name,
                    path: folders[w.project]![0]!,
                    branch: w.name,
                    isMain: w.name === "main"
                  })
                  break
                }
                case "rename": {
                  renamed[w.project] = !renamed[w.project]
                  const name = renamed[w.project] ? `${names[w.project]}-renamed` : names[w.project]!
                  yield* registry.upsertProject({
                    name,
                    commonDir: join(folders[w.project]![0]!, ".git"),
                    mainRoot: folders[w.project]![0]!
                  })
                  break
                }
                case "check":
                  yield* check
                  break
                default: {
                  if (chosen === undefined) break
                  if (w._tag === "delete") yield* registry.deleteWorld(chosen.id)
                  else if (w._tag === "observe") yield* registry.setObserved(chosen.id, w.state, null)
                  else if (w._tag === "service") yield* registry.saveService(serviceRow(chosen.id, w.service, w.state))
                  else if (w._tag === "drop") yield* registry.dropServicesExcept(chosen.id, w.keep)
                  else if (w._tag === "lease") yield* registry.setLeases(chosen.id, leaseOf(chosen, w.services))
                  else if (w._tag === "release") yield* registry.releaseLeases(chosen.id)
                  else if (w._tag === "path") {
                    const p = projects.findIndex((x) => x.id === chosen.projectId)
                    yield* registry.setPath(chosen.id, folders[p]![w.variant]!)
                  }
                }
              }
            }
            yield* check
          })
        )
      ),
      { numRuns: 30 }
    )
  }, 120_000)
})
