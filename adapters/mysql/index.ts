/**
 * The `mysql` adapter (also serving `mariadb` and `percona`): each world gets its own database on one shared
 * MySQL-compatible server, reached through the service's `admin_url` (an account allowed to create and drop
 * databases). Every verb opens one short-lived connection (with a connect timeout) and always closes it.
 *
 * Ownership is marked on the server in a database of berth's own, `berth_meta`, whose table `slices` holds one row
 * (name primary key, owner, created_at) per database berth created; the owner names the berth installation. A
 * database is a slice of this installation exactly when it exists and its row names this owner; anything else (no
 * row, or another installation's) is never reused (`taken`), dropped (`not-owned`) or listed. Why not mark the slice
 * itself: MySQL has no database comments, and a marker table inside the slice would dirty a schema that an app's
 * migration tool may insist be empty.
 *
 * DDL cannot share a transaction with the mark, and MySQL cannot rename a database, so the intent is recorded first:
 * a row in `berth_meta.pending` (name, owner), then CREATE DATABASE, then the mark in `slices` (and the intent row
 * goes). A crash in between leaves an existing database with this installation's intent and no mark: "unfinished",
 * which `list` returns (so gc drops it), teardown drops and provision or clone replaces. It counts only while the
 * database is empty (no tables, views, routines or events; CREATE DATABASE makes nothing else), so one that someone
 * has filled since is left alone like any unmarked database. Teardown drops, then erases the marks: a crash there
 * leaves a mark or intent without a database, which the next provision or teardown clears (and `list` ignores).
 *
 * berth's verbs on one name are serialised server-wide by a named lock (`GET_LOCK`, released when the connection
 * ends), so two daemons or projects never both claim a name; should anyone else create it meanwhile, CREATE DATABASE
 * failing with "database exists" decides. (On a Galera cluster such as Percona XtraDB Cluster named locks are
 * per node, and that CREATE is what still decides.)
 *
 * `clone` copies server-side, statement by statement, into a target that always starts empty: an existing owned
 * target is dropped and created again (with the source's character set and collation). With foreign-key checks off it
 * creates every table (`CREATE TABLE … LIKE`, which copies columns, indexes and checks but not foreign keys, added
 * next from information_schema, pointing at the copy), copies rows (`INSERT … SELECT` of the non-generated columns;
 * each table in its own statement, so a source written to meanwhile may be copied inconsistently across tables), then
 * creates views (in dependency order: retried until no progress), routines and triggers from `SHOW CREATE …`, executed
 * in the target with their DEFINER removed (so the admin account becomes their definer: setting another one needs
 * SUPER or SET_USER_ID) and the source schema's name replaced by the target's. Triggers come last, so copying rows
 * fires none. Not copied: scheduled events (a copy per world would run them once per world), MariaDB packages (the
 * clone fails, naming them), the history rows of system-versioned tables, and AUTO_INCREMENT counters above the
 * largest copied key. A clone that fails half way leaves the target empty again.
 */
import { createHash } from "node:crypto"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { type Connection, createConnection, type RowDataPacket } from "mysql2"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { ownerStanding, pauses, provisionOwned, type Standing, teardownOwned } from "../ownership.js"
import { SOURCE_DATABASE } from "../../src/domain/adapters.js"
import { describeCause, errorCode, NETWORK_CODES, parseAdminUrl, secretsOf, sliceChecks } from "../shared.js"

const ADAPTER = "mysql"
/** MySQL's limit for a database name. */
const MAX_NAME = 64
/** owners (a hash of BERTH_HOME; at most 64 characters, see `sliceChecks`) are stored in a column this wide */
const MAX_OWNER = 64
const META_DB = "berth_meta"
const META_TABLE = "slices"
/** one row per database berth is about to create, written before CREATE DATABASE */
const INTENT_TABLE = "pending"
/** names a slice may never take: berth's own database and the server's */
const RESERVED: ReadonlySet<string> = new Set([META_DB, "mysql", "sys", "information_schema", "performance_schema"])
const CONNECT_TIMEOUT_MS = 5_000
/** how long `end` may take before the socket is simply destroyed (finalizers cannot be interrupted) */
const CLOSE_TIMEOUT_MS = 1_000
/** seconds a verb waits for another berth verb on the same name */
const NAME_LOCK_TIMEOUT_S = 60
/** seconds a DDL statement waits for metadata locks held by others (the server's default is a year) */
const LOCK_WAIT_TIMEOUT_S = 60
/** Pauses while waiting for a concurrent creator to write its ownership mark. */
const MARK_WAIT = pauses(50, 100, 200, 400, 800)
/**
 * The session's SQL mode while copying: no ANSI_QUOTES (the SHOW CREATE output parsed here is backtick-quoted), not
 * strict (rows already stored are copied as they are) and NO_AUTO_VALUE_ON_ZERO (a stored 0 key stays 0).
 */
const COPY_SQL_MODE = "NO_AUTO_VALUE_ON_ZERO"

