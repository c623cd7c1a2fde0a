import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { WorldAction, WorldDesired, WorldState } from "../../src/domain/world-state.js"
import { isSettled, transition, WorldEvent, wants, worldStates } from "../../src/domain/world-state.js"

const RUNS = { numRuns: 500 }

const events: ReadonlyArray<WorldEvent> = [
  WorldEvent.Admit(),
  WorldEvent.Queue(),
  WorldEvent.Start(),
  WorldEvent.Started(),
  WorldEvent.Stop(),
  WorldEvent.Stopped(),
  WorldEvent.Suspend(),
  WorldEvent.Suspended(),
  WorldEvent.Fail({ reason: "boom" }),
  WorldEvent.Remove(),
  WorldEvent.Removed()
]

type Tag = WorldEvent["_tag"]

/** Every legal (state, event) pair, written out by hand; every other pair must be illegal. */
const legal: ReadonlyArray<readonly [WorldState, Tag, WorldState]> = [
  ["queued", "Admit", "starting"],
  ["stopped", "Queue", "queued"],
  ["failed", "Queue", "queued"],
  ["suspended", "Queue", "queued"],
  ["queued", "Start", "starting"],
  ["stopped", "Start", "starting"],
  ["failed", "Start", "starting"],
  ["suspended", "Start", "starting"],
  ["starting", "Started", "running"],
  ["queued", "Stop", "stopping"],
  ["starting", "Stop", "stopping"],
  ["running", "Stop", "stopping"],
  ["failed", "Stop", "stopping"],
  ["suspending", "Stop", "stopping"],
  ["suspended", "Stop", "stopping"],
  ["stopping", "Stopped", "stopped"],
  ["running", "Suspend", "suspending"],
  ["suspending", "Suspended", "suspended"],
  ["starting", "Fail", "failed"],
  ["running", "Fail", "failed"],
  ["stopping", "Fail", "failed"],
  ["suspending", "Fail", "failed"],
  ["queued", "Remove", "removing"],
  ["starting", "Remove", "removing"],
  ["running", "Remove", "removing"],
  ["stopping", "Remove", "removing"],
  ["stopped", "Remove", "removing"],
  ["suspending", "Remove", "removing"],
  ["suspended", "Remove", "removing"],
  ["failed", "Remove", "removing"],
  ["removing", "Remove", "removing"],
  ["removing", "Removed", "removed"]
]

const expected = new Map(legal.map(([state, tag, next]) => [`${state} ${tag}`, next]))

/** What the actor does with an event: apply it when legal, ignore it otherwise. */
const step = (state: WorldState, event: WorldEvent): WorldState => transition(state, event) ?? state

const state = FastCheck.constantFrom(...worldStates)
const event = FastCheck.oneof(
  FastCheck.constantFrom(...events),
  FastCheck.string().map((reason) => WorldEvent.Fail({ reason }))
)

describe("world transition", () => {
  it.each(legal)("%s --%s--> %s", (from, tag, to) => {
    expect(transition(from, events.find((e) => e._tag === tag)!)).toBe(to)
  })

  it("every pair not in the table is illegal", () => {
    for (const from of worldStates) {
      for (const e of events) {
        expect(transition(from, e), `${from} ${e._tag}`).toBe(expected.get(`${from} ${e._tag}`))
      }
    }
  })

  it("ignores a late Started or Suspended during a stop", () => {
    expect(transition("stopping", WorldEvent.Started())).toBeUndefined()
    expect(transition("stopping", WorldEvent.Suspended())).toBeUndefined()
    expect(transition("stopped", WorldEvent.Started())).toBeUndefined()
  })

  it("removed is terminal", () => {
    for (const e of events) expect(transition("removed", e)).toBeUndefined()
  })

  it("random event sequences only ever yield known states; illegal events change nothing", () => {
    FastCheck.assert(
      FastCheck.property(state, FastCheck.array(event, { maxLength: 40 }), (start, sequence) => {
        let current = start
        for (const e of sequence) {
          const next = transition(current, e)
          if (next === undefined) {
            expect(step(current, e)).toBe(current)
          } else {
            expect(worldStates).toContain(next)
          }
          current = step(current, e)
          expect(worldStates).toContain(current)
        }
      }),
      RUNS
    )
  })

  it("the reason of a failure does not change where it leads", () => {
    FastCheck.assert(
      FastCheck.property(state, FastCheck.string(), (from, reason) => {
        expect(transition(from, WorldEvent.Fail({ reason }))).toBe(transition(from, WorldEvent.Fail({ reason: "" })))
      }),
      RUNS
    )
  })

  it("every state but removed can reach removed", () => {
    for (const from of worldStates) {
      if (from === "removed") continue
      expect(step(step(from, WorldEvent.Remove()), WorldEvent.Removed())).toBe("removed")
    }
  })
})

