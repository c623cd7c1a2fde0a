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

export const waitingLine = (w: WorldStatus): string => {
  if (w.queue !== undefined) return `${w.name}: #${w.queue.position} in line, waiting for ${w.queue.waitingFor}`
  const goldens = buildingGoldens(w)
  if (goldens.length > 0) return `${w.name}: ${w.state}; building the golden of ${goldens.join(", ")}`
  // a process is ready once healthy (a service with no check too, after its settle time): `running` is spawned only
  const pending = w.services.filter((s) => (s.kind === "slice" ? s.state !== "ready" : s.state !== "healthy"))
  return pending.length === 0
    ? `${w.name}: ${w.state}`
    : `${w.name}: ${w.state}; waiting for ${pending.map((s) => `${s.name} (${s.state === "running" ? "not ready yet" : s.state})`).join(", ")}`
}