/** Server error numbers this adapter reacts to. */
const ER_DB_CREATE_EXISTS = 1007
const AUTHENTICATION_ERRNOS: ReadonlySet<number> = new Set([
  1045, // ER_ACCESS_DENIED_ERROR
  1130, // ER_HOST_NOT_PRIVILEGED
  1251, // ER_NOT_SUPPORTED_AUTH_MODE
  1698, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR (e.g. unix_socket accounts)
  1820, // ER_MUST_CHANGE_PASSWORD
  1862, // ER_MUST_CHANGE_PASSWORD_LOGIN
  3118, // ER_ACCOUNT_HAS_BEEN_LOCKED (MySQL)
  4151 // ER_ACCOUNT_HAS_BEEN_LOCKED (MariaDB)
])
const GRANT_ERRNOS: ReadonlySet<number> = new Set([
  1044, // ER_DBACCESS_DENIED_ERROR
  1142, // ER_TABLEACCESS_DENIED_ERROR
  1143, // ER_COLUMNACCESS_DENIED_ERROR
  1227, // ER_SPECIFIC_ACCESS_DENIED_ERROR
  1370, // ER_PROCACCESS_DENIED_ERROR
  1419 // ER_BINLOG_CREATE_ROUTINE_NEED_SUPER (binary logging on, log_bin_trust_function_creators off)
])
/** driver codes (besides the shared network ones) for a connection lost or never made */
const LOST_CODES: ReadonlySet<string> = new Set(["PROTOCOL_CONNECTION_LOST", "PROTOCOL_SEQUENCE_TIMEOUT"])

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** A driver or server error, kept raw until the verb decides what it means (some error numbers are expected). */
class MysqlFailure extends Data.TaggedError("MysqlFailure")<{
  readonly phase: "connect" | "query"
  readonly cause: unknown
}> {}

/** Where the admin URL points, with what must never be printed. */
interface Server {
  /** the admin URL as given, for `resolve` */
  readonly url: URL
  /** the admin URL without its database: every statement here names its schema */
  readonly connectUrl: string
  /** `host:port`, for messages */
  readonly location: string
  /** the raw and decoded password, scrubbed from every message */
  readonly secrets: ReadonlyArray<string>
}

type Row = Readonly<Record<string, unknown>>

const names = sliceChecks(ADAPTER, "database", MAX_NAME)
const { checkOwner } = names

const checkName = (name: string): Effect.Effect<string, AdapterError> =>
  Effect.flatMap(names.checkName(name), (safe) =>
    RESERVED.has(safe)
      ? Effect.fail(fail("invalid", `refusing database name "${safe}": it is reserved for berth or the server`))
      : Effect.succeed(safe)
  )

const checkSlice = (slice: Pick<Slice, "name" | "owner">): Effect.Effect<string, AdapterError> =>
  Effect.zipRight(checkOwner(slice.owner), checkName(slice.name))

/** Parses `admin_url` without ever echoing it: it may carry a password. */
const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["mysql:", "mariadb:"],
      kind: "a mysql:// or mariadb:// URL",
      example: "mysql://user:password@host:port/",
      variable: "MYSQL_ADMIN_URL"
    }),
    (url) => {
      const connect = new URL(url.href)
      connect.pathname = "/"
      connect.hash = ""
      return {
        url,
        connectUrl: connect.href,
        location: `${url.hostname || "localhost"}:${url.port || "3306"}`,
        secrets: secretsOf(url)
      }
    }
  )

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** The server's error number, when the server (not the network or the driver) refused. */
const serverErrno = (cause: unknown): number | undefined =>
  typeof cause === "object" &&
  cause !== null &&
  "errno" in cause &&
  typeof cause.errno === "number" &&
  cause.errno > 0 &&
  "sqlState" in cause &&
  typeof cause.sqlState === "string"
    ? cause.errno
    : undefined

/** Turns a driver or server error into the adapter's vocabulary, naming the database and server but no password. */
const classify = (server: Server, action: string, database: string, failure: MysqlFailure): AdapterError => {
  const errno = serverErrno(failure.cause)
  const code = errorCode(failure.cause)
  // a multi-address connect failure is an AggregateError with an empty message and only a code
  const text = describeCause(failure.cause) || code || "unknown error"
  const detail = scrub(server, errno === undefined ? text : `${text} (${code ?? "error"} ${errno})`)
  const what = `${action} database "${database}" on ${server.location}`
  if (
    errno === undefined &&
    (failure.phase === "connect" || (code !== undefined && (NETWORK_CODES.has(code) || LOST_CODES.has(code))))
  ) {
    return fail(
      "unreachable",
      `cannot reach MySQL/MariaDB at ${server.location} to ${action} database "${database}": ${detail}`
    )
  }
  if (errno !== undefined && AUTHENTICATION_ERRNOS.has(errno)) {
    return fail("authentication", `MySQL/MariaDB refused the admin_url credentials; could not ${what}: ${detail}`)
  }
  if (errno !== undefined && GRANT_ERRNOS.has(errno)) {
    return fail(
      "grant",
      `the admin_url account lacks a privilege (it needs CREATE, DROP and, to clone, the rights to read and create views, routines and triggers); could not ${what}: ${detail}`
    )
  }
  return fail("failed", `could not ${what}: ${detail}`)
}

/** Ends a connection politely, or destroys it when the server does not answer in time. */
const close = (connection: Connection): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      resume(Effect.void)
    }
    const timer = setTimeout(() => {
      connection.destroy()
      finish()
    }, CLOSE_TIMEOUT_MS)
    try {
      connection.end(() => finish())
    } catch {
      connection.destroy()
      finish()
    }
  })

