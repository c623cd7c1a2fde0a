/**
 * A world's lifecycle. Observed state changes only through `transition`, a pure function that answers `undefined`
 * for an event that is illegal in the current state; the caller ignores such events, so a late result (a health
 * verdict arriving during a stop, say) can never undo what a user asked for.
 */
import * as Data from "effect/Data"

/** Every observed state, in lifecycle order (handy for tables, schemas and tests). */
export const worldStates = [
  "queued",
  "starting",
  "running",
  "degraded",
  "stopping",
  "stopped",
  "suspending",
  "suspended",
  "failed",
  "removing",
  "removed"
] as const

export type WorldState = (typeof worldStates)[number]

/** What a user asked for; persisted, and changed only by a user's command. */
export type WorldDesired = "up" | "down" | "removed"

export type WorldEvent = Data.TaggedEnum<{
  /** Admission granted a permit to a queued world. */
  Admit: {}
  /** Asked to come up, but it must wait for a permit first. */
  Queue: {}
  /** Start straight away (a permit is already held or none is needed); a running world being adopted starts too. */
  Start: {}
  Started: {}
  Stop: {}
  Stopped: {}
  /** Memory pressure or idleness: the world gives back its processes but keeps everything needed to resume. */
  Suspend: {}
  Suspended: {}
  Fail: { readonly reason: string }
  /** A service of the running world failed for good (its restart policy gave up): the rest keeps running. */
  Degrade: { readonly reason: string }
  /** No service of the world is failed any more (started again, or stopped): it runs whole. */
  Restore: {}
  Remove: {}
  Removed: {}
  /** A new daemon found the world mid-way (a crash cut a command short): nothing of that step is in flight now. */
  Recover: {}
  /** Its processes run but cannot be watched (the config or environment cannot be used now): they are left alone. */
  Unwatched: { readonly reason: string }
}>

export const WorldEvent = Data.taggedEnum<WorldEvent>()

export interface Edge {
  readonly from: ReadonlyArray<WorldState>
  readonly to: WorldState
}

const alive = worldStates.filter((state) => state !== "removing" && state !== "removed")

/**
 * The whole machine as data: for each event, the states it is legal in and where it leads. Exported for the state
 * diagram and table in ARCHITECTURE.md, which `npm run docs:architecture` draws from it.
 */
export const edges: { readonly [Tag in WorldEvent["_tag"]]: Edge } = {
  Admit: { from: ["queued"], to: "starting" },
  Queue: { from: ["stopped", "failed", "suspended"], to: "queued" },
  Start: { from: ["queued", "stopped", "failed", "suspended", "running", "degraded"], to: "starting" },
  Started: { from: ["starting"], to: "running" },
  Stop: { from: ["queued", "starting", "running", "degraded", "failed", "suspending", "suspended"], to: "stopping" },
  Stopped: { from: ["stopping"], to: "stopped" },
  // pressure pre-empts a world that is still in line or starting as well as one that runs
  Suspend: { from: ["queued", "starting", "running", "degraded"], to: "suspending" },
  Suspended: { from: ["suspending"], to: "suspended" },
  Fail: { from: ["queued", "starting", "running", "degraded", "stopping", "suspending"], to: "failed" },
  Degrade: { from: ["running"], to: "degraded" },
  Restore: { from: ["degraded"], to: "running" },
  // removal wins over everything still in flight; asking again while removing is harmless
  Remove: { from: worldStates.filter((state) => state !== "removed"), to: "removing" },
  Removed: { from: ["removing"], to: "removed" },
  Recover: { from: ["queued", "starting", "stopping", "suspending"], to: "stopped" },
  Unwatched: { from: alive, to: "running" }
}

/** The next state, or `undefined` when `event` is illegal in `state` (the caller then ignores the event). */
export const transition = (state: WorldState, event: WorldEvent): WorldState | undefined => {
  const edge = edges[event._tag]
  return edge.from.includes(state) ? edge.to : undefined
}

const settled: ReadonlySet<WorldState> = new Set(["running", "degraded", "stopped", "suspended", "failed", "removed"])

/**
 * True when nothing is in flight: the world stays in this state until a command, a crash or pressure moves it.
 * `queued` is not settled: it is on its way up and only waiting for a permit.
 */
export const isSettled = (state: WorldState): boolean => settled.has(state)

const atRest: ReadonlySet<string> = new Set(["stopped", "failed"])

/** Nothing of the world runs, nor is about to: stopped, or failed (a failed start stops what it started). */
export const isAtRest = (state: string): boolean => atRest.has(state)

