/**
 * berth across machines, as pure data: the names and numbers a cluster of berth daemons agrees on, how a world is
 * addressed as an `@effect/cluster` entity, and how a machine's liveness is read from its heartbeat.
 *
 * Worlds are pinned to the machine that holds their worktree: each machine takes one slot (1..MAX_MACHINES) when it
 * joins, and its worlds' entities live in that slot's shard group, which only that machine's runner is assigned. A
 * command for a world on another machine therefore reaches that machine through the cluster's sharding, and waits
 * (never runs elsewhere) while the machine is gone. The shared group (`ANYWHERE_GROUP`) is the one every runner takes.
 */

import { BEAT_HOLD_MS } from "./fence.js"
import { shortHash } from "./hash.js"
import type { RouteTarget } from "./routes.js"
import { type ServiceState, serviceStates } from "./service-state.js"
import { type WorldState, worldStates } from "./world-state.js"

/** At most this many machines in one cluster: every runner must know every shard group when it starts. */
export const MAX_MACHINES = 32

/** Shards per group; the same on every runner (a cluster's shard ids depend on it). */
export const SHARDS_PER_GROUP = 16

/**
 * The group every runner takes: entities that may run on any machine. It is the engine's own default group, so that a
 * world's entity on one machine (a numeric id, the in-memory test runner) lands where a runner of any config has it.
 */
export const ANYWHERE_GROUP = "default"

/** The TCP port a runner listens on for its peers, on the machine's cluster address, unless one is chosen. */
export const DEFAULT_RUNNER_PORT = 7357

/** The port of the proxy's door for peers (forwarded requests), on the cluster address: the runner's, plus one. */
export const clusterProxyPort = (runnerPort: number): number => runnerPort + 1

/** The prefix of the tables `@effect/cluster` keeps in the cluster's database (its runners, locks and messages). */
export const CLUSTER_TABLE_PREFIX = "berth_cluster"

/**
 * The engine's timings, as ../shared/cluster.md measured them: a machine that stops refreshing its locks loses them
 * after `lockExpirationMs`; it is shown `unreachable` once its heartbeat is that old.
 */
export const timings = {
  lockExpirationMs: 6_000,
  lockRefreshMs: 2_000,
  refreshAssignmentsMs: 1_000,
  messagePollMs: 1_000,
  sendRetryMs: 100,
  /** how often a member writes its heartbeat and its worlds, and reads everyone else's */
  publishMs: 1_000
} as const

export const groupOfSlot = (slot: number): string => `machine-${slot}`

/** Every shard group of a cluster, in the order every runner lists them (the engine numbers locks by it). */
export const allGroups: ReadonlyArray<string> = [
  ANYWHERE_GROUP,
  ...Array.from({ length: MAX_MACHINES }, (_, i) => groupOfSlot(i + 1))
]

/** A world's entity id: `<slot>/<project label>/<world slug>` (labels and slugs hold no `/`). */
export const worldEntityId = (slot: number, project: string, slug: string): string => `${slot}/${project}/${slug}`

export interface WorldAddress {
  readonly slot: number
  readonly project: string
  readonly slug: string
}

export const parseWorldEntityId = (id: string): WorldAddress | undefined => {
  const m = /^(\d{1,3})\/([^/]+)\/([^/]+)$/.exec(id)
  if (m === null) return undefined
  const slot = Number(m[1])
  if (!Number.isInteger(slot) || slot < 1 || slot > MAX_MACHINES) return undefined
  return { slot, project: m[2] as string, slug: m[3] as string }
}

/**
 * A world that runs anywhere (`berth up --anywhere`), on the machine the cluster's placer gave it (the row's `owner`):
 * its entity id there is `any/<slot>/<project>/<slug>`, in that machine's own shard group, so the entity lives on the
 * machine that runs the world and nowhere else.
 */
export const anywhereEntityId = (slot: number, project: string, slug: string): string =>
  `any/${slot}/${project}/${slug}`

