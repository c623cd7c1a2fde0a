/**
 * The machine-global gate: a world starts only while fewer than `max_parallel` run and memory and disk are above their
 * reserves, strictly first come, first served (`domain/admission.ts` decides; this service keeps the line and the
 * permits). A world holds a permit from the moment it is admitted until it stops, fails, is suspended or removed.
 * Waiting is interruptible: a `down` (or Ctrl-C of a waiting `up`) takes the world out of the line.
 */
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import {
  decideGate,
  defaultGateSettings,
  type GateSettings,
  gateClosed,
  type Readings,
  type WaitReason
} from "../domain/admission.js"
import type { DiskFull, InternalError } from "../domain/errors.js"
import { Home } from "./Home.js"
import { sleepToTick } from "./tick.js"
import { Machine } from "./Machine.js"
import { Registry } from "./Registry.js"

const SETTINGS_KEY = "gate"
/** how often the machine is read while worlds wait or run */
export const SAMPLE_EVERY_MS = 2_000

export interface QueueEntry {
  readonly worldId: number
  readonly since: number
  readonly position: number
  readonly reason: WaitReason | undefined
}

export interface AdmissionCounters {
  admitted: number
  queued: number
  suspended: number
  resumed: number
  /** the longest and the total wait of admitted worlds (ms) */
  maxWaitMs: number
  totalWaitMs: number
}

interface Waiter {
  readonly since: number
  readonly queuedAt: number
  readonly granted: Deferred.Deferred<void>
}

const clean = (value: unknown): GateSettings => {
  const v = (value ?? {}) as Partial<GateSettings>
  const num = (x: unknown, fallback: number, min: number) =>
    typeof x === "number" && Number.isFinite(x) && x >= min ? x : fallback
  return {
    maxParallel: Math.floor(num(v.maxParallel, defaultGateSettings.maxParallel, 1)),
    ramReservePercent: Math.min(90, num(v.ramReservePercent, defaultGateSettings.ramReservePercent, 0)),
    diskReserveBytes: num(v.diskReserveBytes, defaultGateSettings.diskReserveBytes, 0),
    resumeFactor: num(v.resumeFactor, defaultGateSettings.resumeFactor, 1)
  }
}

export interface AdmissionService {
  /**
   * Joins the line (or finds the world's place in it) and returns the permit to await: already done when the world
   * holds one. `since` orders the line (when it asked, or was suspended); `path` adds its filesystem to those watched.
   * Leaving early is `release`.
   */
  readonly enter: (worldId: number, since: number, path?: string) => Effect.Effect<Deferred.Deferred<void>>
  /** Takes a permit without waiting: a world found running after a daemon restart keeps running. */
  readonly claim: (worldId: number) => Effect.Effect<void>
  /** Gives the permit back, or leaves the line (its permit is interrupted); the next in line may start. */
  readonly release: (worldId: number) => Effect.Effect<void>
  /** The world's place in the line and why it waits; undefined when it is not in line. */
  readonly entry: (worldId: number) => QueueEntry | undefined
  readonly holds: (worldId: number) => boolean
  /** bumped whenever the line or the permits change: `status` and waiting `up`s follow it */
  readonly changes: SubscriptionRef.SubscriptionRef<number>
  /** the line, first to last */
  readonly queue: Effect.Effect<ReadonlyArray<QueueEntry>>
  /** how many worlds hold a permit */
  readonly running: Effect.Effect<number>
  /** the machine's last reading */
  readonly readings: Effect.Effect<Readings>
  /** the settings in force; `stored`: set by the user rather than the defaults */
  readonly settings: Effect.Effect<GateSettings & { readonly stored: boolean }>
  readonly counters: Effect.Effect<AdmissionCounters>
  /** after a suspension, until memory is back above the reserve times the resume factor */
  readonly recovering: Effect.Effect<boolean>
  /** Memory is short: hold the line at the reserve times the resume factor until it is back. */
  readonly suspended: Effect.Effect<void>
  /** counts a suspended world coming back */
  readonly resumed: Effect.Effect<void>
  /**
   * Each reading of the machine as it is taken (every 2 s, the last one first): the pressure monitor acts on these
   * rather than reading the machine a second time.
   */
  readonly sampled: Stream.Stream<Readings>
  /** Changes (and stores) settings; waiting worlds are let in if the change makes room. */
  readonly setSettings: (patch: Partial<GateSettings>) => Effect.Effect<GateSettings, InternalError | DiskFull>
}

export class Admission extends Context.Tag("berth/Admission")<Admission, AdmissionService>() {}

