/**
 * One service's lifecycle inside a world. As for worlds, observed state changes only through `transition`, which
 * answers `undefined` for an illegal event; the ServiceActor ignores those, so a health verdict or an exit that
 * arrives after a stop began can never resurrect a service.
 *
 * The restart decision is not made here: on an exit the actor first asks `decideRestart` and then reports
 * `Restart`, `Fail` or `Exited`, so that `exited` always means "ended cleanly and stays down".
 *
 * Liveness is judged here too: once healthy, a service turns `unhealthy` only after `UNHEALTHY_AFTER_MISSES` probes
 * in a row missed. On a loaded machine one probe may simply be slow, and `unhealthy` takes the route down.
 */
import * as Data from "effect/Data"
import type { ExitStatus } from "./restart.js"
import { isCleanExit } from "./restart.js"
import { onTick } from "./wake-grid.js"

export type ServiceState =
  | "pending"
  | "starting"
  | "running"
  | "healthy"
  | "unhealthy"
  | "stopping"
  | "stopped"
  | "restarting"
  | "failed"
  | "exited"

/** Every observed state, in lifecycle order. */
export const serviceStates: ReadonlyArray<ServiceState> = [
  "pending",
  "starting",
  "running",
  "healthy",
  "unhealthy",
  "stopping",
  "stopped",
  "restarting",
  "failed",
  "exited"
]

/** What a user asked for (`inactive`: not part of the selected services or group). */
export type ServiceDesired = "running" | "stopped" | "inactive"

export type ServiceEvent = Data.TaggedEnum<{
  /** Dependencies are ready (or the backoff elapsed): setup and spawn begin. */
  Start: {}
  /** The process exists; until a health verdict arrives (or when there is no check) the service is `running`. */
  Spawned: {}
  Healthy: {}
  /** A probe failed; `misses` counts the failed probes in a row, this one included. */
  Unhealthy: { readonly misses: number }
  /** The process ended and will not be restarted: clean exits become `exited`, anything else `failed`. */
  Exited: ExitStatus
  Stop: {}
  /** The process group is gone (SIGTERM, grace, SIGKILL). */
  StopDone: {}
  /** The process died or was judged unhealthy and will be started again after a backoff. */
  Restart: {}
  Fail: { readonly reason: string }
}>

export const ServiceEvent = Data.taggedEnum<ServiceEvent>()

/** Liveness misses in a row that turn a healthy service unhealthy: fewer may be a slow answer on a busy machine. */
export const UNHEALTHY_AFTER_MISSES = 3

/** One liveness probe's result → the event to report and the misses in a row it leaves (a pass resets them). */
export const livenessStep = (
  misses: number,
  passed: boolean
): { readonly misses: number; readonly event: ServiceEvent } =>
  passed
    ? { misses: 0, event: ServiceEvent.Healthy() }
    : { misses: misses + 1, event: ServiceEvent.Unhealthy({ misses: misses + 1 }) }

/** The longest a steadily answering service waits between two liveness probes, whatever its interval. */
export const STEADY_PROBE_CAP_MS = 120_000

/**
 * The wait before the next liveness probe, after `passes` passes in a row: the interval for the first three, then
 * twice as long with each further pass, up to 24 intervals or `STEADY_PROBE_CAP_MS` (2 minutes at the default 5 s).
 * A service that has answered steadily costs few probes while idle — each is a connection, a request and its
 * garbage, and at a hundred worlds they were most of an idle daemon's CPU. A miss (passes = 0) brings back the
 * interval at once, so a service that hangs is `unhealthy` within the cap and three intervals (as Docker's default
 * health check, 3 misses 30 s apart, takes 90 s). A process that exits is seen at once, not by a probe. `spread`
 * (0–1, random in the daemon; 1 when not given) shortens a backed-off wait by up to a fifth.
 */
export const livenessDelayMs = (intervalMs: number, passes: number, spread = 1): number => {
  const steady = Math.max(0, passes - 3)
  const cap = Math.max(intervalMs, Math.min(intervalMs * 24, STEADY_PROBE_CAP_MS))
  const delay = Math.min(cap, intervalMs * 2 ** Math.min(steady, 16))
  if (delay <= intervalMs) return delay
  // a longer wait is shortened by up to a fifth, by `spread` (0 to 1, drawn for each wait): services started together
  // drift apart, so an idle swarm's probes come evenly rather than all in one burst every cap
  return Math.max(intervalMs, Math.round(delay * (0.8 + 0.2 * Math.min(1, Math.max(0, spread)))))
}

