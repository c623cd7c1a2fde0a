/**
 * The pressure monitor: one fiber that looks at each reading of the machine the gate takes (every 2 s) and, while
 * available memory is below the reserve, suspends the newest running world — one at a time, each suspension given time
 * to show in the readings, never a world that started or resumed within the dwell time. Suspended worlds wait in the
 * gate's one fair line and come back, oldest first, once memory is above the reserve by the resume factor. The
 * decision is `domain/admission.ts`'s `suspendNow`; this only reads and acts.
 *
 * What it reads of the worlds and how it suspends one go through `PressureTargets`, so tests can drive the monitor
 * with a fake set of worlds and a TestClock, without the engine.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { describeWait, shouldIdle, suspendNow, underPressure } from "../domain/admission.js"
import type { DiskFull, InternalError } from "../domain/errors.js"
import { Admission } from "../services/Admission.js"
import { ConfigFiles } from "../services/ConfigFiles.js"
import { Router } from "../services/proxy/Router.js"
import { Registry } from "../services/Registry.js"
import { numberKnob } from "../domain/knobs.js"
import { Worlds } from "./Worlds.js"

export const DEFAULT_SETTLE_MS = 10_000
export const DEFAULT_DWELL_MS = 60_000
/** after one suspension, the next waits this long: the freed memory must show in the readings first */
export const settleMs = numberKnob("BERTH_PRESSURE_SETTLE_MS", DEFAULT_SETTLE_MS)
/** a world that started or resumed this recently is not suspended (no flapping) */
export const dwellMs = numberKnob("BERTH_PRESSURE_DWELL_MS", DEFAULT_DWELL_MS)

/** A running world as the monitor sees it. */
export interface PressureWorld {
  readonly id: number
  readonly name: string
  /** when it last became running (its creation, if it never did): dwell and idleness count from here */
  readonly startedAt: number
  /** `[project] idle_suspend` from its berth.toml; undefined when unset or unreadable (asked only per tick) */
  readonly idleSuspendMs: Effect.Effect<number | undefined>
  /** when its routes last saw a request; undefined when none did */
  readonly lastRequestAt: Effect.Effect<number | undefined>
}

/** The worlds the monitor watches and the one thing it does to them. */
export interface PressureTargetsService {
  /** worlds observed running and wanted up (the monitor keeps those that hold a permit) */
  readonly running: Effect.Effect<ReadonlyArray<PressureWorld>, InternalError | DiskFull>
  /** a number that moves whenever a world's state changes (a world started, stopped…): a reason to look again */
  readonly changes: Effect.Effect<number>
  /**
   * Suspends a world in its mailbox: its processes stop, the rest stays. `requeue` (memory) puts it back in the
   * gate's line at once; without it (idleness) its next request wakes it.
   */
  readonly suspend: (
    worldId: number,
    reason: string,
    requeue: boolean
  ) => Effect.Effect<void, { readonly message: string }>
}

export class PressureTargets extends Context.Tag("berth/PressureTargets")<PressureTargets, PressureTargetsService>() {}

/** The engine's worlds: rows from the registry, idleness from their config and the router, suspension by `Worlds`. */
const IDLE_CONFIG_MS = 60_000
/** while a world has `idle_suspend`, idleness is looked at least this often (more often when it is shorter) */
const IDLE_CHECK_MS = 10_000
/**
 * while none has, the worlds are looked at when one changes (a world that starts is looked at at once) and otherwise
 * this often, for an `idle_suspend` written into a running world's berth.toml
 */
export const IDLE_DISCOVER_MS = 60_000

export const PressureTargetsLive: Layer.Layer<PressureTargets, never, Worlds | Registry | Router | ConfigFiles> =
  Layer.effect(
    PressureTargets,
    Effect.gen(function* () {
      const registry = yield* Registry
      const worlds = yield* Worlds
      const router = yield* Router
      const configs = yield* ConfigFiles
      // each world's `idle_suspend`, looked at again every minute rather than on every tick: with dozens of worlds up,
      // reading their configs every 2 s was most of what the daemon did at rest
      const seen = new Map<string, { readonly ms: number | undefined; readonly at: number }>()
      const idleSuspendOf = (path: string) =>
        Effect.suspend(() => {
          const known = seen.get(path)
          if (known !== undefined && Date.now() - known.at < IDLE_CONFIG_MS) return Effect.succeed(known.ms)
          return configs.load(path).pipe(
            Effect.map((l) => l.parsed.config.project.idleSuspendMs),
            Effect.orElseSucceed(() => undefined),
            Effect.tap((ms) =>
              Effect.sync(() => {
                if (seen.size > 10_000) seen.clear()
                seen.set(path, { ms, at: Date.now() })
              })
            )
          )
        })
      return {
        running: Effect.map(registry.worlds(), (rows) =>
          rows
            .filter((w) => (w.observed === "running" || w.observed === "degraded") && w.desired === "up")
            .map(
              (w): PressureWorld => ({
                id: w.id,
                name: w.name,
                startedAt: w.startedAt ?? w.createdAt,
                idleSuspendMs: idleSuspendOf(w.path !== "" ? w.path : w.mainRoot),
                lastRequestAt: router.lastRequest(w.id)
              })
            )
        ),
        changes: SubscriptionRef.get(registry.changes),
        suspend: (worldId, reason, requeue) => worlds.suspend(worldId, reason, requeue)
      } satisfies PressureTargetsService
    })
  )