/** What is known of a world when deciding what to do with it: what is wanted and what is true. */
export interface WorldFacts {
  readonly desired: WorldDesired
  readonly observed: WorldState
  readonly isMain: boolean
  /** the worktree folder exists */
  readonly pathExists: boolean
  /** the worktree folder has existed: a new world's is still being made */
  readonly worktreeReady: boolean
  /** a WorldActor of this daemon looks after the world already */
  readonly hasActor: boolean
  /** recorded processes of the world that are still alive (pid and start time match) */
  readonly liveProcesses: number
  /** a process was ever recorded for it (alive or not): a world created but never started has none */
  readonly recorded: boolean
  /** suspended for idleness: only a request or an `up` wakes it */
  readonly wakesOnRequest: boolean
  /**
   * it runs anywhere (the cluster places it): what a previous daemon ran of it is never adopted, since another machine
   * may run it by now
   */
  readonly runsAnywhere: boolean
}

export type WorldAction =
  /** nothing to do */
  | "none"
  /** take over the live processes and start the dead ones, through admission (after a daemon restart) */
  | "adopt"
  /** the worktree was deleted outside berth: kill its processes, release its leases, forget it */
  | "teardown"
  /** processes are alive that nobody wants: stop them, and the world is `stopped` */
  | "stop-strays"
  /** a crash left it mid-way: a removal is finished (see `finishesRemoval`), anything else is `stopped` */
  | "settle"
  /**
   * a world that runs anywhere, wanted up when its daemon went: it is let go, wanted down and `stopped` here, until
   * the cluster starts it again wherever it lands (its processes were stopped with the strays at daemon start)
   */
  | "release"

/** States a world only passes through: after a crash, one of these is a command left unfinished. */
const TRANSITIONAL: ReadonlySet<WorldState> = new Set(["queued", "starting", "stopping", "suspending", "removing"])

/**
 * What to do so that a world's observed state converges on its desired one, after a daemon (re)start or on the
 * reconciler's pass. One function for both: the reconciler starts an actor for a world that needs one, and that
 * actor's first act asks the same question (with `hasActor` false) and does the answer.
 *
 * A `failed` world that should be up is left alone: starting it again here would turn a crash loop into a retry
 * loop; a user's `up` starts it explicitly. A `suspended` one is adopted, which queues it behind admission, so
 * pressure still decides when it really resumes.
 */
export const decide = (f: WorldFacts): WorldAction => {
  if (f.observed === "removed") return "none"
  if (f.worktreeReady && !f.pathExists && !f.isMain && f.observed !== "removing" && f.desired !== "removed") {
    return "teardown"
  }
  if (f.hasActor) return "none"
  // a removal (or a teardown) a crash interrupted is finished
  if (f.desired === "removed" || f.observed === "removing") return "settle"
  if (f.desired === "up" && f.runsAnywhere) return "release"
  if (f.desired === "up" && f.observed !== "failed") {
    // created and never started (or stopped cleanly with nothing recorded): it waits for its `up`
    if (f.observed === "stopped" && f.liveProcesses === 0 && !f.recorded) return "none"
    // asleep for idleness: a new daemon leaves it asleep (a request or an `up` wakes it)
    if (f.observed === "suspended" && f.wakesOnRequest && f.liveProcesses === 0) return "none"
    return "adopt"
  }
  if (f.liveProcesses > 0) return "stop-strays"
  if (TRANSITIONAL.has(f.observed)) return "settle"
  return "none"
}

/** A `settle` that finishes a removal (asked for, or a teardown of a deleted worktree) rather than stopping. */
export const finishesRemoval = (f: Pick<WorldFacts, "desired" | "observed">): boolean =>
  f.desired === "removed" || f.observed === "removing"

/** What a step of a world's life asks of the world outside: its row written, and its move told to whoever listens. */
export type LifeEffect =
  | { readonly _tag: "Record"; readonly state: WorldState; readonly reason: string | null }
  | { readonly _tag: "Announce"; readonly from: WorldState; readonly to: WorldState }

/** The part of a world's life a step reads and writes: its state and why, and what runs (whatever the actor keeps). */
export interface LifeCore<R> {
  readonly state: WorldState
  readonly reason: string | null
  readonly run: R
}

/**
 * One step of a world's life, pure: `event` moves the state as `transition` allows, with `reason`, and `run` (when
 * given) replaces what runs. An event that moves nothing changes at most what runs, and asks for nothing; one that
 * moves asks for its row to be written and its move to be told. The actor applies the effects in the same step (its
 * one fiber, `SubscriptionRef.modifyEffect`), so nothing reads the state between the move and its row.
 */
export const step = <R, L extends LifeCore<R>>(
  life: L,
  event: WorldEvent,
  reason: string | null,
  run?: R
): { readonly life: L; readonly effects: ReadonlyArray<LifeEffect> } => {
  const to = transition(life.state, event)
  const withRun = run === undefined ? life : { ...life, run }
  if (to === undefined) return { life: withRun, effects: [] }
  return {
    life: { ...withRun, state: to, reason },
    effects: [
      { _tag: "Record", state: to, reason },
      { _tag: "Announce", from: life.state, to }
    ]
  }
}
