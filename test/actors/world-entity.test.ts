/**
 * A world's actor behind an `@effect/cluster` entity (`WorldEntity`), on the in-memory TestRunner: the same world,
 * driven through the cluster's client instead of the socket, moves as it does otherwise.
 */
import * as TestRunner from "@effect/cluster/TestRunner"
import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Protocol from "../../src/actors/protocol.js"
import { WorldEntity, WorldEntityLive } from "../../src/actors/WorldEntity.js"
import { Worlds } from "../../src/actors/Worlds.js"
import { CONFIRM_MS } from "../../src/actors/ServiceActor.js"
import { passTime, worldHarness } from "./world.js"

const APP = `[project]
name = "ent"

[services.api]
cmd = "serve api"
url = "api"
health = { cmd = "check api" }
`

describe("a world as a cluster entity", () => {
  it.scoped("takes down and up through the entity's client, as its actor's own commands", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(APP)
      yield* h.fakes.health.setDefault(true)
      yield* h.up("alpha")
      yield* passTime("api stays up after its check passed", CONFIRM_MS)
      yield* h.awaitState("alpha", "running")
      const id = yield* h.idOf("alpha")

      // the cluster's own loops (shard assignment, retries) run on the real clock; the world's, on the test's
      const live = Clock.make()
      const cluster = yield* Layer.build(
        WorldEntityLive.pipe(
          Layer.provide(Layer.succeed(Worlds, h.engine.worlds)),
          Layer.provideMerge(TestRunner.layer)
        )
      ).pipe(Effect.withClock(live))
      const client = yield* WorldEntity.client.pipe(Effect.provide(cluster))
      const world = client(String(id))
      const viaCluster = <A, E>(effect: Effect.Effect<A, E>) => Effect.withClock(effect, live)

      yield* viaCluster(world.Down(new Protocol.Down()))
      yield* h.awaitState("alpha", "stopped")
      expect((yield* h.process("alpha", "api")).alive).toBe(false)

      yield* viaCluster(world.Up(new Protocol.Up({ selection: { services: [], groups: [] }, env: {} })))
      yield* passTime("api stays up after its check passed", CONFIRM_MS)
      yield* h.awaitState("alpha", "running")
      expect(yield* h.moves("alpha")).toEqual([
        "stopped>starting",
        "starting>running",
        "running>stopping",
        "stopping>stopped",
        "stopped>starting",
        "starting>running"
      ])

      // an id that names no world is refused, typed: no world has it
      const refused = yield* Effect.flip(viaCluster(client("0").Down(new Protocol.Down())))
      expect(refused._tag).toBe("WorldNotFound")
      expect(refused.message).toMatch(/^there is no world "0"\n {2}hint: /)
    })
  )
})
