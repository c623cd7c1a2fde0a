/**
 * When a starting service's port is next tried, while berth waits for something to listen there before its network
 * health check. Each try that finds nothing is a refused connection on loopback (two: 127.0.0.1, then ::1), which
 * costs the daemon a socket, an error and its stack: cheap once, not a hundred times a second for every service of a
 * swarm that takes seconds to start. So: briskly at first (most services listen within a few hundred milliseconds,
 * and `up` should return soon after), then less and less often as the wait grows, a few times a second at most; and a
 * service that listened before is not tried until most of the time it took then has passed, then briskly again
 * around when it listened then. Pure: the wait itself is in `src/services/Health.ts`.
 */

/** The briskest pace, for the first moments of a start. */
export const LISTENER_POLL_MIN_MS = 10
/** The slowest: a service that takes long to start is seen within this of when it listens. */
export const LISTENER_POLL_MAX_MS = 250
/** The pace slows after this much waiting, to a twentieth of the time waited so far. */
const BRISK_MS = 200
/** A service that listened before is first tried after this share of the time it took then... */
const EXPECTED_SHARE = 0.7
/**
 * ...but never later than this: if it now starts much sooner, that is the most `up` waits for nothing (once: see
 * `listenedNow`). The pace's slowing takes care of services that take long.
 */
export const EXPECTED_MAX_MS = 250

/** Around when a service that listened before is expected to listen again, it is tried briskly: from this share... */
const EXPECTED_FROM = 0.95
/** ...to this one of the time it took then. */
const EXPECTED_TO = 1.2

/**
 * How long after a try, `waitedMs` into the wait, the next one is due: briskly at first; else a twentieth of the time
 * waited. For a service that listened before: briskly around when it took to listen then, and before that a tenth of
 * the time waited (it is expected later; if it comes sooner, it is still seen within a tenth).
 */
export const listenerPollGapMs = (waitedMs: number, before?: ListenedBefore): number => {
  if (waitedMs <= BRISK_MS) return LISTENER_POLL_MIN_MS
  if (before !== undefined) {
    if (waitedMs < before.afterMs * EXPECTED_FROM) return shareOfWait(waitedMs, 10)
    if (waitedMs <= before.afterMs * EXPECTED_TO) return LISTENER_POLL_MIN_MS
  }
  return shareOfWait(waitedMs, 20)
}

/** `1 / share` of the time waited, within the pace's bounds. */
const shareOfWait = (waitedMs: number, share: number): number =>
  Math.min(LISTENER_POLL_MAX_MS, Math.max(LISTENER_POLL_MIN_MS, Math.round(waitedMs / share)))

/** The address family that accepted the connection, remembered with how long the service took to listen. */
export type LoopbackFamily = "v4" | "v6"

export interface ListenedBefore {
  /** from the start of the wait (the service's spawn) to the first accepted connection */
  readonly afterMs: number
  readonly family: LoopbackFamily
}

/**
 * What to remember once the listener was found on try number `tries` (1 for the first), `afterMs` into the wait. Found
 * on the first try of a wait that started late on purpose, the service may have listened long before: nothing is
 * remembered then, so that its next start is tried from the beginning rather than waiting again for nothing.
 */
export const listenedNow = (
  before: ListenedBefore | undefined,
  found: { readonly tries: number; readonly afterMs: number; readonly family: LoopbackFamily }
): ListenedBefore | undefined =>
  before !== undefined && found.tries <= 1 && firstListenerPollMs(before) > 0
    ? undefined
    : { afterMs: found.afterMs, family: found.family }

/** How long into the wait the first try is due: at once for a service not seen before. */
export const firstListenerPollMs = (before: ListenedBefore | undefined): number =>
  before === undefined ? 0 : Math.min(EXPECTED_MAX_MS, Math.floor(before.afterMs * EXPECTED_SHARE))

/**
 * The addresses one try asks, in order (the next is asked only when the one before refused). Both families, unless
 * the service listened on one before: then that one, and the other only every third try, so that a service that
 * moved to the other family is still seen within a few tries.
 */
export const listenerPollFamilies = (
  tryIndex: number,
  before: ListenedBefore | undefined
): ReadonlyArray<LoopbackFamily> => {
  if (before === undefined) return ["v4", "v6"]
  const other: LoopbackFamily = before.family === "v4" ? "v6" : "v4"
  return tryIndex % 3 === 2 ? [before.family, other] : [before.family]
}

/** The number of tries a wait takes to find a listener that opens `listenMs` in: how a pace plays out, for its tests. */
export const listenerPollTries = (listenMs: number, before: ListenedBefore | undefined): number => {
  let at = firstListenerPollMs(before)
  let tries = 1
  while (at < listenMs) {
    at += listenerPollGapMs(at, before)
    tries++
  }
  return tries
}
