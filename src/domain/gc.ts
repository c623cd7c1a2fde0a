/**
 * What `berth gc` (and the reconciler's own sweep) drops: a pure decision over the registry's slice rows and what
 * each server says this installation owns. Nothing unowned is ever a candidate: servers only list slices carrying
 * this installation's mark, and a name being made right now is skipped.
 */

export interface GcRow {
  readonly id: number
  /** null: the world is gone (or the row is a golden) */
  readonly worldId: number | null
  readonly project: string
  readonly service: string
  readonly name: string
  /** which server the slice lives on: see `serverKey` */
  readonly server: string
  readonly golden: boolean
  /** a copy of a golden made ahead for the next new world */
  readonly spare: boolean
  /** its service left berth.toml: only an explicit `berth gc` drops it, never the daemon's own sweep */
  readonly detached?: boolean
  /** the golden's key (goldens and spares) */
  readonly key: string | null
  readonly state: "provisioning" | "ready"
  /** when it was made, or (for a golden) last cloned from */
  readonly usedAt: number
}

/**
 * Goldens kept per (project, service, server): branches with different migrations each have their own, so only the
 * least recently used beyond this many are dropped (rebuilding one costs a migrate and a seed, nothing more).
 */
export const GOLDENS_KEPT = 3

/** How long the goldens and spares of a project outlive its last world, unless `BERTH_GOLDEN_GRACE` says otherwise. */
export const GOLDEN_GRACE_MS = 24 * 60 * 60 * 1000

const graceUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `BERTH_GOLDEN_GRACE` ("24h", "30m", "90s", "500ms", "2d"; a bare number is seconds); undefined when unreadable. */
export const parseGrace = (text: string | undefined): number | undefined => {
  if (text === undefined) return undefined
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text)
  return m === null ? undefined : Number(m[1]) * (graceUnits[m[2] ?? "s"] ?? 1000)
}

/** What gc knows of the projects whose goldens may have outlived their worlds. */
export interface GoldenIdle {
  /** projects (labels) with a world now: their goldens and spares stay */
  readonly projectsWithWorlds: ReadonlySet<string>
  /** when gc first found each project without a world (a project not in it is found so now) */
  readonly idleSince: ReadonlyMap<string, number>
  readonly now: number
  readonly graceMs: number
  /** `berth gc --goldens`: no grace */
  readonly force: boolean
}

export interface GcListing {
  readonly server: string
  /** the names the server lists as this installation's */
  readonly names: ReadonlyArray<string>
}

export type GcReason =
  | "world gone"
  | "half-provisioned"
  | "superseded golden"
  | "orphan spare"
  | "unrecorded"
  | "no longer in berth.toml"
  /** a slice of the cluster's that a world which ran anywhere left when it was removed while its machine was away */
  | "left by a removed world"
  /** a golden or spare of a project that has had no world for the grace period (or `berth gc --goldens`) */
  | "no world of the project"

export interface GcAction {
  readonly reason: GcReason
  readonly server: string
  readonly name: string
  /** the registry row to forget once the slice is dropped (none for an unrecorded slice) */
  readonly rowId: number | undefined
}

/** Where a slice lives: embedded adapters by their storage folder, server adapters by their admin URL. */
export const serverKey = (family: string, embedded: boolean, adminUrl: string | null, storage: string): string =>
  `${family}\u0000${embedded ? storage : (adminUrl ?? "")}`

const inFlightKey = (server: string, name: string) => `${server}\u0000${name}`

