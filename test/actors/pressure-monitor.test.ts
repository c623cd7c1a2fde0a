/**
 * The pressure monitor against the real gate on a fake machine, with fake worlds whose suspension does what a
 * WorldActor does with the gate, under a TestClock: below the RAM reserve it suspends the newest running world that
 * holds a permit and has run the dwell time, one at a time with the settle delay; the suspended world rejoins the line
 * and comes back once memory is above the reserve times the resume factor; `idle_suspend` lets an idle world sleep.
 */
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as TestClock from "effect/TestClock"
import {
  DEFAULT_DWELL_MS,
  DEFAULT_SETTLE_MS,
  dwellMs,
  IDLE_DISCOVER_MS,
  monitorPressure,
  PressureTargets,
  settleMs
} from "../../src/actors/PressureMonitor.js"
import type { GateSettings } from "../../src/domain/admission.js"
import { Admission, AdmissionLive, SAMPLE_EVERY_MS } from "../../src/services/Admission.js"
import { admissionDependencies, awaitRef, GiB, makeFakeMachine, makeFakeWorlds } from "./fakes.js"

const DWELL = DEFAULT_DWELL_MS
const SETTLE = DEFAULT_SETTLE_MS

/** The gate (reserve 10 %, resume factor 1.5), fake worlds on it, and the monitor running in the test's scope. */
const monitored = (memoryPercent = 80, settings: Partial<GateSettings> = {}) =>
  Effect.gen(function* () {
    const machine = yield* makeFakeMachine(memoryPercent)
    const context = yield* Layer.build(
      AdmissionLive.pipe(
        Layer.provide(
          admissionDependencies(machine.service, {
            gate: { maxParallel: 10, ramReservePercent: 10, resumeFactor: 1.5, ...settings }
          })
        )
      )
    )
    const admission = Context.get(context, Admission)
    const worlds = yield* makeFakeWorlds(admission)
    const start = monitorPressure.pipe(
      Effect.provideService(Admission, admission),
      Effect.provideService(PressureTargets, worlds.service)
    )
    return { admission, machine: machine.control, worlds: worlds.control, start } as const
  })

const events = (worlds: { readonly events: SubscriptionRef.SubscriptionRef<ReadonlyArray<string>> }) =>
  SubscriptionRef.get(worlds.events)

const eventSeen = (worlds: { readonly events: SubscriptionRef.SubscriptionRef<ReadonlyArray<string>> }, e: string) =>
  awaitRef(e, worlds.events, (all) => all.includes(e))