export const parseAnywhereEntityId = (id: string): WorldAddress | undefined =>
  id.startsWith("any/") ? parseWorldEntityId(id.slice(4)) : undefined

/** What a world that runs anywhere is wanted to be; `removed` rows go once their owner has removed the world. */
export type AnywhereDesired = "up" | "down" | "removed"

/**
 * Where a machine that has no checkout of a project keeps berth's own clone of it, for the worlds of that project it
 * runs anywhere (worktrees of the clone, beside it as for any checkout): the folder's name is the project's label,
 * which is the name berth gives a checkout whose berth.toml names no project.
 */
export const anywhereClone = (homeRoot: string, project: string): string => `${homeRoot}/anywhere/${project}`

/**
 * The owner mark of the slices of worlds that run anywhere: the cluster's, the same on every member (an
 * installation's own mark is `b` and a hash of its BERTH_HOME), so that the machine a world moves to finds its slices
 * its own. `[a-z0-9]`, as every adapter's marks and names want.
 */
export const clusterOwner = (clusterId: string): string => `c${shortHash(`berth cluster ${clusterId}`, 11)}`

/** A world is one that runs anywhere when its checkout is one of those clones or their worktrees. */
export const isAnywhereCheckout = (homeRoot: string, path: string): boolean => path.startsWith(`${homeRoot}/anywhere/`)

/**
 * The machine's own setting that lists its worlds that run anywhere (by row id), whether in a clone or in a worktree
 * of its own checkout of the repository: a new daemon never adopts those (another machine may run them by then).
 */
export const ANYWHERE_SETTING = "anywhere-worlds"

export const anywhereIds = (value: unknown): ReadonlyArray<number> =>
  Array.isArray(value) ? value.filter((v): v is number => typeof v === "number") : []

/** The world runs anywhere: listed in the machine's `ANYWHERE_SETTING` (its value `listed`), or in a clone of berth's. */
export const runsAnywhere = (
  listed: unknown,
  homeRoot: string,
  world: { readonly id: number; readonly path: string }
): boolean => anywhereIds(listed).includes(world.id) || isAnywhereCheckout(homeRoot, world.path)

/**
 * What the machine that holds a world's `Anywhere` entity does when asked to make sure of it: stop its copy here
 * (the world is wanted down or removed, or its row is gone), start it (wanted up and not started by this entity, or a
 * user asked again: a new selection or environment), or only say how it is (it runs, or failed and waits for the user,
 * as a world on one machine does).
 */
export type EnsureStep = "stop" | "remove" | "start" | "report"

export const ensureStep = (facts: {
  readonly desired: AnywhereDesired | undefined
  /** the placer gave the world to this machine (the row's owner is this machine) */
  readonly owned: boolean
  /** this entity has started the world since it began here */
  readonly started: boolean
  /** a user's `up` rather than the reconciler's round */
  readonly asked: boolean
}): EnsureStep => {
  if (facts.desired === undefined || facts.desired === "removed") return "remove"
  // given to another machine meanwhile: this machine's copy stops (it never runs in two places)
  if (facts.desired === "down" || !facts.owned) return "stop"
  return facts.started && !facts.asked ? "report" : "start"
}

/** What a member says of its room for one more world, with each heartbeat: what the placer chooses by. */
export interface Room {
  /** its gate would start a world now: a slot, RAM and disk above the reserves, nobody waiting */
  readonly admits: boolean
  readonly running: number
  readonly waiting: number
  /** of those running or waiting, the worlds that run anywhere */
  readonly anywhere: number
  /** its daemon is stopping: nothing is placed there */
  readonly draining: boolean
}

export const parseRoom = (value: unknown): Room | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const v = value as Record<string, unknown>
  const count = (x: unknown) => (typeof x === "number" && Number.isInteger(x) && x >= 0 ? x : undefined)
  const running = count(v.running)
  const waiting = count(v.waiting)
  if (typeof v.admits !== "boolean" || typeof v.draining !== "boolean") return undefined
  if (running === undefined || waiting === undefined) return undefined
  return { admits: v.admits, running, waiting, anywhere: count(v.anywhere) ?? 0, draining: v.draining }
}