export const monitorPressure = Effect.gen(function* () {
  const admission = yield* Admission
  const targets = yield* PressureTargets
  let lastSuspendAt: number | undefined
  const settle = yield* settleMs
  const dwell = yield* dwellMs
  /** when the worlds were last looked at for idleness, and the shortest `idle_suspend` seen then */
  let idleCheckedAt: number | undefined
  /** the worlds' change counter at that look */
  let idleCheckedChanges: number | undefined
  let shortestIdleMs = Number.POSITIVE_INFINITY
  const tick = Effect.gen(function* () {
    // the Effect clock, not Date.now(): the same in the daemon, and a TestClock drives dwell and settle in tests
    const now = yield* Clock.currentTimeMillis
    // at rest (memory fine, no idleness due) a tick reads nothing else: looking at every world every two seconds was
    // most of an idle daemon's work. Idleness is looked at a few times per the shortest `idle_suspend`, at most 10 s
    // apart; with no world that has one, when a world changes, and once a minute.
    const changes = yield* targets.changes
    const idleEvery = Number.isFinite(shortestIdleMs) ? Math.min(IDLE_CHECK_MS, shortestIdleMs / 3) : IDLE_DISCOVER_MS
    const idleDue =
      idleCheckedAt === undefined ||
      now - idleCheckedAt >= idleEvery ||
      (!Number.isFinite(shortestIdleMs) && changes !== idleCheckedChanges)
    const pressed = underPressure(yield* admission.readings, yield* admission.settings)?._tag === "Ram"
    if (!idleDue && !pressed) return
    const running = (yield* targets.running).filter((w) => admission.holds(w.id))
    // `[project] idle_suspend`: a world whose routes saw no request for that long sleeps until its next one
    const idled = new Set<number>()
    if (idleDue) {
      idleCheckedAt = now
      idleCheckedChanges = changes
      shortestIdleMs = Number.POSITIVE_INFINITY
    }
    for (const w of idleDue ? running : []) {
      const idleMs = yield* w.idleSuspendMs
      if (idleMs === undefined) continue
      shortestIdleMs = Math.min(shortestIdleMs, idleMs)
      const last = Math.max((yield* w.lastRequestAt) ?? 0, w.startedAt)
      if (!shouldIdle(now, last, idleMs)) continue
      idled.add(w.id)
      yield* Effect.logInfo(`world ${w.name} suspended: no request for ${Math.round(idleMs / 1000)} s`)
      yield* Effect.forkDaemon(
        targets
          .suspend(w.id, `suspended: no request for ${Math.round(idleMs / 1000)} s; its next request wakes it`, false)
          .pipe(Effect.catchAll((e) => Effect.logWarning(`idle suspend: ${e.message}`)))
      )
    }
    const pick = suspendNow({
      readings: yield* admission.readings,
      settings: yield* admission.settings,
      // a world idled just now is on its way out already: pressure picks among the others
      running: running
        .filter((w) => !idled.has(w.id))
        .map((w) => ({ id: String(w.id), startedAt: w.startedAt, since: w.startedAt })),
      now,
      lastSuspendAt,
      settleMs: settle,
      dwellMs: dwell
    })
    if (pick === undefined) return
    lastSuspendAt = now
    const reason = `suspended: low on ${describeWait(pick.reason)}`
    yield* Effect.logInfo(`world ${running.find((w) => String(w.id) === pick.id)?.name ?? pick.id} ${reason}`)
    // the suspension runs in the world's mailbox; the monitor does not wait for it
    yield* Effect.forkDaemon(
      targets
        .suspend(Number(pick.id), reason, true)
        .pipe(Effect.catchAll((e) => Effect.logWarning(`suspend: ${e.message}`)))
    )
  })
  // one tick per reading the gate takes: the machine is read once per interval, by the gate
  yield* admission.sampled.pipe(
    Stream.runForEach(() => tick.pipe(Effect.catchAllCause((cause) => Effect.logWarning("pressure monitor", cause)))),
    Effect.forkScoped
  )
})
