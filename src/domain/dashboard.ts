/**
 * The dashboards' pure logic, shared by the daemon's state stream (`Watch`), `berth dashboard` and the web page's
 * server: what changed between two readings of the worlds, a world's CPU and memory from two samples of /proc, and
 * the view model every watcher folds the stream's messages into (sorted, filtered, flattened into selectable rows).
 * The shapes are structural: the Schemas that carry them over the socket live in `daemon/api.ts`.
 */

export interface ServiceView {
  readonly name: string
  readonly kind: string
  readonly state: string
  readonly pid: number | null
  readonly port: number | null
  readonly url: string | null
  readonly restarts: number
  readonly reason: string | null
}

export interface EventView {
  readonly service: string | null
  readonly kind: string
  readonly message: string
  readonly at: number
}

export interface WorldStatusView {
  readonly project: string
  readonly name: string
  readonly path: string
  readonly main: boolean
  readonly desired: string
  readonly state: string
  readonly reason: string | null
  readonly services: ReadonlyArray<ServiceView>
  readonly events: ReadonlyArray<EventView>
  readonly queue?: { readonly position: number; readonly waitingFor: string } | undefined
}

/** A world as the stream carries it: its status (as `Status` answers it) and what acting on it needs. */
export interface WatchedWorldView<S extends WorldStatusView = WorldStatusView> {
  readonly id: number
  /** the repository's main checkout: a folder that exists, to name the world's project in a request */
  readonly mainRoot: string
  readonly selection: { readonly services: ReadonlyArray<string>; readonly groups: ReadonlyArray<string> }
  readonly status: S
}

export interface LineEntryView {
  readonly worldId: number
  readonly project: string
  readonly world: string
  readonly position: number
  readonly waitingFor: string
}

export interface MachineView {
  readonly memTotalBytes: number
  readonly memAvailableBytes: number
  readonly memAvailablePercent: number
  readonly disks: ReadonlyArray<{ readonly path: string; readonly freeBytes: number }>
  readonly running: number
  readonly reserves: {
    readonly maxParallel: number
    readonly ramPercent: number
    readonly diskBytes: number
    readonly resumeFactor: number
    readonly recovering: boolean
  }
}

export interface UsageView {
  readonly worldId: number
  /** percent of one core, summed over the world's processes; null on the first sample (nothing to compare with) */
  readonly cpuPercent: number | null
  readonly rssBytes: number
  readonly processes: number
}

/** The stream's messages, as the daemon sends them: a snapshot first, then one per observed change. */
export type WatchMessageView<S extends WorldStatusView = WorldStatusView> =
  | {
      readonly _tag: "Snapshot"
      readonly worlds: ReadonlyArray<WatchedWorldView<S>>
      readonly line: ReadonlyArray<LineEntryView>
      readonly machine: MachineView
      readonly usage: ReadonlyArray<UsageView>
      readonly dashboard: string | null
      readonly at: number
    }
  | { readonly _tag: "WorldChanged"; readonly world: WatchedWorldView<S> }
  | { readonly _tag: "WorldGone"; readonly id: number }
  | { readonly _tag: "LineChanged"; readonly line: ReadonlyArray<LineEntryView> }
  | { readonly _tag: "Readings"; readonly machine: MachineView; readonly usage: ReadonlyArray<UsageView> }
  | { readonly _tag: "EventAdded"; readonly worldId: number; readonly world: string; readonly event: EventView }

// ---------------------------------------------------------------------------------------------------------------
// What changed (the daemon's side)

/** An event's identity: the registry gives none in a status, and two events of one millisecond are rare but equal. */
const eventKey = (e: EventView) => `${e.at}\u0000${e.service ?? ""}\u0000${e.kind}\u0000${e.message}`

/**
 * The messages that take a watcher from `before` to `after` (both keyed by world id, with the worlds' encoded text
 * to compare): a world whose status changed is sent whole, a world gone by its id, and each event not seen before on
 * its own (oldest first), so a watcher can show a feed without comparing lists itself.
 */
export const diffWorlds = <W extends WatchedWorldView>(
  before: ReadonlyMap<number, { readonly text: string; readonly world: W }>,
  after: ReadonlyArray<{ readonly text: string; readonly world: W }>
): Array<
  | { readonly _tag: "WorldChanged"; readonly world: W }
  | { readonly _tag: "WorldGone"; readonly id: number }
  | {
      readonly _tag: "EventAdded"
      readonly worldId: number
      readonly world: string
      readonly event: W["status"]["events"][number]
    }
