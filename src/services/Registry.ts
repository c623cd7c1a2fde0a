/**
 * The daemon's state in SQLite (WAL, foreign keys, busy timeout): projects, worlds, their services and processes,
 * port leases, events and machine-wide settings. Desired state lives here and survives restarts; it is changed only
 * by a user's command. Migrations are code, applied in place at start; a database that is corrupt or was written by
 * a newer berth stops the daemon with a clear error and is never discarded.
 */
import { openSync, readSync, closeSync, existsSync, statSync, chmodSync } from "node:fs"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { isDiskFull } from "../domain/disk.js"
import { type DiskFull, InternalError } from "../domain/errors.js"
import { assignProjectLabel, assignSlug } from "../domain/names.js"
import { type Touched, TouchJournal } from "../domain/touched.js"
import type { WorldDesired, WorldState } from "../domain/world-state.js"
import { diskFullAt } from "./disk.js"
import { Home } from "./Home.js"
import { openDatabase, type SqliteStatement } from "./sqlite.js"

export class RegistryUnavailable extends Data.TaggedError("RegistryUnavailable")<{
  readonly file: string
  readonly reason: string
  readonly hint: string
}> {
  override get message() {
    return `berth's state database ${this.file} cannot be used: ${this.reason}\n  hint: ${this.hint}`
  }
}

/**
 * How much of a world's history is kept (and of the machine's own events): its latest events, enough for any `logs
 * berth` a person reads, bounded so that a service that fails over and over for months does not grow the state
 */
export const EVENTS_KEPT = 1000

/**
 * Every world's latest `?` events, newest first within each world: for each world, its latest through the index on
 * (world_id, id) — the work of a status stays with the worlds and the events it shows, whatever their history holds
 */
export const RECENT_EVENTS_SQL = `SELECT e.world_id AS worldId, e.id, e.service, e.kind, e.message, e.at
  FROM worlds w JOIN events e ON e.id IN (SELECT id FROM events WHERE world_id = w.id ORDER BY id DESC LIMIT ?)
  ORDER BY e.world_id, e.id DESC`

const WORLD_SELECT = `SELECT w.*, p.label AS project_name, p.name AS declared_name, p.main_root AS main_root
  FROM worlds w JOIN projects p ON p.id = w.project_id`

const PROJECT_SELECT = "SELECT id, name, label, common_dir AS commonDir, main_root AS mainRoot FROM projects"

const SERVICE_SELECT = `SELECT world_id AS worldId, name, observed, pid, pgid, start_time AS startTime, restarts, reason,
  log_tail AS logTail, command FROM services`

/** the highest world id ever given (a setting), so that no id is given twice */
const WORLD_ID_HIGH_WATER = "world-id-high-water"

