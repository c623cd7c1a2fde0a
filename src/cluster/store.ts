/**
 * What berth's daemons share through the cluster's PostgreSQL database, beside `@effect/cluster`'s own tables: which
 * machines are members (their slot, the address their peers dial, their heartbeat) and what each machine's worlds look
 * like now (their status as `berth status` shows it), so that any machine can list every world and route to it.
 *
 * Each machine writes only its own rows; a machine's rows go with it when it leaves. Liveness is read with the
 * database's clock (`now() - heartbeat_at`), so machines whose clocks disagree still agree on who is late.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { WorldStatus } from "../daemon/api.js"
import { type AnywhereDesired, freeSlot, MAX_MACHINES, parseRoom, type Room } from "../domain/cluster.js"
import { ClusterRefused } from "../domain/errors.js"

/** The version of berth's own tables in a cluster's database; a berth that finds a newer one refuses to join. */
export const SCHEMA_VERSION = 4

/** A world that runs anywhere, as the cluster wants it: the shared half of its state (DESIGN: entities are in memory). */
export interface AnywhereRow {
  /** the project's label and the world's slug on the machine that asked for it: the entity's id */
  readonly project: string
  readonly slug: string
  readonly name: string
  readonly branch: string
  /** the git remote every machine clones the branch from */
  readonly remote: string
  readonly selection: { readonly services: ReadonlyArray<string>; readonly groups: ReadonlyArray<string> }
  readonly env: Readonly<Record<string, string>>
  readonly desired: AnywhereDesired
  /** counts the starts: a machine whose generation is not the row's lost the world and stops its copy */
  readonly generation: number
  /** the machine that runs it now, if any */
  readonly owner: string | null
  /** why the last machine that tried could not start it, until one does */
  readonly reason: string | null
  /**
   * the machine it last left without a user asking (given up, stopped, left the cluster), until the next machine to
   * run it has said so in the world's history (`status`: when it moved, and from where)
   */
  readonly moved?: { readonly from: string; readonly at: number; readonly why: string } | null
}

export interface Machine {
  readonly name: string
  readonly machineId: string
  readonly slot: number
  /** the address peers dial: the runner's and the proxy's */
  readonly address: string
  readonly runnerPort: number
  /** the proxy's HTTP port on `address`, when it listens there */
  readonly proxyPort: number | null
  readonly version: string
  /** how long ago its last heartbeat was, by the database's clock */
  readonly heartbeatAgeMs: number
  readonly joinedAt: number
  /** its room for one more world, as its last heartbeat said (undefined from a member of an older berth) */
  readonly room: Room | undefined
}

/** A slice of a world that runs anywhere, as one machine's generation of the world claims it. */
export interface SliceClaim {
  readonly project: string
  readonly slug: string
  readonly service: string
  /** its name on its server, and which server (a hash of its address): the same two mean the same data */
  readonly name: string
  readonly server: string
  readonly machine: string
  readonly generation: number
}

export interface MachineClaim {
  readonly name: string
  readonly machineId: string
  readonly address: string
  readonly runnerPort: number
  readonly proxyPort: number | null
  readonly version: string
  /** take over the name from a machine that has not been heard from in a while */
  readonly replace: boolean
}

/** One world of one machine, as that machine last published it. */
export interface SharedWorld {
  readonly machine: string
  readonly status: WorldStatus
}

const decodeStatus = Schema.decodeUnknownOption(WorldStatus)

/** JSON from PostgreSQL arrives parsed (jsonb) or as text, depending on the driver's type parsers. */
const parsed = (value: unknown): unknown => {
  if (typeof value !== "string") return value
  try {
    return JSON.parse(value)
  } catch {
    return undefined
  }
}