> => {
  const out: ReturnType<typeof diffWorlds<W>> = []
  const seen = new Set<number>()
  for (const { text, world } of after) {
    seen.add(world.id)
    const old = before.get(world.id)
    if (old !== undefined && old.text === text) continue
    out.push({ _tag: "WorldChanged", world })
    // a world seen for the first time brings its history in its status; only later events are news
    if (old === undefined) continue
    const known = new Set(old.world.status.events.map(eventKey))
    const fresh = world.status.events.filter((e) => !known.has(eventKey(e)))
    for (const event of [...fresh].reverse()) {
      out.push({ _tag: "EventAdded", worldId: world.id, world: world.status.name, event })
    }
  }
  for (const id of before.keys()) if (!seen.has(id)) out.push({ _tag: "WorldGone", id })
  return out
}

// ---------------------------------------------------------------------------------------------------------------
// CPU and memory from /proc

/** What one `/proc/<pid>/stat` line says about a process's cost. */
export interface ProcUsage {
  readonly pid: number
  readonly pgrp: number
  /** utime + stime: clock ticks of CPU used so far */
  readonly ticks: number
  /** resident set size, in pages */
  readonly rssPages: number
}

/**
 * `/proc/<pid>/stat` → pid, process group, CPU ticks (utime + stime, fields 14 and 15) and RSS (field 24, pages).
 * The comm (field 2) may hold spaces and parentheses, so fields are counted from the last `)`.
 */
export const parseUsage = (text: string): ProcUsage | undefined => {
  const open = text.indexOf("(")
  const close = text.lastIndexOf(")")
  if (open === -1 || close < open) return undefined
  const pid = Number(text.slice(0, open).trim())
  // after the comm, field n is rest[n - 3]
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/)
  const numbers = [rest[2], rest[11], rest[12], rest[21]].map((f) =>
    f !== undefined && /^-?\d+$/.test(f) ? Number(f) : Number.NaN
  )
  const [pgrp, utime, stime, rss] = numbers as [number, number, number, number]
  if (!Number.isInteger(pid) || numbers.some(Number.isNaN)) return undefined
  return { pid, pgrp, ticks: utime + stime, rssPages: Math.max(0, rss) }
}

/** One reading of every world's processes: when it was taken, and each world's summed ticks, pages and count. */
export interface UsageSample {
  readonly at: number
  readonly worlds: ReadonlyMap<
    number,
    { readonly ticks: number; readonly rssPages: number; readonly processes: number }
  >
}

/**
 * Sums the processes of each world's process groups (`groups`: pgid → world id). A process that left its group
 * (a daemonized helper) is not counted: what berth stops is the group, so that is what it measures.
 */
export const sampleUsage = (
  at: number,
  processes: ReadonlyArray<ProcUsage>,
  groups: ReadonlyMap<number, number>
): UsageSample => {
  const worlds = new Map<number, { ticks: number; rssPages: number; processes: number }>()
  for (const p of processes) {
    const worldId = groups.get(p.pgrp)
    if (worldId === undefined) continue
    const sum = worlds.get(worldId) ?? { ticks: 0, rssPages: 0, processes: 0 }
    sum.ticks += p.ticks
    sum.rssPages += p.rssPages
    sum.processes += 1
    worlds.set(worldId, sum)
  }
  return { at, worlds }
}

/**
 * Each world's CPU (percent of one core over the time between the samples) and memory now. CPU is null without an
 * earlier sample of that world; a drop in ticks (a process replaced by a newer one) counts as nothing rather than
 * as a negative.
 */
export const usageBetween = (
  before: UsageSample | undefined,
  now: UsageSample,
  ticksPerSecond = 100,
  pageSize = 4096
): Array<UsageView> => {
  const out: Array<UsageView> = []
  const seconds = before === undefined ? 0 : (now.at - before.at) / 1000
  for (const [worldId, s] of now.worlds) {
    const old = before?.worlds.get(worldId)
    const cpuPercent =
      old === undefined || seconds <= 0
        ? null
        : Math.round((1000 * Math.max(0, s.ticks - old.ticks)) / ticksPerSecond / seconds) / 10
    out.push({ worldId, cpuPercent, rssBytes: s.rssPages * pageSize, processes: s.processes })
  }
  return out.sort((a, b) => a.worldId - b.worldId)
}

// ---------------------------------------------------------------------------------------------------------------
// The view model (every watcher's side)

export interface DashboardModel<S extends WorldStatusView = WorldStatusView> {
  /** sorted: by project, then the main checkout first, then by name */
  readonly worlds: ReadonlyArray<WatchedWorldView<S>>
  readonly line: ReadonlyArray<LineEntryView>
  readonly machine: MachineView | undefined
  readonly usage: ReadonlyMap<number, UsageView>
  /** the newest events last, at most `MAX_EVENTS` */
  readonly events: ReadonlyArray<{ readonly world: string; readonly event: EventView }>
  readonly dashboard: string | null
  /** whether a snapshot has arrived */
  readonly ready: boolean
}

export const MAX_EVENTS = 50