/** One connection on the admin URL for the length of the scope; closed even when connecting fails half way. */
const connect = (server: Server): Effect.Effect<Connection, MysqlFailure, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<Connection, MysqlFailure>((resume) => {
      let connection: Connection
      try {
        connection = createConnection({
          uri: server.connectUrl,
          connectTimeout: CONNECT_TIMEOUT_MS,
          multipleStatements: false
        })
      } catch (cause) {
        resume(Effect.fail(new MysqlFailure({ phase: "connect", cause })))
        return
      }
      // an error with no query waiting (a dropped idle connection) is an event; unhandled, it would crash the daemon
      connection.on("error", () => undefined)
      const onError = (cause: unknown) => {
        connection.removeListener("connect", onConnect)
        connection.destroy()
        resume(Effect.fail(new MysqlFailure({ phase: "connect", cause })))
      }
      const onConnect = () => {
        connection.removeListener("error", onError)
        resume(Effect.succeed(connection))
      }
      connection.once("error", onError)
      connection.once("connect", onConnect)
      return Effect.sync(() => connection.destroy())
    }),
    close
  )

const query = (
  connection: Connection,
  sql: string,
  values: ReadonlyArray<string | number> = []
): Effect.Effect<ReadonlyArray<Row>, MysqlFailure> =>
  Effect.async<ReadonlyArray<Row>, MysqlFailure>((resume) => {
    connection.query<RowDataPacket[]>({ sql, values: [...values] }, (error, result) => {
      if (error !== null) resume(Effect.fail(new MysqlFailure({ phase: "query", cause: error })))
      else resume(Effect.succeed(Array.isArray(result) ? result : []))
    })
  })

/**
 * Runs a verb on one admin connection; raw driver failures become AdapterErrors naming `database`. The body may
 * catch `MysqlFailure`s it expects (a database that exists already) before they get here.
 */
const withServer = <A>(
  adminUrl: string | undefined,
  action: string,
  database: string,
  body: (connection: Connection, server: Server) => Effect.Effect<A, MysqlFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    Effect.scoped(
      Effect.gen(function* () {
        const connection = yield* connect(server)
        // a known SQL mode whatever the server's default (ANSI_QUOTES would change SHOW CREATE's quoting), and a
        // bounded wait for metadata locks, so a DROP behind someone's open transaction fails instead of hanging
        yield* query(connection, "SET SESSION sql_mode = ?, SESSION lock_wait_timeout = ?", [
          COPY_SQL_MODE,
          LOCK_WAIT_TIMEOUT_S
        ])
        return yield* body(connection, server)
      })
    ).pipe(Effect.catchTag("MysqlFailure", (failure) => Effect.fail(classify(server, action, database, failure))))
  )

/** Identifiers cannot be parameters: names from the catalog may hold anything, so backticks are always doubled. */
const ident = (name: string): string => `\`${name.replaceAll("`", "``")}\``
const META = `${ident(META_DB)}.${ident(META_TABLE)}`
const INTENTS = `${ident(META_DB)}.${ident(INTENT_TABLE)}`

/** Which of berth's tables exist (`pending` is missing on a server last used by an older berth). */
const metaTables = (connection: Connection): Effect.Effect<ReadonlySet<string>, MysqlFailure> =>
  Effect.map(
    query(
      connection,
      "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?)",
      [META_DB, META_TABLE, INTENT_TABLE]
    ),
    (rows) => new Set(rows.map((row) => String(row.name)))
  )

/** Creates berth's own database and tables on first use (and only then: IF NOT EXISTS still needs the privilege). */
const ensureMeta = (connection: Connection): Effect.Effect<void, MysqlFailure> =>
  Effect.gen(function* () {
    if ((yield* metaTables(connection)).size === 2) return
    yield* query(connection, `CREATE DATABASE IF NOT EXISTS ${ident(META_DB)}`)
    for (const table of [META, INTENTS]) {
      yield* query(
        connection,
        `CREATE TABLE IF NOT EXISTS ${table} (
          name VARCHAR(${MAX_NAME}) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
          owner VARCHAR(${MAX_OWNER}) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
          created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
        ) ENGINE = InnoDB`
      )
    }
  })

