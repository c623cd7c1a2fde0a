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

// ---------------------------------------------------------------------------------------------------------------
// The gate: which waiting worlds start now, and why the others wait. One fair order for new and suspended worlds.

/** The machine-global settings of the gate. */
export interface GateSettings {
  /** at most this many worlds run at once */
  readonly maxParallel: number
  /** a world starts only while available memory is above this share of the total (percent) */
  readonly ramReservePercent: number
  /** … and free disk on every watched filesystem is above this (bytes) */
  readonly diskReserveBytes: number
  /** after pressure, memory must exceed the reserve by this factor before anything starts or resumes */
  readonly resumeFactor: number
}

export const defaultGateSettings: GateSettings = {
  maxParallel: 20,
  ramReservePercent: 10,
  diskReserveBytes: 2 * 1024 ** 3,
  resumeFactor: 1.5
}

/** What the machine reads now: memory, and the free space of each filesystem worlds live on. */
export interface Readings {
  readonly memTotalBytes: number
  readonly memAvailableBytes: number
  readonly disks: ReadonlyArray<{ readonly path: string; readonly freeBytes: number }>
}

export type WaitReason =
  | { readonly _tag: "Slot"; readonly running: number; readonly maxParallel: number }
  | { readonly _tag: "Ram"; readonly availablePercent: number; readonly reservePercent: number }
  | { readonly _tag: "Disk"; readonly path: string; readonly freeBytes: number; readonly reserveBytes: number }

const percentOf = (r: Readings) => (r.memTotalBytes <= 0 ? 100 : (100 * r.memAvailableBytes) / r.memTotalBytes)

/** Memory (and disk) below the reserves: the pressure monitor suspends a world. */
export const underPressure = (r: Readings, s: GateSettings): WaitReason | undefined => {
  const available = percentOf(r)
  if (available < s.ramReservePercent) {
    return { _tag: "Ram", availablePercent: available, reservePercent: s.ramReservePercent }
  }
  return lowDisk(r, s)
}

const lowDisk = (r: Readings, s: GateSettings): WaitReason | undefined => {
  for (const d of r.disks) {
    if (d.freeBytes < s.diskReserveBytes) {
      return { _tag: "Disk", path: d.path, freeBytes: d.freeBytes, reserveBytes: s.diskReserveBytes }
    }
  }
  return undefined
}

/**
 * Why one more world may not start now, or undefined when it may. Memory must be above the reserve — and, while the
 * machine is recovering from pressure, above the reserve times the resume factor, so a world resumed is not
 * suspended again at once.
 */
export const gateClosed = (
  running: number,
  r: Readings,
  s: GateSettings,
  recovering: boolean
): WaitReason | undefined => {
  if (running >= s.maxParallel) return { _tag: "Slot", running, maxParallel: s.maxParallel }
  const available = percentOf(r)
  const needed = recovering ? s.ramReservePercent * Math.max(1, s.resumeFactor) : s.ramReservePercent
  if (available < needed) return { _tag: "Ram", availablePercent: available, reservePercent: needed }
  return lowDisk(r, s)
}

export interface Waiting {
  readonly id: string
  /** when it asked (a new `up`), or when it was suspended: one order for both, so neither starves */
  readonly since: number
}

export interface GateDecision {
  /** start these now, in this order */
  readonly admit: ReadonlyArray<string>
  /** the rest, in order: position 1 is next */
  readonly waiting: ReadonlyArray<{ readonly id: string; readonly position: number; readonly reason: WaitReason }>
}

/**
 * Strictly first come, first served: the head of the line starts when the gate is open, and no later world overtakes
 * it while it waits, whatever it waits for. Admitting one counts as one more running.
 */
export const decideGate = (
  waiting: ReadonlyArray<Waiting>,
  running: number,
  r: Readings,
  s: GateSettings,
  recovering: boolean,
  admittedSinceReading = 0
): GateDecision => {
  const order = admissionOrder(waiting.map((w) => ({ id: w.id, queuedAt: w.since })))
  const admit: Array<string> = []
  let n = running
  let i = 0
  const held = (): WaitReason | undefined =>
    gateClosed(n, r, s, recovering) ??
    // one reading says nothing of what the worlds it let in will use: while memory is near the reserve, one world
    // starts per reading, and the next waits to see its cost in a fresh one
    (memoryTight(r, s, recovering) && admittedSinceReading + admit.length >= 1
      ? { _tag: "Ram", availablePercent: percentOf(r), reservePercent: s.ramReservePercent }
      : undefined)
  for (; i < order.length; i++) {
    if (held() !== undefined) break
    admit.push(order[i]!)
    n++
  }
  const reason = held() ?? { _tag: "Slot", running: n, maxParallel: s.maxParallel }
  return { admit, waiting: order.slice(i).map((id, k) => ({ id, position: k + 1, reason })) }
}

/** Memory within the resume margin of the reserve (or recovering from pressure): worlds are let in one per reading. */
export const memoryTight = (r: Readings, s: GateSettings, recovering: boolean): boolean =>
  recovering || percentOf(r) < s.ramReservePercent * Math.max(1, s.resumeFactor)

/** A running world as the pressure monitor sees it. */
export interface Candidate extends RunningWorld {
  /** when it last started or resumed: a world is not suspended again within the dwell time */
  readonly since: number
}

/**
 * Under pressure, the world to suspend now: the newest running one that has run at least `dwellMs`, and only when the
 * last suspension is `settleMs` old (one at a time: each suspension's memory must show in the readings first).
 */
export const suspendNow = (input: {
  readonly readings: Readings
  readonly settings: GateSettings
  readonly running: ReadonlyArray<Candidate>
  readonly now: number
  readonly lastSuspendAt: number | undefined
  readonly settleMs: number
  readonly dwellMs: number
}): { readonly id: string; readonly reason: WaitReason } | undefined => {
  const reason = underPressure(input.readings, input.settings)
  if (reason === undefined || reason._tag !== "Ram") return undefined
  if (input.lastSuspendAt !== undefined && input.now - input.lastSuspendAt < input.settleMs) return undefined
  const id = victim(input.running.filter((w) => input.now - w.since >= input.dwellMs))
  return id === undefined ? undefined : { id, reason }
}

/** How a wait reads in `status` and on `up`'s live line. */
export const describeWait = (reason: WaitReason): string => {
  switch (reason._tag) {
    case "Slot":
      return `a slot (${reason.running} of ${reason.maxParallel} worlds run)`
    case "Ram":
      return `memory (${reason.availablePercent.toFixed(0)}% free, needs ${reason.reservePercent.toFixed(0)}%)`
    case "Disk":
      return `disk space on ${reason.path} (${(reason.freeBytes / 1024 ** 3).toFixed(1)} GB free, needs ${(reason.reserveBytes / 1024 ** 3).toFixed(1)} GB)`
  }
}

/** `[project] idle_suspend`: a world whose routes last saw a request (or which started) `idleMs` ago sleeps. */
export const shouldIdle = (now: number, lastActive: number, idleMs: number): boolean =>
  idleMs > 0 && now - lastActive >= idleMs