export const emptyModel = <S extends WorldStatusView>(): DashboardModel<S> => ({
  worlds: [],
  line: [],
  machine: undefined,
  usage: new Map(),
  events: [],
  dashboard: null,
  ready: false
})

const byPlace = <S extends WorldStatusView>(a: WatchedWorldView<S>, b: WatchedWorldView<S>): number =>
  a.status.project.localeCompare(b.status.project) ||
  Number(b.status.main) - Number(a.status.main) ||
  a.status.name.localeCompare(b.status.name) ||
  a.id - b.id

export const sortWorlds = <S extends WorldStatusView>(
  worlds: ReadonlyArray<WatchedWorldView<S>>
): Array<WatchedWorldView<S>> => [...worlds].sort(byPlace)

/** The model after one message of the stream. */
export const applyMessage = <S extends WorldStatusView>(
  model: DashboardModel<S>,
  message: WatchMessageView<S>
): DashboardModel<S> => {
  switch (message._tag) {
    case "Snapshot":
      return {
        worlds: sortWorlds(message.worlds),
        line: message.line,
        machine: message.machine,
        usage: new Map(message.usage.map((u) => [u.worldId, u])),
        events: message.worlds
          .flatMap((w) => w.status.events.map((event) => ({ world: w.status.name, event })))
          .sort((a, b) => a.event.at - b.event.at)
          .slice(-MAX_EVENTS),
        dashboard: message.dashboard,
        ready: true
      }
    case "WorldChanged":
      return {
        ...model,
        worlds: sortWorlds([...model.worlds.filter((w) => w.id !== message.world.id), message.world])
      }
    case "WorldGone": {
      const usage = new Map(model.usage)
      usage.delete(message.id)
      return { ...model, worlds: model.worlds.filter((w) => w.id !== message.id), usage }
    }
    case "LineChanged":
      return { ...model, line: message.line }
    case "Readings":
      return { ...model, machine: message.machine, usage: new Map(message.usage.map((u) => [u.worldId, u])) }
    case "EventAdded":
      return {
        ...model,
        events: [...model.events, { world: message.world, event: message.event }].slice(-MAX_EVENTS)
      }
  }
}

/**
 * Whether a world matches what the user typed after `/`: every word appears in its project, name, state or one of
 * its services' names, case-insensitively.
 */
export const matchesFilter = (world: WatchedWorldView, filter: string): boolean => {
  const words = filter
    .toLowerCase()
    .split(/\s+/)
    .filter((w) => w !== "")
  if (words.length === 0) return true
  const hay = [world.status.project, world.status.name, world.status.state, ...world.status.services.map((s) => s.name)]
    .join(" ")
    .toLowerCase()
  return words.every((w) => hay.includes(w))
}

/** One selectable row: a world, or one of its services. */
export interface Row<S extends WorldStatusView = WorldStatusView> {
  readonly world: WatchedWorldView<S>
  readonly service: ServiceView | undefined
}

/** The rows a dashboard lists, in order: each world, then its services. */
export const rowsOf = <S extends WorldStatusView>(model: DashboardModel<S>, filter: string): Array<Row<S>> =>
  model.worlds
    .filter((w) => matchesFilter(w, filter))
    .flatMap((world) => [
      { world, service: undefined },
      ...world.status.services.map((service) => ({ world, service }))
    ])

/** A row's identity, so the selection stays on the same world or service while rows come and go around it. */
export const rowKey = (row: Row): string => `${row.world.id}/${row.service?.name ?? ""}`

/** The index to select in `rows` for the key selected before (else the nearest row to where it was). */
export const reselect = (rows: ReadonlyArray<Row>, key: string | undefined, previousIndex: number): number => {
  if (rows.length === 0) return 0
  const found = key === undefined ? -1 : rows.findIndex((r) => rowKey(r) === key)
  if (found !== -1) return found
  return Math.max(0, Math.min(previousIndex, rows.length - 1))
}

/** "1.2 GiB", "340 MiB", "12 KiB". */
export const formatBytes = (bytes: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${unit === 0 || value >= 100 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`
}

/** The machine's readings against the reserves, in one line. */
export const machineLine = (m: MachineView | undefined): string => {
  if (m === undefined) return "reading the machine…"
  const disk = m.disks.map((d) => `${formatBytes(d.freeBytes)} free on ${d.path}`).join(", ")
  return [
    `${m.running}/${m.reserves.maxParallel} running`,
    `memory ${m.memAvailablePercent.toFixed(0)}% free (reserve ${m.reserves.ramPercent}%${m.reserves.recovering ? `, back at ${(m.reserves.ramPercent * m.reserves.resumeFactor).toFixed(0)}%` : ""})`,
    `disk ${disk === "" ? "?" : disk} (reserve ${formatBytes(m.reserves.diskBytes)})`
  ].join(" · ")
}
