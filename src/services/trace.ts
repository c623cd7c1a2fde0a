/**
 * Timestamps for following one `berth up` through the CLI, the daemon and the services: with BERTH_TRACE naming a
 * file, each mark appends `<epoch ms, to the µs> <pid> <label>` to it (every process shares the clock, so the lines
 * of several line up). Unset, a mark costs a lookup. For measuring (bench/README.md), never for behaviour.
 */
import * as Effect from "effect/Effect"
import { readText } from "../domain/knobs.js"
import { appendMark } from "./trace-mark.js"

/** A mark from the engine: BERTH_TRACE is read through Effect `Config`, as every knob of the daemon is. */
export const trace = (label: string): Effect.Effect<void> =>
  Effect.flatMap(readText("BERTH_TRACE"), (file) => Effect.sync(() => appendMark(file, label)))
