import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import type { ServiceState } from "../../src/domain/service-state.js"
import {
  livenessDelayMs,
  livenessStep,
  probeDueMs,
  STEADY_PROBE_CAP_MS,
  ServiceEvent,
  serviceStates,
  transition,
  UNHEALTHY_AFTER_MISSES
} from "../../src/domain/service-state.js"

const RUNS = { numRuns: 500 }

const clean = ServiceEvent.Exited({ code: 0, signal: null })
const crashed = ServiceEvent.Exited({ code: 1, signal: null })
const killed = ServiceEvent.Exited({ code: null, signal: "SIGSEGV" })
/** the miss that turns a healthy service unhealthy */
const failing = ServiceEvent.Unhealthy({ misses: UNHEALTHY_AFTER_MISSES })

/** One representative per kind of event; `Exited` twice because its payload picks the target. */
const events: ReadonlyArray<readonly [string, ServiceEvent]> = [
  ["Start", ServiceEvent.Start()],
  ["Spawned", ServiceEvent.Spawned()],
  ["Healthy", ServiceEvent.Healthy()],
  ["Unhealthy", failing],
  ["Exited(0)", clean],
  ["Exited(1)", crashed],
  ["Stop", ServiceEvent.Stop()],
  ["StopDone", ServiceEvent.StopDone()],
  ["Restart", ServiceEvent.Restart()],
  ["Fail", ServiceEvent.Fail({ reason: "boom" })]
]

/** Every legal (state, event) pair, by hand; all others must be illegal. */
const legal: ReadonlyArray<readonly [ServiceState, string, ServiceState]> = [
  ["pending", "Start", "starting"],
  ["stopped", "Start", "starting"],
  ["exited", "Start", "starting"],
  ["failed", "Start", "starting"],
  ["restarting", "Start", "starting"],
  ["starting", "Spawned", "running"],
  ["running", "Healthy", "healthy"],
  ["healthy", "Healthy", "healthy"],
  ["unhealthy", "Healthy", "healthy"],
  ["running", "Unhealthy", "unhealthy"],
  ["healthy", "Unhealthy", "unhealthy"],
  ["unhealthy", "Unhealthy", "unhealthy"],
  ["starting", "Exited(0)", "exited"],
  ["running", "Exited(0)", "exited"],
  ["healthy", "Exited(0)", "exited"],
  ["unhealthy", "Exited(0)", "exited"],
  ["starting", "Exited(1)", "failed"],
  ["running", "Exited(1)", "failed"],
  ["healthy", "Exited(1)", "failed"],
  ["unhealthy", "Exited(1)", "failed"],
  ["pending", "Stop", "stopping"],
  ["starting", "Stop", "stopping"],
  ["running", "Stop", "stopping"],
  ["healthy", "Stop", "stopping"],
  ["unhealthy", "Stop", "stopping"],
  ["restarting", "Stop", "stopping"],
  ["exited", "Stop", "stopping"],
  ["failed", "Stop", "stopping"],
  ["stopping", "StopDone", "stopped"],
  ["starting", "Restart", "restarting"],
  ["running", "Restart", "restarting"],
  ["healthy", "Restart", "restarting"],
  ["unhealthy", "Restart", "restarting"],
  ["pending", "Fail", "failed"],
  ["starting", "Fail", "failed"],
  ["running", "Fail", "failed"],
  ["healthy", "Fail", "failed"],
  ["unhealthy", "Fail", "failed"],
  ["restarting", "Fail", "failed"]
]

const expected = new Map(legal.map(([state, name, next]) => [`${state} ${name}`, next]))
const eventNamed = new Map(events)

const step = (state: ServiceState, event: ServiceEvent): ServiceState => transition(state, event) ?? state

const state = FastCheck.constantFrom(...serviceStates)
const exitStatus = FastCheck.record({
  code: FastCheck.option(FastCheck.integer({ min: 0, max: 255 }), { nil: null }),
  signal: FastCheck.option(FastCheck.constantFrom("SIGTERM", "SIGKILL", "SIGSEGV", "SIGINT"), { nil: null })
})
const event = FastCheck.oneof(
  FastCheck.constantFrom(...events.map(([, e]) => e)),
  FastCheck.integer({ min: 1, max: 10 }).map((misses) => ServiceEvent.Unhealthy({ misses })),
  exitStatus.map((exit) => ServiceEvent.Exited(exit)),
  FastCheck.string().map((reason) => ServiceEvent.Fail({ reason }))
)

