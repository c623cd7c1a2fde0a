/** Rows for tests that write the registry directly. */
import type { ServiceRow } from "../../src/services/Registry.js"

/** A service's row in `observed`, with no process recorded. */
export const serviceRow = (worldId: number, name: string, observed: string): ServiceRow => ({
  worldId,
  name,
  observed,
  pid: null,
  pgid: null,
  startTime: null,
  restarts: 0,
  reason: null,
  logTail: null,
  command: null
})
