/**
 * The `postgres` adapter: each world gets its own database on one shared PostgreSQL server, reached through the
 * service's `admin_url` (a role allowed to create databases). Ownership is marked on the server itself with the
 * comment `berth:<owner>:<name>` on the database (owner: the berth installation), so a database berth did not create
 * — or another installation created — is never listed, dropped or reused.
 *
 * `CREATE DATABASE` cannot share a transaction with its comment, so a database is never created under the slice's
 * name: it is built (created, or copied from a template) under a pending name `berth_new_<owner>_<hash of the
 * name>_<nonce>`, marked there, and renamed into place. A crash mid-way leaves a database that its name alone shows
 * to be this installation's and unfinished: `list` returns it (so gc drops it), teardown of the slice drops it, and
 * it never stands in the way of the slice itself. The nonce keeps two attempts (through admin URLs naming different
 * databases, which berth's advisory locks do not serialise) from ever meeting on one pending name.
 *
 * Every verb takes one connection on the admin URL for its length: a new one, or one a verb that succeeded in the
 * last few seconds left behind once its session's advisory locks were released. A connection is never shared by two
 * verbs at once, and one whose verb failed is closed.
 */
import { createHash, randomBytes } from "node:crypto"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Scope from "effect/Scope"
import pg from "pg"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { pauses, provisionOwned, type Standing, teardownOwned } from "../ownership.js"
import { decodeComponent, errorCode, NETWORK_CODES, parseAdminUrl, secretsOf, sliceChecks } from "../shared.js"
import { SOURCE_DATABASE } from "../../src/domain/adapters.js"

const ADAPTER = "postgres"
/** PostgreSQL truncates longer identifiers silently, which would make two slices collide. */
const MAX_NAME = 63
const CONNECT_TIMEOUT_MS = 5_000
/** Pauses before each retry of a clone whose template is in use, after terminating its sessions. */
const CLONE_RETRY = pauses(100, 250, 500, 1_000, 2_000)
/** as many as CLONE_RETRY has pauses: for the message */
const CLONE_RETRIES = 5

/** SQLSTATEs this adapter reacts to. */
const DUPLICATE_DATABASE = "42P04"
/** what a RENAME racing a CREATE DATABASE of the same name may get instead of 42P04 (the catalog's index) */
const UNIQUE_VIOLATION = "23505"
const OBJECT_IN_USE = "55006"
const INSUFFICIENT_PRIVILEGE = "42501"
const AUTHENTICATION_CODES: ReadonlySet<string> = new Set(["28P01", "28000"])

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** A driver or server error, kept raw until the verb decides what it means (some SQLSTATEs are expected). */
class PgFailure extends Data.TaggedError("PgFailure")<{
  readonly phase: "connect" | "query"
  readonly cause: unknown
}> {}

/** Where the admin URL points, with what must never be printed. */
interface Server {
  readonly url: string
  /** `host:port`, for messages */
  readonly location: string
  /** the admin URL's own database, named by `list` errors */
  readonly database: string
  /** the raw and decoded password, scrubbed from every message */
  readonly secrets: ReadonlyArray<string>
}

const { checkName, checkSlice } = sliceChecks(ADAPTER, "database", MAX_NAME)

