import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { WorldDesired, WorldFacts, WorldState } from "../../src/domain/world-state.js"
import {
  decide,
  finishesRemoval,
  isSettled,
  step as stepLife,
  transition,
  WorldEvent,
  worldStates
} from "../../src/domain/world-state.js"

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
  WorldEvent.Degrade({ reason: "worker: exited (exit code 3)" }),
  WorldEvent.Restore(),
  WorldEvent.Remove(),
  WorldEvent.Removed(),
  WorldEvent.Recover(),
  WorldEvent.Unwatched({ reason: "config" })
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
  ["running", "Start", "starting"],
  ["degraded", "Start", "starting"],
  ["starting", "Started", "running"],
  ["queued", "Stop", "stopping"],
  ["starting", "Stop", "stopping"],
  ["running", "Stop", "stopping"],
  ["degraded", "Stop", "stopping"],
  ["failed", "Stop", "stopping"],
  ["suspending", "Stop", "stopping"],
  ["suspended", "Stop", "stopping"],
  ["stopping", "Stopped", "stopped"],
  ["queued", "Suspend", "suspending"],
  ["starting", "Suspend", "suspending"],
  ["running", "Suspend", "suspending"],
  ["degraded", "Suspend", "suspending"],
  ["suspending", "Suspended", "suspended"],
  ["queued", "Fail", "failed"],
  ["starting", "Fail", "failed"],
  ["running", "Fail", "failed"],
  ["degraded", "Fail", "failed"],
  ["running", "Degrade", "degraded"],
  ["degraded", "Restore", "running"],
  ["stopping", "Fail", "failed"],
  ["suspending", "Fail", "failed"],
  ["queued", "Remove", "removing"],
  ["starting", "Remove", "removing"],
  ["running", "Remove", "removing"],
  ["degraded", "Remove", "removing"],
  ["stopping", "Remove", "removing"],
  ["stopped", "Remove", "removing"],
  ["suspending", "Remove", "removing"],
  ["suspended", "Remove", "removing"],
  ["failed", "Remove", "removing"],
  ["removing", "Remove", "removing"],
  ["removing", "Removed", "removed"],
  ["queued", "Recover", "stopped"],
  ["starting", "Recover", "stopped"],
  ["stopping", "Recover", "stopped"],
  ["suspending", "Recover", "stopped"],
  ...(
    ["queued", "starting", "running", "degraded", "stopping", "stopped", "suspending", "suspended", "failed"] as const
  ).map((from) => [from, "Unwatched", "running"] as const)
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

describe("decide", () => {
  const desired = FastCheck.constantFrom<WorldDesired>("up", "down", "removed")
  const facts = FastCheck.record<WorldFacts>({
    desired,
    observed: state,
    isMain: FastCheck.boolean(),
    pathExists: FastCheck.boolean(),
    worktreeReady: FastCheck.boolean(),
    hasActor: FastCheck.boolean(),
    liveProcesses: FastCheck.nat(3),
    recorded: FastCheck.boolean(),
    wakesOnRequest: FastCheck.boolean(),
    runsAnywhere: FastCheck.boolean()
  })

  it("never asks for an action that is illegal in the observed state", () => {
    FastCheck.assert(
      FastCheck.property(facts, (f) => {
        const action = decide(f)
        const legalNow = (s: WorldState, e: WorldEvent) => transition(s, e) !== undefined
        // an adopted world first settles what a crash cut short, then starts (or queues)
        const settledFirst = step(f.observed, WorldEvent.Recover())
        if (action === "adopt") {
          expect(legalNow(settledFirst, WorldEvent.Start()) || legalNow(settledFirst, WorldEvent.Queue())).toBe(true)
        }
        if (action === "teardown" || (action === "settle" && finishesRemoval(f))) {
          expect(legalNow(f.observed, WorldEvent.Remove())).toBe(true)
        }
      }),
      RUNS
    )
  })

  it("an actor's own settle pass, carried out, leaves nothing for the next pass but what the user must ask for", () => {
    // what the actor does for each answer, as events (processes aside)
    const carry = (f: WorldFacts): WorldFacts => {
      switch (decide(f)) {
        case "adopt":
          return {
            ...f,
            observed: step(step(step(f.observed, WorldEvent.Recover()), WorldEvent.Start()), WorldEvent.Started()),
            liveProcesses: 1,
            recorded: true
          }
        case "stop-strays":
        case "settle": {
          if (finishesRemoval(f))
            return { ...f, observed: step(step(f.observed, WorldEvent.Remove()), WorldEvent.Removed()) }
          let observed = step(f.observed, WorldEvent.Recover())
          if (observed === "running" || observed === "suspended")
            observed = step(step(observed, WorldEvent.Stop()), WorldEvent.Stopped())
          return { ...f, observed, liveProcesses: 0 }
        }
        case "release": {
          let observed = step(f.observed, WorldEvent.Recover())
          if (observed === "running" || observed === "degraded" || observed === "suspended")
            observed = step(step(observed, WorldEvent.Stop()), WorldEvent.Stopped())
          return { ...f, desired: "down", observed, liveProcesses: 0 }
        }
        default:
          return f
      }
    }
    FastCheck.assert(
      FastCheck.property(facts, (f0) => {
        const f = { ...f0, hasActor: false, pathExists: true }
        const after = carry(f)
        if (after.observed === "removed") return
        expect(decide(after)).toBe(after.desired === "up" && after.observed === "running" ? "adopt" : "none")
      }),
      RUNS
    )
  })
})

describe("step", () => {
  const reason = FastCheck.option(FastCheck.string({ maxLength: 8 }), { nil: null })
  const run = FastCheck.option(FastCheck.constantFrom("idle", "launching", "running"), { nil: undefined })

  it("moves the state as transition says, asks for its row and its announcement, and keeps anything else", () => {
    FastCheck.assert(
      FastCheck.property(state, event, reason, run, reason, (s, e, why, r, before) => {
        const life = { state: s, reason: before, run: "idle", extra: 1 }
        const next = stepLife(life, e, why, r)
        const to = transition(s, e)
        expect(next.life.extra).toBe(1)
        expect(next.life.run).toBe(r ?? "idle")
        if (to === undefined) {
          // an event that moves nothing asks for nothing: no write, no publish
          expect(next.effects).toEqual([])
          expect(next.life.state).toBe(s)
          expect(next.life.reason).toBe(before)
          if (r === undefined) expect(next.life).toBe(life)
        } else {
          expect(next.life.state).toBe(to)
          expect(next.life.reason).toBe(why)
          expect(next.effects).toEqual([
            { _tag: "Record", state: to, reason: why },
            { _tag: "Announce", from: s, to }
          ])
        }
      }),
      RUNS
    )
  })
})
