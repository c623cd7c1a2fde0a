/**
 * The gate as the daemon runs it (`services/Admission.ts`) on a fake machine under a TestClock: one line, first come
 * first served, at most max_parallel permits, the RAM and disk reserves, and hysteresis after a suspension. The
 * machine is read every SAMPLE_EVERY_MS, so a change of memory shows only at the next reading.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import type { GateSettings } from "../../src/domain/admission.js"
import { Admission, AdmissionLive, SAMPLE_EVERY_MS } from "../../src/services/Admission.js"
import { admissionDependencies, GiB, makeFakeMachine, within } from "./fakes.js"

/** An Admission on a fake 16 GiB machine with `memoryPercent` available, the gate settings stored as given. */
const gate = (settings: Partial<GateSettings> = {}, memoryPercent = 80) =>
  Effect.gen(function* () {
    const machine = yield* makeFakeMachine(memoryPercent)
    const context = yield* Layer.build(
      AdmissionLive.pipe(Layer.provide(admissionDependencies(machine.service, { gate: settings })))
    )
    // the sampler's first reading runs as soon as it is scheduled: let it, so each `adjust` below is one reading
    yield* Effect.yieldNow()
    return { admission: Context.get(context, Admission), machine: machine.control } as const
  })

const granted = (permit: Deferred.Deferred<void>) => Deferred.isDone(permit)

/** The line as world ids, first to last. */
const line = (admission: Context.Tag.Service<Admission>) => Effect.map(admission.queue, (q) => q.map((e) => e.worldId))