/** Parses `admin_url` without ever echoing it: it may carry a password. */
const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["postgres:", "postgresql:"],
      kind: "a postgres:// URL",
      // a user before an empty host (`postgres://u@/db?host=…`) is no URL; the socket goes in the query instead
      example: "postgres://user:password@host:port/db, or postgres:///db?host=/run/postgresql&user=name for a socket",
      variable: "POSTGRES_ADMIN_URL"
    }),
    (url) => {
      const host = url.hostname || url.searchParams.get("host") || "localhost"
      const database = decodeComponent(url.pathname.replace(/^\//, "")) || decodeComponent(url.username) || "postgres"
      return { url: url.href, location: `${host}:${url.port || "5432"}`, database, secrets: secretsOf(url) }
    }
  )

const textOf = (cause: unknown): string => {
  if (cause instanceof Error) {
    // a multi-address connect failure is an AggregateError with an empty message and only a code
    const code = errorCode(cause)
    return cause.message || code || cause.name
  }
  return String(cause)
}

/** pg's error for a server that closed the connection mid-query carries no code, only this message. */
const isConnectionLost = (cause: unknown): boolean =>
  cause instanceof Error && /^Connection terminated( unexpectedly)?$/.test(cause.message)

const sqlState = (failure: PgFailure): string | undefined =>
  failure.cause instanceof pg.DatabaseError ? failure.cause.code : undefined

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** Turns a driver or server error into the adapter's vocabulary, naming the database and server but no password. */
const classify = (server: Server, action: string, database: string, failure: PgFailure): AdapterError => {
  const state = sqlState(failure)
  const code = errorCode(failure.cause)
  const detail = scrub(server, `${textOf(failure.cause)}${state === undefined ? "" : ` (SQLSTATE ${state})`}`)
  const what = `${action} database "${database}" on ${server.location}`
  if (
    state === undefined &&
    (failure.phase === "connect" || (code !== undefined && NETWORK_CODES.has(code)) || isConnectionLost(failure.cause))
  ) {
    return fail(
      "unreachable",
      `cannot reach PostgreSQL at ${server.location} to ${action} database "${database}": ${detail}`
    )
  }
  if (state !== undefined && AUTHENTICATION_CODES.has(state)) {
    return fail("authentication", `PostgreSQL refused the admin_url credentials; could not ${what}: ${detail}`)
  }
  if (state === INSUFFICIENT_PRIVILEGE) {
    return fail("grant", `the admin_url role lacks a privilege (it needs CREATEDB); could not ${what}: ${detail}`)
  }
  return fail("failed", `could not ${what}: ${detail}`)
}

/**
 * Admin connections left idle by a verb that succeeded, by admin URL, kept for a few seconds: PostgreSQL takes 10–20
 * ms to start a session, most of what renaming a spare into a new world costs, and worlds tend to come in bursts.
 * A connection goes back only once its session's advisory locks are released; one whose verb failed or was
 * interrupted, or that the server closed, is ended instead.
 */
const idle = new Map<string, Array<{ readonly client: pg.Client; readonly timer: NodeJS.Timeout }>>()
const IDLE_MS = 10_000
const MAX_IDLE = 4
/** connections the server closed or that failed: never lent again */
const broken = new WeakSet<pg.Client>()

const end = (client: pg.Client) => void client.end().catch(() => undefined)

const take = (url: string): pg.Client | undefined => {
  const list = idle.get(url)
  while (list !== undefined && list.length > 0) {
    const entry = list.pop()
    if (entry === undefined) break
    clearTimeout(entry.timer)
    if (!broken.has(entry.client)) return entry.client
    end(entry.client)
  }
  return undefined
}

const putBack = (url: string, client: pg.Client) => {
  const list = idle.get(url) ?? []
  if (broken.has(client) || list.length >= MAX_IDLE) return end(client)
  const timer = setTimeout(() => {
    const now = idle.get(url)
    const at = now?.findIndex((e) => e.client === client) ?? -1
    if (now !== undefined && at >= 0) now.splice(at, 1)
    end(client)
  }, IDLE_MS)
  // an idle connection never keeps a process alive
  timer.unref()
  list.push({ client, timer })
  idle.set(url, list)
}

const open = async (server: Server): Promise<pg.Client> => {
  const client = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS })
  // a connection dropped while idle is reported as an event; unhandled, it would crash the daemon
  client.on("error", () => broken.add(client))
  client.on("end", () => broken.add(client))
  try {
    await client.connect()
  } catch (cause) {
    await client.end().catch(() => undefined)
    throw cause
  }
  return client
}

