/**
 * One wall-clock grid for the daemon's periodic work. An idle daemon pays for each wake more than for the little
 * work it then does (the event loop, the effect runtime and cold caches), so the loops wait for ticks of whole
 * seconds on the clock: the adopted processes' look every second, the pressure sample every 2 s, the reconciler's look
 * every 3 s and the probe grid every 5 s come due together and share their wakes, instead of each paying for its own.
 */

/** The grid's finest tick: every periodic wait ends on a multiple of it. */
export const WAKE_TICK_MS = 1_000

/** How long from `nowMs` to the next multiple of `periodMs` on the clock: the wait of a loop that runs every period. */
export const untilTick = (nowMs: number, periodMs: number): number =>
  periodMs <= 0 ? 0 : (Math.floor(nowMs / periodMs) + 1) * periodMs - nowMs

/**
 * A wait of at least `waitMs` from `nowMs`, lengthened to end on a tick of `tickMs` (by less than one tick); `tickMs`
 * 0 keeps the wait as it is.
 */
export const onTick = (nowMs: number, waitMs: number, tickMs: number): number =>
  tickMs <= 0 ? waitMs : Math.ceil((nowMs + waitMs) / tickMs) * tickMs - nowMs
