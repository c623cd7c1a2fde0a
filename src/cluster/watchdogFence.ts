/**
 * One fence of the watchdog (`watchdog.ts`): the process groups of a lease run out, looked up by their marks, then
 * stopped (SIGTERM, a grace, SIGKILL) — unless the lease was renewed while they were looked up. A daemon that thaws
 * renews its lease before it starts a copy again (`leaseLets`), so a group found after that renewal may be a new copy,
 * never a fenced one; reading the lease again after the look-up tells the two apart. Plain Node, as the watchdog.
 */
import { FENCE_GRACE_MS, type FenceLease, type WatchStep, watchStep } from "../domain/fence.js"

export interface FenceIo {
  /** the lease file as it is now */
  readonly lease: () => FenceLease | undefined
  /** the process groups of these worlds of this home, from the marks of the live processes */
  readonly groups: (worlds: ReadonlyArray<number>, home: string) => ReadonlyArray<number>
  readonly signal: (pgid: number, signal: NodeJS.Signals) => void
  readonly sleep: (ms: number) => Promise<void>
  readonly daemonAlive: () => boolean
  readonly now: () => number
}

/** Stops the groups of `step`'s worlds unless the lease no longer says to; answers the groups it stopped. */
export const fenceGroups = async (
  step: Extract<WatchStep, { readonly _tag: "Fence" }>,
  serves: { readonly daemon: number; readonly session: string },
  io: FenceIo
): Promise<ReadonlyArray<number>> => {
  const groups = io.groups(step.worlds, step.home)
  if (groups.length === 0) return []
  const again = watchStep({ lease: io.lease(), serves, daemonAlive: io.daemonAlive(), now: io.now() })
  if (again._tag !== "Fence") return []
  for (const pgid of groups) io.signal(pgid, "SIGTERM")
  await io.sleep(FENCE_GRACE_MS)
  for (const pgid of groups) io.signal(pgid, "SIGKILL")
  return groups
}
