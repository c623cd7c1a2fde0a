/**
 * The log budget: how much of BERTH_HOME's disk the services' logs may take, per world and in all, and which files go
 * when they take more — rotated copies first, the oldest first, and only then the live logs themselves (emptied, since
 * their services hold them open). Pure: the daemon reads the files and applies the answer.
 */

const MiB = 1024 * 1024

export interface LogBudget {
  /** a live log is rotated past this size */
  readonly rotateAtBytes: number
  /** every log of one world together */
  readonly perWorldBytes: number
  /** every log of every world */
  readonly perHomeBytes: number
}

/**
 * The budget on a disk of `diskBytes`: a quarter of it for logs at most, 1 GiB at most in all, a quarter of that per
 * world (256 MiB at most), a live log rotated at a quarter of its world's share (10 MiB at most), so that a chatty
 * service can never fill a small disk, and a large one keeps what was kept before. A disk of unknown size (0) counts
 * as a large one.
 */
export const logBudget = (diskBytes: number): LogBudget => {
  const basis = diskBytes > 0 ? diskBytes : Number.POSITIVE_INFINITY
  const perHomeBytes = Math.max(MiB, Math.min(1024 * MiB, Math.floor(basis / 4)))
  const perWorldBytes = Math.min(256 * MiB, Math.floor(perHomeBytes / 2))
  return { perHomeBytes, perWorldBytes, rotateAtBytes: Math.min(10 * MiB, Math.floor(perWorldBytes / 4)) }
}

export interface LogFileFacts {
  readonly path: string
  /** the world it belongs to (its folder under BERTH_HOME/logs) */
  readonly world: string
  /** a service's live log (written to now) rather than a rotated copy */
  readonly live: boolean
  readonly bytes: number
  readonly modifiedMs: number
}

export interface LogTrim {
  /** rotated copies to delete */
  readonly drop: ReadonlyArray<string>
  /** live logs to empty */
  readonly truncate: ReadonlyArray<string>
}

/** oldest rotated copy first; then the largest live log */
const order = (a: LogFileFacts, b: LogFileFacts): number =>
  a.live !== b.live
    ? a.live
      ? 1
      : -1
    : a.live
      ? b.bytes - a.bytes || a.path.localeCompare(b.path)
      : a.modifiedMs - b.modifiedMs || a.path.localeCompare(b.path)

/** What to drop and empty so that every world is within `perWorldBytes` and all of them within `perHomeBytes`. */
export const logTrim = (files: ReadonlyArray<LogFileFacts>, budget: LogBudget): LogTrim => {
  const gone = new Set<string>()
  const trimTo = (group: ReadonlyArray<LogFileFacts>, limit: number) => {
    let total = group.reduce((sum, f) => sum + (gone.has(f.path) ? 0 : f.bytes), 0)
    for (const f of [...group].sort(order)) {
      if (total <= limit) return
      if (gone.has(f.path) || f.bytes === 0) continue
      gone.add(f.path)
      total -= f.bytes
    }
  }
  const worlds = new Map<string, Array<LogFileFacts>>()
  for (const f of files) worlds.set(f.world, [...(worlds.get(f.world) ?? []), f])
  for (const group of worlds.values()) trimTo(group, budget.perWorldBytes)
  trimTo(files, budget.perHomeBytes)
  const chosen = files.filter((f) => gone.has(f.path))
  return {
    drop: chosen.filter((f) => !f.live).map((f) => f.path),
    truncate: chosen.filter((f) => f.live).map((f) => f.path)
  }
}

/** The fastest a service is taken to write: the next look at the logs comes before one could pass its budget. */
export const FASTEST_WRITE_BYTES_PER_S = 8 * MiB
export const LOG_CHECK_MIN_MS = 2_000
export const LOG_CHECK_MAX_MS = 30_000

/**
 * When to look at the logs next: as late as the room left allows at the fastest writing (the tighter of a world's
 * and the home's), between 2 and 30 s. A small disk (8 MB: 2 MB of logs) is looked at every 2 s; a home with room to
 * spare every 30 s — each look reads every log file's size, which at a hundred idle worlds is most of what the daemon
 * does. Rotation at `rotateAtBytes` may then come a little late; the budget, which protects the disk, does not.
 */
export const nextLogCheckMs = (files: ReadonlyArray<LogFileFacts>, budget: LogBudget): number => {
  const perWorld = new Map<string, number>()
  let total = 0
  for (const f of files) {
    total += f.bytes
    perWorld.set(f.world, (perWorld.get(f.world) ?? 0) + f.bytes)
  }
  const fullestWorld = Math.max(0, ...perWorld.values())
  const room = Math.min(budget.perHomeBytes - total, budget.perWorldBytes - fullestWorld)
  const ms = (Math.max(0, room) / FASTEST_WRITE_BYTES_PER_S) * 1000
  return Math.round(Math.min(LOG_CHECK_MAX_MS, Math.max(LOG_CHECK_MIN_MS, ms)))
}