describe("service transition", () => {
  it.each(legal)("%s --%s--> %s", (from, name, to) => {
    expect(transition(from, eventNamed.get(name)!)).toBe(to)
  })

  it("every pair not in the table is illegal", () => {
    for (const from of serviceStates) {
      for (const [name, e] of events) {
        expect(transition(from, e), `${from} ${name}`).toBe(expected.get(`${from} ${name}`))
      }
    }
  })

  it("a health result during or after a stop is ignored", () => {
    for (const from of ["stopping", "stopped"] as const) {
      expect(transition(from, ServiceEvent.Healthy())).toBeUndefined()
      expect(transition(from, failing)).toBeUndefined()
    }
  })

  it("a stop always ends in stopped: late exits, verdicts and give-ups are ignored while stopping", () => {
    for (const [, e] of events) {
      const next = transition("stopping", e)
      expect(next === undefined || next === "stopped").toBe(true)
    }
    expect(transition("stopping", killed)).toBeUndefined()
  })

  it("a signal death is a failure, never a clean exit", () => {
    expect(transition("healthy", killed)).toBe("failed")
    expect(transition("running", ServiceEvent.Exited({ code: 0, signal: "SIGTERM" }))).toBe("failed")
  })

  it("random event sequences only ever yield known states; illegal events change nothing", () => {
    FastCheck.assert(
      FastCheck.property(state, FastCheck.array(event, { maxLength: 40 }), (start, sequence) => {
        let current = start
        for (const e of sequence) {
          const next = transition(current, e)
          if (next === undefined) expect(step(current, e)).toBe(current)
          else expect(serviceStates).toContain(next)
          current = step(current, e)
          expect(serviceStates).toContain(current)
        }
      }),
      RUNS
    )
  })

  it("exited is reached only through a clean exit", () => {
    FastCheck.assert(
      FastCheck.property(state, event, (from, e) => {
        if (from !== "exited" && transition(from, e) === "exited") {
          expect(e).toMatchObject({ _tag: "Exited", code: 0, signal: null })
        }
      }),
      RUNS
    )
  })

  it("health results are legal exactly while a spawned process is being watched", () => {
    for (const from of serviceStates) {
      const watched = from === "running" || from === "healthy" || from === "unhealthy"
      expect(transition(from, ServiceEvent.Healthy()) !== undefined).toBe(watched)
      expect(transition(from, failing) !== undefined).toBe(watched)
    }
  })

  it("a typical life: start, spawn, flap, crash, restart, stop", () => {
    const life = [
      ServiceEvent.Start(),
      ServiceEvent.Spawned(),
      ServiceEvent.Healthy(),
      failing,
      ServiceEvent.Healthy(),
      ServiceEvent.Restart(),
      ServiceEvent.Healthy(),
      ServiceEvent.Start(),
      ServiceEvent.Spawned(),
      ServiceEvent.Stop(),
      ServiceEvent.Healthy(),
      crashed,
      ServiceEvent.StopDone()
    ]
    const seen: Array<ServiceState> = []
    life.reduce<ServiceState>((s, e) => {
      const next = step(s, e)
      seen.push(next)
      return next
    }, "pending")
    expect(seen).toEqual([
      "starting",
      "running",
      "healthy",
      "unhealthy",
      "healthy",
      "restarting",
      "restarting",
      "starting",
      "running",
      "stopping",
      "stopping",
      "stopping",
      "stopped"
    ])
  })

  it("one or two missed probes leave a healthy service healthy (routable); the third in a row turns it unhealthy", () => {
    expect(UNHEALTHY_AFTER_MISSES).toBe(3)
    expect(transition("healthy", ServiceEvent.Unhealthy({ misses: 1 }))).toBe("healthy")
    expect(transition("healthy", ServiceEvent.Unhealthy({ misses: 2 }))).toBe("healthy")
    expect(transition("healthy", ServiceEvent.Unhealthy({ misses: 3 }))).toBe("unhealthy")
    expect(transition("unhealthy", ServiceEvent.Unhealthy({ misses: 4 }))).toBe("unhealthy")
    // before it was ever healthy, a failed readiness check is a verdict, whatever the count
    expect(transition("running", ServiceEvent.Unhealthy({ misses: 1 }))).toBe("unhealthy")
    expect(transition("unhealthy", ServiceEvent.Healthy())).toBe("healthy")
  })

  it("livenessStep counts misses in a row and a pass resets them", () => {
    expect(livenessStep(0, true)).toEqual({ misses: 0, event: ServiceEvent.Healthy() })
    expect(livenessStep(0, false)).toEqual({ misses: 1, event: ServiceEvent.Unhealthy({ misses: 1 }) })
    expect(livenessStep(2, false)).toEqual({ misses: 3, event: ServiceEvent.Unhealthy({ misses: 3 }) })
    expect(livenessStep(5, true).misses).toBe(0)
  })

  it("while watched, a healthy service is unhealthy exactly when its last three probes or more all missed", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(FastCheck.boolean(), { maxLength: 60 }), (results) => {
        let state: ServiceState = "healthy"
        let misses = 0
        let trailing = 0
        for (const passed of results) {
          const step = livenessStep(misses, passed)
          misses = step.misses
          state = transition(state, step.event) ?? state
          trailing = passed ? 0 : trailing + 1
          expect(state).toBe(trailing >= UNHEALTHY_AFTER_MISSES ? "unhealthy" : "healthy")
        }
      }),
      RUNS
    )
  })
})