const databaseExists = (connection: Connection, name: string): Effect.Effect<boolean, MysqlFailure> =>
  Effect.map(
    query(connection, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", [name]),
    (rows) => rows.length > 0
  )

/** The installations whose mark and whose intent `name` carries, if any. */
const marksOf = (
  connection: Connection,
  name: string
): Effect.Effect<{ readonly mark: string | undefined; readonly intent: string | undefined }, MysqlFailure> =>
  Effect.gen(function* () {
    const tables = yield* metaTables(connection)
    const ownerIn = (table: string, qualified: string) =>
      tables.has(table)
        ? Effect.map(query(connection, `SELECT owner FROM ${qualified} WHERE name = ?`, [name]), (rows) =>
            rows[0] === undefined ? undefined : String(rows[0].owner)
          )
        : Effect.succeed(undefined)
    return { mark: yield* ownerIn(META_TABLE, META), intent: yield* ownerIn(INTENT_TABLE, INTENTS) }
  })

/** True when `name` holds nothing: what CREATE DATABASE makes, and all a crash before the mark can leave. */
const isEmpty = (connection: Connection, name: string): Effect.Effect<boolean, MysqlFailure> =>
  Effect.map(
    query(
      connection,
      `SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?)
            + (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ?)
            + (SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = ?) AS n`,
      [name, name, name]
    ),
    (rows) => Number(rows[0]?.n) === 0
  )

/**
 * "missing" may still have a stale mark or intent (left by a crash between drop and unmark, or before CREATE);
 * "unfinished" is an empty database with this installation's intent and no mark (a crash before the mark);
 * "foreign" is a database without a mark, "elsewhere" one marked (or intended) by another berth installation.
 */
type Ownership = "missing" | "ours" | "unfinished" | "foreign" | "elsewhere"

const ownership = (connection: Connection, owner: string, name: string): Effect.Effect<Ownership, MysqlFailure> =>
  Effect.gen(function* () {
    if (!(yield* databaseExists(connection, name))) return "missing"
    const { mark, intent } = yield* marksOf(connection, name)
    if (mark !== undefined) return mark === owner ? "ours" : "elsewhere"
    if (intent === undefined) return "foreign"
    if (intent !== owner) return "elsewhere"
    return (yield* isEmpty(connection, name)) ? "unfinished" : "foreign"
  })

/** The protocol's reading of a state: another installation's slice is as foreign as an unmarked database. */
const standingOf = (state: Ownership): Standing => (state === "elsewhere" ? "foreign" : state)

/** Why berth leaves `name` alone, for a state that is "foreign" or "elsewhere". */
const notOurs = (server: Server, name: string, state: Ownership): string =>
  state === "elsewhere"
    ? `database "${name}" on ${server.location} is a slice of another berth installation`
    : `database "${name}" on ${server.location} is not a berth slice`

/**
 * Serialises berth's verbs on these names across the whole server (session locks, released when the connection
 * ends; sorted, so two clones never wait on each other). Hashed: MySQL refuses lock names over 64 characters.
 */
const lockNames = (
  connection: Connection,
  server: Server,
  names: ReadonlyArray<string>
): Effect.Effect<void, MysqlFailure | AdapterError> =>
  Effect.forEach(
    [...new Set(names)].sort(),
    (name) =>
      Effect.flatMap(
        query(connection, "SELECT GET_LOCK(?, ?) AS got", [
          `berth.slice.${createHash("sha1").update(name).digest("hex")}`,
          NAME_LOCK_TIMEOUT_S
        ]),
        (rows) =>
          Number(rows[0]?.got) === 1
            ? Effect.void
            : Effect.fail(
                fail(
                  "failed",
                  `another berth operation on database "${name}" on ${server.location} is still running after ${NAME_LOCK_TIMEOUT_S} s; retry later`
                )
              )
      ),
    { discard: true }
  )

/** a row already there is stale (its database was missing, checked under the name lock): it is taken over */
const upsertOwner = (table: string) =>
  `INSERT INTO ${table} (name, owner) VALUES (?, ?) ON DUPLICATE KEY UPDATE owner = ?, created_at = CURRENT_TIMESTAMP`

/**
 * The part of a creation before the mark: the intent, then the database (with `options`, e.g. a character set).
 * False when the database exists already (someone outside berth's lock made it): the intent is withdrawn.
 */
const createIntended = (
  connection: Connection,
  owner: string,
  name: string,
  options: string
): Effect.Effect<boolean, MysqlFailure> =>
  Effect.gen(function* () {
    yield* query(connection, upsertOwner(INTENTS), [name, owner, owner])
    const created = yield* query(connection, `CREATE DATABASE ${ident(name)}${options}`).pipe(
      Effect.as(true),
      Effect.catchIf(
        (failure) => serverErrno(failure.cause) === ER_DB_CREATE_EXISTS,
        () => Effect.succeed(false)
      )
    )
    if (!created) yield* query(connection, `DELETE FROM ${INTENTS} WHERE name = ? AND owner = ?`, [name, owner])
    return created
  })

/**
 * Marks a database created just now as `owner`'s. Should that fail, the fresh unmarked database is dropped so a retry
 * starts clean. The intent goes once the mark is there; should that fail, a mark outranks it anyway.
 */
const mark = (connection: Connection, owner: string, name: string): Effect.Effect<void, MysqlFailure> =>
  query(connection, upsertOwner(META), [name, owner, owner]).pipe(
    Effect.tapError(() => Effect.ignore(query(connection, `DROP DATABASE IF EXISTS ${ident(name)}`))),
    Effect.zipRight(
      Effect.ignore(query(connection, `DELETE FROM ${INTENTS} WHERE name = ? AND owner = ?`, [name, owner]))
    )
  )

/** Creates `name` and marks it; false when it existed already (see `createIntended`). */
const createMarked = (
  connection: Connection,
  owner: string,
  name: string,
  options = ""
): Effect.Effect<boolean, MysqlFailure> =>
  Effect.flatMap(createIntended(connection, owner, name, options), (created) =>
    created ? Effect.as(mark(connection, owner, name), true) : Effect.succeed(false)
  )

/** Erases this installation's mark and intent for `name`. */
const unmark = (connection: Connection, owner: string, name: string): Effect.Effect<void, MysqlFailure> =>
  Effect.gen(function* () {
    const tables = yield* metaTables(connection)
    for (const [table, qualified] of [
      [META_TABLE, META],
      [INTENT_TABLE, INTENTS]
    ] as const) {
      if (tables.has(table)) {
        yield* query(connection, `DELETE FROM ${qualified} WHERE name = ? AND owner = ?`, [name, owner])
      }
    }
  })

/**
 * Drops an owned database. Its other sessions are ended first, best effort (it takes PROCESS and SUPER or
 * CONNECTION_ADMIN): an idle one does not block DROP DATABASE, but one inside a transaction holds a metadata lock.
 */
const drop = (connection: Connection, name: string): Effect.Effect<void, MysqlFailure> =>
  Effect.gen(function* () {
    const sessions = yield* query(
      connection,
      "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()",
      [name]
    )
    yield* Effect.forEach(sessions, (row) => Effect.ignore(query(connection, "KILL CONNECTION ?", [Number(row.id)])), {
      discard: true
    })
    yield* query(connection, `DROP DATABASE IF EXISTS ${ident(name)}`)
  })

/** Whose database the slice's name is now (see `Adapter.standing`): an unfinished one of ours counts as ours. */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, "look at", name, (connection) =>
      Effect.map(ownership(connection, slice.owner, name), (state) => ownerStanding(standingOf(state)))
    )
  )

