/**
 * The decisions behind admission and memory/disk pressure, kept pure so the Admission service and the
 * PressureMonitor fiber only read the machine and carry them out.
 */

export interface QueuedWorld {
  readonly id: string
  readonly queuedAt: number
}

export interface RunningWorld {
  readonly id: string
  readonly startedAt: number
}

/** Deterministic order for equal timestamps: plain code-unit comparison, not locale-dependent. */
const byId = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/** Which queued world gets the next permit: oldest first (FIFO), ties by id. */
export const admissionOrder = (worlds: ReadonlyArray<QueuedWorld>): ReadonlyArray<string> =>
  [...worlds].sort((a, b) => a.queuedAt - b.queuedAt || byId(a.id, b.id)).map((world) => world.id)

export type Pressure = "ok" | "pressure"

export interface MachineReading {
  readonly memAvailableBytes: number
  readonly diskFreeBytes: number
}

export interface PressureLimits {
  readonly minMemBytes: number
  readonly minDiskBytes: number
}

export interface Hysteresis {
  /** Pressure ends only once both readings exceed their minimum times this (values below 1 count as 1). */
  readonly resumeFactor: number
}

/**
 * Enters pressure as soon as memory or disk drops below its minimum; leaves it only when both are back above
 * minimum × resumeFactor. Readings in between keep the current state, so a world that is suspended and frees a
 * little memory is not resumed straight into the next suspension.
 */
export const pressure = (
  reading: MachineReading,
  limits: PressureLimits,
  hysteresis: Hysteresis,
  current: Pressure
): Pressure => {
  if (reading.memAvailableBytes < limits.minMemBytes || reading.diskFreeBytes < limits.minDiskBytes) return "pressure"
  if (current === "ok") return "ok"
  const factor = Math.max(1, hysteresis.resumeFactor)
  const recovered =
    reading.memAvailableBytes > limits.minMemBytes * factor && reading.diskFreeBytes > limits.minDiskBytes * factor
  return recovered ? "ok" : "pressure"
}

/**
 * The world to suspend under pressure: the most recently started, which has the least work to lose and mirrors
 * oldest-first resumption. Ties go to the greatest id (the reverse of `admissionOrder`). `undefined` if none runs.
 */
export const victim = (running: ReadonlyArray<RunningWorld>): string | undefined => {
  let newest: RunningWorld | undefined
  for (const world of running) {
    if (
      newest === undefined ||
      world.startedAt > newest.startedAt ||
      (world.startedAt === newest.startedAt && world.id > newest.id)
    ) {
      newest = world
    }
  }
  return newest?.id
}