/**
 * A machine the placer gives up a world's owner after: its heartbeat is this old, so its own watchdog has stopped its
 * copy by then (the fence stops it `BEAT_HOLD_MS` after its last heartbeat started, in at most 0.7 s; domain/fence.ts).
 */
export const GIVE_UP_AFTER_MS = BEAT_HOLD_MS + 1_500

/** A machine the placer gives a world to must have been heard from this lately. */
export const PLACE_ON_HEARD_MS = 3 * timings.publishMs

export interface PlacerMachine {
  readonly name: string
  readonly heartbeatAgeMs: number
  readonly room: Room | undefined
  /** the worlds that run anywhere the table gives it now (current, where its room is a heartbeat old) */
  readonly owned?: number
}

/** Per machine, how many worlds that run anywhere the table gives it (wanted up). */
export const ownedPlacements = (
  rows: ReadonlyArray<{ readonly owner: string | null; readonly desired: AnywhereDesired }>
): Map<string, number> => {
  const owned = new Map<string, number>()
  for (const r of rows) {
    if (r.owner !== null && r.desired === "up") owned.set(r.owner, (owned.get(r.owner) ?? 0) + 1)
  }
  return owned
}

/**
 * How busy a machine is: its own worlds, running or waiting, as its room said, and the worlds that run anywhere the
 * table gives it, as the table says now (a world placed a moment ago counts at once, so a burst of ups spreads out).
 */
export const placerLoad = (m: PlacerMachine): number => {
  const room = m.room
  const own = Math.max(0, (room?.running ?? 0) + (room?.waiting ?? 0) - (room?.anywhere ?? 0))
  return own + (m.owned ?? room?.anywhere ?? 0)
}

/** A machine the placer may count on: heard from lately, not stopping. */
const usable = (m: PlacerMachine) => m.heartbeatAgeMs <= PLACE_ON_HEARD_MS && m.room?.draining !== true

/**
 * Where a world that runs anywhere goes (cluster-wide admission): a machine whose gate admits a world now, the least
 * busy first; when none does, the one with the shortest line (the world waits there, as on one machine). Ties go to
 * `previous` (its clone is there), then by name, so every placer decides alike. Undefined when no machine is usable.
 */
export const placeAnywhere = (machines: ReadonlyArray<PlacerMachine>, previous: string | null): string | undefined => {
  const candidates = machines.filter(usable)
  const roomy = candidates.filter((m) => m.room?.admits === true)
  const pool = roomy.length > 0 ? roomy : candidates
  const sorted = [...pool].sort(
    (a, b) =>
      placerLoad(a) - placerLoad(b) ||
      Number(b.name === previous) - Number(a.name === previous) ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  )
  return sorted[0]?.name
}

/** A world that runs anywhere waits in its machine's line this long before it may move to a machine with room. */
export const MOVE_WAITING_AFTER_MS = 2_000

/**
 * Whether a world that waits in this machine's line (`self`) should leave it for another machine: it has waited a
 * moment here, and another machine the placer may use would start a world now. The world has no process yet, so the
 * move costs nothing; it is this machine that lets it go (nothing can start it here after that), and the placer then
 * gives it a machine with room.
 */
export const moveWaiting = (waitedMs: number, machines: ReadonlyArray<PlacerMachine>, self: string): boolean =>
  waitedMs >= MOVE_WAITING_AFTER_MS && machines.some((m) => m.name !== self && usable(m) && m.room?.admits === true)

/**
 * One row in the placer's round: leave it, ask its owner to make its part true, give it a machine (it has none, or
 * its owner is gone), or forget it (removed, and no machine holds it).
 */