/** One connection on the admin URL for the length of the scope (a recent one when there is); ended on failure. */
const connect = (server: Server): Effect.Effect<pg.Client, PgFailure, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => take(server.url) ?? (await open(server)),
      catch: (cause) => new PgFailure({ phase: "connect", cause })
    }),
    // not waited for: the session's advisory locks go with the unlock (or with the session, ~15-20 ms here), and a
    // verb that next needs one of them waits for it on the server as it would for anyone's
    (client, exit) =>
      Effect.sync(() => {
        // a session idling in template1 would stop every CREATE DATABASE that copies it (the empty slice's)
        if (Exit.isFailure(exit) || server.database === "template1") return end(client)
        client.query("SELECT pg_advisory_unlock_all()").then(
          () => putBack(server.url, client),
          () => end(client)
        )
      })
  )

const query = (
  client: pg.Client,
  sql: string,
  params: ReadonlyArray<string | ReadonlyArray<string>> = []
): Effect.Effect<ReadonlyArray<Record<string, unknown>>, PgFailure> =>
  Effect.tryPromise({
    try: () => client.query<Record<string, unknown>>(sql, [...params]).then((result) => result.rows),
    catch: (cause) => new PgFailure({ phase: "query", cause })
  })

/**
 * Runs a verb on one admin connection; raw driver failures become AdapterErrors naming `database`. The body may
 * catch `PgFailure`s it expects (a duplicate database, a template in use) before they get here.
 */
const withServer = <A>(
  adminUrl: string | undefined,
  action: string,
  database: string,
  body: (client: pg.Client, server: Server) => Effect.Effect<A, PgFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    Effect.scoped(Effect.flatMap(connect(server), (client) => body(client, server))).pipe(
      Effect.catchTag("PgFailure", (failure) => Effect.fail(classify(server, action, database, failure)))
    )
  )

/** Identifiers cannot be parameters in DDL: the name is validated by `checkName` and still always double-quoted. */
const ident = (name: string): string => `"${name}"`
/** owners and names are both `[a-z0-9_]`: the mark needs no quoting beyond the literal's own */
const markOf = (owner: string, name: string): string => `berth:${owner}:${name}`

const PENDING = "berth_new_"
const hex = (text: string, length: number): string => createHash("sha256").update(text).digest("hex").slice(0, length)
/** the owner as pending names carry it: shortened when long, so that a pending name always fits in MAX_NAME */
const ownerTag = (owner: string): string => (owner.length <= 20 ? owner : `h${hex(owner, 19)}`)
/** slice names are up to MAX_NAME long: a pending name carries a hash of one instead */
const nameHash = (name: string): string => hex(name, 12)
const pendingPrefix = (owner: string, name: string): string => `${PENDING}${ownerTag(owner)}_${nameHash(name)}_`
/** A new pending name for `name`, fresh for each attempt. */
const pendingName = (owner: string, name: string): string =>
  `${pendingPrefix(owner, name)}${randomBytes(4).toString("hex")}`
/** `owner` is `[a-z0-9_]`: nothing in it needs escaping; the exact shape keeps owner "a" from matching "a_b"'s names */
const pendingPattern = (owner: string): RegExp =>
  new RegExp(`^${PENDING}${ownerTag(owner)}_([0-9a-f]{12})_[0-9a-f]{8}$`)
const isPending = (owner: string, name: string): boolean => pendingPattern(owner).test(name)

/** A slice's own name never takes the shape of a pending one, which teardown and gc would take as unfinished. */
const checkTarget = (slice: Pick<Slice, "name" | "owner">): Effect.Effect<string, AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    isPending(slice.owner, name)
      ? Effect.fail(fail("invalid", `refusing database name "${name}": berth builds slices under names of that form`))
      : Effect.succeed(name)
  )

type Ownership = "missing" | "ours" | "foreign"

/** Whose database `name` is, from its row in pg_database (none: missing). */
const ownershipOf = (owner: string, name: string, row: Record<string, unknown> | undefined): Ownership => {
  if (row === undefined) return "missing"
  // a pending name is this installation's by its shape, marked or not (a crash before the mark)
  if (isPending(owner, name)) return "ours"
  // the owner part decides: a spare renamed into a world is ours even if a crash came before its re-marking
  return typeof row.mark === "string" && row.mark.startsWith(`berth:${owner}:`) ? "ours" : "foreign"
}

