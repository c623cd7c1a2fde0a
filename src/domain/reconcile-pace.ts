/**
 * When the reconciler's pass over every world is due. It looks every few seconds, but a look costs nothing (what
 * changed since the last pass is one counter and one stat per worktree); the pass itself — every world's row read and
 * decided on — comes at once after anything changed, and less and less often while nothing does. Pure: the reconcile
 * loop (`src/actors/Reconciler.ts`) gathers the facts.
 */

/** How often the reconciler looks, and the least time between two passes. */
export const RECONCILE_TICK_MS = 3_000
/** The longest two passes are apart while nothing changes. */
export const RECONCILE_QUIET_MAX_MS = 30_000

/** How long after the last pass the next is due, after `quietPasses` passes in a row that found nothing changed. */
export const quietWaitMs = (quietPasses: number): number =>
  Math.min(RECONCILE_QUIET_MAX_MS, RECONCILE_TICK_MS * 2 ** Math.min(Math.max(0, quietPasses), 16))

export interface PaceFacts {
  /** the registry's change counter moved since the last pass (a world's or a service's state, leases, worlds) */
  readonly changed: boolean
  /** a worktree that existed at the last pass is gone (deleted outside berth) */
  readonly vanished: boolean
  readonly sinceLastPassMs: number
  readonly quietPasses: number
}

/** Whether a pass runs on this look: anything changed, a worktree vanished, or the quiet wait is over. */
export const passDue = (f: PaceFacts): boolean =>
  f.changed || f.vanished || f.sinceLastPassMs >= quietWaitMs(f.quietPasses)