const migrations = {
  "0001_init": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE projects (
      id INTEGER PRIMARY KEY,
      name TEXT NOT NULL,
      common_dir TEXT NOT NULL UNIQUE,
      main_root TEXT NOT NULL
    )`
    yield* sql`CREATE TABLE worlds (
      id INTEGER PRIMARY KEY,
      project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      slug TEXT NOT NULL,
      path TEXT NOT NULL,
      branch TEXT,
      is_main INTEGER NOT NULL DEFAULT 0,
      desired TEXT NOT NULL,
      observed TEXT NOT NULL,
      reason TEXT,
      setup_done INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL,
      started_at INTEGER,
      UNIQUE (project_id, name),
      UNIQUE (project_id, slug)
    )`
    yield* sql`CREATE TABLE services (
      world_id INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
      name TEXT NOT NULL,
      observed TEXT NOT NULL,
      pid INTEGER,
      pgid INTEGER,
      start_time TEXT,
      restarts INTEGER NOT NULL DEFAULT 0,
      reason TEXT,
      log_tail TEXT,
      PRIMARY KEY (world_id, name)
    )`
    yield* sql`CREATE TABLE leases (
      port INTEGER PRIMARY KEY,
      world_id INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
      service TEXT NOT NULL,
      name TEXT NOT NULL,
      UNIQUE (world_id, service, name)
    )`
    yield* sql`CREATE TABLE events (
      id INTEGER PRIMARY KEY,
      world_id INTEGER REFERENCES worlds(id) ON DELETE CASCADE,
      service TEXT,
      kind TEXT NOT NULL,
      message TEXT NOT NULL,
      at INTEGER NOT NULL
    )`
    yield* sql`CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`
  }),
  "0002_slices": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // what the last `up` selected, so that a daemon restart brings back the same services
    yield* sql`ALTER TABLE worlds ADD COLUMN selection TEXT`
    // set once the world's worktree has existed: only then does a missing folder mean it was deleted
    yield* sql`ALTER TABLE worlds ADD COLUMN worktree_ready INTEGER NOT NULL DEFAULT 0`
    // ownership: berth drops only the slices recorded here
    yield* sql`CREATE TABLE slices (
      world_id INTEGER NOT NULL REFERENCES worlds(id) ON DELETE CASCADE,
      service TEXT NOT NULL,
      adapter TEXT NOT NULL,
      name TEXT NOT NULL,
      url TEXT,
      -- the resolved admin_url: teardown and gc need it when no CLI environment is at hand (state.db is 0600)
      admin_url TEXT,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (world_id, service)
    )`
  }),
  "0003_slice_lifecycle": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // a slice outlives its world row (world_id set to NULL) until it is really dropped: gc finds it there; goldens
    // are slices of no world; `state` says whether migrate/seed (or the clone) finished
    yield* sql`CREATE TABLE slices_v3 (
      id INTEGER PRIMARY KEY,
      world_id INTEGER REFERENCES worlds(id) ON DELETE SET NULL,
      project TEXT NOT NULL,
      service TEXT NOT NULL,
      adapter TEXT NOT NULL,
      name TEXT NOT NULL,
      url TEXT,
      admin_url TEXT,
      storage TEXT NOT NULL,
      options TEXT NOT NULL DEFAULT '{}',
      golden_key TEXT,
      state TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      used_at INTEGER NOT NULL,
      UNIQUE (world_id, service)
    )`
    yield* sql`INSERT INTO slices_v3 (world_id, project, service, adapter, name, url, admin_url, storage, state,
      created_at, used_at)
      SELECT s.world_id, p.name, s.service, s.adapter, s.name, s.url, s.admin_url, '', CASE WHEN s.url IS NULL
      THEN 'provisioning' ELSE 'ready' END, s.created_at, s.created_at
      FROM slices s JOIN worlds w ON w.id = s.world_id JOIN projects p ON p.id = w.project_id`
    yield* sql`DROP TABLE slices`
    yield* sql`ALTER TABLE slices_v3 RENAME TO slices`
    yield* sql`CREATE INDEX slices_golden ON slices (project, service, golden_key)`
  }),
  "0004_slice_roles": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // a slice of no world is a golden, or a spare: a copy of a golden made ahead, renamed into the next new world
    yield* sql`ALTER TABLE slices ADD COLUMN role TEXT NOT NULL DEFAULT 'world'`
    yield* sql`UPDATE slices SET role = 'golden' WHERE golden_key IS NOT NULL`
  }),
  "0005_identity_env": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // a project is its repository: two repositories that declare the same name get distinct labels (hosts, slice
    // names, goldens); the first keeps the plain name
    yield* sql`ALTER TABLE projects ADD COLUMN label TEXT`
    const rows = yield* sql<{ id: number; name: string; common_dir: string }>`SELECT id, name, common_dir
      FROM projects ORDER BY id`
    const taken = new Set<string>()
    for (const r of rows) {
      const label = assignProjectLabel(r.name, r.common_dir, taken)
      taken.add(label)
      yield* sql`UPDATE projects SET label = ${label} WHERE id = ${r.id}`
    }
    yield* sql`CREATE UNIQUE INDEX projects_label ON projects (label)`
    // the environment the world was last brought up with (the CLI's), used for every later action on it — adoption,
    // restarts, removal, gc — never the daemon's own (state.db is owner-only)
    yield* sql`ALTER TABLE worlds ADD COLUMN env TEXT`
  }),
  "0006_service_command": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // the command a service was started with, as berth ran it (tokens resolved, a dev server's flags added, secrets
    // masked), for status
    yield* sql`ALTER TABLE services ADD COLUMN command TEXT`
  }),
  "0007_wakes_on_request": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // a world suspended for idleness sleeps until a request or an `up` wakes it, across daemon restarts too; one
    // suspended for memory goes back in line
    yield* sql`ALTER TABLE worlds ADD COLUMN wakes_on_request INTEGER NOT NULL DEFAULT 0`
  }),
  "0008_events_by_world": Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // a world's latest events are read through this (every status, every `logs berth`), never by going through the
    // history of every world; and a history longer than it keeps is cut down once, here
    yield* sql`CREATE INDEX events_world ON events (world_id, id)`
    yield* sql`DELETE FROM events WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY world_id
      ORDER BY id DESC) AS n FROM events) WHERE n > ${EVENTS_KEPT})`
    // each new event lets its world's (or the machine's) oldest go past the latest EVENTS_KEPT, in the insert itself
    // and through the index: no statement more for the daemon. (Another EVENTS_KEPT needs a migration of its own.)
    yield* sql.unsafe(`CREATE TRIGGER events_kept AFTER INSERT ON events BEGIN
      DELETE FROM events WHERE world_id IS NEW.world_id AND id <= (SELECT id FROM events
        WHERE world_id IS NEW.world_id ORDER BY id DESC LIMIT 1 OFFSET ${EVENTS_KEPT});
    END`)
  })
}

/** How many migrations this berth knows: a database with more was written by a newer one (doctor says so too). */
export const knownMigrations = Object.keys(migrations).length

export interface ProjectRow {
  readonly id: number
  /** as berth.toml (or the folder) names it */
  readonly name: string
  /** what berth calls it: the name, unless another repository has it (then with a short suffix) */
  readonly label: string
  readonly commonDir: string
  readonly mainRoot: string
}

export interface WorldRow {
  readonly id: number
  readonly projectId: number
  /** the project's label: unique per repository, the name in hosts, slice names and status */
  readonly projectName: string
  /** the name berth.toml (or the folder) gives the project: differs from the label when another repository has it */
  readonly declaredName: string
  readonly mainRoot: string
  readonly name: string
  readonly slug: string
  readonly path: string
  readonly branch: string | null
  readonly isMain: boolean
  readonly desired: WorldDesired
  readonly observed: WorldState
  readonly reason: string | null
  readonly setupDone: boolean
  /** the worktree folder has existed (a new world's may not yet) */
  readonly worktreeReady: boolean
  /** the services and groups the last `up` selected (none: all) */
  readonly selection: { readonly services: ReadonlyArray<string>; readonly groups: ReadonlyArray<string> }
  /** the environment of the command that last brought it up (null: a world of an older berth) */
  readonly env: Readonly<Record<string, string>> | null
  /** suspended for idleness: it sleeps until a request or an `up` wakes it, across daemon restarts too */
  readonly wakesOnRequest: boolean
  readonly createdAt: number
  readonly startedAt: number | null
}

export interface ServiceRow {
  readonly worldId: number
  readonly name: string
  readonly observed: string
  readonly pid: number | null
  readonly pgid: number | null
  readonly startTime: string | null
  readonly restarts: number
  readonly reason: string | null
  readonly logTail: string | null
  /** the command as started (secrets masked); null keeps the one recorded */
  readonly command: string | null
}

export interface SliceRow {
  readonly id: number
  /** null once the world is gone (gc drops the slice) and for goldens */
  readonly worldId: number | null
  readonly project: string
  readonly service: string
  readonly adapter: string
  readonly name: string
  /** the address, once provisioned */
  readonly url: string | null
  /** the server it was made on (resolved admin_url), for teardown without the user's environment */
  readonly adminUrl: string | null
  /** where an embedded adapter keeps it */
  readonly storage: string
  /** the adapter options it was made with (a redis slice's mode, say) */
  readonly options: Readonly<Record<string, unknown>>
  /** set for a golden template: the hash of what it was built from */
  readonly goldenKey: string | null
  /** `ready` once migrate and seed (or the clone) finished */
  readonly state: "provisioning" | "ready"
  /** a world's slice, a golden template, or a spare copy of a golden waiting for the next new world */
  readonly role: "world" | "golden" | "spare" | "detached"
  readonly createdAt: number
  readonly usedAt: number
}

/** What is recorded before a slice is made. */
export type NewSlice = Pick<
  SliceRow,
  "worldId" | "project" | "service" | "adapter" | "name" | "adminUrl" | "storage" | "options" | "goldenKey"
> & {
  /** for a slice of no world: what it is (default golden) */
  readonly role?: "golden" | "spare"
}

interface SliceRecord {
  readonly id: number
  readonly world_id: number | null
  readonly project: string
  readonly service: string
  readonly adapter: string
  readonly name: string
  readonly url: string | null
  readonly admin_url: string | null
  readonly storage: string
  readonly options: string
  readonly golden_key: string | null
  readonly state: string
  readonly role: string
  readonly created_at: number
  readonly used_at: number
}

const toSlice = (r: SliceRecord): SliceRow => ({
  id: r.id,
  worldId: r.world_id,
  project: r.project,
  service: r.service,
  adapter: r.adapter,
  name: r.name,
  url: r.url,
  adminUrl: r.admin_url,
  storage: r.storage,
  options: JSON.parse(r.options) as Record<string, unknown>,
  goldenKey: r.golden_key,
  state: r.state === "ready" ? "ready" : "provisioning",
  role: r.role === "golden" || r.role === "spare" || r.role === "detached" ? r.role : "world",
  createdAt: r.created_at,
  usedAt: r.used_at
})

/** A server (or storage folder) slices were made on. */
export interface SliceServer {
  readonly adapter: string
  readonly adminUrl: string | null
  readonly storage: string
  readonly options: Readonly<Record<string, unknown>>
}

export interface LeaseRow {
  readonly port: number
  readonly worldId: number
  readonly service: string
  readonly name: string
}

interface WorldRecord {
  readonly id: number
  readonly project_id: number
  readonly project_name: string
  readonly declared_name: string
  readonly main_root: string
  readonly name: string
  readonly slug: string
  readonly path: string
  readonly branch: string | null
  readonly is_main: number
  readonly desired: string
  readonly observed: string
  readonly reason: string | null
  readonly setup_done: number
  readonly selection: string | null
  readonly worktree_ready: number | undefined
  readonly env: string | null
  readonly wakes_on_request: number | undefined
  readonly created_at: number
  readonly started_at: number | null
}

/**
 * JSON columns parsed once per distinct text: the reconciler and the pressure monitor read every world every few
 * seconds, and parsing each world's whole environment each time was most of the daemon's work at rest. The parsed
 * values are shared, so they are frozen.
 */
const parsedJson = new Map<string, unknown>()
const parseOnce = <A>(text: string): A => {
  const known = parsedJson.get(text)
  if (known !== undefined) return known as A
  if (parsedJson.size >= 1_000) parsedJson.clear()
  const value = Object.freeze(JSON.parse(text) as A)
  parsedJson.set(text, value)
  return value
}

const toWorld = (r: WorldRecord): WorldRow => ({
  id: r.id,
  projectId: r.project_id,
  projectName: r.project_name,
  declaredName: r.declared_name,
  mainRoot: r.main_root,
  name: r.name,
  slug: r.slug,
  path: r.path,
  branch: r.branch,
  isMain: r.is_main === 1,
  desired: r.desired as WorldDesired,
  observed: r.observed as WorldState,
  reason: r.reason,
  setupDone: r.setup_done === 1,
  worktreeReady: r.worktree_ready === 1,
  selection: r.selection === null ? { services: [], groups: [] } : parseOnce<WorldRow["selection"]>(r.selection),
  env: r.env === null ? null : parseOnce<Record<string, string>>(r.env),
  wakesOnRequest: r.wakes_on_request === 1,
  createdAt: r.created_at,
  startedAt: r.started_at
})

/** A file that exists but does not start with SQLite's magic header is not ours to open (or to overwrite). */
const checkHeader = (file: string): string | undefined => {
  if (!existsSync(file) || statSync(file).size === 0) return undefined
  const fd = openSync(file, "r")
  try {
    const header = Buffer.alloc(16)
    readSync(fd, header, 0, 16, 0)
    return header.toString("latin1") === "SQLite format 3\u0000" ? undefined : "it is not a SQLite database"
  } finally {
    closeSync(fd)
  }
}

/** An event of a world's history, as `status` shows it. */
export interface EventRow {
  /** increasing: what a follower has seen */
  readonly id: number
  readonly service: string | null
  readonly kind: string
  readonly message: string
  readonly at: number
}

/** What a database failure reaches callers as: berth's own fault, or a disk too full to write the change. */
export type RegistryError = InternalError | DiskFull

/** Every database failure reaches callers as a RegistryError. */
export interface RegistryService {
  /** the database file */
  readonly file: string
  /**
   * Bumped after every write that changes what a route points at (a world's or a service's state, leases, worlds made
   * or gone, a project renamed): the router brings its table up to date on it (reading again only what
   * `touchedSince` names) instead of reading the database per request.
   */
  readonly changes: SubscriptionRef.SubscriptionRef<number>
  /**
   * Which worlds the writes bumping `changes` after `version` (one of its values) touched, or "all" when one may have
   * changed any route (a project renamed or moved) or they are no longer remembered: the router re-reads only those.
   * The answer's version is the one to ask from next; a write is counted here before `changes` publishes it.
   */
  readonly touchedSince: (version: number) => Effect.Effect<Touched>
  /**
   * The project of a repository (its git common dir), registered on first sight; its label is assigned once and kept
   * while the declared name stays.
   */
  readonly upsertProject: (p: Omit<ProjectRow, "id" | "label">) => Effect.Effect<ProjectRow, RegistryError>
  /** Every repository whose berth.toml declares `name`. */
  readonly projectsNamed: (name: string) => Effect.Effect<ReadonlyArray<ProjectRow>, RegistryError>
  /** The project that has this label on this machine, if one has. */
  readonly projectLabelled: (label: string) => Effect.Effect<ProjectRow | undefined, RegistryError>
  /** A project's worlds, or (no argument) every world. */
  readonly worlds: (projectId?: number) => Effect.Effect<ReadonlyArray<WorldRow>, RegistryError>
  readonly world: (id: number) => Effect.Effect<WorldRow | undefined, RegistryError>
  readonly findWorld: (projectId: number, name: string) => Effect.Effect<WorldRow | undefined, RegistryError>
  /** Creates a world (down, stopped) with a slug no other world of the project holds. */
  readonly createWorld: (w: {
    readonly projectId: number
    readonly name: string
    readonly path: string
    readonly branch: string | null
    readonly isMain: boolean
  }) => Effect.Effect<WorldRow, RegistryError>
  readonly setDesired: (id: number, desired: WorldDesired) => Effect.Effect<void, RegistryError>
  /** Also stamps `startedAt` when the world becomes `running`. */
  readonly setObserved: (id: number, observed: WorldState, reason: string | null) => Effect.Effect<void, RegistryError>
  readonly markSetupDone: (id: number) => Effect.Effect<void, RegistryError>
  readonly setWakesOnRequest: (id: number, on: boolean) => Effect.Effect<void, RegistryError>
  readonly markWorktreeReady: (id: number) => Effect.Effect<void, RegistryError>
  /** What the last `up` asked for. */
  readonly setSelection: (
    id: number,
    selection: { readonly services: ReadonlyArray<string>; readonly groups: ReadonlyArray<string> }
  ) => Effect.Effect<void, RegistryError>
  /** The environment of the command that brought the world up: every later action uses it. */
  readonly setEnv: (id: number, env: Readonly<Record<string, string>>) => Effect.Effect<void, RegistryError>
  readonly setPath: (id: number, path: string) => Effect.Effect<void, RegistryError>
  /** Deletes the world row; its slices stay, with no world, for gc. */
  readonly deleteWorld: (id: number) => Effect.Effect<void, RegistryError>
  /** A world's services, or (no argument) every world's. */
  readonly services: (worldId?: number) => Effect.Effect<ReadonlyArray<ServiceRow>, RegistryError>
  /** Inserts or replaces the row of (world, service). */
  readonly saveService: (s: ServiceRow) => Effect.Effect<void, RegistryError>
  /** Inserts or replaces several rows of one world's services in one transaction: all of them, or none. */
  readonly saveServices: (worldId: number, rows: ReadonlyArray<ServiceRow>) => Effect.Effect<void, RegistryError>
  readonly dropServicesExcept: (worldId: number, keep: ReadonlyArray<string>) => Effect.Effect<void, RegistryError>
  /** A world's port leases, or (no argument) every lease. */
  readonly leases: (worldId?: number) => Effect.Effect<ReadonlyArray<LeaseRow>, RegistryError>
  /** Replaces a world's leases in one transaction (the port column is the machine-wide guard). */
  readonly setLeases: (worldId: number, entries: ReadonlyArray<LeaseRow>) => Effect.Effect<void, RegistryError>
  readonly releaseLeases: (worldId: number) => Effect.Effect<void, RegistryError>
  /** A world's slices, or (no argument) every slice row: goldens and those whose world is gone included. */
  readonly slices: (worldId?: number) => Effect.Effect<ReadonlyArray<SliceRow>, RegistryError>
  /** The golden rows of (project, service, key), oldest first. */
  readonly goldens: (
    project: string,
    service: string,
    key: string
  ) => Effect.Effect<ReadonlyArray<SliceRow>, RegistryError>
  /** The spare copies of a golden, oldest first. */
  readonly spares: (
    project: string,
    service: string,
    key: string
  ) => Effect.Effect<ReadonlyArray<SliceRow>, RegistryError>
  /**
   * Records a slice before it is made (a world's replaces what the world had for that service; a golden or spare is
   * a new row), so that a crash mid-provision leaves a row that teardown or gc can act on.
   */
  readonly recordSlice: (s: NewSlice) => Effect.Effect<SliceRow, RegistryError>
  readonly setSliceUrl: (id: number, url: string) => Effect.Effect<void, RegistryError>
  /** Filled (migrated and seeded, or copied): `ready`, and used now. */
  readonly markSliceReady: (id: number) => Effect.Effect<void, RegistryError>
  /** Back to `provisioning`: what is on the server is about to be replaced. */
  readonly markSliceProvisioning: (id: number) => Effect.Effect<void, RegistryError>
  /** Used now (gc keeps the most recently used goldens). */
  readonly touchSlice: (id: number) => Effect.Effect<void, RegistryError>
  /** With `name`, only while the row still names that slice (an id is reused once the highest row is gone). */
  readonly forgetSlice: (id: number, name?: string) => Effect.Effect<void, RegistryError>
  /** A slice no longer any world's: kept on its server, left for gc. */
  readonly detachSlice: (id: number) => Effect.Effect<void, RegistryError>
  /** Every server (or storage folder) a slice was ever made on, for gc to ask what this installation owns there. */
  readonly sliceServers: () => Effect.Effect<ReadonlyArray<SliceServer & { readonly key: string }>, RegistryError>
  /** Forgets a server recorded by `recordSliceServer` (gc: one whose adapter nothing serves and no world uses). */
  readonly forgetSliceServer: (key: string) => Effect.Effect<void, RegistryError>
  readonly recordSliceServer: (server: SliceServer & { readonly key: string }) => Effect.Effect<void, RegistryError>
  readonly addEvent: (e: {
    readonly worldId: number | null
    readonly service: string | null
    readonly kind: string
    readonly message: string
  }) => Effect.Effect<void, RegistryError>
  /** A world's latest events (those after the event `after`, when given), newest first. */
  readonly events: (
    worldId: number,
    limit?: number,
    after?: number
  ) => Effect.Effect<ReadonlyArray<EventRow>, RegistryError>
  /**
   * Every world's latest `limit` events, newest first within each world, in one read: a status of all worlds asks
   * once, not once per world (each of which scanned the whole table).
   */
  readonly recentEvents: (
    limit: number
  ) => Effect.Effect<ReadonlyArray<EventRow & { readonly worldId: number }>, RegistryError>
  /** A machine-wide setting's stored JSON value; undefined when it was never set. */
  readonly getSetting: (key: string) => Effect.Effect<unknown, RegistryError>
  readonly setSetting: (key: string, value: unknown) => Effect.Effect<void, RegistryError>
  /** Reads a setting and writes what `f` makes of it in one transaction: no other write comes between the two. */
  readonly updateSetting: (key: string, f: (value: unknown) => unknown) => Effect.Effect<void, RegistryError>
}

export class Registry extends Context.Tag("berth/Registry")<Registry, RegistryService>() {}

/**
 * Database errors are berth's own failures, callers see an InternalError and never a raw SqlError; but a write that
 * found the disk full (SQLITE_FULL) is a DiskFull naming the database, which the user can do something about.
 */
const sqlFailure =
  (file: string, home: string) =>
  (e: SqlError): RegistryError =>
    isDiskFull(e.cause) ? diskFullAt(file, home) : new InternalError({ reason: `state database: ${e.message}` })

const makeRegistry = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const home = yield* Home
  /**
   * Bumped after every write that changes what a route points at (a world's or a service's state, leases, worlds
   * made or gone): the router rebuilds its table from it instead of reading the database per request.
   */
  const changes = yield* SubscriptionRef.make(0)
  /** the worlds each bump of `changes` touched (the journal's version is the counter's value) */
  const journal = new TouchJournal()
  const failure = sqlFailure(home.database, home.root)
  /**
   * `sql.withTransaction`, with a COMMIT or ROLLBACK that fails (a full disk) a failure like any statement's: @effect/sql
   * makes it a defect, which reached users as an internal error. After such a COMMIT SQLite may or may not have rolled
   * back, so the transaction is rolled back here if it is still open: the connection's next write is not inside it.
   */
  const transaction = <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, SqlError, R> =>
    sql
      .withTransaction(effect)
      .pipe(
        Effect.catchSomeDefect((defect) =>
          defect instanceof SqlError
            ? Option.some(Effect.zipRight(Effect.ignore(sql.unsafe("ROLLBACK")), Effect.fail(defect)))
            : Option.none()
        )
      )
  const orInternal =
    <Args extends ReadonlyArray<unknown>, A, R>(f: (...args: Args) => Effect.Effect<A, SqlError, R>) =>
    (...args: Args): Effect.Effect<A, RegistryError, R> =>
      Effect.mapError(f(...args), failure)
  /**
   * `orInternal`, and the change announced once the write succeeded, with the worlds it touched (`touched`: none,
   * nothing to announce). Uninterruptible: a write committed but never announced would leave its world's routes stale
   * until that world is written again.
   */
  const announced =
    <Args extends ReadonlyArray<unknown>, A, R>(
      f: (...args: Args) => Effect.Effect<A, SqlError, R>,
      touched: (result: A, ...args: Args) => ReadonlyArray<number> | "all" | undefined
    ) =>
    (...args: Args): Effect.Effect<A, RegistryError, R> =>
      Effect.uninterruptible(
        Effect.tap(orInternal(f)(...args), (result) => {
          const worlds = touched(result, ...args)
          return worlds === undefined
            ? Effect.void
            : SubscriptionRef.updateEffect(changes, () => Effect.sync(() => journal.record(worlds)))
        })
      )
  /** a write whose first argument is the world it touches */
  const theWorld = <A>(_: A, id: number): ReadonlyArray<number> => [id]

  /**
   * The reads go through a connection of their own, each statement prepared once. Through @effect/sql a statement
   * costs about a hundred effect steps (its cache of prepared statements, the connection's semaphore, a span): the
   * reads were nearly a third of a warm `up`'s steps. WAL gives each read the last committed state — never what a
   * transaction open on the writing connection has not committed yet — and a read neither waits for a writer nor
   * holds one up. The writes stay on @effect/sql's one connection, whose transactions keep them in order.
   */
  const reader = yield* Effect.acquireRelease(
    Effect.try({
      try: () => {
        const db = openDatabase(home.database, { readonly: false })
        db.pragma("query_only = ON")
        db.pragma("busy_timeout = 5000")
        return db
      },
      catch: (cause) => unavailable(home.database, cause instanceof Error ? cause.message : String(cause))
    }),
    (db) => Effect.sync(() => db.close())
  )
  const prepared = new Map<string, SqliteStatement>()
  const read = <A>(text: string, ...params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>, RegistryError> =>
    Effect.try({
      try: () => {
        let statement = prepared.get(text)
        if (statement === undefined) {
          statement = reader.prepare(text)
          prepared.set(text, statement)
        }
        return statement.all(...params) as ReadonlyArray<A>
      },
      catch: (cause) => failure(new SqlError({ cause, message: "Failed to execute statement" }))
    })
  const first = <A>(rows: ReadonlyArray<A>): A | undefined => rows[0]

  const worldSelect = sql.unsafe(WORLD_SELECT)
  const projectSelect = sql.unsafe(PROJECT_SELECT)

  /**
   * The project of a repository (its git common dir), registered on first sight. Its label is assigned once and kept
   * while the declared name stays: a label never changes under running worlds.
   */
  const upsertProject = Effect.fn("Registry.upsertProject")(function* (p: Omit<ProjectRow, "id" | "label">) {
    return yield* transaction(
      Effect.gen(function* () {
        const existing = (yield* sql<ProjectRow>`${projectSelect} WHERE common_dir = ${p.commonDir}`)[0]
        if (existing !== undefined && existing.name === p.name) {
          if (existing.mainRoot === p.mainRoot) return { project: existing, changed: false }
          yield* sql`UPDATE projects SET main_root = ${p.mainRoot} WHERE id = ${existing.id}`
          return { project: { ...existing, mainRoot: p.mainRoot }, changed: true }
        }
        const others = yield* sql<{ label: string }>`SELECT label FROM projects WHERE common_dir != ${p.commonDir}`
        const label = assignProjectLabel(p.name, p.commonDir, new Set(others.map((o) => o.label)))
        yield* sql`INSERT INTO projects (name, label, common_dir, main_root) VALUES (${p.name}, ${label},
          ${p.commonDir}, ${p.mainRoot})
          ON CONFLICT (common_dir) DO UPDATE SET name = excluded.name, label = excluded.label,
          main_root = excluded.main_root`
        const project = (yield* sql<ProjectRow>`${projectSelect} WHERE common_dir = ${p.commonDir}`)[0]!
        return { project, changed: existing !== undefined }
      })
    )
  })

  /** Other repositories whose berth.toml declares `name` (for saying why a label carries a suffix). */
  const projectsNamed = (name: string) => read<ProjectRow>(`${PROJECT_SELECT} WHERE name = ? ORDER BY id`, name)

  const projectLabelled = (label: string) =>
    Effect.map(read<ProjectRow>(`${PROJECT_SELECT} WHERE label = ?`, label), first)

  const worlds = (projectId?: number) =>
    Effect.map(
      projectId === undefined
        ? read<WorldRecord>(`${WORLD_SELECT} ORDER BY p.name, w.created_at, w.id`)
        : read<WorldRecord>(`${WORLD_SELECT} WHERE w.project_id = ? ORDER BY w.created_at, w.id`, projectId),
      (rows) => rows.map(toWorld)
    )

  const oneWorld = (rows: ReadonlyArray<WorldRecord>) => (rows[0] === undefined ? undefined : toWorld(rows[0]))

  const world = (id: number) => Effect.map(read<WorldRecord>(`${WORLD_SELECT} WHERE w.id = ?`, id), oneWorld)

  const findWorld = (projectId: number, name: string) =>
    Effect.map(read<WorldRecord>(`${WORLD_SELECT} WHERE w.project_id = ? AND w.name = ?`, projectId, name), oneWorld)

  /** Creates a world with a slug no other world of the project holds (assigned once, then kept). */
  const createWorld = Effect.fn("Registry.createWorld")(function* (w: {
    readonly projectId: number
    readonly name: string
    readonly path: string
    readonly branch: string | null
    readonly isMain: boolean
  }) {
    return yield* transaction(
      Effect.gen(function* () {
        const held = yield* sql<{ slug: string; name: string }>`SELECT slug, name FROM worlds
          WHERE project_id = ${w.projectId}`
        const slug = assignSlug(w.name, new Map(held.map((r) => [r.slug, r.name])))
        // a world id is never given twice: what is kept under it (its log folder, events, marks on its processes)
        // must never be taken for a removed world's. SQLite would hand the highest id out again once its row went
        const [last] = yield* sql<{ id: number }>`SELECT max(
            coalesce((SELECT max(id) FROM worlds), 0),
            coalesce((SELECT CAST(value AS INTEGER) FROM settings WHERE key = ${WORLD_ID_HIGH_WATER}), 0)) AS id`
        const id = (last?.id ?? 0) + 1
        yield* sql`INSERT INTO worlds (id, project_id, name, slug, path, branch, is_main, desired, observed, created_at)
          VALUES (${id}, ${w.projectId}, ${w.name}, ${slug}, ${w.path}, ${w.branch}, ${w.isMain ? 1 : 0}, 'down',
          'stopped', ${Date.now()})`
        yield* sql`INSERT INTO settings (key, value) VALUES (${WORLD_ID_HIGH_WATER}, ${String(id)})
          ON CONFLICT (key) DO UPDATE SET value = excluded.value`
        const rows = yield* sql<WorldRecord>`${worldSelect} WHERE w.project_id = ${w.projectId} AND w.name = ${w.name}`
        return toWorld(rows[0]!)
      })
    )
  })

  const setDesired = (id: number, desired: WorldDesired) =>
    sql`UPDATE worlds SET desired = ${desired} WHERE id = ${id}`.pipe(Effect.asVoid)

  const setObserved = (id: number, observed: WorldState, reason: string | null) =>
    sql`UPDATE worlds SET observed = ${observed}, reason = ${reason},
      started_at = CASE WHEN ${observed} = 'running' THEN ${Date.now()} ELSE started_at END WHERE id = ${id}`.pipe(
      Effect.asVoid
    )

  const setPath = (id: number, path: string) =>
    sql`UPDATE worlds SET path = ${path} WHERE id = ${id}`.pipe(Effect.asVoid)

  const setSelection = (
    id: number,
    selection: { readonly services: ReadonlyArray<string>; readonly groups: ReadonlyArray<string> }
  ) => sql`UPDATE worlds SET selection = ${JSON.stringify(selection)} WHERE id = ${id}`.pipe(Effect.asVoid)

  const setEnv = (id: number, env: Readonly<Record<string, string>>) =>
    sql`UPDATE worlds SET env = ${JSON.stringify(env)} WHERE id = ${id}`.pipe(Effect.asVoid)

  const markWorktreeReady = (id: number) =>
    sql`UPDATE worlds SET worktree_ready = 1 WHERE id = ${id}`.pipe(Effect.asVoid)

  const setWakesOnRequest = (id: number, on: boolean) =>
    sql`UPDATE worlds SET wakes_on_request = ${on ? 1 : 0} WHERE id = ${id}`.pipe(Effect.asVoid)

  const markSetupDone = (id: number) => sql`UPDATE worlds SET setup_done = 1 WHERE id = ${id}`.pipe(Effect.asVoid)

  const deleteWorld = (id: number) => sql`DELETE FROM worlds WHERE id = ${id}`.pipe(Effect.asVoid)

  /** A world's services, or (no argument) every world's. */
  const services = (worldId?: number) =>
    worldId === undefined
      ? read<ServiceRow>(`${SERVICE_SELECT} ORDER BY rowid`)
      : read<ServiceRow>(`${SERVICE_SELECT} WHERE world_id = ? ORDER BY rowid`, worldId)

  const saveService = (s: ServiceRow) =>
    sql`INSERT INTO services (world_id, name, observed, pid, pgid, start_time, restarts, reason, log_tail, command)
      VALUES (${s.worldId}, ${s.name}, ${s.observed}, ${s.pid}, ${s.pgid}, ${s.startTime}, ${s.restarts}, ${s.reason},
      ${s.logTail}, ${s.command})
      ON CONFLICT (world_id, name) DO UPDATE SET observed = excluded.observed, pid = excluded.pid,
      pgid = excluded.pgid, start_time = excluded.start_time, restarts = excluded.restarts,
      reason = excluded.reason, log_tail = excluded.log_tail,
      command = COALESCE(excluded.command, services.command)`.pipe(Effect.asVoid)

  const saveServices = (_worldId: number, rows: ReadonlyArray<ServiceRow>) =>
    transaction(Effect.forEach(rows, saveService, { discard: true }))

  const dropServicesExcept = (worldId: number, keep: ReadonlyArray<string>) =>
    (keep.length === 0
      ? sql`DELETE FROM services WHERE world_id = ${worldId}`
      : sql`DELETE FROM services WHERE world_id = ${worldId} AND name NOT IN ${sql.in(keep)}`
    ).pipe(Effect.asVoid)

  const leases = (worldId?: number) =>
    worldId === undefined
      ? read<LeaseRow>("SELECT port, world_id AS worldId, service, name FROM leases")
      : read<LeaseRow>("SELECT port, world_id AS worldId, service, name FROM leases WHERE world_id = ?", worldId)

  /** Replaces a world's leases with `entries` in one transaction (the port column is the machine-wide guard). */
  const setLeases = Effect.fn("Registry.setLeases")(function* (worldId: number, entries: ReadonlyArray<LeaseRow>) {
    yield* transaction(
      Effect.gen(function* () {
        yield* sql`DELETE FROM leases WHERE world_id = ${worldId}`
        for (const e of entries) {
          yield* sql`INSERT INTO leases (port, world_id, service, name) VALUES (${e.port}, ${worldId}, ${e.service},
            ${e.name})`
        }
      })
    )
  })

  /** A world's slices, or (no argument) every slice row: goldens and those whose world is gone included. */
  const toSlices = (rows: ReadonlyArray<SliceRecord>) => rows.map(toSlice)

  const slices = (worldId?: number) =>
    Effect.map(
      worldId === undefined
        ? read<SliceRecord>("SELECT * FROM slices ORDER BY id")
        : read<SliceRecord>("SELECT * FROM slices WHERE world_id = ? ORDER BY id", worldId),
      toSlices
    )

  /** A golden's rows (`role` golden), or its spare copies (`role` spare), oldest first. */
  const ofGolden = (role: "golden" | "spare") => (project: string, service: string, key: string) =>
    Effect.map(
      read<SliceRecord>(
        `SELECT * FROM slices WHERE world_id IS NULL AND role = ? AND project = ? AND service = ? AND golden_key = ?
          ORDER BY id`,
        role,
        project,
        service,
        key
      ),
      toSlices
    )
  const goldens = ofGolden("golden")
  const spares = ofGolden("spare")

  /**
   * Records a slice before it is made (a world's replaces what the world had for that service; a golden is a new
   * row), so that a crash mid-provision leaves a row that teardown or gc can act on.
   */
  const recordSlice = Effect.fn("Registry.recordSlice")(function* (s: NewSlice) {
    const now = Date.now()
    const options = JSON.stringify(s.options)
    const rows = yield* s.worldId === null
      ? sql<SliceRecord>`INSERT INTO slices (world_id, project, service, adapter, name, admin_url, storage, options,
          golden_key, state, role, created_at, used_at) VALUES (NULL, ${s.project}, ${s.service}, ${s.adapter},
          ${s.name}, ${s.adminUrl}, ${s.storage}, ${options}, ${s.goldenKey}, 'provisioning', ${s.role ?? "golden"},
          ${now}, ${now}) RETURNING *`
      : sql<SliceRecord>`INSERT INTO slices (world_id, project, service, adapter, name, admin_url, storage, options,
          golden_key, state, created_at, used_at) VALUES (${s.worldId}, ${s.project}, ${s.service}, ${s.adapter},
          ${s.name}, ${s.adminUrl}, ${s.storage}, ${options}, NULL, 'provisioning', ${now}, ${now})
          ON CONFLICT (world_id, service) DO UPDATE SET adapter = excluded.adapter, name = excluded.name,
          admin_url = COALESCE(excluded.admin_url, admin_url), storage = excluded.storage, options = excluded.options
          RETURNING *`
    return toSlice(rows[0]!)
  })

  const setSliceUrl = (id: number, url: string) =>
    sql`UPDATE slices SET url = ${url} WHERE id = ${id}`.pipe(Effect.asVoid)

  const markSliceReady = (id: number) =>
    sql`UPDATE slices SET state = 'ready', used_at = ${Date.now()} WHERE id = ${id}`.pipe(Effect.asVoid)

  /** Back to `provisioning`: what is on the server is about to be replaced. */
  const markSliceProvisioning = (id: number) =>
    sql`UPDATE slices SET state = 'provisioning' WHERE id = ${id}`.pipe(Effect.asVoid)

  const touchSlice = (id: number) => sql`UPDATE slices SET used_at = ${Date.now()} WHERE id = ${id}`.pipe(Effect.asVoid)

  /** A slice no longer any world's: kept on its server, left for gc. */
  const detachSlice = (id: number) =>
    sql`UPDATE slices SET world_id = NULL, role = 'detached' WHERE id = ${id}`.pipe(Effect.asVoid)

  const forgetSlice = (id: number, name?: string) =>
    (name === undefined
      ? sql`DELETE FROM slices WHERE id = ${id}`
      : sql`DELETE FROM slices WHERE id = ${id} AND name = ${name}`
    ).pipe(Effect.asVoid)

  /** Every server (or storage folder) a slice was ever made on, for gc to ask what this installation owns there. */
  const sliceServers = () =>
    Effect.map(
      read<{ key: string; value: string }>("SELECT key, value FROM settings WHERE key LIKE 'slice-server:%'"),
      (rows) => rows.map((r) => ({ ...(JSON.parse(r.value) as SliceServer), key: r.key.slice("slice-server:".length) }))
    )

  const forgetSliceServer = (key: string) =>
    sql`DELETE FROM settings WHERE key = ${`slice-server:${key}`}`.pipe(Effect.asVoid)

  const recordSliceServer = (server: SliceServer & { readonly key: string }) =>
    sql`INSERT INTO settings (key, value) VALUES (${`slice-server:${server.key}`}, ${JSON.stringify({
      adapter: server.adapter,
      adminUrl: server.adminUrl,
      storage: server.storage,
      options: server.options
    })}) ON CONFLICT (key) DO NOTHING`.pipe(Effect.asVoid)

  const releaseLeases = (worldId: number) => sql`DELETE FROM leases WHERE world_id = ${worldId}`.pipe(Effect.asVoid)

  /** Records an event (the table's trigger lets the world's oldest go past the latest EVENTS_KEPT). */
  const addEvent = (e: { worldId: number | null; service: string | null; kind: string; message: string }) =>
    sql`INSERT INTO events (world_id, service, kind, message, at) VALUES (${e.worldId}, ${e.service}, ${e.kind},
      ${e.message}, ${Date.now()})`.pipe(Effect.asVoid)

  const events = (worldId: number, limit = 50, after = 0) =>
    read<EventRow>(
      "SELECT id, service, kind, message, at FROM events WHERE world_id = ? AND id > ? ORDER BY id DESC LIMIT ?",
      worldId,
      after,
      limit
    )

  const recentEvents = (limit: number) => read<EventRow & { readonly worldId: number }>(RECENT_EVENTS_SQL, limit)

  const getSetting = (key: string) =>
    Effect.map(read<{ value: string }>("SELECT value FROM settings WHERE key = ?", key), (rows) =>
      rows[0] === undefined ? undefined : (JSON.parse(rows[0].value) as unknown)
    )

  const setSetting = (key: string, value: unknown) =>
    sql`INSERT INTO settings (key, value) VALUES (${key}, ${JSON.stringify(value)})
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`.pipe(Effect.asVoid)

  const updateSetting = (key: string, f: (value: unknown) => unknown) =>
    transaction(
      Effect.gen(function* () {
        const rows = yield* sql<{ value: string }>`SELECT value FROM settings WHERE key = ${key}`
        yield* setSetting(key, f(rows[0] === undefined ? undefined : JSON.parse(rows[0].value)))
      })
    )

  return {
    file: home.database,
    changes,
    touchedSince: (version: number) => Effect.sync(() => journal.since(version)),
    // a project renamed or moved changes its worlds' routes (their host names, where their config is read): rare
    // enough that every route is read again; a new project has no world yet
    upsertProject: (p: Omit<ProjectRow, "id" | "label">) =>
      Effect.map(announced(upsertProject, (r) => (r.changed ? "all" : undefined))(p), (r) => r.project),
    projectsNamed,
    projectLabelled,
    worlds,
    world,
    findWorld,
    createWorld: announced(createWorld, (w) => [w.id]),
    setDesired: orInternal(setDesired),
    setObserved: announced(setObserved, theWorld),
    markSetupDone: orInternal(markSetupDone),
    setWakesOnRequest: orInternal(setWakesOnRequest),
    markWorktreeReady: orInternal(markWorktreeReady),
    setSelection: orInternal(setSelection),
    setEnv: orInternal(setEnv),
    setPath: announced(setPath, theWorld),
    deleteWorld: announced(deleteWorld, theWorld),
    services,
    saveService: announced(saveService, (_, s) => [s.worldId]),
    saveServices: announced(saveServices, theWorld),
    dropServicesExcept: announced(dropServicesExcept, theWorld),
    leases,
    setLeases: announced(setLeases, theWorld),
    releaseLeases: announced(releaseLeases, theWorld),
    slices,
    goldens,
    spares,
    recordSlice: orInternal(recordSlice),
    setSliceUrl: orInternal(setSliceUrl),
    markSliceReady: orInternal(markSliceReady),
    markSliceProvisioning: orInternal(markSliceProvisioning),
    touchSlice: orInternal(touchSlice),
    forgetSlice: orInternal(forgetSlice),
    detachSlice: orInternal(detachSlice),
    sliceServers,
    recordSliceServer: orInternal(recordSliceServer),
    forgetSliceServer: orInternal(forgetSliceServer),
    addEvent: orInternal(addEvent),
    events,
    recentEvents,
    getSetting,
    setSetting: orInternal(setSetting),
    updateSetting: orInternal(updateSetting)
  } satisfies RegistryService
})

const unavailable = (file: string, reason: string) =>
  new RegistryUnavailable({
    file,
    reason,
    hint: `move it aside (for example to ${file}.broken) and run the command again; berth will start with empty state`
  })

/** Opens (creating if needed) the database under BERTH_HOME, sets the pragmas berth relies on and migrates it. */
export const RegistryLive: Layer.Layer<Registry, RegistryUnavailable, Home> = Layer.unwrapEffect(
  Effect.gen(function* () {
    const home = yield* Home
    const file = home.database
    const problem = checkHeader(file)
    if (problem !== undefined) return yield* unavailable(file, problem)
    const client = SqliteClient.layer({ filename: file })
    const setup = Layer.effectDiscard(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        yield* sql`PRAGMA foreign_keys = ON`
        yield* sql`PRAGMA busy_timeout = 5000`
        yield* sql`PRAGMA synchronous = NORMAL`
        const integrity = yield* sql<{ quick_check: string }>`PRAGMA quick_check`
        if (integrity[0]?.quick_check !== "ok") {
          return yield* unavailable(file, `it is corrupt (${integrity[0]?.quick_check ?? "no answer"})`)
        }
        yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations) })
        const applied = yield* sql<{ n: number }>`SELECT MAX(migration_id) AS n FROM effect_sql_migrations`
        if ((applied[0]?.n ?? 0) > knownMigrations) {
          return yield* new RegistryUnavailable({
            file,
            reason: "it was written by a newer berth",
            hint: "upgrade berth, or move the file aside to start with empty state"
          })
        }
        chmodSync(file, 0o600)
      }).pipe(
        Effect.catchTags({
          SqlError: (e: SqlError) => unavailable(file, String((e.cause as Error | undefined)?.message ?? e.message)),
          MigrationError: (e) => unavailable(file, e.message)
        })
      )
    )
    return Layer.scoped(Registry, makeRegistry).pipe(
      Layer.provide(setup),
      Layer.provide(client),
      // better-sqlite3 throws (a defect) on some broken files: it is still "cannot use this file", never a crash
      Layer.catchAllCause((cause) => {
        const failure = Cause.failureOption(cause)
        return Layer.fail(
          Option.isSome(failure) && failure.value._tag === "RegistryUnavailable"
            ? failure.value
            : unavailable(
                file,
                Cause.squash(cause) instanceof Error ? (Cause.squash(cause) as Error).message : "unknown"
              )
        )
      })
    )
  })
)
