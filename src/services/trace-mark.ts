/**
 * One timestamped mark appended to the BERTH_TRACE file (`trace.ts` says what they are for). No Effect here: the
 * CLI's lean path marks through this module before anything of Effect is loaded.
 */
import { appendFileSync } from "node:fs"

export const appendMark = (file: string | undefined, label: string): void => {
  if (file === undefined || file === "") return
  try {
    appendFileSync(file, `${(performance.timeOrigin + performance.now()).toFixed(3)} ${process.pid} ${label}\n`)
  } catch {
    // a trace that cannot be written is no reason to fail anything
  }
}

/** A mark from the CLI's lean path, which runs before any Effect: its own environment says where. */
export const traceNow = (label: string): void => appendMark(process.env.BERTH_TRACE, label)
