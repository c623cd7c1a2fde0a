/**
 * What an agent is told while `up` waits (MCP progress notifications): the world's place in line, a golden being
 * built, or which services are not ready yet. A pure reading of the world's status, so it is tested as such.
 */
import type { WorldStatus } from "../daemon/api.js"

/** Slices whose golden is being built now: a `golden_build` event with no `golden_ready` after it (events are newest first). */
const buildingGoldens = (w: WorldStatus): ReadonlyArray<string> => {
  const settled = new Set<string>()
  const building: Array<string> = []
  for (const e of w.events) {
    if (e.service === null) continue
    if (e.kind === "golden_ready") settled.add(e.service)
    else if (e.kind === "golden_build" && !settled.has(e.service) && !building.includes(e.service)) {
      building.push(e.service)
    }
  }
  const provisioning = new Set(w.services.filter((s) => s.kind === "slice" && s.state !== "ready").map((s) => s.name))
  return building.filter((name) => provisioning.has(name))
}

/** The project's setup runs now: a `setup_start` event with no `setup_done` after it (events are newest first). */
const runningSetup = (w: WorldStatus): boolean => {
  const last = w.events.find((e) => e.kind === "setup_start" || e.kind === "setup_done")
  return last?.kind === "setup_start" && (w.state === "starting" || w.state === "queued")
}

/** What a waiting `up` is waiting for, as `up --json --progress` prints it (and the lines below say it). */
export interface Progress {
  readonly world: string
  readonly state: string
  /** its place in line and what it waits for, while it is in line */
  readonly queue: { readonly position: number; readonly waitingFor: string } | null
  /** the project's setup runs now (once per worktree, before any service) */
  readonly setup: boolean
  /** slices whose golden is being built now */
  readonly building: ReadonlyArray<string>
  /** services not ready yet, with their state */
  readonly waiting: ReadonlyArray<{ readonly name: string; readonly state: string }>
}

export const progressOf = (w: WorldStatus): Progress => ({
  world: w.name,
  state: w.state,
  queue: w.queue ?? null,
  setup: runningSetup(w),
  building: buildingGoldens(w),
  // a process is ready once healthy (a service with no check too, after its settle time): `running` is spawned only
  waiting: w.services
    .filter((s) => (s.kind === "slice" ? s.state !== "ready" : s.state !== "healthy"))
    .map((s) => ({ name: s.name, state: s.state }))
})

/**
 * A world on its way up — in line, or starting — whose waits are worth telling; one still leaving (stopping for a
 * reload, or stopped before an up reached it) is not there yet.
 */
export const onItsWay = (w: WorldStatus): boolean =>
  w.queue !== undefined || w.state === "queued" || w.state === "starting"

/** What a waiting up waits for, in words (while setup runs, with the last line it printed). */
export const waitingLine = (w: WorldStatus): string => {
  const p = progressOf(w)
  if (p.queue !== null) return `${w.name}: #${p.queue.position} in line, waiting for ${p.queue.waitingFor}`
  if (p.setup) return `${w.name}: ${w.state}; running setup${w.setupTail === undefined ? "" : `: ${w.setupTail}`}`
  if (p.building.length > 0) return `${w.name}: ${w.state}; building the golden of ${p.building.join(", ")}`
  return p.waiting.length === 0
    ? `${w.name}: ${w.state}`
    : `${w.name}: ${w.state}; waiting for ${p.waiting.map((s) => `${s.name} (${s.state === "running" ? "not ready yet" : s.state})`).join(", ")}`
}
