/**
 * Fencing worlds that run anywhere. Such a world runs on the machine that holds its shard's lock in the cluster's
 * database; another machine takes the lock once it has not been renewed for the lock expiry, and starts the world
 * there. A daemon that is frozen (SIGSTOP, a stalled event loop, a machine under swap) cannot stop its copy in time,
 * and its copy's processes are separate OS processes that keep running: two copies. So each member daemon keeps a
 * lease file that says until when its hold is known good, and a small watchdog process beside it stops the world's
 * processes when that moment passes without a renewal. The daemon itself starts nothing for such a world while its
 * lease is stale (ServiceActor waits on the world's fence).
 *
 * The lease is measured from the START of the last lock refresh that succeeded and of the last heartbeat: the database
 * stamps both later than that, so the lease never outlasts the moment another machine may take the world: a lock's
 * expiry, or the placer's giving up on a machine whose heartbeat is old.
 */

/** Stops a frozen daemon's copy this long before another machine may take the world's lock. */
export const FENCE_MARGIN_MS = 1_000

/** How long a fenced service is asked to stop (SIGTERM) before it is killed. */
export const FENCE_GRACE_MS = 500

/**
 * How often the holder (`cluster/holder.ts`) looks at the clocks while it holds a world's processes: a machine that
 * wakes from sleep is seen at its next look, since the monotonic clock its timer runs on stands still during sleep (a
 * machine frozen, or the holder stopped, it sees at once: its look is overdue). Costs 0.11–0.14 % of a core.
 */
export const HOLDER_TICK_MS = 100

/**
 * The shortest stall (the holder stopped, or the machine asleep) after which the holder fences what it holds at once,
 * if the daemon's hold ran out meanwhile. Whatever stall is shorter, the cluster cannot have given the machine up
 * during it unless the hold had run out well before it (`GIVE_UP_AFTER_MS` is `BEAT_HOLD_MS` + 1.5 s), and then the
 * watchdog has fenced the copy already.
 */
export const STALL_MS = 1_000

export interface FenceLease {
  /** the daemon that writes it: a watchdog serves one daemon, and leaves when another has taken over */
  readonly daemon: number
  /** one membership session of that daemon: a session that starts again starts a watchdog of its own */
  readonly session: string
  /** epoch ms: past it, the worlds below must not run here */
  readonly until: number
  /** this machine's worlds that run anywhere (registry ids) */
  readonly worlds: ReadonlyArray<number>
  /** the BERTH_HOME whose processes are fenced (their marks name it) */
  readonly home: string
  /** the daemon let go of its worlds itself (it stopped or left the cluster): nothing to watch */
  readonly done: boolean
}

/** The moment the hold renewed at `renewedAt` stops being good. */
export const leaseUntil = (renewedAt: number, expirationMs: number, marginMs: number = FENCE_MARGIN_MS): number =>
  renewedAt + expirationMs - marginMs

/**
 * How long a heartbeat holds the machine's worlds that run anywhere: the cluster's placer gives such a world to another
 * machine once its owner's heartbeat is older than this plus a margin (`GIVE_UP_AFTER_MS`, domain/cluster.ts).
 */
export const BEAT_HOLD_MS = 4_000

/**
 * A lock refresh renews the hold only when it kept every shard it asked for, and asked for one at least: a refresh of
 * none is the engine's probe of a lock storage it found unhealthy (it has let go of every shard then, and is stopping
 * their worlds), or a runner that holds nothing — neither says anything of the worlds that run here.
 */
export const refreshRenews = (asked: ReadonlyArray<string>, kept: ReadonlyArray<string>): boolean => {
  if (asked.length === 0) return false
  const held = new Set(kept)
  return asked.every((id) => held.has(id))
}

/**
 * Until when a member's hold is good (epoch ms; 0 before its first renewals): the earlier of what its last full lock
 * refresh and its last heartbeat allow, each counted from when it started.
 */
export const holdUntil = (
  hold: { readonly refreshedAt: number | undefined; readonly beatAt: number | undefined },
  expirationMs: number
): number =>
  hold.refreshedAt === undefined || hold.beatAt === undefined
    ? 0
    : Math.min(leaseUntil(hold.refreshedAt, expirationMs), hold.beatAt + BEAT_HOLD_MS)

export const formatLease = (lease: FenceLease): string => `${JSON.stringify(lease)}\n`

const isInt = (x: unknown): x is number => typeof x === "number" && Number.isSafeInteger(x)

/** A file's text as a JSON object, or undefined when it is none (half written, damaged). */
const jsonObject = (text: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** A lease file's text, or undefined when it is not one (half written, another build's, damaged). */
export const parseLease = (text: string): FenceLease | undefined => {
  const v = jsonObject(text)
  if (v === undefined) return undefined
  if (!isInt(v.daemon) || typeof v.session !== "string" || !isInt(v.until)) return undefined
  if (typeof v.home !== "string" || typeof v.done !== "boolean") return undefined
  if (!Array.isArray(v.worlds) || !v.worlds.every(isInt)) return undefined
  return { daemon: v.daemon, session: v.session, until: v.until, worlds: v.worlds, home: v.home, done: v.done }
}