export type PlacerStep = "ensure" | "place" | "release" | "forget" | "nothing"

export const placerStep = (
  row: { readonly desired: AnywhereDesired; readonly owner: string | null },
  owner: PlacerMachine | undefined
): PlacerStep => {
  const gone = row.owner !== null && (owner === undefined || owner.heartbeatAgeMs > GIVE_UP_AFTER_MS)
  if (row.desired === "up") return row.owner === null || gone ? "place" : "ensure"
  if (row.owner === null) return row.desired === "removed" ? "forget" : "nothing"
  return gone ? "release" : "ensure"
}

/** How often the cluster's reconciler makes sure every world wanted anywhere runs somewhere (or nowhere). */
export const ENSURE_EVERY_MS = 1_000

/** The shard group of a world's entity: its machine's slot. */
export const shardGroupOf = (entityId: string): string => {
  const address = parseWorldEntityId(entityId) ?? parseAnywhereEntityId(entityId)
  return address === undefined ? ANYWHERE_GROUP : groupOfSlot(address.slot)
}

/** The lowest slot nobody holds, or undefined when the cluster is full. */
export const freeSlot = (taken: Iterable<number>): number | undefined => {
  const used = new Set(taken)
  for (let slot = 1; slot <= MAX_MACHINES; slot++) if (!used.has(slot)) return slot
  return undefined
}

/** A machine's name: one DNS label (it appears in status and in the proxy's pages). */
export const machineNameProblem = (name: string): string | undefined =>
  /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(name)
    ? undefined
    : "a machine's name is 1-63 lower-case letters, digits and dashes, not starting or ending with a dash"

/** What the cluster's database address must look like: berth keeps the cluster's state in PostgreSQL. */
export const clusterUrlProblem = (url: string): string | undefined =>
  /^postgres(ql)?:\/\/\S*$/.test(url)
    ? undefined
    : "the cluster's state lives in PostgreSQL: give its address as postgres://user[:password]@host[:port]/database (or postgres:///database?host=/var/run/postgresql for a local socket)"

/** An IPv4 or IPv6 literal that peers can dial: never a loopback or unspecified address. */
export const addressProblem = (address: string): string | undefined => {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(address)
  if (v4 !== null) {
    const octets = v4.slice(1).map(Number)
    if (octets.some((o) => o > 255)) return `${address} is not an IPv4 address`
    if (octets[0] === 127 || octets[0] === 0) {
      return `${address} is not reachable from another machine: give the address of this machine on the network its peers share`
    }
    return undefined
  }
  if (/^[0-9a-f:]+$/i.test(address) && address.includes(":")) {
    return address === "::1" || address === "::" ? `${address} is not reachable from another machine` : undefined
  }
  return `${address} is not an IP address: give this machine's address on the network its peers share`
}

export type MachineState = "up" | "unreachable"

/** A machine whose heartbeat is older than its locks' expiry has lost them: nothing of it can be reached now. */
export const machineState = (heartbeatAgeMs: number): MachineState =>
  heartbeatAgeMs <= timings.lockExpirationMs ? "up" : "unreachable"

/** The world state other machines show for a world whose machine is unreachable. */
export const UNREACHABLE = "unreachable"

/**
 * A watcher's id for a world of another machine: negative (this machine's own worlds have positive row ids) and the
 * same for as long as the world exists, so that a dashboard keeps its selection across updates.
 */
export const remoteWorldId = (machine: string, project: string, slug: string): number => {
  let hash = 0x811c9dc5
  for (const ch of `${machine}/${project}/${slug}`) hash = Math.imul(hash ^ ch.charCodeAt(0), 0x01000193) >>> 0
  return -((hash % 0x3fffffff) + 1)
}

/** What a machine publishes of a world that the proxy needs: its services' URLs and states. */
export interface PublishedWorld {
  readonly machine: string
  readonly status: {
    readonly project: string
    readonly name: string
    readonly slug: string
    readonly state: string
    readonly services: ReadonlyArray<{
      readonly state: string
      readonly port: number | null
      readonly url: string | null
    }>
  }
}

