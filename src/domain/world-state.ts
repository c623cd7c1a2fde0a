/**
 * A world's lifecycle. Observed state changes only through `transition`, a pure function that answers `undefined`
 * for an event that is illegal in the current state; the caller ignores such events, so a late result (a health
 * verdict arriving during a stop, say) can never undo what a user asked for.
 */
import * as Data from "effect/Data"

export type WorldState =
  | "queued"
  | "starting"
  | "running"
  | "stopping"
  | "stopped"
  | "suspending"
  | "suspended"
  | "failed"
  | "removing"
  | "removed"

/** Every observed state, in lifecycle order (handy for tables, schemas and tests). */
export const worldStates: ReadonlyArray<WorldState> = [
  "queued",
  "starting",
  "running",
  "stopping",
  "stopped",
  "suspending",
  "suspended",
  "failed",
  "removing",
  "removed"
]

/** What a user asked for; persisted, and changed only by a user's command. */
export type WorldDesired = "up" | "down" | "removed"

export type WorldEvent = Data.TaggedEnum<{
  /** Admission granted a permit to a queued world. */
  Admit: {}
  /** Asked to come up, but it must wait for a permit first. */
  Queue: {}
  /** Start straight away (a permit is already held or none is needed). */
  Start: {}
  Started: {}
  Stop: {}
  Stopped: {}
  /** Memory or disk pressure: the world gives back its resources but keeps everything needed to resume. */
  Suspend: {}
  Suspended: {}
  Fail: { readonly reason: string }
  Remove: {}
  Removed: {}
}>

export const WorldEvent = Data.taggedEnum<WorldEvent>()

interface Edge {
  readonly from: ReadonlyArray<WorldState>
  readonly to: WorldState
}

/** The whole machine as data: for each event, the states it is legal in and where it leads. */
const edges: { readonly [Tag in WorldEvent["_tag"]]: Edge } = {
  Admit: { from: ["queued"], to: "starting" },
  Queue: { from: ["stopped", "failed", "suspended"], to: "queued" },
  Start: { from: ["queued", "stopped", "failed", "suspended"], to: "starting" },
  Started: { from: ["starting"], to: "running" },
  Stop: { from: ["queued", "starting", "running", "failed", "suspending", "suspended"], to: "stopping" },
  Stopped: { from: ["stopping"], to: "stopped" },
  Suspend: { from: ["running"], to: "suspending" },
  Suspended: { from: ["suspending"], to: "suspended" },
  Fail: { from: ["starting", "running", "stopping", "suspending"], to: "failed" },
  // removal wins over everything still in flight; asking again while removing is harmless
  Remove: { from: worldStates.filter((state) => state !== "removed"), to: "removing" },
  Removed: { from: ["removing"], to: "removed" }
}

/** The next state, or `undefined` when `event` is illegal in `state` (the caller then ignores the event). */
export const transition = (state: WorldState, event: WorldEvent): WorldState | undefined => {
  const edge = edges[event._tag]
  return edge.from.includes(state) ? edge.to : undefined
}

const settled: ReadonlySet<WorldState> = new Set(["running", "stopped", "suspended", "failed", "removed"])

/**
 * True when nothing is in flight: the world stays in this state until a command, a crash or pressure moves it.
 * `queued` is not settled: it is on its way up and only waiting for a permit.
 */
export const isSettled = (state: WorldState): boolean => settled.has(state)

export type WorldAction = "start" | "stop" | "remove" | "none"

/**
 * What the actor should do so that `observed` converges on `desired`. In-flight states answer `"none"`: the
 * reconciler asks again once they settle. `"start"` means "ask admission for a permit" (Queue or Start).
 *
 * A `failed` world that should be up is left alone: starting it again here would turn a crash loop into a retry
 * loop; a user's `up` starts it explicitly. A `suspended` one is started, which queues it behind admission, so
 * pressure still decides when it really resumes.
 */
export const wants = (desired: WorldDesired, observed: WorldState): WorldAction => {
  switch (desired) {
    case "removed":
      return observed === "removing" || observed === "removed" ? "none" : "remove"
    case "down":
      switch (observed) {
        case "queued":
        case "starting":
        case "running":
        case "failed":
        case "suspending":
        case "suspended":
          return "stop"
        default:
          return "none"
      }
    case "up":
      return observed === "stopped" || observed === "suspended" ? "start" : "none"
  }
}
