/**
 * Timestamps for following one `berth up` through the CLI, the daemon and the services: with BERTH_TRACE naming a
 * file, each mark appends `<epoch ms, to the µs> <pid> <label>` to it (every process shares the clock, so the lines
 * of several line up). Unset, a mark costs a lookup. For measuring (bench/README.md), never for behaviour.
 */
import { appendFileSync } from "node:fs"
import * as Effect from "effect/Effect"
import { readText } from "../domain/knobs.js"

const append = (file: string | undefined, label: string): void => {
  if (file === undefined || file === "") return
  try {
    appendFileSync(file, `${(performance.timeOrigin + performance.now()).toFixed(3)} ${process.pid} ${label}\n`)
  } catch {
    // a trace that cannot be written is no reason to fail anything
  }
}

/** A mark from the engine: BERTH_TRACE is read through Effect `Config`, as every knob of the daemon is. */
export const trace = (label: string): Effect.Effect<void> =>
  Effect.flatMap(readText("BERTH_TRACE"), (file) => Effect.sync(() => append(file, label)))

/** A mark from the CLI's lean path, which runs before any Effect: its own environment says where. */
export const traceNow = (label: string): void => append(process.env.BERTH_TRACE, label)
