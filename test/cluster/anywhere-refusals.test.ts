/**
 * What the machine a world that runs anywhere was given answers when it cannot run it (`MachineCannotRun`): its
 * daemon is stopping, or a project of the world's label there comes from another repository. The world's entity
 * (`anywhereLayer`) on an in-memory sharding engine, over a real engine of worlds (the world harness) and a shared
 * table kept in memory: no database, no network namespace, no root. And what a user's request answers when no machine
 * of the cluster takes the world (`NoMachineAvailable`).
 */
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import { Worlds } from "../../src/actors/Worlds.js"
import { Anywhere, type AnywhereHost, anywhereLayer } from "../../src/cluster/anywhere.js"
import { shardingConfig } from "../../src/cluster/runner.js"
import type { AnywhereRow } from "../../src/cluster/store.js"
import { settleNow } from "../../src/cluster/anywhere-requests.js"
import { anywhereEntityId } from "../../src/domain/cluster.js"
import { GitLive } from "../../src/services/Git.js"
import { Home } from "../../src/services/Home.js"
import { Registry } from "../../src/services/Registry.js"
import { rowOf } from "./parts.js"
import { worldHarness } from "../actors/world.js"

const APP = `[project]
name = "ent"

[services.api]
cmd = "serve api"
url = "api"
health = { cmd = "check api" }
`

/** The shared table as the entity sees it: the rows the test sets, and what the entity wrote to it. */
const memoryTable = (rows: ReadonlyArray<AnywhereRow>) => {
  const letGo: Array<string> = []
  const notes: Array<string | null> = []
  const store: AnywhereHost["store"] = {
    anywhere: (only) =>
      Effect.sync(() => rows.filter((r) => only === undefined || (r.project === only.project && r.slug === only.slug))),
    note: (_project, _slug, reason) => Effect.sync(() => void notes.push(reason)),
    letGo: (_project, slug, machine, why) => Effect.sync(() => void letGo.push(`${slug} by ${machine}: ${why}`)),
    toldMove: () => Effect.void
  }
  return { store, letGo, notes }
}

/** One machine's sharding engine in memory (slot 1), holding its own shard group and the shared one. */
const engineInMemory = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(MessageStorage.layerMemory),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer(shardingConfig({ address: "127.0.0.1", port: 1, slot: 1 })))
)

describe("a world that runs anywhere, on a machine that cannot run it", () => {
  it.scoped("answers MachineCannotRun when its daemon is stopping, and gives the world back to the placer", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(APP)
      const table = memoryTable([rowOf("ent", "beta", "m1")])
      const draining = yield* Ref.make(true)
      const ensure = yield* entityOn(h, table.store, draining)
      const failure = yield* ensure("ent", "beta").pipe(Effect.flip)
      expect(failure._tag).toBe("MachineCannotRun")
      expect(failure.message).toContain("it is stopping")
      expect(table.letGo).toEqual(["beta by m1: m1 was stopping"])
      // nothing of it started here
      expect(yield* h.engine.worlds.idOf("ent", "beta")).toBeUndefined()
    })
  )

  it.scoped("answers MachineCannotRun when its project's label there is another repository's, and says which", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(APP)
      // the machine knows a project labelled "ent" once a world of it was asked for: the harness's repository, which
      // has no origin
      yield* h.up("alpha")
      const table = memoryTable([{ ...rowOf("ent", "beta", "m1"), remote: "/elsewhere/ent.git" }])
      const ensure = yield* entityOn(h, table.store, yield* Ref.make(false))
      const failure = yield* ensure("ent", "beta").pipe(Effect.flip)
      expect(failure._tag).toBe("MachineCannotRun")
      expect(failure.message).toContain(`its project ent there is ${h.dir}, another repository`)
      // the reason is noted on the world's row, for `status` on every machine
      expect(table.notes.at(-1)).toContain("on m1:")
      expect(yield* h.engine.worlds.idOf("ent", "beta")).toBeUndefined()
    })
  )
})

describe("a user's request for a world that runs anywhere", () => {
  it.effect(
    "answers NoMachineAvailable, with the placer's reason, when no machine of the cluster takes the world",
    () =>
      Effect.gen(function* () {
        let row: AnywhereRow = rowOf("ent", "gamma", null)
        const asked: Array<string> = []
        const store = {
          anywhere: () => Effect.sync(() => [row]),
          machines: Effect.succeed([]),
          note: (_project: string, _slug: string, reason: string | null) =>
            Effect.sync(() => {
              row = { ...row, reason }
            }),
          forget: () => Effect.void,
          reassign: () => Effect.succeed(false)
        }
        const failure = yield* settleNow(store, row, (_r, owner) =>
          Effect.sync(() => {
            asked.push(owner.name)
            return null
          })
        ).pipe(Effect.flip)
        expect(failure._tag).toBe("NoMachineAvailable")
        expect(failure.message).toContain("gamma")
        expect(failure.message).toContain("no machine of the cluster can take it now")
        expect(asked).toEqual([])
      })
  )
})

/** The entity of this machine ("m1", slot 1) over the harness's engine: `Ensure` asked as a user's `up` would. */
const entityOn = (
  h: Effect.Effect.Success<ReturnType<typeof worldHarness>>,
  store: AnywhereHost["store"],
  draining: Ref.Ref<boolean>
) =>
  Effect.gen(function* () {
    // the engine's own loops (shard assignment, polls) run on the real clock; the world's, on the test's
    const live = Clock.make()
    const host: AnywhereHost = { store, machine: "m1", draining: Ref.get(draining), saw: () => Effect.void }
    const built = yield* Layer.build(
      anywhereLayer(host).pipe(
        Layer.provide(
          Layer.mergeAll(
            Layer.succeed(Worlds, h.engine.worlds),
            Layer.succeed(Registry, h.engine.registry),
            Home.layerAt(h.home.root),
            GitLive
          )
        ),
        Layer.provideMerge(engineInMemory)
      )
    ).pipe(Effect.withClock(live))
    const client = yield* Anywhere.client.pipe(Effect.provide(built))
    return (project: string, slug: string) =>
      Effect.withClock(client(anywhereEntityId(1, project, slug)).Ensure({ asked: true }), live)
  })