describe("isSettled", () => {
  it.each([
    ["queued", false],
    ["starting", false],
    ["running", true],
    ["stopping", false],
    ["stopped", true],
    ["suspending", false],
    ["suspended", true],
    ["failed", true],
    ["removing", false],
    ["removed", true]
  ] as const)("%s → %s", (s, settled) => {
    expect(isSettled(s)).toBe(settled)
  })
})

describe("wants", () => {
  const table: ReadonlyArray<readonly [WorldDesired, WorldState, WorldAction]> = [
    ["up", "queued", "none"],
    ["up", "starting", "none"],
    ["up", "running", "none"],
    ["up", "stopping", "none"],
    ["up", "stopped", "start"],
    ["up", "suspending", "none"],
    ["up", "suspended", "start"],
    ["up", "failed", "none"],
    ["up", "removing", "none"],
    ["up", "removed", "none"],
    ["down", "queued", "stop"],
    ["down", "starting", "stop"],
    ["down", "running", "stop"],
    ["down", "stopping", "none"],
    ["down", "stopped", "none"],
    ["down", "suspending", "stop"],
    ["down", "suspended", "stop"],
    ["down", "failed", "stop"],
    ["down", "removing", "none"],
    ["down", "removed", "none"],
    ["removed", "queued", "remove"],
    ["removed", "starting", "remove"],
    ["removed", "running", "remove"],
    ["removed", "stopping", "remove"],
    ["removed", "stopped", "remove"],
    ["removed", "suspending", "remove"],
    ["removed", "suspended", "remove"],
    ["removed", "failed", "remove"],
    ["removed", "removing", "none"],
    ["removed", "removed", "none"]
  ]

  it.each(table)("desired %s, observed %s → %s", (desired, observed, action) => {
    expect(wants(desired, observed)).toBe(action)
  })

  const desired = FastCheck.constantFrom<WorldDesired>("up", "down", "removed")

  it("never asks for an action that is illegal in the observed state", () => {
    FastCheck.assert(
      FastCheck.property(desired, state, (d, observed) => {
        const action = wants(d, observed)
        const legalNow = (e: WorldEvent) => transition(observed, e) !== undefined
        if (action === "start") expect(legalNow(WorldEvent.Queue()) || legalNow(WorldEvent.Start())).toBe(true)
        if (action === "stop") expect(legalNow(WorldEvent.Stop())).toBe(true)
        if (action === "remove") expect(legalNow(WorldEvent.Remove())).toBe(true)
      }),
      RUNS
    )
  })

  it("carrying out what it wants, then letting in-flight work finish, converges", () => {
    const goal: Record<WorldDesired, ReadonlyArray<WorldState>> = {
      up: ["running", "failed", "removed"],
      down: ["stopped", "removed"],
      removed: ["removed"]
    }
    // in-flight states finish the way they were heading
    const finish: Partial<Record<WorldState, WorldEvent>> = {
      queued: WorldEvent.Admit(),
      starting: WorldEvent.Started(),
      stopping: WorldEvent.Stopped(),
      suspending: WorldEvent.Suspended(),
      removing: WorldEvent.Removed()
    }
    FastCheck.assert(
      FastCheck.property(desired, state, (d, start) => {
        let current = start
        for (let i = 0; i < 10; i++) {
          const action = wants(d, current)
          const e =
            action === "start"
              ? WorldEvent.Start()
              : action === "stop"
                ? WorldEvent.Stop()
                : action === "remove"
                  ? WorldEvent.Remove()
                  : finish[current]
          if (e === undefined) break
          current = step(current, e)
        }
        expect(goal[d]).toContain(current)
        expect(wants(d, current)).toBe("none")
      }),
      RUNS
    )
  })
})