export const makeStore = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient

  /** Whether berth's tables are in this database (`cluster init` made them), and at which version. */
  const schemaVersion: Effect.Effect<number | undefined, SqlError> = Effect.gen(function* () {
    const [exists] = yield* sql<{ name: string | null }>`SELECT to_regclass('berth_meta')::text AS name`
    if (exists?.name === null || exists === undefined) return undefined
    const rows = yield* sql<{ value: string }>`SELECT value FROM berth_meta WHERE key = 'schema'`
    return rows[0] === undefined ? undefined : Number(rows[0].value)
  })

  /** Makes berth's tables, once, whoever else runs `cluster init` at the same moment. */
  const migrate = sql
    .withTransaction(
      Effect.gen(function* () {
        // two machines initializing at once would race in CREATE TABLE IF NOT EXISTS (a unique violation in pg_type)
        yield* sql`SELECT pg_advisory_xact_lock(hashtext('berth cluster schema'))`
        yield* sql`CREATE TABLE IF NOT EXISTS berth_meta (key text PRIMARY KEY, value text NOT NULL)`
        yield* sql`CREATE TABLE IF NOT EXISTS berth_machines (
          name text PRIMARY KEY,
          machine_id text NOT NULL,
          slot integer NOT NULL UNIQUE CHECK (slot BETWEEN 1 AND ${sql.literal(String(MAX_MACHINES))}),
          address text NOT NULL,
          runner_port integer NOT NULL,
          proxy_port integer,
          version text NOT NULL,
          joined_at timestamptz NOT NULL DEFAULT now(),
          heartbeat_at timestamptz NOT NULL DEFAULT now()
        )`
        yield* sql`CREATE TABLE IF NOT EXISTS berth_worlds (
          machine text NOT NULL REFERENCES berth_machines (name) ON DELETE CASCADE,
          project text NOT NULL,
          slug text NOT NULL,
          status jsonb NOT NULL,
          updated_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (machine, project, slug)
        )`
        yield* createAnywhere
      })
    )
    .pipe(Effect.asVoid)

  /**
   * The table of worlds that run anywhere (version 2), each machine's room for one more (version 3), and the slices of
   * worlds that run anywhere with the cluster's own id, the owner mark of those slices (version 4): a cluster made by an
   * older version gains them when a member starts.
   */
  const createAnywhere = sql.withTransaction(
    Effect.gen(function* () {
      // members that start at once would race in the DDL below, as `cluster init`s would
      yield* sql`SELECT pg_advisory_xact_lock(hashtext('berth cluster schema'))`
      yield* sql`ALTER TABLE berth_machines ADD COLUMN IF NOT EXISTS room jsonb`
      yield* sql`CREATE TABLE IF NOT EXISTS berth_anywhere (
        project text NOT NULL,
        slug text NOT NULL,
        name text NOT NULL,
        branch text NOT NULL,
        remote text NOT NULL,
        selection jsonb NOT NULL,
        env jsonb NOT NULL,
        desired text NOT NULL,
        generation bigint NOT NULL DEFAULT 0,
        owner text,
        reason text,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (project, slug)
      )`
      // where a world moved from, until its next machine has said so (a member of an older berth ignores them)
      yield* sql`ALTER TABLE berth_anywhere ADD COLUMN IF NOT EXISTS moved_from text,
        ADD COLUMN IF NOT EXISTS moved_at timestamptz, ADD COLUMN IF NOT EXISTS moved_why text`
      yield* sql`CREATE TABLE IF NOT EXISTS berth_slices (
        project text NOT NULL,
        slug text NOT NULL,
        service text NOT NULL,
        name text NOT NULL,
        server text NOT NULL,
        state text NOT NULL,
        generation bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (project, slug, service)
      )`
      // slices of removed worlds still on their servers: the machine that made them was away when the world went
      yield* sql`CREATE TABLE IF NOT EXISTS berth_slice_orphans (
        name text NOT NULL,
        server text NOT NULL,
        since timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (name, server)
      )`
      yield* sql`INSERT INTO berth_meta (key, value) VALUES ('id', md5(random()::text || clock_timestamp()::text))
        ON CONFLICT (key) DO NOTHING`
      // a member of an older berth, which knows neither, is refused from now on
      yield* sql`INSERT INTO berth_meta (key, value) VALUES ('schema', ${String(SCHEMA_VERSION)})
        ON CONFLICT (key) DO UPDATE SET value = greatest(berth_meta.value::int, excluded.value::int)::text`
    })
  )

  const toAnywhere = (r: {
    project: string
    slug: string
    name: string
    branch: string
    remote: string
    selection: unknown
    env: unknown
    desired: string
    generation: string | number
    owner: string | null
    reason: string | null
    moved_from?: string | null
    moved_at?: Date | string | null
    moved_why?: string | null
  }): AnywhereRow => {
    const selection = parsed(r.selection) as AnywhereRow["selection"] | undefined
    const env = parsed(r.env) as AnywhereRow["env"] | undefined
    return {
      project: r.project,
      slug: r.slug,
      name: r.name,
      branch: r.branch,
      remote: r.remote,
      selection: { services: selection?.services ?? [], groups: selection?.groups ?? [] },
      env: env ?? {},
      desired: r.desired === "down" || r.desired === "removed" ? r.desired : "up",
      generation: Number(r.generation),
      owner: r.owner,
      reason: r.reason,
      moved:
        r.moved_from === null || r.moved_from === undefined
          ? null
          : {
              from: r.moved_from,
              at: r.moved_at === null || r.moved_at === undefined ? 0 : new Date(r.moved_at).getTime(),
              why: r.moved_why ?? ""
            }
    }
  }

  /** Every world wanted anywhere, or the one of `project`/`slug`. */
  const anywhere = (only?: { readonly project: string; readonly slug: string }) =>
    Effect.map(
      only === undefined
        ? sql<Parameters<typeof toAnywhere>[0]>`SELECT * FROM berth_anywhere ORDER BY project, slug`
        : sql<Parameters<typeof toAnywhere>[0]>`SELECT * FROM berth_anywhere
            WHERE project = ${only.project} AND slug = ${only.slug}`,
      (rows) => rows.map(toAnywhere)
    )

  /** What a user asked of a world that runs anywhere: a new one, or its desired state, selection and environment. */
  const want = (
    w: Omit<AnywhereRow, "generation" | "owner" | "desired" | "reason" | "moved"> & { readonly desired: "up" }
  ): Effect.Effect<void, SqlError> =>
    sql`INSERT INTO berth_anywhere (project, slug, name, branch, remote, selection, env, desired)
      VALUES (${w.project}, ${w.slug}, ${w.name}, ${w.branch}, ${w.remote}, ${JSON.stringify(w.selection)}::jsonb,
        ${JSON.stringify(w.env)}::jsonb, 'up')
      ON CONFLICT (project, slug) DO UPDATE SET selection = excluded.selection, env = excluded.env,
        branch = excluded.branch, remote = excluded.remote, desired = 'up', updated_at = now()`.pipe(Effect.asVoid)

  // taken down or removed by a user: where it ran before is no move to tell of
  const setDesired = (project: string, slug: string, desired: AnywhereDesired) =>
    (desired === "up"
      ? sql`UPDATE berth_anywhere SET desired = ${desired}, updated_at = now()
          WHERE project = ${project} AND slug = ${slug}`
      : sql`UPDATE berth_anywhere SET desired = ${desired}, updated_at = now(), moved_from = NULL
          WHERE project = ${project} AND slug = ${slug}`
    ).pipe(Effect.asVoid)

  /**
   * The placer gives the world to `to` (a new generation), or to no machine (null), if its owner is still `from`: two
   * placers deciding at once (a singleton that moves) cannot both win. True when this one did.
   */
  const reassign = (project: string, slug: string, from: string | null, to: string | null, why?: string) =>
    Effect.map(
      from !== null && why !== undefined
        ? sql<{ generation: string | number }>`UPDATE berth_anywhere
            SET owner = ${to}, generation = generation + ${to === null ? 0 : 1}, updated_at = now(),
              moved_from = ${from}, moved_at = now(), moved_why = ${why}
            WHERE project = ${project} AND slug = ${slug} AND owner = ${from} RETURNING generation`
        : sql<{ generation: string | number }>`UPDATE berth_anywhere
            SET owner = ${to}, generation = generation + ${to === null ? 0 : 1}, updated_at = now()
            WHERE project = ${project} AND slug = ${slug} AND owner IS NOT DISTINCT FROM ${from} RETURNING generation`,
      (rows) => rows.length > 0
    )

  /** The machine that runs the world now has told of its move (`moved`) in the world's history. */
  const toldMove = (project: string, slug: string, from: string) =>
    sql`UPDATE berth_anywhere SET moved_from = NULL
      WHERE project = ${project} AND slug = ${slug} AND moved_from = ${from}`.pipe(Effect.asVoid)

  /** A world wanted removed that no machine holds any more goes. */
  const forget = (project: string, slug: string) =>
    sql`WITH gone AS (DELETE FROM berth_anywhere WHERE project = ${project} AND slug = ${slug}
        AND desired = 'removed' AND owner IS NULL RETURNING project, slug),
      left_behind AS (DELETE FROM berth_slices s USING gone WHERE s.project = gone.project AND s.slug = gone.slug
        RETURNING s.name, s.server)
      INSERT INTO berth_slice_orphans (name, server) SELECT name, server FROM left_behind
        ON CONFLICT (name, server) DO NOTHING`.pipe(Effect.asVoid)

  /**
   * The slices removed worlds left on their servers (`forget` records what their records still held: the machine that
   * made them was away, or could not drop them), with whether a world has claimed the name since (`claimed`: then
   * what is there is that world's, never an orphan's).
   */
  const sliceOrphans = Effect.map(
    sql<{ name: string; server: string; claimed: boolean }>`SELECT o.name, o.server,
        EXISTS (SELECT 1 FROM berth_slices s WHERE s.name = o.name) AS claimed
      FROM berth_slice_orphans o ORDER BY o.since`,
    (rows) => rows.map((r) => ({ name: r.name, server: r.server, claimed: r.claimed === true }))
  )

  /** An orphan dropped (or taken over by a world that claimed its name): its record goes. */
  const clearOrphan = (name: string, server: string) =>
    sql`DELETE FROM berth_slice_orphans WHERE name = ${name} AND server = ${server}`.pipe(Effect.asVoid)

  /** Why the world could not start (or null once it has): what `status` shows while no machine runs it. */
  const note = (project: string, slug: string, reason: string | null) =>
    sql`UPDATE berth_anywhere SET reason = ${reason} WHERE project = ${project} AND slug = ${slug}`.pipe(Effect.asVoid)

  /** `machine` no longer runs the world (it stopped it); a row wanted removed goes with it. */
  const letGo = (project: string, slug: string, machine: string, why?: string) =>
    sql.withTransaction(
      Effect.gen(function* () {
        // `why`: the machine let go of a world still wanted up, which runs elsewhere next (a move to tell of)
        yield* why === undefined
          ? sql`UPDATE berth_anywhere SET owner = NULL, updated_at = now()
              WHERE project = ${project} AND slug = ${slug} AND owner = ${machine}`
          : sql`UPDATE berth_anywhere SET owner = NULL, updated_at = now(), moved_from = ${machine}, moved_at = now(),
                moved_why = ${why}
              WHERE project = ${project} AND slug = ${slug} AND owner = ${machine}`
        yield* forget(project, slug)
      })
    )

  /** The cluster's own id (made with its tables): what names it as the owner of the slices that move with worlds. */
  const clusterId = Effect.map(
    sql<{ value: string }>`SELECT value FROM berth_meta WHERE key = 'id'`,
    (rows) => rows[0]?.value ?? ""
  )

  /**
   * A slice of a world that runs anywhere, claimed for `machine`'s generation of the world: fenced in the same
   * statement by the world's row (still given to `machine`, at that generation), so a machine that lost the world
   * writes nothing. Answers the slice's state after the claim — `ready` when the same slice (name and server) was made
   * already, by whichever machine: the world's data, to be used as it is — or undefined when the claim was refused.
   * `moved` when a slice of that name was made under another server: one server can be written several ways (a
   * name or an address, a default port spelled out, other credentials), so it may be the world's data itself: the
   * claimer uses what it finds under the name as it is, and makes the slice only where there is none. The record
   * stays `moved` until the claimer says the slice is ready, so a crash meanwhile never makes it look half-made.
   */
  const claimSlice = (c: SliceClaim): Effect.Effect<"ready" | "moved" | "provisioning" | undefined, SqlError> =>
    Effect.map(
      sql<{ state: string }>`INSERT INTO berth_slices (project, slug, service, name, server, state, generation)
        SELECT a.project, a.slug, ${c.service}, ${c.name}, ${c.server}, 'provisioning', a.generation
          FROM berth_anywhere a
          WHERE a.project = ${c.project} AND a.slug = ${c.slug} AND a.owner = ${c.machine}
            AND a.generation = ${c.generation}
        ON CONFLICT (project, slug, service) DO UPDATE SET
          state = CASE
            WHEN berth_slices.name = excluded.name AND berth_slices.server = excluded.server THEN berth_slices.state
            WHEN berth_slices.name = excluded.name AND berth_slices.state IN ('ready', 'moved') THEN 'moved'
            ELSE 'provisioning' END,
          name = excluded.name, server = excluded.server, generation = excluded.generation, updated_at = now()
        RETURNING state`,
      (rows) => {
        const state = rows[0]?.state
        return state === undefined ? undefined : state === "ready" || state === "moved" ? state : "provisioning"
      }
    )

  /**
   * Says the claimed slice is ready (`to: "ready"`), or forgets it once dropped (`to: "dropped"`), fenced as the claim
   * is. False when `machine` no longer holds that generation of the world: it must not touch the slice.
   */
  const settleSlice = (c: Omit<SliceClaim, "name" | "server">, to: "ready" | "dropped") => {
    const fenced = sql`EXISTS (SELECT 1 FROM berth_anywhere a WHERE a.project = ${c.project} AND a.slug = ${c.slug}
      AND a.owner = ${c.machine} AND a.generation = ${c.generation})`
    const where = sql`project = ${c.project} AND slug = ${c.slug} AND service = ${c.service}
      AND generation = ${c.generation} AND ${fenced}`
    return Effect.map(
      to === "ready"
        ? sql<{
            n: number
          }>`UPDATE berth_slices SET state = 'ready', updated_at = now() WHERE ${where} RETURNING 1 AS n`
        : sql<{ n: number }>`DELETE FROM berth_slices WHERE ${where} RETURNING 1 AS n`,
      (rows) => rows.length > 0
    )
  }

  /**
   * Whether `machine` may drop its copy of a slice: while it holds the world at that generation, or when the record
   * names another slice (or none) for the world — never the one another machine runs the world on now, nor one of its
   * name under another server, which may be the same server written another way (see `claimSlice`).
   */
  const mayDropSlice = (c: SliceClaim) =>
    Effect.map(
      sql<{ ok: boolean }>`SELECT EXISTS (SELECT 1 FROM berth_anywhere WHERE project = ${c.project} AND slug = ${c.slug}
          AND owner = ${c.machine} AND generation = ${c.generation})
        OR NOT EXISTS (SELECT 1 FROM berth_slices WHERE project = ${c.project} AND slug = ${c.slug}
          AND service = ${c.service} AND name = ${c.name}) AS ok`,
      (rows) => rows[0]?.ok === true
    )

  /** Whether `machine` still holds that generation of the world (read right before a slice is dropped or overwritten). */
  const holds = (project: string, slug: string, machine: string, generation: number) =>
    Effect.map(
      sql<{ n: number }>`SELECT 1 AS n FROM berth_anywhere WHERE project = ${project} AND slug = ${slug}
        AND owner = ${machine} AND generation = ${generation}`,
      (rows) => rows.length > 0
    )

  /**
   * Takes this machine's row: its slot stays its own across restarts (the row is keyed by name and checked by the
   * machine's id), a new machine gets the lowest free slot. A name another live machine holds is refused.
   */
  const claim = (c: MachineClaim): Effect.Effect<number, SqlError | ClusterRefused> =>
    sql.withTransaction(
      Effect.gen(function* () {
        // one claim at a time, so two machines joining at once cannot take one slot
        yield* sql`LOCK TABLE berth_machines IN SHARE ROW EXCLUSIVE MODE`
        const rows = yield* sql<{
          name: string
          machine_id: string
          slot: number
          age_ms: number
        }>`SELECT name, machine_id, slot, (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms
           FROM berth_machines`
        const mine = rows.find((r) => r.name === c.name)
        if (mine !== undefined && mine.machine_id !== c.machineId && !c.replace) {
          return yield* new ClusterRefused({
            reason: `another machine is already in the cluster as ${c.name} (last heard from ${Math.round(mine.age_ms / 1000)} s ago)`,
            hint: "give this machine another name with --name, or — if that machine is gone for good — take its name over with --replace"
          })
        }
        const slot = mine?.slot ?? freeSlot(rows.map((r) => r.slot))
        if (slot === undefined) {
          return yield* new ClusterRefused({
            reason: `the cluster already has ${MAX_MACHINES} machines, as many as it can hold`,
            hint: "run `berth cluster leave` on a machine that no longer needs to be a member"
          })
        }
        if (mine !== undefined) {
          // a replaced machine's worlds were that machine's, not this one's
          if (mine.machine_id !== c.machineId) yield* sql`DELETE FROM berth_worlds WHERE machine = ${c.name}`
          yield* sql`UPDATE berth_machines SET machine_id = ${c.machineId}, address = ${c.address},
            runner_port = ${c.runnerPort}, proxy_port = ${c.proxyPort}, version = ${c.version}, heartbeat_at = now()
            WHERE name = ${c.name}`
        } else {
          yield* sql`INSERT INTO berth_machines (name, machine_id, slot, address, runner_port, proxy_port, version)
            VALUES (${c.name}, ${c.machineId}, ${slot}, ${c.address}, ${c.runnerPort}, ${c.proxyPort}, ${c.version})`
        }
        return slot
      })
    )

  /** This machine is alive; false when its row is gone (another machine took its name over, or it was removed). */
  const heartbeat = (name: string, machineId: string, proxyPort: number | null, room: Room) =>
    Effect.map(
      sql<{ name: string }>`UPDATE berth_machines SET heartbeat_at = now(), proxy_port = ${proxyPort},
        room = ${JSON.stringify(room)}::jsonb
        WHERE name = ${name} AND machine_id = ${machineId} RETURNING name`,
      (rows) => rows.length > 0
    )

  /** What this machine says of its room at once, between heartbeats (it starts to stop). */
  const setRoom = (name: string, room: Room) =>
    sql`UPDATE berth_machines SET room = ${JSON.stringify(room)}::jsonb WHERE name = ${name}`.pipe(Effect.asVoid)

  /** Replaces this machine's published worlds: `changed` upserted, every world not in `present` dropped. */
  const publish = (
    machine: string,
    changed: ReadonlyArray<WorldStatus>,
    present: ReadonlyArray<{ readonly project: string; readonly slug: string }>
  ) =>
    sql.withTransaction(
      Effect.gen(function* () {
        for (const status of changed) {
          yield* sql`INSERT INTO berth_worlds (machine, project, slug, status, updated_at)
            VALUES (${machine}, ${status.project}, ${status.slug}, ${JSON.stringify(status)}::jsonb, now())
            ON CONFLICT (machine, project, slug) DO UPDATE SET status = excluded.status, updated_at = now()`
        }
        const keep = present.map((w) => `${w.project}/${w.slug}`)
        yield* sql`DELETE FROM berth_worlds WHERE machine = ${machine}
          AND project || '/' || slug NOT IN (SELECT jsonb_array_elements_text(${JSON.stringify(keep)}::jsonb))`
      })
    )

  const machines: Effect.Effect<ReadonlyArray<Machine>, SqlError> = Effect.map(
    sql<{
      name: string
      machine_id: string
      slot: number
      address: string
      runner_port: number
      proxy_port: number | null
      version: string
      age_ms: number
      joined_ms: number
      room: unknown
    }>`SELECT name, machine_id, slot, address, runner_port, proxy_port, version, room,
         (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms,
         (extract(epoch FROM joined_at) * 1000)::float8 AS joined_ms
       FROM berth_machines ORDER BY slot`,
    (rows) =>
      rows.map((r) => ({
        name: r.name,
        machineId: r.machine_id,
        slot: r.slot,
        address: r.address,
        runnerPort: r.runner_port,
        proxyPort: r.proxy_port,
        version: r.version,
        heartbeatAgeMs: Math.max(0, Math.round(r.age_ms)),
        joinedAt: Math.round(r.joined_ms),
        room: parseRoom(typeof r.room === "string" ? parsed(r.room) : r.room)
      }))
  )

  /** Every published world of every machine but `except`'s. Rows a newer berth wrote in a shape this one cannot read are skipped. */
  const worlds = (except: string): Effect.Effect<ReadonlyArray<SharedWorld>, SqlError> =>
    Effect.map(
      sql<{ machine: string; status: unknown }>`SELECT machine, status FROM berth_worlds
        WHERE machine <> ${except} ORDER BY machine, project, slug`,
      (rows) =>
        rows.flatMap((r) =>
          Option.match(decodeStatus(parsed(r.status)), {
            onNone: () => [],
            onSome: (status) => [{ machine: r.machine, status }]
          })
        )
    )

  /** This machine leaves: its row and its worlds' rows go. */
  const remove = (name: string, machineId: string) =>
    sql`DELETE FROM berth_machines WHERE name = ${name} AND machine_id = ${machineId}`.pipe(Effect.asVoid)

  return {
    schemaVersion,
    migrate,
    createAnywhere: Effect.asVoid(createAnywhere),
    claim,
    heartbeat,
    publish,
    machines,
    worlds,
    remove,
    anywhere,
    want,
    setDesired,
    reassign,
    toldMove,
    forget,
    sliceOrphans,
    clearOrphan,
    setRoom,
    letGo,
    note,
    clusterId,
    claimSlice,
    settleSlice,
    mayDropSlice,
    holds
  } as const
})

export type Store = Effect.Effect.Success<typeof makeStore>