const provision = Effect.fn("MysqlAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withServer(slice.adminUrl, "provision", name, (connection, server) =>
    provisionOwned({
      lock: Effect.zipRight(ensureMeta(connection), lockNames(connection, server, [name])),
      look: ownership(connection, slice.owner, name),
      standing: standingOf,
      // what a crash left before its mark is made again from nothing
      clear: drop(connection, name),
      create: createMarked(connection, slice.owner, name),
      // right after a concurrent CREATE DATABASE the winner's mark may not be written yet: give it a moment
      settle: MARK_WAIT,
      taken: (state) => fail("taken", `${notOurs(server, name, state)}; drop it or pick another name`),
      vanished: (state) =>
        fail(
          "failed",
          `database "${name}" on ${server.location} ${state === "missing" ? "appeared and vanished" : "was being made by another berth operation"} during provision; retry`
        )
    })
  )
})

const resolveUrl = Effect.fn("MysqlAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  const url = new URL(server.url.href)
  url.pathname = `/${name}`
  return url.href
})

const teardown = Effect.fn("MysqlAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withServer(slice.adminUrl, "tear down", name, (connection, server) =>
    teardownOwned({
      lock: lockNames(connection, server, [name]),
      look: ownership(connection, slice.owner, name),
      standing: standingOf,
      drop: drop(connection, name),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving it alone`),
      // also clears a stale mark of ours
      after: unmark(connection, slice.owner, name)
    })
  )
})

/** Copying fails with the object it was copying named; the cause is classified like any other failure. */
class CopyStepFailure extends Data.TaggedError("CopyStepFailure")<{
  readonly what: string
  readonly failure: MysqlFailure
}> {}

const step = <A>(what: string, effect: Effect.Effect<A, MysqlFailure>): Effect.Effect<A, CopyStepFailure> =>
  Effect.mapError(effect, (failure) => new CopyStepFailure({ what, failure }))

/** What `SHOW CREATE VIEW/PROCEDURE/FUNCTION/TRIGGER` printed, made to create the same object in `target`. */
const retarget = (statement: string, source: string, target: string): string =>
  statement
    // only in the header: a body may mention the word
    .replace(
      /^(\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:ALGORITHM\s*=\s*\w+\s+)?)DEFINER\s*=\s*(?:`(?:[^`]|``)*`|'(?:[^']|'')*'|[^\s@]+)(?:\s*@\s*(?:`(?:[^`]|``)*`|'(?:[^']|'')*'|\S+?))?\s+/i,
      "$1"
    )
    // MySQL 8 qualifies every name in a view with its schema (MariaDB does not); routine and trigger texts are kept
    // as written, where a name may be qualified with or without backticks. (`source` is a safe identifier: no regex
    // metacharacters, and a slice's name, so a mention that is not a qualifier is unlikely.)
    .split(`${ident(source)}.`)
    .join(`${ident(target)}.`)
    .replace(new RegExp(`(?<![\\w$\`.])${source}(?=\\s*\\.)`, "g"), target)

/** Generated columns (and MariaDB's row-versioning ones) take no values: they are computed again in the copy. */
const GENERATED = /\b(?:VIRTUAL|STORED|PERSISTENT) GENERATED\b|\bROW (?:START|END)\b/i

const FK_RULES: ReadonlySet<string> = new Set(["CASCADE", "SET NULL", "SET DEFAULT", "RESTRICT", "NO ACTION"])

interface ForeignKey {
  readonly table: string
  readonly name: string
  readonly columns: Array<string>
  readonly refSchema: string
  readonly refTable: string
  readonly refColumns: Array<string>
  readonly onUpdate: string
  readonly onDelete: string
}

const copyTables = (connection: Connection, source: string, target: string): Effect.Effect<void, CopyStepFailure> =>
  Effect.gen(function* () {
    const tables = (yield* step(
      "listing tables",
      query(
        connection,
        // SYSTEM VERSIONED and SEQUENCE are MariaDB's; CREATE TABLE … LIKE copies both kinds as what they are
        "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED', 'SEQUENCE') ORDER BY TABLE_NAME",
        [source]
      )
    )).map((row) => String(row.name))
    for (const table of tables) {
      yield* step(
        `creating table "${table}"`,
        query(connection, `CREATE TABLE ${ident(target)}.${ident(table)} LIKE ${ident(source)}.${ident(table)}`)
      )
    }

    // LIKE leaves foreign keys behind: add them, pointing at the copy when they pointed inside the source
    const keyRows = yield* step(
      "listing foreign keys",
      query(
        connection,
        `SELECT k.TABLE_NAME AS tbl, k.CONSTRAINT_NAME AS name, k.COLUMN_NAME AS col,
                k.REFERENCED_TABLE_SCHEMA AS ref_schema, k.REFERENCED_TABLE_NAME AS ref_table,
                k.REFERENCED_COLUMN_NAME AS ref_col, r.UPDATE_RULE AS on_update, r.DELETE_RULE AS on_delete
           FROM information_schema.KEY_COLUMN_USAGE k
           JOIN information_schema.REFERENTIAL_CONSTRAINTS r
             ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME
            AND r.TABLE_NAME = k.TABLE_NAME
          WHERE k.TABLE_SCHEMA = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL
          ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION`,
        [source]
      )
    )
    const keys = new Map<string, ForeignKey>()
    for (const row of keyRows) {
      const table = String(row.tbl)
      const name = String(row.name)
      const id = `${table}\u0000${name}`
      const key = keys.get(id) ?? {
        table,
        name,
        columns: [],
        refSchema: String(row.ref_schema) === source ? target : String(row.ref_schema),
        refTable: String(row.ref_table),
        refColumns: [],
        onUpdate: String(row.on_update),
        onDelete: String(row.on_delete)
      }
      key.columns.push(String(row.col))
      key.refColumns.push(String(row.ref_col))
      keys.set(id, key)
    }
    const byTable = new Map<string, Array<ForeignKey>>()
    for (const key of keys.values()) byTable.set(key.table, [...(byTable.get(key.table) ?? []), key])
    for (const [table, tableKeys] of byTable) {
      const clauses = tableKeys.map((key) => {
        // the rules come from the catalog, but are spliced into DDL: only the five the grammar knows
        const onUpdate = FK_RULES.has(key.onUpdate) ? ` ON UPDATE ${key.onUpdate}` : ""
        const onDelete = FK_RULES.has(key.onDelete) ? ` ON DELETE ${key.onDelete}` : ""
        return `ADD CONSTRAINT ${ident(key.name)} FOREIGN KEY (${key.columns.map(ident).join(", ")}) REFERENCES ${ident(key.refSchema)}.${ident(key.refTable)} (${key.refColumns.map(ident).join(", ")})${onUpdate}${onDelete}`
      })
      // one ALTER per table: each may rebuild it
      yield* step(
        `adding the foreign keys of table "${table}"`,
        query(connection, `ALTER TABLE ${ident(target)}.${ident(table)} ${clauses.join(", ")}`)
      )
    }

    const columnRows = yield* step(
      "listing columns",
      query(
        connection,
        "SELECT TABLE_NAME AS tbl, COLUMN_NAME AS col, EXTRA AS extra FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION",
        [source]
      )
    )
    const columns = new Map<string, Array<string>>()
    for (const row of columnRows) {
      if (GENERATED.test(String(row.extra ?? ""))) continue
      const table = String(row.tbl)
      columns.set(table, [...(columns.get(table) ?? []), String(row.col)])
    }
    for (const table of tables) {
      const list = (columns.get(table) ?? []).map(ident).join(", ")
      if (list === "") continue
      yield* step(
        `copying the rows of table "${table}"`,
        query(
          connection,
          `INSERT INTO ${ident(target)}.${ident(table)} (${list}) SELECT ${list} FROM ${ident(source)}.${ident(table)}`
        )
      )
    }
  })

/**
 * Creates objects whose statements may depend on one another (a view on a view, a trigger that PRECEDES another),
 * retrying the failures for as long as a round makes progress.
 */
const createInOrder = (
  objects: ReadonlyArray<{ readonly what: string; readonly create: Effect.Effect<void, MysqlFailure> }>
): Effect.Effect<void, CopyStepFailure> =>
  Effect.gen(function* () {
    let pending = objects
    while (pending.length > 0) {
      const failed: Array<{ readonly what: string; readonly create: Effect.Effect<void, MysqlFailure> }> = []
      let first: CopyStepFailure | undefined
      for (const object of pending) {
        const result = yield* Effect.either(object.create)
        if (result._tag === "Left") {
          failed.push(object)
          first ??= new CopyStepFailure({ what: object.what, failure: result.left })
        }
      }
      if (first !== undefined && failed.length === pending.length) return yield* Effect.fail(first)
      pending = failed
    }
  })

/** Runs `statement` in the target under the SQL mode the object was created with, then goes back to the copy's. */
const createWithMode = (
  connection: Connection,
  statement: string,
  sqlMode: string | undefined
): Effect.Effect<void, MysqlFailure> =>
  sqlMode === undefined
    ? Effect.asVoid(query(connection, statement))
    : query(connection, "SET SESSION sql_mode = ?", [sqlMode]).pipe(
        Effect.zipRight(query(connection, statement)),
        Effect.ensuring(Effect.ignore(query(connection, "SET SESSION sql_mode = ?", [COPY_SQL_MODE]))),
        Effect.asVoid
      )

/** `SHOW CREATE …`'s one row; its text column is NULL when the account may not read the definition. */
const showCreate = (
  connection: Connection,
  kind: "VIEW" | "PROCEDURE" | "FUNCTION" | "TRIGGER",
  column: string,
  source: string,
  name: string
): Effect.Effect<
  { readonly statement: string; readonly sqlMode: string | undefined },
  CopyStepFailure | AdapterError
> =>
  Effect.flatMap(
    step(
      `reading ${kind.toLowerCase()} "${name}"`,
      query(connection, `SHOW CREATE ${kind} ${ident(source)}.${ident(name)}`)
    ),
    (rows) => {
      const statement = rows[0]?.[column]
      const sqlMode = rows[0]?.sql_mode
      return typeof statement === "string" && statement !== ""
        ? Effect.succeed({ statement, sqlMode: typeof sqlMode === "string" ? sqlMode : undefined })
        : Effect.fail(
            fail(
              "grant",
              `cannot read the definition of ${kind.toLowerCase()} "${name}" in database "${source}": the admin_url account needs the right to see it (SHOW_ROUTINE on MySQL 8, SELECT on mysql.proc on MariaDB)`
            )
          )
    }
  )

const copyObjects = (
  connection: Connection,
  source: string,
  target: string
): Effect.Effect<void, CopyStepFailure | AdapterError> =>
  Effect.gen(function* () {
    // SHOW CREATE prints names unqualified where they live in the source: make the target the current database
    yield* step("selecting the target", query(connection, `USE ${ident(target)}`))

    const views = yield* step(
      "listing views",
      query(
        connection,
        "SELECT TABLE_NAME AS name FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME",
        [source]
      )
    )
    const viewStatements = yield* Effect.forEach(views, (row) =>
      Effect.map(showCreate(connection, "VIEW", "Create View", source, String(row.name)), (shown) => ({
        what: `creating view "${String(row.name)}"`,
        create: Effect.asVoid(query(connection, retarget(shown.statement, source, target)))
      }))
    )
    yield* createInOrder(viewStatements)

    const routines = yield* step(
      "listing routines",
      query(
        connection,
        "SELECT ROUTINE_NAME AS name, ROUTINE_TYPE AS type FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_TYPE, ROUTINE_NAME",
        [source]
      )
    )
    for (const row of routines) {
      const name = String(row.name)
      const type = String(row.type)
      if (type !== "PROCEDURE" && type !== "FUNCTION") {
        return yield* Effect.fail(
          fail("failed", `cannot clone database "${source}": berth does not copy ${type.toLowerCase()} "${name}"`)
        )
      }
      const shown = yield* showCreate(
        connection,
        type,
        type === "PROCEDURE" ? "Create Procedure" : "Create Function",
        source,
        name
      )
      yield* step(
        `creating ${type.toLowerCase()} "${name}"`,
        createWithMode(connection, retarget(shown.statement, source, target), shown.sqlMode)
      )
    }

    const triggers = yield* step(
      "listing triggers",
      query(
        connection,
        // in their firing order, so creating them one after another keeps it
        "SELECT TRIGGER_NAME AS name FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY EVENT_OBJECT_TABLE, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER",
        [source]
      )
    )
    const triggerStatements = yield* Effect.forEach(triggers, (row) =>
      Effect.map(showCreate(connection, "TRIGGER", "SQL Original Statement", source, String(row.name)), (shown) => ({
        what: `creating trigger "${String(row.name)}"`,
        create: createWithMode(connection, retarget(shown.statement, source, target), shown.sqlMode)
      }))
    )
    yield* createInOrder(triggerStatements)
  })

/** Creates `name` with the character set and collation of `like`, and marks it; false when it existed already. */
const createLike = (
  connection: Connection,
  owner: string,
  name: string,
  like: string
): Effect.Effect<boolean, MysqlFailure> =>
  Effect.gen(function* () {
    const rows = yield* query(
      connection,
      "SELECT DEFAULT_CHARACTER_SET_NAME AS charset, DEFAULT_COLLATION_NAME AS collation FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
      [like]
    )
    const charset = String(rows[0]?.charset ?? "")
    const collation = String(rows[0]?.collation ?? "")
    // catalog values spliced into DDL: only plain words
    const options =
      /^\w+$/.test(charset) && /^\w+$/.test(collation) ? ` CHARACTER SET ${charset} COLLATE ${collation}` : ""
    return yield* createMarked(connection, owner, name, options)
  })

/**
 * `target` (a slice of `owner`) becomes a copy of `source`, table by table: what the target held goes first (it was
 * provisioned empty, holds an older copy, or was left half-made), and a copy that fails half way leaves it empty and
 * still owned. `verb` says which command asked (clone from a golden, copy of the user's database).
 */
const copyInto = (
  connection: Connection,
  server: Server,
  owner: string,
  source: string,
  target: string,
  verb: "clone" | "copy"
) =>
  Effect.gen(function* () {
    const targetState = yield* ownership(connection, owner, target)
    if (targetState === "foreign" || targetState === "elsewhere") {
      return yield* Effect.fail(
        fail("not-owned", `cannot ${verb}: ${notOurs(server, target, targetState)}; leaving it alone`)
      )
    }
    if (targetState === "ours" || targetState === "unfinished") yield* drop(connection, target)
    if (!(yield* createLike(connection, owner, target, source))) {
      return yield* Effect.fail(
        fail(
          "not-owned",
          `cannot ${verb}: database "${target}" on ${server.location} was created by someone else meanwhile; leaving it alone`
        )
      )
    }
    yield* query(connection, "SET SESSION foreign_key_checks = 0")
    yield* Effect.zipRight(copyTables(connection, source, target), copyObjects(connection, source, target)).pipe(
      Effect.tapError(() =>
        Effect.ignore(
          query(connection, `DROP DATABASE IF EXISTS ${ident(target)}`).pipe(
            Effect.zipRight(createLike(connection, owner, target, source))
          )
        )
      ),
      Effect.catchTag("CopyStepFailure", ({ what, failure }) =>
        Effect.fail(classify(server, `${verb} "${source}" (while ${what}) into`, target, failure))
      )
    )
  })

const clone = Effect.fn("MysqlAdapter.clone")(function* (from: Slice, to: Slice) {
  const source = yield* checkSlice(from)
  const target = yield* checkSlice(to)
  if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone database "${source}" onto itself`))
  yield* withServer(to.adminUrl ?? from.adminUrl, "clone into", target, (connection, server) =>
    Effect.gen(function* () {
      yield* ensureMeta(connection)
      yield* lockNames(connection, server, [source, target])
      const sourceState = yield* ownership(connection, from.owner, source)
      if (sourceState === "missing") {
        return yield* Effect.fail(
          fail("failed", `cannot clone: database "${source}" does not exist on ${server.location} (provision it first)`)
        )
      }
      if (sourceState === "unfinished") {
        return yield* Effect.fail(
          fail("failed", `cannot clone: database "${source}" on ${server.location} was never finished (provision it)`)
        )
      }
      if (sourceState !== "ours") {
        return yield* Effect.fail(fail("not-owned", `cannot clone: ${notOurs(server, source, sourceState)}`))
      }
      return yield* copyInto(connection, server, to.owner, source, target, "clone")
    })
  )
})

/**
 * `to` becomes a copy of the user's own database `source` (`clone_from = "<name>"`): read table by table, never
 * marked, changed or dropped.
 */
const copyExisting = Effect.fn("MysqlAdapter.copyExisting")(function* (source: string, to: Slice) {
  if (!SOURCE_DATABASE.test(source)) {
    return yield* Effect.fail(
      fail(
        "invalid",
        `refusing clone_from ${JSON.stringify(source)}: a database name must match ${SOURCE_DATABASE.source}`
      )
    )
  }
  const target = yield* checkSlice(to)
  if (source === target) return yield* Effect.fail(fail("invalid", `cannot copy database "${source}" onto itself`))
  yield* withServer(to.adminUrl, "copy into", target, (connection, server) =>
    Effect.gen(function* () {
      yield* ensureMeta(connection)
      yield* lockNames(connection, server, [target])
      const found = yield* query(
        connection,
        "SELECT 1 AS found FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
        [source]
      )
      if (found.length === 0) {
        return yield* Effect.fail(
          fail("invalid", `cannot copy: there is no database "${source}" on ${server.location} (clone_from)`)
        )
      }
      return yield* copyInto(connection, server, to.owner, source, target, "copy")
    })
  )
})

const list = Effect.fn("MysqlAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withServer(scope.adminUrl, "list slices from", META_DB, (connection) =>
    Effect.gen(function* () {
      const tables = yield* metaTables(connection)
      const namesIn = (table: string, qualified: string) =>
        tables.has(table)
          ? Effect.map(query(connection, `SELECT name FROM ${qualified} WHERE owner = ?`, [owner]), (rows) =>
              rows.map((row) => String(row.name))
            )
          : Effect.succeed([])
      const marked = yield* namesIn(META_TABLE, META)
      const intended = yield* namesIn(INTENT_TABLE, INTENTS)
      const existing = new Set(
        (yield* query(connection, "SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA")).map((row) =>
          String(row.name)
        )
      )
      // a mark whose database is gone (a crash between drop and unmark) is not a slice
      const names = new Set(marked.filter((name) => existing.has(name)))
      // a database whose creation a crash cut short before its mark is, for gc to drop
      for (const name of intended) {
        if (!names.has(name) && existing.has(name) && (yield* ownership(connection, owner, name)) === "unfinished") {
          names.add(name)
        }
      }
      return [...names].sort()
    })
  )
})

/**
 * What provision and clone do before their ownership mark, alone: the state a daemon killed right there leaves
 * behind. For tests of crash recovery.
 */
export const beforeMark = {
  provision: (slice: Slice): Effect.Effect<void, AdapterError> =>
    Effect.flatMap(checkSlice(slice), (name) =>
      withServer(slice.adminUrl, "provision", name, (connection) =>
        Effect.zipRight(ensureMeta(connection), Effect.asVoid(createIntended(connection, slice.owner, name, "")))
      )
    )
} as const

export const mysqlAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  copyExisting,
  list,
  standing
}
