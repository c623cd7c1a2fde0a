/**
 * What to do when a service's process ends: a pure function of the restart policy, the exit and the recent restart
 * budget, so the ServiceActor only carries it out. Backoff is exponential and capped; a crash loop (too many
 * restarts within a sliding window) gives up with a reason a user can act on.
 */
import * as Data from "effect/Data"

export type RestartPolicy = "no" | "on-failure" | "always"

/** How a process ended, as Node reports it: a signal death has `code: null`. */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
}

export interface RestartLimits {
  /** Restarts allowed within `windowMs` before giving up. */
  readonly maxRestarts?: number
  readonly windowMs?: number
  /** Delay before the first restart of a window; doubled for each further one. */
  readonly baseDelayMs?: number
  readonly maxDelayMs?: number
}

export const defaultRestartLimits: Required<RestartLimits> = {
  maxRestarts: 5,
  windowMs: 60_000,
  baseDelayMs: 500,
  maxDelayMs: 30_000
}

export interface RestartInput {
  readonly policy: RestartPolicy
  readonly exit: ExitStatus
  /** We asked it to stop (down, reload, remove, restart of a stuck process): never a crash. */
  readonly stoppedByUs: boolean
  /** When earlier restarts happened (ms); only those inside the window count. */
  readonly recentRestarts: ReadonlyArray<number>
  readonly now: number
  readonly limits?: RestartLimits
}

export type RestartDecision = Data.TaggedEnum<{
  /** Start again after `delayMs`; `attempt` counts restarts within the window, this one included (1-based). */
  Restart: { readonly delayMs: number; readonly attempt: number }
  /** A crash loop: mark the service `failed` with this reason. */
  GiveUp: { readonly reason: string }
  /** Leave it down: it was stopped by us, or its policy does not ask for a restart. */
  Done: {}
}>

export const RestartDecision = Data.taggedEnum<RestartDecision>()

/** Exit code 0 and no signal: the only exit `on-failure` does not restart. */
export const isCleanExit = (exit: ExitStatus): boolean => exit.code === 0 && exit.signal === null

/** `"exit code 1"`, `"killed by SIGKILL"`: the signal wins because a signal death carries no meaningful code. */
export const exitDescription = (exit: ExitStatus): string =>
  exit.signal !== null
    ? `killed by ${exit.signal}`
    : exit.code !== null
      ? `exit code ${exit.code}`
      : "exit status unknown"

/** Restarts younger than the window; timestamps after `now` (a clock step back) count too, to stay conservative. */
export const restartsInWindow = (recentRestarts: ReadonlyArray<number>, now: number, windowMs: number): number =>
  recentRestarts.filter((at) => at > now - windowMs).length

/** `min(maxDelay, base · 2ⁿ)`, written so huge `n` saturates at the cap instead of producing NaN. */
export const backoffDelay = (n: number, limits?: RestartLimits): number => {
  const { baseDelayMs, maxDelayMs } = { ...defaultRestartLimits, ...limits }
  const base = Math.max(0, baseDelayMs)
  const cap = Math.max(0, maxDelayMs)
  return base === 0 ? 0 : Math.min(cap, base * 2 ** Math.max(0, n))
}

/** `60_000` → `"60s"`, `1_500` → `"1.5s"`, `250` → `"250ms"`. */
const formatWindow = (ms: number): string => (ms >= 1000 ? `${ms / 1000}s` : `${ms}ms`)

export const decideRestart = (input: RestartInput): RestartDecision => {
  if (input.stoppedByUs || input.policy === "no") return RestartDecision.Done()
  const clean = isCleanExit(input.exit)
  if (input.policy === "on-failure" && clean) return RestartDecision.Done()
  const limits = { ...defaultRestartLimits, ...input.limits }
  const n = restartsInWindow(input.recentRestarts, input.now, limits.windowMs)
  if (n >= limits.maxRestarts) {
    const again = clean ? "exited again" : "crashed again"
    return RestartDecision.GiveUp({
      reason: `restarted ${n} times in ${formatWindow(limits.windowMs)} and ${again} (${exitDescription(input.exit)})`
    })
  }
  return RestartDecision.Restart({ delayMs: backoffDelay(n, limits), attempt: n + 1 })
}
