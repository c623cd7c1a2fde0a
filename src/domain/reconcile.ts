/**
 * The reconciler's decision for one world: compare what is wanted (desired, persisted) with what is true (the
 * worktree folder, live processes, whether an actor already looks after it) and say what to do. Pure, so the whole
 * table of cases is tested without processes or git.
 */
import type { WorldDesired, WorldState } from "./world-state.js"

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
}

export type ReconcileAction =
  /** nothing to do */
  | "none"
  /** take over the live processes and start the dead ones (after a daemon restart) */
  | "adopt"
  /** the worktree was deleted outside berth: kill its processes, release its leases, forget it */
  | "teardown"
  /** processes are alive that nobody wants: stop them */
  | "stop-strays"
  /** a crash left it mid-way (stopping, starting, removing…): finish what was asked */
  | "settle"

/** States a world only passes through: after a crash, one of these is a command left unfinished. */
const TRANSITIONAL: ReadonlySet<WorldState> = new Set(["queued", "starting", "stopping", "suspending", "removing"])

export const decide = (f: WorldFacts): ReconcileAction => {
  if (f.worktreeReady && !f.pathExists && !f.isMain && f.observed !== "removing" && f.desired !== "removed") {
    return "teardown"
  }
  if (f.hasActor) return "none"
  // a removal a crash interrupted is finished
  if (f.desired === "removed") return "settle"
  // a failed world stays failed until the user's next `up`: a crash loop must not become a retry loop
  if (f.desired === "up" && f.observed !== "failed") return "adopt"
  if (f.liveProcesses > 0) return "stop-strays"
  if (TRANSITIONAL.has(f.observed)) return "settle"
  return "none"
}
