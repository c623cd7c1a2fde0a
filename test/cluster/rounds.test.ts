/**
 * A member's rounds (cluster/publishing.ts) over an in-memory store, a fake `Worlds` and the test clock: what it
 * publishes and when, what the view learns, and what the proxy's door is told. No database, no root.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import * as TestClock from "effect/TestClock"
import { FULL_PUBLISH_MS, makeRounds } from "../../src/cluster/publishing.js"
import type { AnywhereRow, Machine, SharedWorld } from "../../src/cluster/store.js"
import { makeClusterState } from "../../src/cluster/view.js"
import type { WorldStatus } from "../../src/daemon/api.js"
import type { RouteTarget } from "../../src/domain/routes.js"
import { fakeWorlds, machineNamed, rowOf, sharedOf, statusOf } from "./parts.js"

const room = { admits: true, running: 0, waiting: 0, anywhere: 0, draining: false }

/** A store that keeps what it is told, and answers what the test sets. */
const memoryStore = () => {
  const published: Array<{ changed: ReadonlyArray<string>; present: ReadonlyArray<string> }> = []
  /** every status published as changed, whole */
  const sent: Array<WorldStatus> = []
  const beats: Array<{ name: string; port: number | null }> = []
  const table = {
    alive: true,
    anywhere: [] as ReadonlyArray<AnywhereRow>,
    machines: [] as ReadonlyArray<Machine>,
    others: [] as ReadonlyArray<SharedWorld>
  }
  const store = {
    heartbeat: (name: string, _id: string, port: number | null) =>
      Effect.sync(() => {
        beats.push({ name, port })
        return table.alive
      }),
    anywhere: () => Effect.sync(() => [...table.anywhere]),
    publish: (
      _machine: string,
      changed: ReadonlyArray<WorldStatus>,
      present: ReadonlyArray<{ readonly project: string; readonly slug: string }>
    ) =>
      Effect.sync(() => {
        published.push({ changed: changed.map((s) => s.slug), present: present.map((s) => s.slug) })
        sent.push(...changed)
      }),
    machines: Effect.sync(() => table.machines),
    worlds: (except: string) => Effect.sync(() => table.others.filter((w) => w.machine !== except))
  }
  return { store, table, published, sent, beats }
}

const setup = Effect.gen(function* () {
  const memory = memoryStore()
  const worlds = yield* fakeWorlds
  const state = yield* makeClusterState
  const admitted: Array<ReadonlyArray<string>> = []
  const routed: Array<ReadonlyArray<RouteTarget>> = []
  const port = yield* Ref.make<number | null>(null)
  const saw: Array<number> = []
  const rounds = yield* makeRounds({
    store: memory.store,
    machine: { name: "m1", machineId: "m1-id" },
    worlds: worlds.worlds,
    state,
    room: Effect.succeed(room),
    sawAnywhere: (_rows, startedAt) => Effect.sync(() => void saw.push(startedAt)),
    door: {
      port: Ref.get(port),
      admit: (peers) =>
        Effect.zipRight(
          Ref.set(port, 7452),
          Effect.sync(() => void admitted.push(peers))
        ),
      route: (targets) => Effect.sync(() => void routed.push(targets))
    }
  })
  return { ...memory, worlds, state, rounds, admitted, routed, saw }
})

describe("a member's rounds", () => {
  it.effect("publish every world at first, then only on a change or every few seconds, never the log lines", () =>
    Effect.gen(function* () {
      const t = yield* setup
      t.worlds.set([statusOf("shop", "a"), statusOf("shop", "b")])
      yield* t.rounds.round
      expect(t.published).toEqual([{ changed: ["a", "b"], present: ["a", "b"] }])
      expect((yield* t.state.view.get).own).toBe(2)

      // nothing changed: the next rounds publish nothing until a full publish is due
      yield* TestClock.adjust(1_000)
      yield* t.rounds.round
      expect(t.published).toHaveLength(1)
      yield* TestClock.adjust(FULL_PUBLISH_MS)
      yield* t.rounds.round
      expect(t.published[1]).toEqual({ changed: [], present: ["a", "b"] })

      // a world's change is published at the next round, and only what changed
      const watching = yield* Effect.fork(t.rounds.watchChanges)
      yield* Effect.yieldNow()
      t.worlds.set([statusOf("shop", "a"), statusOf("shop", "b", "stopped")])
      yield* t.worlds.changed({
        worldId: 2,
        project: "shop",
        world: "b",
        from: "running",
        to: "stopped",
        event: "Stopped",
        reason: null,
        at: 0
      })
      yield* Effect.yieldNow()
      yield* TestClock.adjust(1_000)
      yield* t.rounds.round
      expect(t.published[2]).toEqual({ changed: ["b"], present: ["a", "b"] })
      yield* Fiber.interrupt(watching)
    })
  )

  it.effect("publish no log lines, and mark the worlds that run anywhere as such", () =>
    Effect.gen(function* () {
      const t = yield* setup
      t.table.anywhere = [rowOf("shop", "b", "m1")]
      t.worlds.set([statusOf("shop", "a"), statusOf("shop", "b")])
      yield* t.rounds.round
      expect(t.sent.map((s) => [s.slug, s.placement, s.services[0]?.logTail])).toEqual([
        ["a", undefined, []],
        ["b", "anywhere", []]
      ])
    })
  )

  it.effect("tell the view and the proxy's door what the cluster holds, each only when it changed", () =>
    Effect.gen(function* () {
      const t = yield* setup
      t.table.machines = [machineNamed("m1", 1), machineNamed("m2", 2)]
      t.table.others = [sharedOf("m2", statusOf("shop", "c"))]
      t.table.anywhere = [rowOf("shop", "c", "m2")]
      yield* t.rounds.round
      const view = yield* t.state.view.get
      expect(view.machines.map((m) => m.name)).toEqual(["m1", "m2"])
      expect(view.worlds.map((w) => w.status.slug)).toEqual(["c"])
      expect(view.anywhere.map((r) => r.slug)).toEqual(["c"])
      expect(t.admitted).toEqual([["10.0.0.2"]])
      expect(t.routed).toHaveLength(1)
      expect(t.routed[0]?.map((r) => r.world)).toEqual(["c"])
      // the same again: the door is told nothing new, and the heartbeat says where this machine's URLs are
      yield* TestClock.adjust(1_000)
      yield* t.rounds.round
      expect(t.admitted).toHaveLength(1)
      expect(t.routed).toHaveLength(1)
      expect(t.beats.map((b) => b.port)).toEqual([null, 7452])
      // each round read what is wanted anywhere afresh, at the round's start by the clock
      expect(t.saw).toEqual([0, 1_000])
    })
  )

  it.effect("end the session when another machine took this machine's name", () =>
    Effect.gen(function* () {
      const t = yield* setup
      t.table.alive = false
      const failed = yield* Effect.flip(t.rounds.round)
      expect(failed._tag).toBe("ClusterRefused")
      expect(failed.message).toContain("another machine took over the name m1")
      expect(t.published).toHaveLength(0)
    })
  )
})