const ownership = (client: pg.Client, owner: string, name: string): Effect.Effect<Ownership, PgFailure> =>
  Effect.map(
    query(client, "SELECT shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE datname = $1", [name]),
    (rows) => ownershipOf(owner, name, rows[0])
  )

/** The ownership of several databases in one round trip. */
const ownerships = (
  client: pg.Client,
  of: ReadonlyArray<{ readonly owner: string; readonly name: string }>
): Effect.Effect<ReadonlyArray<Ownership>, PgFailure> =>
  Effect.map(
    query(
      client,
      "SELECT datname, shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE datname = ANY($1)",
      [of.map((o) => o.name)]
    ),
    (rows) =>
      of.map((o) =>
        ownershipOf(
          o.owner,
          o.name,
          rows.find((row) => row.datname === o.name)
        )
      )
  )

/** This installation's pending databases of slice `name`: attempts that a crash (or a failed drop) left behind. */
const pendingOf = (client: pg.Client, owner: string, name: string): Effect.Effect<ReadonlyArray<string>, PgFailure> =>
  Effect.map(
    query(client, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", [pendingPrefix(owner, name)]),
    (rows) => rows.map((row) => String(row.datname)).filter((datname) => isPending(owner, datname))
  )

/**
 * Serialises berth's own verbs on one slice (session lock, released when the connection ends): a pending name takes
 * the lock of the slice it is for, so gc never drops one that a provision is building. Advisory locks are per
 * database, so callers whose admin URLs name different databases still rely on the duplicate-database path.
 */
const lockNames = (client: pg.Client, owner: string, names: ReadonlyArray<string>): Effect.Effect<void, PgFailure> =>
  Effect.forEach(
    [...new Set(names.map((name) => pendingPattern(owner).exec(name)?.[1] ?? nameHash(name)))].sort(),
    (key) => query(client, "SELECT pg_advisory_lock(hashtext('berth'), hashtext($1))", [key]),
    { discard: true }
  )

const markSql = (owner: string, name: string, database = name): string =>
  `COMMENT ON DATABASE ${ident(database)} IS '${markOf(owner, name)}'`

const mark = (client: pg.Client, owner: string, name: string, database = name): Effect.Effect<void, PgFailure> =>
  Effect.asVoid(query(client, markSql(owner, name, database)))

/**
 * Builds slice `name` under a pending name (`create` makes the database there), marks it, runs `clear` (which may
 * drop an older `name`), and renames it into place. False when `name` exists by then (someone outside berth's lock
 * made it): the pending database is dropped. Any failure drops it too, best effort; what a crash leaves, gc drops.
 */
const build = (
  client: pg.Client,
  owner: string,
  name: string,
  create: (database: string) => Effect.Effect<void, PgFailure | AdapterError>,
  clear: Effect.Effect<void, PgFailure> = Effect.void
): Effect.Effect<boolean, PgFailure | AdapterError> => {
  const pending = pendingName(owner, name)
  return Effect.gen(function* () {
    yield* create(pending)
    yield* mark(client, owner, name, pending)
    yield* clear
    const placed = yield* query(client, `ALTER DATABASE ${ident(pending)} RENAME TO ${ident(name)}`).pipe(
      Effect.as(true),
      Effect.catchIf(
        (failure) => sqlState(failure) === DUPLICATE_DATABASE || sqlState(failure) === UNIQUE_VIOLATION,
        () => Effect.succeed(false)
      )
    )
    if (!placed) yield* drop(client, pending)
    return placed
  }).pipe(Effect.onError(() => Effect.ignore(drop(client, pending))))
}

const serverVersion = (client: pg.Client): Effect.Effect<number, PgFailure> =>
  Effect.map(query(client, "SELECT current_setting('server_version_num') AS version"), (rows) =>
    Number(rows[0]?.version ?? 0)
  )

/** Drops an owned database; WITH (FORCE) (PostgreSQL 13+) ends its sessions first. */
const drop = (client: pg.Client, name: string): Effect.Effect<void, PgFailure> =>
  Effect.gen(function* () {
    if ((yield* serverVersion(client)) >= 130_000) {
      yield* query(client, `DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`)
      return
    }
    yield* terminateSessions(client, name)
    yield* query(client, `DROP DATABASE IF EXISTS ${ident(name)}`)
  })

const terminateSessions = (client: pg.Client, name: string): Effect.Effect<void, PgFailure> =>
  Effect.asVoid(
    query(
      client,
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
      [name]
    )
  )

const provision = (slice: Slice): Effect.Effect<boolean, AdapterError> =>
  Effect.flatMap(checkTarget(slice), (name) =>
    withServer(slice.adminUrl, "provision", name, (client, server) =>
      provisionOwned({
        lock: lockNames(client, slice.owner, [name]),
        look: ownership(client, slice.owner, name),
        standing: (state): Standing => state,
        clear: Effect.void,
        create: build(client, slice.owner, name, (pending) =>
          Effect.asVoid(query(client, `CREATE DATABASE ${ident(pending)}`))
        ),
        taken: () =>
          fail(
            "taken",
            `database "${name}" already exists on ${server.location} and is not a berth slice; drop it or pick another name`
          ),
        // someone else made it between our look and our rename, then dropped it again
        vanished: () =>
          fail("failed", `database "${name}" on ${server.location} appeared and vanished during provision; retry`)
      })
    )
  )

const resolveUrl = (slice: Slice): Effect.Effect<string, AdapterError> =>
  Effect.gen(function* () {
    const name = yield* checkName(slice.name)
    const server = yield* serverOf(slice.adminUrl)
    const url = new URL(server.url)
    url.pathname = `/${name}`
    return url.href
  })

const teardown = (slice: Slice): Effect.Effect<void, AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, "tear down", name, (client, server) =>
      teardownOwned({
        lock: Effect.zipRight(
          lockNames(client, slice.owner, [name]),
          // what a crash left of this slice's builds goes too; a pending name (from gc) is a build itself
          isPending(slice.owner, name)
            ? Effect.void
            : Effect.flatMap(pendingOf(client, slice.owner, name), (pending) =>
                Effect.forEach(pending, (database) => drop(client, database), { discard: true })
              )
        ),
        look: ownership(client, slice.owner, name),
        standing: (state): Standing => state,
        drop: drop(client, name),
        notOwned: () =>
          fail("not-owned", `database "${name}" on ${server.location} is not a berth slice; leaving it alone`)
      })
    )
  )

