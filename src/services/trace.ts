/**
 * Timestamps for following one `berth up` through the CLI, the daemon and the services: with BERTH_TRACE naming a
 * file, each mark appends `<epoch ms, to the µs> <pid> <label>` to it (every process shares the clock, so the lines
 * of several line up). Unset, a mark costs one comparison. For measuring (bench/README.md), never for behaviour.
 */
import { appendFileSync } from "node:fs"

const file = process.env.BERTH_TRACE

export const trace = (label: string): void => {
  if (file === undefined || file === "") return
  try {
    appendFileSync(file, `${(performance.timeOrigin + performance.now()).toFixed(3)} ${process.pid} ${label}\n`)
  } catch {
    // a trace that cannot be written is no reason to fail anything
  }
}
