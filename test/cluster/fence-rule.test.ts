/**
 * The fence's rule for starting a world that runs anywhere (`installRule`, with the real Registry and Fence): the
 * daemon's hold in memory may be renewed a moment before the lease file is, and a start in that moment is one the
 * watchdog, reading the stale file, would stop as a fenced copy. So a start waits for the file as well. And the hold
 * itself, renewed by the engine's lock refreshes (`renewing`).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as ShardId from "@effect/cluster/ShardId"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { markAnywhere } from "../../src/cluster/anywhere.js"
import { type Hold, installRule, renewing } from "../../src/cluster/fence.js"
import { formatLease, refreshRenews } from "../../src/domain/fence.js"
import { Fence, FenceLive } from "../../src/services/Fence.js"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { killAll } from "../e2e/harness.js"

const home = mkdtempSync(join(tmpdir(), "berth-fence-rule-"))
afterAll(() => {
  // the holder the rule starts once a start is let through ends with its pipe; it is not left for the worker's end
  killAll(home)
  rmSync(home, { recursive: true, force: true })
})

const layer = Layer.mergeAll(FenceLive, RegistryLive.pipe(Layer.provideMerge(Home.layerAt(home))))

describe("the fence's rule for a start", () => {
  it.live("keeps a start waiting while the lease file is run out, though the hold in memory is renewed", () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      const fence = yield* Fence
      const paths = yield* Home
      const project = yield* registry.upsertProject({
        name: "shop",
        commonDir: "/tmp/shop/.git",
        mainRoot: "/tmp/shop"
      })
      const world = yield* registry.createWorld({
        projectId: project.id,
        name: "feat-a",
        path: "",
        branch: "feat-a",
        isMain: false
      })
      yield* markAnywhere(registry, [world.id], true)
      const lease = (until: number) =>
        writeFileSync(
          paths.fenceFile,
          formatLease({ daemon: process.pid, session: "s1", until, worlds: [world.id], home: paths.root, done: false })
        )
      // the daemon has just thawed: its hold is renewed, the file not yet
      lease(Date.now() - 1)
      const now = Date.now()
      yield* installRule(
        { refreshedAt: now, beatAt: now },
        { member: Effect.succeed(true), owns: () => Effect.succeed(true) }
      )
      const start = yield* Effect.fork(fence.hold(world.id))
      yield* Effect.sleep("400 millis")
      expect(Option.isNone(yield* Fiber.poll(start)), "a start while the lease file is run out waits").toBe(true)
      // the next round of the lease's writer
      lease(Date.now() + 3_000)
      yield* Fiber.join(start).pipe(Effect.timeout("2 seconds"))
    }).pipe(Effect.provide(layer))
  )
})

describe("the hold's renewal by the engine's lock refreshes", () => {
  const shard = (id: number) => ShardId.make("machine-1", id)
  const address = RunnerAddress.make("10.0.0.1", 7357)

  it.effect("renews on a refresh that kept every shard it asked for, never on one that asked for none", () =>
    Effect.gen(function* () {
      const hold: Hold = { refreshedAt: undefined, beatAt: undefined }
      const storage = yield* RunnerStorage.RunnerStorage.pipe(
        Effect.provide(renewing(hold).pipe(Layer.provide(RunnerStorage.layerMemory)))
      )
      yield* storage.acquire(address, [shard(1)])
      // the probe of a lock storage the engine found unhealthy: it has let go of every shard, and stops their worlds
      yield* storage.refresh(address, [])
      expect(hold.refreshedAt, "a refresh of no shard").toBeUndefined()
      yield* storage.refresh(address, [shard(1)])
      expect(hold.refreshedAt, "a refresh that kept its shard").toBeDefined()
      const renewed = hold.refreshedAt
      // a shard another machine took: the refresh keeps only the rest
      yield* storage.refresh(address, [shard(1), shard(2)])
      expect(hold.refreshedAt, "a refresh that lost a shard").toBe(renewed)
    })
  )

  it("renews only when every shard asked for was kept, and one was asked for at least", () => {
    expect(refreshRenews([], [])).toBe(false)
    expect(refreshRenews([], ["1"])).toBe(false)
    expect(refreshRenews(["1"], ["1"])).toBe(true)
    expect(refreshRenews(["1", "2"], ["2", "1", "3"])).toBe(true)
    expect(refreshRenews(["1", "2"], ["1"])).toBe(false)
  })
})