/**
 * `CREATE DATABASE … TEMPLATE` refuses while anyone is connected to the template (after waiting ~5 s itself): end
 * those sessions and try again, a few times, since an app with a pool may reconnect straight away.
 */
const copyFrom = (
  client: pg.Client,
  server: Server,
  source: string,
  target: string,
  into: string
): Effect.Effect<void, PgFailure | AdapterError> =>
  Effect.gen(function* () {
    // FILE_COPY (15+) copies files instead of WAL-logging every block: much faster for large templates
    const strategy = (yield* serverVersion(client)) >= 150_000 ? " STRATEGY FILE_COPY" : ""
    const create = query(client, `CREATE DATABASE ${ident(into)} TEMPLATE ${ident(source)}${strategy}`)
    const inUse = (failure: PgFailure) => sqlState(failure) === OBJECT_IN_USE
    let attempts = 0
    // each retry ends the template's sessions right before it, after the pause, so that a pool that reconnects at
    // once has the least time to come back
    const attempt = Effect.suspend(() =>
      attempts++ === 0 ? create : Effect.zipRight(terminateSessions(client, source), create)
    )
    yield* attempt.pipe(
      Effect.retry({ schedule: CLONE_RETRY, while: inUse }),
      Effect.catchIf(inUse, () =>
        Effect.fail(
          fail(
            "failed",
            `cannot clone database "${source}" into "${target}" on ${server.location}: "${source}" is still in use by other sessions after ${CLONE_RETRIES} attempts to end them; stop whatever keeps reconnecting to it and retry`
          )
        )
      )
    )
  })

