/**
 * The processes recorded for a world in the state database: which still run (pid and start time match) and which
 * died, read when a daemon starts again; and those no generation owns, which `halt` stops. Used by recovery and by a
 * generation's release alike, so it stands apart from both.
 */
import * as Effect from "effect/Effect"
import { Processes, type ProcessesService, type ProcessHandle } from "../../services/Processes.js"
import { Registry, type RegistryService } from "../../services/Registry.js"
import type { Rows } from "./rows.js"

/** service states berth passes through on its own way somewhere: after a crash, a row in one of these is unfinished */
const IN_FLIGHT: ReadonlySet<string> = new Set(["starting", "stopping", "restarting", "pending"])

/**
 * The recorded processes of a world: those still alive (pid and start time match) and those that died. Only a service
 * that was up and ended unwatched "died" (its restart policy decides); one berth itself was stopping or starting when
 * the daemon went (a reload, say) is simply started again.
 */
export const recordedProcesses = (worldId: number) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const processes = yield* Processes
    const handles = new Map<string, ProcessHandle>()
    const died = new Set<string>()
    /** live, but a daemon was stopping them when it died (a down, a reload, a restart): leaving at berth's request */
    const leaving = new Set<string>()
    for (const s of yield* registry.services(worldId)) {
      if (s.pid === null || s.pgid === null || s.startTime === null) continue
      const handle = { pid: s.pid, pgid: s.pgid, startTime: s.startTime }
      if (yield* processes.isRunning(handle)) {
        handles.set(s.name, handle)
        if (s.observed === "stopping") leaving.add(s.name)
      } else if (!IN_FLIGHT.has(s.observed)) died.add(s.name)
    }
    return { handles, died, leaving }
  })

/** Processes recorded for this world that no generation owns (e.g. after a failed adoption). */
export const makeStopOrphans = (deps: {
  readonly worldId: number
  readonly registry: RegistryService
  readonly processes: ProcessesService
  readonly saveRow: Rows["saveRow"]
}) =>
  Effect.gen(function* () {
    const { worldId, registry, processes, saveRow } = deps
    for (const s of yield* registry.services(worldId)) {
      if (s.pid !== null && s.pgid !== null && s.startTime !== null) {
        const handle = { pid: s.pid, pgid: s.pgid, startTime: s.startTime }
        if (yield* processes.isRunning(handle)) yield* processes.stop(handle, 10_000)
      } else if (!IN_FLIGHT.has(s.observed)) continue
      // a row a crash left mid-way (`stopping`, `starting`, …) settles too: nothing of it runs now
      yield* saveRow({ ...s, observed: "stopped", pid: null, pgid: null, startTime: null })
    }
  })
