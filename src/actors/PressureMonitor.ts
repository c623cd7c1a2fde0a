/**
 * The pressure monitor: one fiber that reads the machine every few seconds and, while available memory is below the
 * reserve, suspends the newest running world — one at a time, each suspension given time to show in the readings,
 * never a world that started or resumed within the dwell time. Suspended worlds wait in the gate's one fair line and
 * come back, oldest first, once memory is above the reserve by the resume factor. The decision is
 * `domain/admission.ts`'s `suspendNow`; this only reads and acts.
 */
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { describeWait, shouldIdle, suspendNow } from "../domain/admission.js"
import { Admission, SAMPLE_EVERY_MS } from "../services/Admission.js"
import { ConfigFiles } from "../services/ConfigFiles.js"
import { Router } from "../services/proxy/Router.js"
import { Registry } from "../services/Registry.js"
import { Worlds } from "./Worlds.js"

const fromEnv = (name: string, fallback: number) => {
  const n = Number(process.env[name])
  return Number.isFinite(n) && n >= 0 ? n : fallback
}

/** after one suspension, the next waits this long: the freed memory must show in the readings first */
export const settleMs = () => fromEnv("BERTH_PRESSURE_SETTLE_MS", 10_000)
/** a world that started or resumed this recently is not suspended (no flapping) */
export const dwellMs = () => fromEnv("BERTH_PRESSURE_DWELL_MS", 60_000)

export const monitorPressure = Effect.gen(function* () {
  const admission = yield* Admission
  const registry = yield* Registry
  const worlds = yield* Worlds
  const router = yield* Router
  const configs = yield* ConfigFiles
  const idleSuspendOf = (path: string) =>
    configs.load(path).pipe(
      Effect.map((l) => l.parsed.config.project.idleSuspendMs),
      Effect.orElseSucceed(() => undefined)
    )
  let lastSuspendAt: number | undefined
  const settle = settleMs()
  const dwell = dwellMs()
  const tick = Effect.gen(function* () {
    yield* admission.sample
    const running = (yield* registry.worlds()).filter(
      (w) => w.observed === "running" && w.desired === "up" && admission.holds(w.id)
    )
    const now = Date.now()
    // `[project] idle_suspend`: a world whose routes saw no request for that long sleeps until its next one
    for (const w of running) {
      const idleMs = yield* idleSuspendOf(w.path !== "" ? w.path : w.mainRoot)
      if (idleMs === undefined) continue
      const last = Math.max((yield* router.lastRequest(w.id)) ?? 0, w.startedAt ?? w.createdAt)
      if (!shouldIdle(now, last, idleMs)) continue
      yield* Effect.logInfo(`world ${w.name} suspended: no request for ${Math.round(idleMs / 1000)} s`)
      yield* Effect.forkDaemon(
        worlds
          .suspend(w.id, `suspended: no request for ${Math.round(idleMs / 1000)} s; its next request wakes it`, false)
          .pipe(Effect.catchAll((e) => Effect.logWarning(`idle suspend: ${e.message}`)))
      )
    }
    const pick = suspendNow({
      readings: yield* admission.readings,
      settings: yield* admission.settings,
      running: running.map((w) => ({
        id: String(w.id),
        startedAt: w.startedAt ?? w.createdAt,
        since: w.startedAt ?? w.createdAt
      })),
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
      worlds.suspend(Number(pick.id), reason).pipe(Effect.catchAll((e) => Effect.logWarning(`suspend: ${e.message}`)))
    )
  })
  yield* tick.pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("pressure monitor", cause)),
    Effect.repeat(Schedule.spaced(`${SAMPLE_EVERY_MS} millis`)),
    Effect.forkScoped
  )
})