/** Whose database the slice's name is now (see `Adapter.standing`): one look, on the admin connection. */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, "look at", name, (client) => ownership(client, slice.owner, name))
  )

const clone = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  Effect.gen(function* () {
    const source = yield* checkSlice(from)
    const target = yield* checkTarget(to)
    if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone database "${source}" onto itself`))
    yield* withServer(to.adminUrl ?? from.adminUrl, "clone into", target, (client, server) =>
      Effect.gen(function* () {
        yield* lockNames(client, to.owner, [source, target])
        const sourceState = yield* ownership(client, from.owner, source)
        if (sourceState === "missing") {
          return yield* Effect.fail(
            fail(
              "failed",
              `cannot clone: database "${source}" does not exist on ${server.location} (provision it first)`
            )
          )
        }
        if (sourceState === "foreign") {
          return yield* Effect.fail(
            fail("not-owned", `cannot clone: database "${source}" on ${server.location} is not a berth slice`)
          )
        }
        const targetState = yield* ownership(client, to.owner, target)
        if (targetState === "foreign") {
          return yield* Effect.fail(
            fail(
              "not-owned",
              `cannot clone: database "${target}" on ${server.location} exists and is not a berth slice; leaving it alone`
            )
          )
        }
        // the target was provisioned empty (or holds an older copy): it is replaced once the copy is ready
        // (comments are not copied with a template: the copy gets its own mark before it takes the name)
        const placed = yield* build(
          client,
          to.owner,
          target,
          (pending) => copyFrom(client, server, source, target, pending),
          targetState === "ours" ? drop(client, target) : Effect.void
        )
        if (placed || (yield* ownership(client, to.owner, target)) === "ours") return
        return yield* Effect.fail(
          fail(
            "not-owned",
            `cannot clone: database "${target}" on ${server.location} was created by someone else meanwhile; leaving it alone`
          )
        )
      })
    )
  })

/** `clone_from`'s name of a database already on the server: checked before it is ever written into SQL. */
const checkSource = (source: string): Effect.Effect<string, AdapterError> =>
  SOURCE_DATABASE.test(source)
    ? Effect.succeed(source)
    : Effect.fail(
        fail(
          "invalid",
          `refusing clone_from ${JSON.stringify(source)}: a database name must match ${SOURCE_DATABASE.source}`
        )
      )

/**
 * `to` becomes a copy of the user's own database `source` (`clone_from = "<name>"`). Its sessions are never ended:
 * the copy needs none on it, and a source in use is an error that says what to do.
 */
const copyExisting = (source: string, to: Slice): Effect.Effect<void, AdapterError> =>
  Effect.gen(function* () {
    const name = yield* checkSource(source)
    const target = yield* checkTarget(to)
    if (name === target) return yield* Effect.fail(fail("invalid", `cannot copy database "${name}" onto itself`))
    yield* withServer(to.adminUrl, "copy into", target, (client, server) =>
      Effect.gen(function* () {
        yield* lockNames(client, to.owner, [target])
        const found = yield* query(client, "SELECT 1 FROM pg_database WHERE datname = $1", [name])
        if (found.length === 0) {
          return yield* Effect.fail(
            fail("invalid", `cannot copy: there is no database "${name}" on ${server.location} (clone_from)`)
          )
        }
        const targetState = yield* ownership(client, to.owner, target)
        if (targetState === "foreign") {
          return yield* Effect.fail(
            fail("not-owned", `cannot copy into database "${target}" on ${server.location}: it is not a berth slice`)
          )
        }
        const strategy = (yield* serverVersion(client)) >= 150_000 ? " STRATEGY FILE_COPY" : ""
        const placed = yield* build(
          client,
          to.owner,
          target,
          (pending) =>
            query(client, `CREATE DATABASE ${ident(pending)} TEMPLATE ${ident(name)}${strategy}`).pipe(
              Effect.asVoid,
              Effect.catchIf(
                (failure) => sqlState(failure) === OBJECT_IN_USE,
                () =>
                  Effect.fail(
                    fail(
                      "failed",
                      `cannot copy database "${name}" on ${server.location}: other sessions are connected to it, and PostgreSQL copies a database only while none is; close them (stop what uses it) and run up again`
                    )
                  )
              )
            ),
          targetState === "ours" ? drop(client, target) : Effect.void
        )
        if (placed || (yield* ownership(client, to.owner, target)) === "ours") return
        return yield* Effect.fail(
          fail(
            "not-owned",
            `cannot copy into database "${target}" on ${server.location}: made by someone else meanwhile`
          )
        )
      })
    )
  })

/** A spare copy becomes a world's database: a rename on the server, instant whatever its size. */
const rename = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  Effect.gen(function* () {
    const source = yield* checkSlice(from)
    const target = yield* checkTarget(to)
    yield* withServer(to.adminUrl ?? from.adminUrl, "rename into", target, (client, server) =>
      Effect.gen(function* () {
        yield* lockNames(client, to.owner, [source, target])
        // a new world waits on this rename: both looks in one round trip, the rename and the new mark in another
        const [sourceState, targetState] = yield* ownerships(client, [
          { owner: from.owner, name: source },
          { owner: to.owner, name: target }
        ])
        if (sourceState !== "ours") {
          return yield* Effect.fail(
            fail("failed", `cannot rename: database "${source}" on ${server.location} is not this berth's slice`)
          )
        }
        if (targetState !== "missing") {
          return yield* Effect.fail(fail("taken", `cannot rename into "${target}" on ${server.location}: it exists`))
        }
        // nobody should be connected to a spare; if someone is, RENAME fails and the caller copies instead. Two
        // statements of one query are one transaction: the database is never seen renamed without its new mark
        yield* query(client, `ALTER DATABASE ${ident(source)} RENAME TO ${ident(target)}; ${markSql(to.owner, target)}`)
      })
    )
  })