describe("livenessDelayMs", () => {
  it("waits the interval for the first passes, then longer with each pass, up to 24 intervals or 2 minutes", () => {
    expect([0, 1, 2, 3].map((p) => livenessDelayMs(5_000, p))).toEqual([5_000, 5_000, 5_000, 5_000])
    expect([4, 5, 6, 7, 8, 9, 100].map((p) => livenessDelayMs(5_000, p))).toEqual([
      10_000, 20_000, 40_000, 80_000, 120_000, 120_000, 120_000
    ])
    // a short interval stops at 24 of them; a long one is never shortened
    expect(livenessDelayMs(100, 50)).toBe(2_400)
    expect(livenessDelayMs(60_000, 50)).toBe(120_000)
    expect(livenessDelayMs(200_000, 50)).toBe(200_000)
  })

  it("never waits less than the interval nor more than the cap, and a miss brings back the interval", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.integer({ min: 1, max: 120_000 }),
        FastCheck.nat(1_000),
        FastCheck.double({ min: 0, max: 1, noNaN: true }),
        (interval, passes, spread) => {
          const delay = livenessDelayMs(interval, passes, spread)
          expect(delay).toBeGreaterThanOrEqual(interval)
          expect(delay).toBeLessThanOrEqual(Math.max(interval, STEADY_PROBE_CAP_MS))
          expect(livenessDelayMs(interval, 0, spread)).toBe(interval)
          // the spread only ever shortens a backed-off wait, by a fifth at most
          const full = livenessDelayMs(interval, passes)
          expect(delay).toBeLessThanOrEqual(full)
          expect(delay).toBeGreaterThanOrEqual(Math.min(full, Math.max(interval, Math.round(full * 0.8))))
        }
      )
    )
  })

  it("spreads the steady waits of services started together over a fifth of the cap", () => {
    expect(livenessDelayMs(5_000, 100, 0)).toBe(96_000)
    expect(livenessDelayMs(5_000, 100, 0.5)).toBe(108_000)
    expect(livenessDelayMs(5_000, 100, 1)).toBe(120_000)
    // the first passes keep the interval exactly
    expect(livenessDelayMs(5_000, 2, 0)).toBe(5_000)
  })
})

describe("probeDueMs", () => {
  it("ends a backed-off wait on the next tick of the grid, and keeps a wait of one interval", () => {
    // 10 s from 1.3 s: due at 11.3 s, so at 15 s
    expect(probeDueMs(1_300, 10_000, 5_000)).toBe(13_700)
    // already on a tick
    expect(probeDueMs(5_000, 10_000, 5_000)).toBe(10_000)
    // an interval's wait (starting, or after a miss) keeps its pace
    expect(probeDueMs(1_300, 5_000, 5_000)).toBe(5_000)
    // a short interval is its own grid; 0 keeps every wait
    expect(probeDueMs(1_300, 800, 200)).toBe(900)
    expect(probeDueMs(1_300, 10_000, 5_000, 0)).toBe(10_000)
  })

  it("waits at least the delay and less than one tick more; waits that end together end on one tick", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.integer({ min: 0, max: 2 ** 42 }),
        FastCheck.integer({ min: 1, max: 200_000 }),
        FastCheck.integer({ min: 1, max: 120_000 }),
        FastCheck.integer({ min: 0, max: 10_000 }),
        (now, delay, interval, slotMs) => {
          const wait = probeDueMs(now, delay, interval, slotMs)
          const slot = Math.min(slotMs, interval)
          if (delay <= interval || slot === 0) {
            expect(wait).toBe(delay)
            return
          }
          expect(wait).toBeGreaterThanOrEqual(delay)
          expect(wait).toBeLessThan(delay + slot)
          expect((now + wait) % slot).toBe(0)
          // two services whose backed-off waits end within the same tick are probed at the same moment
          const other = probeDueMs(now + 1, delay - 1, interval, slotMs)
          if (delay - 1 > interval) expect(now + 1 + other).toBe(now + wait)
        }
      ),
      RUNS
    )
  })
})