export interface PeerMachine {
  readonly name: string
  readonly address: string
  /** its cluster listener's port, where peers forward requests */
  readonly proxyPort: number | null
  readonly heartbeatAgeMs: number
}

/** A service counts as reachable in the same states the proxy routes a local one in. */
const REACHABLE: ReadonlySet<string> = new Set(["running", "healthy", "unhealthy"])

const isWorldState = (s: string): s is WorldState => (worldStates as ReadonlyArray<string>).includes(s)
const isServiceState = (s: string): s is ServiceState => (serviceStates as ReadonlyArray<string>).includes(s)

/**
 * Other machines' published copies, less the stale ones of worlds that run anywhere: such a world's copy counts only
 * on the machine its row gives it to (each placement is a new generation, written with the owner), so a machine that
 * was given up and comes back gets neither routes nor a listing for its old copy; and a copy whose row is gone is of a
 * world removed meanwhile (its machine, silent, has not said so yet).
 */
export const currentCopies = <
  W extends {
    readonly machine: string
    readonly status: { readonly project: string; readonly slug: string; readonly placement?: string | undefined }
  }
>(
  copies: ReadonlyArray<W>,
  anywhere: ReadonlyArray<{ readonly project: string; readonly slug: string; readonly owner: string | null }>
): ReadonlyArray<W> => {
  const owners = new Map(anywhere.map((r) => [`${r.project}/${r.slug}`, r.owner]))
  return copies.filter((w) => {
    const key = `${w.status.project}/${w.status.slug}`
    if (!owners.has(key)) return w.status.placement !== "anywhere"
    const owner = owners.get(key)
    return owner === null || owner === w.machine
  })
}

/**
 * The routes of other machines' worlds: every service with a URL, forwarded to its machine's cluster listener, Host
 * kept (the same host names on every machine). A world whose machine is silent, or that does not run, keeps its route
 * with `ready` false, so the proxy answers 503 with Retry-After rather than 404.
 */
export const remoteTargets = (
  worlds: ReadonlyArray<PublishedWorld>,
  machines: ReadonlyArray<PeerMachine>
): Array<RouteTarget> => {
  const byName = new Map(machines.map((m) => [m.name, m]))
  // one route per host name: a world that moved is published by its new machine and, until it is tidied or its
  // machine's rows expire, by the old one too; the one that can serve wins
  const out = new Map<string, RouteTarget>()
  const rank = (t: RouteTarget) => (t.ready ? 2 : 0) + (t.worldState === "running" ? 1 : 0)
  for (const w of worlds) {
    const machine = byName.get(w.machine)
    if (machine === undefined || machine.proxyPort === null) continue
    const up = machineState(machine.heartbeatAgeMs) === "up"
    for (const s of w.status.services) {
      if (s.url === null) continue
      let hostname: string
      try {
        hostname = new URL(s.url).hostname.toLowerCase()
      } catch {
        continue
      }
      const label = hostname.split(".")[0] ?? ""
      const prefix = `${label}.${w.status.slug}.${w.status.project}.`
      if (label === "" || !hostname.startsWith(prefix)) continue
      const target: RouteTarget = {
        project: w.status.project,
        world: w.status.slug,
        worldName: w.status.name === w.status.slug ? undefined : w.status.name,
        service: label,
        worldState: isWorldState(w.status.state) ? w.status.state : "stopped",
        serviceState: isServiceState(s.state) ? s.state : "stopped",
        port: s.port ?? undefined,
        ready: up && REACHABLE.has(s.state),
        domain: hostname.slice(prefix.length),
        remote: { machine: machine.name, address: machine.address, port: machine.proxyPort }
      }
      const known = out.get(hostname)
      if (known === undefined || rank(target) > rank(known)) out.set(hostname, target)
    }
  }
  return [...out.values()]
}