describe("PressureMonitor", () => {
  it.effect("reads its knobs through Effect's Config: a value given is taken, one out of range is the default", () =>
    Effect.gen(function* () {
      const given = ConfigProvider.fromMap(
        new Map([
          ["BERTH_PRESSURE_SETTLE_MS", "500"],
          ["BERTH_PRESSURE_DWELL_MS", "-3"]
        ])
      )
      expect(yield* Effect.withConfigProvider(settleMs, given)).toBe(500)
      expect(yield* Effect.withConfigProvider(dwellMs, given)).toBe(DEFAULT_DWELL_MS)
      expect(yield* Effect.withConfigProvider(settleMs, ConfigProvider.fromMap(new Map()))).toBe(DEFAULT_SETTLE_MS)
    })
  )

  it("runs with the documented defaults", () => {
    expect(DWELL).toBe(60_000)
    expect(SETTLE).toBe(10_000)
  })

  it.scoped("suspends the newest running world under pressure, one at a time, each after the settle delay", () =>
    Effect.gen(function* () {
      const { admission, machine, worlds, start } = yield* monitored()
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* worlds.add({ id: 2, startedAt: 1_000 })
      yield* worlds.add({ id: 3, startedAt: 2_000 })
      yield* start
      // plenty of memory: nothing happens, however long
      yield* TestClock.adjust(DWELL + 2_000)
      expect(yield* events(worlds)).toEqual([])

      yield* machine.setMemoryPercent(5)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "suspend 3")
      expect((yield* worlds.reasons).get(3)).toBe("suspended: low on memory (5% free, needs 10%)")
      // the suspended world is back in line at once, and the gate holds it to the reserve times the resume factor
      expect(yield* admission.recovering).toBe(true)
      expect(admission.entry(3)?.reason).toMatchObject({ _tag: "Ram", reservePercent: 15 })

      // memory is still short, but the last suspension has to show in the readings first
      yield* TestClock.adjust(SETTLE - SAMPLE_EVERY_MS)
      expect(yield* events(worlds)).toEqual(["suspend 3"])
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "suspend 2")
      expect(yield* events(worlds)).toEqual(["suspend 3", "suspend 2"])
      expect(admission.holds(1)).toBe(true)
    })
  )

  it.scoped("never suspends a world that started within the dwell time, even the newest", () =>
    Effect.gen(function* () {
      const { worlds, start } = yield* monitored(5)
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* worlds.add({ id: 2, startedAt: 50_000 })
      yield* start
      yield* TestClock.adjust(DWELL - SAMPLE_EVERY_MS)
      expect(yield* events(worlds)).toEqual([])
      // world 1 has run the dwell time; world 2, newer, has not: the older one goes
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "suspend 1")
      // world 2 reaches the dwell time at 50 s + DWELL
      yield* TestClock.adjust(50_000 - SAMPLE_EVERY_MS)
      expect(yield* events(worlds)).toEqual(["suspend 1"])
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "suspend 2")
    })
  )

  it.scoped("resumes suspended worlds in the order they were suspended, once memory is above the reserve × 1.5", () =>
    Effect.gen(function* () {
      // two slots: world 1 keeps one, so only one of the suspended worlds can come back
      const { admission, machine, worlds, start } = yield* monitored(80, { maxParallel: 2 })
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* worlds.add({ id: 2, startedAt: 1_000 })
      yield* worlds.add({ id: 3, startedAt: 2_000 })
      yield* start
      yield* TestClock.adjust(DWELL + 2_000)
      yield* machine.setMemoryPercent(5)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "suspend 3")
      yield* TestClock.adjust(SETTLE)
      yield* eventSeen(worlds, "suspend 2")
      yield* machine.setMemoryPercent(12)
      // above the reserve (no more suspensions), below the reserve times 1.5 (nobody comes back)
      yield* TestClock.adjust(SETTLE * 3)
      expect(yield* events(worlds)).toEqual(["suspend 3", "suspend 2"])
      expect((yield* admission.queue).map((e) => e.worldId)).toEqual([3, 2])

      yield* machine.setMemoryPercent(16)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "resume 3")
      expect(yield* admission.recovering).toBe(false)
      expect(admission.entry(2)?.reason).toMatchObject({ _tag: "Slot", running: 2, maxParallel: 2 })
      // it has just resumed: within the dwell time, so it is not the next to go either
      yield* machine.setMemoryPercent(5)
      yield* TestClock.adjust(SETTLE)
      yield* eventSeen(worlds, "suspend 1")
      expect(yield* events(worlds)).toEqual(["suspend 3", "suspend 2", "resume 3", "suspend 1"])
    })
  )

  it.scoped("leaves alone a world that holds no permit", () =>
    Effect.gen(function* () {
      const { worlds, start } = yield* monitored(5)
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* worlds.add({ id: 9, startedAt: 1_000, holds: false })
      yield* start
      yield* TestClock.adjust(DWELL + 2_000)
      yield* eventSeen(worlds, "suspend 1")
      yield* TestClock.adjust(SETTLE * 3)
      expect(yield* events(worlds)).toEqual(["suspend 1"])
    })
  )

  it.scoped("does not suspend for low disk: only memory is given back by stopping processes", () =>
    Effect.gen(function* () {
      const { machine, worlds, start } = yield* monitored()
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* machine.setDiskFree(GiB / 2)
      yield* start
      yield* TestClock.adjust(DWELL * 2)
      expect(yield* events(worlds)).toEqual([])
    })
  )

  it.scoped(
    "lets a world idle for [project] idle_suspend sleep, counted from its last request, without requeuing it",
    () =>
      Effect.gen(function* () {
        const { admission, worlds, start } = yield* monitored()
        yield* worlds.add({ id: 1, startedAt: 0, idleSuspendMs: 30_000 })
        yield* worlds.add({ id: 2, startedAt: 0 })
        yield* start
        yield* TestClock.adjust(20_000)
        yield* worlds.request(1, 20_000)
        yield* TestClock.adjust(30_000 - SAMPLE_EVERY_MS)
        expect(yield* events(worlds)).toEqual([])
        yield* TestClock.adjust(SAMPLE_EVERY_MS)
        yield* eventSeen(worlds, "idle 1")
        expect((yield* worlds.reasons).get(1)).toBe("suspended: no request for 30 s; its next request wakes it")
        expect(admission.holds(1)).toBe(false)
        expect(yield* admission.queue).toEqual([])
        expect(yield* admission.recovering).toBe(false)
        yield* TestClock.adjust(DWELL * 2)
        expect(yield* events(worlds)).toEqual(["idle 1"])
      })
  )

  it.scoped("at rest with no idle_suspend, looks at the worlds once a minute, and at once when one changes", () =>
    Effect.gen(function* () {
      const { worlds, start } = yield* monitored()
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* start
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      const first = yield* worlds.looks
      expect(first).toBe(1)
      // a minute of ticks every 2 s reads the worlds once more, at its end
      yield* TestClock.adjust(IDLE_DISCOVER_MS - 2 * SAMPLE_EVERY_MS)
      expect(yield* worlds.looks).toBe(first)
      yield* TestClock.adjust(2 * SAMPLE_EVERY_MS)
      expect(yield* worlds.looks).toBe(first + 1)
      // a world that starts with idle_suspend is looked at on the next tick, and idles on time
      yield* worlds.add({ id: 2, startedAt: IDLE_DISCOVER_MS + SAMPLE_EVERY_MS, idleSuspendMs: 6_000 })
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect(yield* worlds.looks).toBe(first + 2)
      yield* TestClock.adjust(8_000)
      yield* eventSeen(worlds, "idle 2")
    })
  )

  it.scoped("a world idled in a tick is not also picked for pressure in it: pressure takes another", () =>
    Effect.gen(function* () {
      const { machine, worlds, start } = yield* monitored()
      yield* worlds.add({ id: 1, startedAt: 0 })
      // the newest, and idle from 63 s on; idleness is looked at every 10 s, so first at the tick of 70 s
      yield* worlds.add({ id: 2, startedAt: 1_000, idleSuspendMs: 62_000 })
      yield* start
      yield* TestClock.adjust(68_500)
      expect(yield* events(worlds)).toEqual([])
      yield* machine.setMemoryPercent(5)
      yield* TestClock.adjust(1_500)
      yield* eventSeen(worlds, "idle 2")
      yield* eventSeen(worlds, "suspend 1")
      expect([...(yield* events(worlds))].sort()).toEqual(["idle 2", "suspend 1"])
    })
  )

  it.scoped("keeps watching after a tick that failed (the registry could not be read)", () =>
    Effect.gen(function* () {
      const { machine, worlds, start } = yield* monitored()
      yield* worlds.add({ id: 1, startedAt: 0 })
      yield* start
      yield* TestClock.adjust(DWELL)
      yield* machine.setMemoryPercent(5)
      yield* worlds.failNextRead
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect(yield* events(worlds)).toEqual([])
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      yield* eventSeen(worlds, "suspend 1")
    })
  )
})