export const gcPlan = (input: {
  readonly rows: ReadonlyArray<GcRow>
  readonly listings: ReadonlyArray<GcListing>
  /** `server\0name` of every slice being provisioned, cloned or built right now */
  readonly inFlight: ReadonlySet<string>
  /** name prefixes of the slices of worlds that exist: never dropped as unrecorded */
  readonly livePrefixes?: ReadonlyArray<string>
  /** goldens and spares of projects with no world left: dropped after the grace (none without it) */
  readonly idle?: GoldenIdle
}): ReadonlyArray<GcAction> => {
  const busy = (server: string, name: string) => input.inFlight.has(inFlightKey(server, name))
  const actions: Array<GcAction> = []
  const dropped = new Set<number>()
  const drop = (reason: GcReason, row: GcRow) => {
    if (dropped.has(row.id) || busy(row.server, row.name)) return
    dropped.add(row.id)
    actions.push({ reason, server: row.server, name: row.name, rowId: row.id })
  }
  for (const row of input.rows) {
    if (row.detached === true) drop("no longer in berth.toml", row)
    else if (!row.golden && !row.spare && row.worldId === null) drop("world gone", row)
    else if (row.state === "provisioning") drop("half-provisioned", row)
  }
  const idle = input.idle
  if (idle !== undefined) {
    // a world made and removed since gc last looked has touched its golden: the grace counts from then at the least
    const lastUse = new Map<string, number>()
    for (const row of input.rows) {
      if (row.golden || row.spare) lastUse.set(row.project, Math.max(lastUse.get(row.project) ?? 0, row.usedAt))
    }
    for (const row of input.rows) {
      if ((!row.golden && !row.spare) || idle.projectsWithWorlds.has(row.project)) continue
      const since = Math.max(idle.idleSince.get(row.project) ?? idle.now, lastUse.get(row.project) ?? 0)
      if (idle.force || idle.now - since >= idle.graceMs) drop("no world of the project", row)
    }
  }
  const goldens = new Map<string, Array<GcRow>>()
  for (const row of input.rows) {
    if (!row.golden || row.state !== "ready") continue
    const group = `${row.project}\u0000${row.service}\u0000${row.server}`
    goldens.set(group, [...(goldens.get(group) ?? []), row])
  }
  for (const group of goldens.values()) {
    const byUse = [...group].sort((a, b) => b.usedAt - a.usedAt || b.id - a.id)
    for (const row of byUse.slice(GOLDENS_KEPT)) drop("superseded golden", row)
  }
  // a spare is only worth keeping while its golden is: one ready spare per golden
  const goldenOf = (row: GcRow) => `${row.project}\u0000${row.service}\u0000${row.server}\u0000${row.key}`
  const kept = new Set(input.rows.filter((r) => r.golden && !dropped.has(r.id)).map(goldenOf))
  const spared = new Set<string>()
  for (const row of input.rows) {
    if (!row.spare || row.state !== "ready") continue
    if (!kept.has(goldenOf(row)) || spared.has(goldenOf(row))) drop("orphan spare", row)
    else spared.add(goldenOf(row))
  }
  // gc drops only what it positively knows is orphaned: a name any row records (on whatever server it was written
  // down) or one shaped like an existing world's slice is never a candidate
  const recorded = new Set(input.rows.map((row) => inFlightKey(row.server, row.name)))
  const named = new Set(input.rows.map((row) => row.name))
  const live = input.livePrefixes ?? []
  for (const listing of input.listings) {
    for (const name of listing.names) {
      const key = inFlightKey(listing.server, name)
      if (recorded.has(key) || named.has(name) || busy(listing.server, name)) continue
      if (live.some((prefix) => name.startsWith(prefix))) continue
      actions.push({ reason: "unrecorded", server: listing.server, name, rowId: undefined })
    }
  }
  return actions
}

export const gcInFlightKey = inFlightKey

/**
 * What gc forgets of an adapter nothing serves (a mistyped name, or an executable since removed): the records of
 * worlds that are gone and whose slice was never finished (nothing of theirs can hold data), then the record of a
 * server no row is on any more. Nothing on a server is touched: there is no adapter to ask.
 */
export const forgetPlan = (input: {
  readonly rows: ReadonlyArray<GcRow>
  /** servers (see `serverKey`) whose adapter nothing serves now */
  readonly unknown: ReadonlySet<string>
  /** the servers recorded apart from any row */
  readonly servers: ReadonlyArray<string>
}): { readonly rows: ReadonlyArray<GcRow>; readonly servers: ReadonlyArray<string> } => {
  const rows = input.rows.filter(
    (row) => input.unknown.has(row.server) && row.worldId === null && row.state === "provisioning"
  )
  const gone = new Set(rows.map((row) => row.id))
  const used = new Set(input.rows.filter((row) => !gone.has(row.id)).map((row) => row.server))
  const servers = input.servers.filter((server) => input.unknown.has(server) && !used.has(server))
  return { rows, servers: [...new Set(servers)] }
}

/**
 * What gc says of a record it forgot (or would): the command's output and the daemon's own sweep say the same, so a
 * record never goes unsaid whichever of the two came first.
 */
export const forgottenLine = (f: {
  readonly outcome: "forgotten" | "would forget"
  readonly adapter: string
  readonly name?: string | undefined
  readonly where: string
  readonly reason: string
}): string =>
  `${f.outcome === "forgotten" ? "forgot" : "would forget"} ${f.name === undefined ? f.adapter : `${f.adapter} slice ${f.name}`} at ${f.where}: ${f.reason}`