const make = Effect.gen(function* () {
  const registry = yield* Registry
  const machine = yield* Machine
  const home = yield* Home
  let settings = clean(yield* registry.getSetting(SETTINGS_KEY))
  /** fixed, or `auto`: the settings above came from the defaults (for `berth config`) */
  let stored = (yield* registry.getSetting(SETTINGS_KEY)) !== undefined
  const waiting = new Map<number, Waiter>()
  const holding = new Set<number>()
  let readings: Readings = yield* machine.read([home.root])
  /** after a suspension, the gate asks for the reserve times the resume factor until memory is back above it */
  let recovering = false
  /** worlds let in since the last reading: near the reserve, one per reading */
  let admittedSinceReading = 0
  let decision: ReturnType<typeof decideGate> = { admit: [], waiting: [] }
  const counters: AdmissionCounters = {
    admitted: 0,
    queued: 0,
    suspended: 0,
    resumed: 0,
    maxWaitMs: 0,
    totalWaitMs: 0
  }
  /** bumped whenever the line or the permits change: `status` and waiting `up`s follow it */
  const changes = yield* SubscriptionRef.make(0)
  /** the filesystems worlds live on, besides BERTH_HOME (their worktrees' folders) */
  const watched = new Set<string>([home.root])

  const evaluate = Effect.gen(function* () {
    if (
      recovering &&
      gateClosed(0, readings, { ...settings, maxParallel: Number.MAX_SAFE_INTEGER }, true) === undefined
    ) {
      recovering = false
    }
    decision = decideGate(
      [...waiting].map(([id, w]) => ({ id: String(id), since: w.since })),
      holding.size,
      readings,
      settings,
      recovering,
      admittedSinceReading
    )
    admittedSinceReading += decision.admit.length
    const now = Date.now()
    for (const id of decision.admit) {
      const worldId = Number(id)
      const w = waiting.get(worldId)
      if (w === undefined) continue
      waiting.delete(worldId)
      holding.add(worldId)
      counters.admitted++
      const waited = now - w.queuedAt
      counters.totalWaitMs += waited
      counters.maxWaitMs = Math.max(counters.maxWaitMs, waited)
      yield* Deferred.succeed(w.granted, undefined)
    }
    yield* SubscriptionRef.update(changes, (n) => n + 1)
  })

  /** the readings as they are taken, for the pressure monitor */
  const taken = yield* SubscriptionRef.make(readings)
  const sample = Effect.gen(function* () {
    readings = yield* machine.read([...watched])
    admittedSinceReading = 0
    if (waiting.size > 0 || recovering) yield* evaluate
    yield* SubscriptionRef.set(taken, readings)
  })
  // on the daemon's wake grid, so an idle daemon's periodic looks share their wakes (wake-grid.ts)
  yield* sample.pipe(Effect.zipRight(sleepToTick(SAMPLE_EVERY_MS)), Effect.forever, Effect.forkScoped)

  const enter = (worldId: number, since: number, path?: string) =>
    Effect.gen(function* () {
      if (path !== undefined) watched.add(path)
      if (holding.has(worldId)) {
        const done = yield* Deferred.make<void>()
        yield* Deferred.succeed(done, undefined)
        return done
      }
      const existing = waiting.get(worldId)
      if (existing !== undefined) return existing.granted
      const granted = yield* Deferred.make<void>()
      waiting.set(worldId, { since, queuedAt: Date.now(), granted })
      counters.queued++
      yield* evaluate
      return granted
    })

  /** Takes a permit without waiting: a world found running after a daemon restart keeps running. */
  const claim = (worldId: number) =>
    Effect.gen(function* () {
      waiting.delete(worldId)
      holding.add(worldId)
      yield* evaluate
    })

  const release = (worldId: number) =>
    Effect.gen(function* () {
      const had = holding.delete(worldId)
      const w = waiting.get(worldId)
      if (w !== undefined) {
        waiting.delete(worldId)
        yield* Deferred.interrupt(w.granted)
      }
      if (had || w !== undefined) yield* evaluate
    })

  const entry = (worldId: number): QueueEntry | undefined => {
    const w = waiting.get(worldId)
    if (w === undefined) return undefined
    const d = decision.waiting.find((x) => x.id === String(worldId))
    return { worldId, since: w.since, position: d?.position ?? 1, reason: d?.reason }
  }

  return {
    enter,
    claim,
    release,
    entry,
    holds: (worldId: number) => holding.has(worldId),
    changes,
    queue: Effect.sync(() =>
      [...waiting.keys()]
        .flatMap((id) => {
          const e = entry(id)
          return e === undefined ? [] : [e]
        })
        .sort((a, b) => a.position - b.position)
    ),
    running: Effect.sync(() => holding.size),
    readings: Effect.sync(() => readings),
    settings: Effect.sync(() => ({ ...settings, stored })),
    counters: Effect.sync(() => ({ ...counters })),
    recovering: Effect.sync(() => recovering),
    suspended: Effect.sync(() => {
      recovering = true
      counters.suspended++
    }),
    resumed: Effect.sync(() => {
      counters.resumed++
    }),
    sampled: taken.changes,
    setSettings: (patch: Partial<GateSettings>) =>
      Effect.gen(function* () {
        settings = clean({ ...settings, ...patch })
        stored = true
        yield* registry.setSetting(SETTINGS_KEY, settings)
        yield* evaluate
        return settings
      })
  } satisfies AdmissionService
})

export const AdmissionLive: Layer.Layer<Admission, InternalError | DiskFull, Registry | Machine | Home> = Layer.scoped(
  Admission,
  make
)
