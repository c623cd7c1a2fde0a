/**
 * The route table kept world by world: each world of this machine has its routes (`WorldRoutes`), and the table is
 * made from them in the registry's order of worlds (project name, then creation, then id), then the routes of
 * worlds other machines run, then the dashboard — exactly as a table made from every world at once, so that "first
 * wins" for a host claimed twice stays the same. A world read again keeps the very `RouteTarget` objects of its
 * routes that did not change (the proxy's counters and the host names hang on them), and a table whose pieces are
 * all as before is not made again.
 */
import { makeRouteTable, type RouteTable, type RouteTarget, withDashboardRoute } from "./routes.js"
import type { ServiceState } from "./service-state.js"
import type { WorldState } from "./world-state.js"

/** Where a world stands in the registry's order (`ORDER BY p.name, w.created_at, w.id`). */
export interface WorldOrder {
  /** the project's declared name */
  readonly project: string
  readonly createdAt: number
  readonly id: number
}

/** One world's routes, and where they go in the table. */
export interface WorldRoutes {
  readonly order: WorldOrder
  readonly targets: ReadonlyArray<RouteTarget>
}

/**
 * SQLite's BINARY collation compares UTF-8 bytes, which order as code points do; JavaScript's `<` compares UTF-16
 * code units, which differ for characters past U+FFFF against U+E000–U+FFFF.
 */
export const compareCodePoints = (a: string, b: string): number => {
  if (a === b) return 0
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!
    const y = b.codePointAt(i)!
    if (x !== y) return x < y ? -1 : 1
    if (x > 0xffff) i++
  }
  return a.length - b.length
}

export const compareWorldOrder = (a: WorldOrder, b: WorldOrder): number =>
  compareCodePoints(a.project, b.project) || a.createdAt - b.createdAt || a.id - b.id

/**
 * A service counts as reachable once it runs (or passed its health check) — and while it is merely `unhealthy`: its
 * process lives, and a slow answer from it beats a 502 from berth.
 */
const READY: ReadonlySet<string> = new Set(["running", "healthy", "unhealthy"])

/** What a world's routes are made of: its row, its services' states and leases, its config's routed services. */
export interface WorldSource {
  readonly id: number
  /** the project's host label */
  readonly project: string
  readonly slug: string
  readonly name: string
  readonly observed: string
  /** service name → its observed state (a service without a row is stopped) */
  readonly states: ReadonlyMap<string, string>
  /** service name → the port of its main lease */
  readonly ports: ReadonlyMap<string, number>
  /** the services with a url, in the config's order */
  readonly routed: ReadonlyArray<{ readonly name: string; readonly url: string | undefined }>
  /** the project's domain (`[project] domain`) */
  readonly domain: string | undefined
}

/** A world's routes, one per routed service with a url. */
export const worldTargets = (w: WorldSource): ReadonlyArray<RouteTarget> => {
  const out: Array<RouteTarget> = []
  for (const s of w.routed) {
    if (s.url === undefined) continue
    const state = (w.states.get(s.name) ?? "stopped") as ServiceState
    out.push({
      project: w.project,
      world: w.slug,
      worldName: w.name,
      service: s.url,
      worldState: w.observed as WorldState,
      worldId: w.id,
      serviceState: state,
      port: w.ports.get(s.name),
      ready: READY.has(state),
      domain: w.domain
    })
  }
  return out
}

/** Whether two targets route and read the same (every field a page or the proxy uses). */
export const sameTarget = (a: RouteTarget, b: RouteTarget): boolean =>
  a === b ||
  (a.project === b.project &&
    a.world === b.world &&
    a.worldName === b.worldName &&
    a.service === b.service &&
    a.worldState === b.worldState &&
    a.serviceState === b.serviceState &&
    a.port === b.port &&
    a.ready === b.ready &&
    a.domain === b.domain &&
    a.worldId === b.worldId &&
    a.machineOnly === b.machineOnly &&
    (a.remote === b.remote ||
      (a.remote !== undefined &&
        b.remote !== undefined &&
        a.remote.machine === b.remote.machine &&
        a.remote.address === b.remote.address &&
        a.remote.port === b.remote.port)))

const keyOf = (t: RouteTarget): string => `${t.service}\n${t.world}\n${t.project}\n${t.domain ?? ""}`