/**
 * The grid a backed-off liveness probe falls due on (`probeDueMs`), where the interval is no shorter. An idle daemon
 * pays for a probe mostly in waking up: on a 2-core machine one probe alone cost 1.4–2 ms of CPU, five at one wake
 * 0.7 ms each. Probes that fall due on the same tick of the grid share the wake.
 */
export const PROBE_SLOT_MS = 5_000

/**
 * How long to wait, from `nowMs`, for a probe `delayMs` away: a wait no longer than the interval is kept as it is (a
 * service starting, or one that just missed, keeps its pace); a backed-off one is lengthened to the next tick of a
 * grid of `min(slotMs, intervalMs)` on the clock — by less than one tick, so a hung service is seen at most that much
 * later. `slotMs` 0 keeps every wait.
 */
export const probeDueMs = (nowMs: number, delayMs: number, intervalMs: number, slotMs = PROBE_SLOT_MS): number =>
  delayMs <= intervalMs ? delayMs : onTick(nowMs, delayMs, Math.min(slotMs, intervalMs))

/** States in which a process of ours is (or may be) alive. */
const live: ReadonlyArray<ServiceState> = ["starting", "running", "healthy", "unhealthy"]
/** States in which a health probe may run: the process was spawned and no stop or restart is under way. */
const probed: ReadonlyArray<ServiceState> = ["running", "healthy", "unhealthy"]

/** Exits and verdicts lead somewhere that depends on the event's payload; everything else is a fixed edge. */
export const transition = (state: ServiceState, event: ServiceEvent): ServiceState | undefined => {
  const when = (from: ReadonlyArray<ServiceState>, to: ServiceState): ServiceState | undefined =>
    from.includes(state) ? to : undefined
  switch (event._tag) {
    case "Start":
      return when(["pending", "stopped", "exited", "failed", "restarting"], "starting")
    case "Spawned":
      return when(["starting"], "running")
    case "Healthy":
      return when(probed, "healthy")
    // a healthy service stays healthy (and routable) through a few misses; before it was ever healthy a failed
    // check is already a verdict
    case "Unhealthy":
      return when(probed, state === "healthy" && event.misses < UNHEALTHY_AFTER_MISSES ? "healthy" : "unhealthy")
    case "Exited":
      return when(live, isCleanExit(event) ? "exited" : "failed")
    // a stop also sweeps a dead service's group: commands that fork and exit 0 leave orphans behind
    case "Stop":
      return when(["pending", ...live, "restarting", "exited", "failed"], "stopping")
    case "StopDone":
      return when(["stopping"], "stopped")
    case "Restart":
      return when(live, "restarting")
    // a stop always ends in `stopped`: a late give-up must not overwrite it
    case "Fail":
      return when(["pending", ...live, "restarting"], "failed")
  }
}

/**
 * Every kind of event, once — twice where its payload picks the target (a clean or unclean exit, a miss before or at
 * the limit) — named. `npm run docs:architecture` asks `transition` each of them in every state to draw the state
 * diagram and table in ARCHITECTURE.md, so they show what `transition` does; the type makes a new event need one.
 */
export const serviceEventCases: {
  readonly [Tag in ServiceEvent["_tag"]]: ReadonlyArray<readonly [name: string, event: ServiceEvent]>
} = {
  Start: [["Start", ServiceEvent.Start()]],
  Spawned: [["Spawned", ServiceEvent.Spawned()]],
  Healthy: [["Healthy", ServiceEvent.Healthy()]],
  Unhealthy: [
    [`Unhealthy (miss 1–${UNHEALTHY_AFTER_MISSES - 1})`, ServiceEvent.Unhealthy({ misses: 1 })],
    [`Unhealthy (miss ${UNHEALTHY_AFTER_MISSES}+)`, ServiceEvent.Unhealthy({ misses: UNHEALTHY_AFTER_MISSES })]
  ],
  Exited: [
    ["Exited (code 0)", ServiceEvent.Exited({ code: 0, signal: null })],
    ["Exited (other code, or signal)", ServiceEvent.Exited({ code: 1, signal: null })]
  ],
  Stop: [["Stop", ServiceEvent.Stop()]],
  StopDone: [["StopDone", ServiceEvent.StopDone()]],
  Restart: [["Restart", ServiceEvent.Restart()]],
  Fail: [["Fail", ServiceEvent.Fail({ reason: "" })]]
}