const list = (scope: ListScope): Effect.Effect<ReadonlyArray<string>, AdapterError> =>
  Effect.flatMap(serverOf(scope.adminUrl), (server) =>
    withServer(scope.adminUrl, "list slices from", server.database, (client) =>
      Effect.map(
        query(
          client,
          "SELECT datname, shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE starts_with(shobj_description(oid, 'pg_database'), 'berth:' || $1 || ':') OR starts_with(datname, $2) ORDER BY datname",
          [scope.owner, `${PENDING}${ownerTag(scope.owner)}_`]
        ),
        // pending databases too, marked or not: what a crash left half-made is gc's to drop
        (rows) =>
          rows
            .filter(
              (row) =>
                (typeof row.mark === "string" && row.mark.startsWith(`berth:${scope.owner}:`)) ||
                isPending(scope.owner, String(row.datname))
            )
            .map((row) => String(row.datname))
      )
    )
  )

/**
 * What provision and clone do before their ownership mark, alone: the state a daemon killed right there leaves
 * behind. For tests of crash recovery.
 */
export const beforeMark = {
  provision: (slice: Slice): Effect.Effect<void, AdapterError> =>
    Effect.flatMap(checkTarget(slice), (name) =>
      withServer(slice.adminUrl, "provision", name, (client) =>
        Effect.asVoid(query(client, `CREATE DATABASE ${ident(pendingName(slice.owner, name))}`))
      )
    ),
  clone: (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
    Effect.gen(function* () {
      const source = yield* checkSlice(from)
      const target = yield* checkTarget(to)
      yield* withServer(to.adminUrl, "clone into", target, (client, server) =>
        copyFrom(client, server, source, target, pendingName(to.owner, target))
      )
    }),
  /** the pending name of slice `name` with this nonce: another installation's, say, to show it is left alone */
  pendingName: (owner: string, name: string, nonce: string): string => `${pendingPrefix(owner, name)}${nonce}`
} as const

export const postgresAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  copyExisting,
  rename,
  list,
  standing
}