export type WatchStep =
  /** nothing to do now */
  | { readonly _tag: "Wait" }
  /** stop every process of these worlds of this home; then leave if the daemon is gone (nothing will start them) */
  | {
      readonly _tag: "Fence"
      readonly worlds: ReadonlyArray<number>
      readonly home: string
      readonly thenExit: boolean
    }
  /** the watchdog's work is over */
  | { readonly _tag: "Exit" }

/**
 * One look of the watchdog that serves the daemon `serves` (its pid and session). A dead daemon's worlds are still fenced when their lease
 * runs out (a machine whose daemon was killed must not keep a copy the cluster starts elsewhere); the watchdog leaves
 * once nothing is left to fence, or when a newer daemon has written the lease (it starts a watchdog of its own).
 */
export const watchStep = (input: {
  readonly lease: FenceLease | undefined
  readonly serves: { readonly daemon: number; readonly session: string }
  readonly daemonAlive: boolean
  readonly now: number
}): WatchStep => {
  const { lease, serves, daemonAlive, now } = input
  if (lease === undefined) return daemonAlive ? { _tag: "Wait" } : { _tag: "Exit" }
  if (lease.daemon !== serves.daemon || lease.session !== serves.session || lease.done) return { _tag: "Exit" }
  if (lease.worlds.length === 0) return daemonAlive ? { _tag: "Wait" } : { _tag: "Exit" }
  if (now >= lease.until) return { _tag: "Fence", worlds: lease.worlds, home: lease.home, thenExit: !daemonAlive }
  return { _tag: "Wait" }
}

/**
 * What a watchdog fenced (or the holder, as the machine woke from a stall): the worlds whose processes it stopped,
 * when, for which daemon and session. The daemon reads it when it thaws (or is back on the network): those copies are
 * stopped, whatever its actors last saw of them, and are started again only once this machine holds the worlds again
 * (or given up, to run elsewhere).
 */
export interface FencedRecord {
  readonly daemon: number
  readonly session: string
  /** epoch ms */
  readonly at: number
  readonly worlds: ReadonlyArray<number>
}

export const formatFenced = (record: FencedRecord): string => `${JSON.stringify(record)}\n`

export const parseFenced = (text: string): FencedRecord | undefined => {
  const v = jsonObject(text)
  if (v === undefined) return undefined
  if (!isInt(v.daemon) || typeof v.session !== "string" || !isInt(v.at)) return undefined
  if (!Array.isArray(v.worlds) || !v.worlds.every(isInt)) return undefined
  return { daemon: v.daemon, session: v.session, at: v.at, worlds: v.worlds }
}

/**
 * The worlds of a fenced record that a daemon (`daemon`, whose last handled record was made at `since`) has still to
 * count as stopped: another daemon's record, or one already handled, asks nothing.
 */
export const newlyFenced = (record: FencedRecord | undefined, daemon: number, since: number): ReadonlyArray<number> =>
  record === undefined || record.daemon !== daemon || record.at <= since ? [] : record.worlds

/**
 * A fence of the daemon `serves` (its pid and session) is recorded already since its hold ran out at `until`: the
 * holder fenced its copies as the machine woke, before the watchdog had looked them up (or the watchdog did, a moment
 * ago). Another record would count the same fence twice, and take down a copy started again meanwhile.
 */
export const recordedSince = (
  record: FencedRecord | undefined,
  serves: { readonly daemon: number; readonly session: string },
  until: number
): boolean =>
  record !== undefined && record.daemon === serves.daemon && record.session === serves.session && record.at >= until

/**
 * The lease on disk lets the daemon `daemon` start a process of a world that runs anywhere: it is that daemon's, not
 * let go, and good now. The daemon's own hold may be renewed a moment before the file is: a process started in that
 * moment is one the watchdog, reading the stale file, would stop as a fenced copy. So a start waits for the file, and
 * the watchdog reads it again after it has looked the processes up (`cluster/watchdogFence.ts`): whatever it found
 * that a renewed lease let start, it leaves.
 */
export const leaseLets = (lease: FenceLease | undefined, daemon: number, now: number): boolean =>
  lease !== undefined && lease.daemon === daemon && !lease.done && now < lease.until

/** What a world's history says of a copy the fence (the watchdog, or the holder) stopped at `at`, for `status`. */
export const fencedMessage = (at: number): string =>
  `this machine's copy was fenced at ${new Date(at).toISOString().slice(11, 19)} UTC: the daemon had not renewed its hold in the cluster in time (frozen, asleep, or cut off), so the fence stopped the world's processes; it starts again here once the cluster gives the world back, or runs on another machine`

/**
 * Why a copy of a world that runs anywhere is stopped, when the watchdog fenced it: its latest event but the stop that
 * followed is the fence's (`Cluster` records it). Null otherwise. (Plain: the watchdog's bundle includes this module.)
 */
export const fencedReason = (
  w: { readonly events: ReadonlyArray<{ readonly kind: string; readonly message: string }> },
  /** the world is at rest (stopped, failed, …): a copy that runs again is no longer the fenced one */
  atRest: boolean
): string | null => {
  if (!atRest) return null
  const last = w.events.find((e) => e.kind !== "stopped")
  return last?.kind === "fenced" ? last.message : null
}