describe("Admission", () => {
  it.scoped("admits first come, first served up to max_parallel; a release lets in the head of the line", () =>
    Effect.gen(function* () {
      const { admission } = yield* gate({ maxParallel: 2 })
      const one = yield* admission.enter(1, 100)
      const two = yield* admission.enter(2, 200)
      expect(yield* granted(one)).toBe(true)
      expect(yield* granted(two)).toBe(true)
      const three = yield* admission.enter(3, 300)
      const five = yield* admission.enter(5, 500)
      // a suspended world rejoins at the time it was suspended: before later arrivals, after earlier ones
      const four = yield* admission.enter(4, 250)
      expect(yield* line(admission)).toEqual([4, 3, 5])
      expect(admission.entry(3)).toMatchObject({
        position: 2,
        reason: { _tag: "Slot", running: 2, maxParallel: 2 }
      })

      yield* admission.release(1)
      expect(yield* granted(four)).toBe(true)
      expect(yield* granted(three)).toBe(false)
      expect(yield* granted(five)).toBe(false)
      yield* admission.release(2)
      expect(yield* granted(three)).toBe(true)
      expect(yield* granted(five)).toBe(false)
      yield* admission.release(4)
      expect(yield* granted(five)).toBe(true)
      expect(yield* admission.running).toBe(2)
      expect(yield* line(admission)).toEqual([])
      expect(yield* admission.counters).toMatchObject({ admitted: 5, queued: 5 })
    })
  )

  it.scoped("entering again finds the same place; a world that holds a permit gets one at once", () =>
    Effect.gen(function* () {
      const { admission } = yield* gate({ maxParallel: 1 })
      const first = yield* admission.enter(1, 100)
      const again = yield* admission.enter(1, 999)
      expect(yield* granted(first)).toBe(true)
      expect(yield* granted(again)).toBe(true)
      const waiting = yield* admission.enter(2, 200)
      expect(yield* admission.enter(2, 50)).toBe(waiting)
      expect(admission.entry(2)?.since).toBe(200)
    })
  )

  it.scoped("nobody overtakes a world waiting for memory: a later one waits behind it, whatever it waits for", () =>
    Effect.gen(function* () {
      const { admission, machine } = yield* gate({ maxParallel: 2, ramReservePercent: 10 }, 5)
      yield* admission.claim(1)
      const b = yield* admission.enter(2, 200)
      expect(admission.entry(2)?.reason).toMatchObject({ _tag: "Ram", reservePercent: 10 })
      // memory is back, but the gate learns it only at the next reading: C comes first and queues behind B
      yield* machine.setMemoryPercent(50)
      const c = yield* admission.enter(3, 300)
      expect(yield* granted(c)).toBe(false)
      expect(yield* line(admission)).toEqual([2, 3])

      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect(yield* granted(b)).toBe(true)
      // the last slot went to B, the head: C waits for a slot now
      expect(yield* granted(c)).toBe(false)
      expect(admission.entry(3)).toMatchObject({ position: 1, reason: { _tag: "Slot", running: 2 } })
    })
  )

  // one reading says nothing of what the worlds it lets in will use: near the reserve, one per reading
  it.scoped("near the memory reserve, worlds are let in one per reading", () =>
    Effect.gen(function* () {
      const { admission, machine } = yield* gate({ maxParallel: 10, ramReservePercent: 10 }, 5)
      const permits = yield* Effect.forEach([1, 2, 3, 4, 5], (id) => admission.enter(id, id * 100))
      yield* machine.setMemoryPercent(12)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect((yield* Effect.filter(permits, granted)).length).toBe(1)
      // a release between readings lets nobody else in: the next one waits for a fresh reading
      yield* admission.release(1)
      expect((yield* Effect.filter(permits, granted)).length).toBe(1)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect((yield* Effect.filter(permits, granted)).length).toBe(2)
      // with room to spare, the rest of the line starts together
      yield* machine.setMemoryPercent(60)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect((yield* Effect.filter(permits, granted)).length).toBe(5)
    })
  )

  it.scoped("a world that leaves the line has its permit interrupted and lets the next one move up", () =>
    Effect.gen(function* () {
      const { admission } = yield* gate({ maxParallel: 1 })
      yield* admission.claim(1)
      const two = yield* admission.enter(2, 200)
      const three = yield* admission.enter(3, 300)
      yield* admission.release(2)
      const exit = yield* within("the permit to end", Effect.exit(Deferred.await(two)))
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(admission.entry(3)?.position).toBe(1)
      yield* admission.release(1)
      expect(yield* granted(three)).toBe(true)
    })
  )

  it.scoped("claim takes a permit without waiting (a world found running after a restart), and it counts", () =>
    Effect.gen(function* () {
      const { admission } = yield* gate({ maxParallel: 1 }, 1)
      yield* admission.claim(7)
      expect(admission.holds(7)).toBe(true)
      const next = yield* admission.enter(8, 100)
      expect(admission.entry(8)?.reason).toMatchObject({ _tag: "Slot" })
      yield* admission.release(7)
      // the slot is free, but memory (1 %) holds the line
      expect(yield* granted(next)).toBe(false)
      expect(admission.entry(8)?.reason).toMatchObject({ _tag: "Ram" })
    })
  )

  it.scoped("low disk on a watched filesystem holds the line until the next reading shows room", () =>
    Effect.gen(function* () {
      const { admission, machine } = yield* gate({ diskReserveBytes: 2 * GiB })
      yield* machine.setDiskFree(1 * GiB)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      const one = yield* admission.enter(1, 100, "/worktrees")
      expect(admission.entry(1)?.reason).toMatchObject({ _tag: "Disk", freeBytes: 1 * GiB })
      yield* machine.setDiskFree(3 * GiB)
      yield* TestClock.adjust(SAMPLE_EVERY_MS - 1)
      expect(yield* granted(one)).toBe(false)
      yield* TestClock.adjust(1)
      expect(yield* granted(one)).toBe(true)
    })
  )

  it.scoped("after a suspension the gate asks for the reserve times the resume factor, then forgets it", () =>
    Effect.gen(function* () {
      const { admission, machine } = yield* gate({ ramReservePercent: 10, resumeFactor: 1.5 }, 12)
      yield* admission.suspended
      expect(yield* admission.recovering).toBe(true)
      const back = yield* admission.enter(1, 100)
      expect(admission.entry(1)?.reason).toMatchObject({ _tag: "Ram", reservePercent: 15 })
      yield* machine.setMemoryPercent(14)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect(yield* granted(back)).toBe(false)
      yield* machine.setMemoryPercent(16)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect(yield* granted(back)).toBe(true)
      expect(yield* admission.recovering).toBe(false)
      // recovered: the plain reserve applies again
      yield* machine.setMemoryPercent(11)
      yield* TestClock.adjust(SAMPLE_EVERY_MS)
      expect(yield* granted(yield* admission.enter(2, 200))).toBe(true)
    })
  )

  it.scoped("new settings apply at once and are stored; a larger max_parallel lets waiting worlds in", () =>
    Effect.gen(function* () {
      const { admission } = yield* gate({ maxParallel: 1 })
      yield* admission.claim(1)
      const two = yield* admission.enter(2, 200)
      const three = yield* admission.enter(3, 300)
      expect((yield* admission.settings).stored).toBe(true)
      yield* admission.setSettings({ maxParallel: 3 })
      expect(yield* granted(two)).toBe(true)
      expect(yield* granted(three)).toBe(true)
    })
  )

  it.scoped("reads the machine every SAMPLE_EVERY_MS, and not in between", () =>
    Effect.gen(function* () {
      const { machine } = yield* gate()
      // past the readings taken at start
      yield* TestClock.adjust(1)
      const before = yield* machine.reads
      yield* TestClock.adjust(SAMPLE_EVERY_MS * 3 - 2)
      expect((yield* machine.reads) - before).toBe(2)
      yield* TestClock.adjust(1)
      expect((yield* machine.reads) - before).toBe(3)
    })
  )
})