/**
 * `next`, with each target equal to one of `before` (the same host) replaced by that one; `before` itself when
 * nothing differs, so that an unchanged world or set of remote routes is recognised by identity.
 */
export const keepSame = (
  before: ReadonlyArray<RouteTarget> | undefined,
  next: ReadonlyArray<RouteTarget>
): ReadonlyArray<RouteTarget> => {
  if (before === undefined || before.length === 0) return next.length === 0 && before !== undefined ? before : next
  const old = new Map<string, RouteTarget>()
  for (const t of before) if (!old.has(keyOf(t))) old.set(keyOf(t), t)
  let all = before.length === next.length
  const out = next.map((t, i) => {
    const was = old.get(keyOf(t))
    const kept = was !== undefined && sameTarget(was, t) ? was : t
    if (kept !== before[i]) all = false
    return kept
  })
  return all ? before : out
}

/** The routes of this machine's worlds, by world id, and the rest of the table, as last published. */
export interface RouteBook {
  readonly worlds: ReadonlyMap<number, WorldRoutes>
  /** the worlds' ids in table order */
  readonly order: ReadonlyArray<number>
  readonly remote: ReadonlyArray<RouteTarget>
  readonly dashboardPort: number | undefined
}

export const emptyBook: RouteBook = { worlds: new Map(), order: [], remote: [], dashboardPort: undefined }

/**
 * The book with some worlds read again: `changed` maps a world's id to its routes, or to undefined when the world is
 * gone. `all` says `changed` holds every world there is, in the registry's order (a full read): the others are
 * dropped, and that order is taken as it is. Answers `book` itself when nothing differs.
 */
export const patchWorlds = (
  book: RouteBook,
  changed: ReadonlyMap<number, WorldRoutes | undefined>,
  all: boolean
): RouteBook => {
  let worlds: Map<number, WorldRoutes> | undefined
  let reorder = false
  const edit = () => (worlds ??= new Map(book.worlds))
  if (all) {
    for (const id of book.worlds.keys()) {
      if (!changed.has(id)) {
        edit().delete(id)
        reorder = true
      }
    }
  }
  for (const [id, next] of changed) {
    const was = book.worlds.get(id)
    if (next === undefined) {
      if (was === undefined) continue
      edit().delete(id)
      reorder = true
      continue
    }
    const targets = keepSame(was?.targets, next.targets)
    const sameOrder = was !== undefined && compareWorldOrder(was.order, next.order) === 0
    if (was !== undefined && sameOrder && targets === was.targets) continue
    edit().set(id, { order: sameOrder ? was.order : next.order, targets })
    if (!sameOrder) reorder = true
  }
  if (all) {
    const order = [...changed.keys()].filter((id) => changed.get(id) !== undefined)
    const same = order.length === book.order.length && order.every((id, i) => book.order[i] === id)
    if (worlds === undefined && same) return book
    return { ...book, worlds: worlds ?? book.worlds, order: same ? book.order : order }
  }
  if (worlds === undefined) return book
  const byId = worlds
  const order = reorder
    ? [...byId.keys()].sort((a, b) => compareWorldOrder(byId.get(a)!.order, byId.get(b)!.order))
    : book.order
  return { ...book, worlds: byId, order }
}

/** The book with the routes of worlds other machines run replaced (those equal to before kept). */
export const withRemote = (book: RouteBook, remote: ReadonlyArray<RouteTarget>): RouteBook => {
  const kept = keepSame(book.remote, remote)
  return kept === book.remote ? book : { ...book, remote: kept }
}

export const withDashboard = (book: RouteBook, port: number | undefined): RouteBook =>
  port === book.dashboardPort ? book : { ...book, dashboardPort: port }

/**
 * The table of a book: this machine's worlds first, in the registry's order, then the remote routes (a world of this
 * machine keeps a host both claim: makeRouteTable's first wins), then the dashboard.
 */
export const tableOf = (book: RouteBook, domain: string): RouteTable => {
  const all: Array<RouteTarget> = []
  for (const id of book.order) for (const t of book.worlds.get(id)!.targets) all.push(t)
  for (const t of book.remote) all.push(t)
  return withDashboardRoute(makeRouteTable(all, domain), book.dashboardPort)
}
