/**
 * The `clickhouse` adapter: each world gets its own database on one shared ClickHouse server, reached over its HTTP
 * interface through the service's `admin_url` (default `http://default@127.0.0.1:8123`). No driver: the official
 * `@clickhouse/client` does not speak to older servers (Debian's 18.16 has no query parameters, and its error format
 * is not parsed), while plain HTTP works with every version.
 *
 * Ownership is marked in berth's own database `berth_meta`: one table per slice, named after it, whose column
 * `owner` has the installation as its DEFAULT — `CREATE TABLE` is atomic and exclusive, so the mark is written in one
 * statement and two claims of one name never both succeed. (Database comments, the other place a mark could go, came
 * to ClickHouse long after 18.16.) The mark is written before the database is created: a crash in between leaves a
 * mark without a database, which `list` returns (so gc drops it) and `provision` finishes; teardown drops the
 * database, then the mark. A database without this installation's mark is never reused (`taken`), dropped
 * (`not-owned`) or listed.
 *
 * `clone` copies server-side into a target that starts empty: each table's structure (`CREATE TABLE … AS`, engine
 * and keys included), then its rows (`INSERT … SELECT`); views are created again from `SHOW CREATE TABLE` with the
 * source database's name replaced. Materialized views are not copied (the clone fails, naming them): each would
 * need its inner table and trigger rewired. A clone that fails half way leaves the target empty again.
 *
 * `resolve` gives the admin URL with the database as the HTTP interface's own parameter:
 * `http://default@127.0.0.1:8123/?database=acme_login_db`.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { pauses, provisionOwned, type Standing, teardownOwned, ownerStanding } from "../ownership.js"
import { decodeComponent, fetchFailure, parseAdminUrl, secretsOf, sliceChecks } from "../shared.js"

const ADAPTER = "clickhouse"
const DEFAULT_URL = "http://default@127.0.0.1:8123"
const MAX_NAME = 64
const META_DB = "berth_meta"
/** names a slice may never take: berth's own database and the server's */
const RESERVED: ReadonlySet<string> = new Set([META_DB, "system", "default"])
const READ_TIMEOUT_MS = 10_000
/** copying rows may take a while on a large golden */
const WRITE_TIMEOUT_MS = 300_000
/** while a concurrent provision that won the mark creates its database */
const CREATE_WAIT = pauses(50, 100, 200, 400, 800)

/** ClickHouse's error codes this adapter reacts to. */
const DATABASE_ALREADY_EXISTS = 82
const TABLE_ALREADY_EXISTS = 57
const AUTHENTICATION_CODES: ReadonlySet<number> = new Set([192, 193, 194, 516])
const GRANT_CODES: ReadonlySet<number> = new Set([164, 497])

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** An HTTP exchange that failed: no answer (`status` undefined), or the server's error text. */
class ChFailure extends Data.TaggedError("ChFailure")<{
  readonly status: number | undefined
  readonly text: string
  readonly cause: unknown
  readonly timeoutMs: number
}> {}

interface Server {
  readonly url: URL
  /** the HTTP interface's root, without credentials */
  readonly endpoint: string
  readonly authorization: string | undefined
  readonly location: string
  readonly secrets: ReadonlyArray<string>
}

const names = sliceChecks(ADAPTER, "database", MAX_NAME)
const { checkOwner } = names

const checkSlice = (slice: Pick<Slice, "name" | "owner">): Effect.Effect<string, AdapterError> =>
  Effect.zipRight(
    checkOwner(slice.owner),
    Effect.flatMap(names.checkName(slice.name), (name) =>
      RESERVED.has(name)
        ? Effect.fail(fail("invalid", `refusing database name "${name}": it is reserved for berth or the server`))
        : Effect.succeed(name)
    )
  )

const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["http:", "https:"],
      kind: "an http:// or https:// URL of ClickHouse's HTTP interface",
      example: "http://user:password@host:8123",
      variable: "CLICKHOUSE_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    (url) => {
      const user = decodeComponent(url.username)
      const password = decodeComponent(url.password)
      const port = url.port || (url.protocol === "https:" ? "443" : "8123")
      return {
        url,
        endpoint: `${url.protocol}//${url.host}/`,
        authorization: user === "" ? undefined : `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
        location: `${url.hostname}:${port}`,
        secrets: secretsOf(url)
      }
    }
  )

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** `Code: 82, e.displayText() = DB::Exception: …` (and newer servers' `Code: 82. DB::Exception: …`) */
const serverCode = (failure: ChFailure): number | undefined => {
  const match = /^Code: (\d+)[.,]/.exec(failure.text)
  return match?.[1] === undefined ? undefined : Number(match[1])
}

/** The server's message, without the noise 18.16 wraps it in. */
const serverText = (failure: ChFailure): string =>
  failure.text
    .replace(/, e\.what\(\) = DB::Exception\s*$/, "")
    .replace("e.displayText() = DB::Exception: ", "")
    .trim()

const classify = (server: Server, action: string, database: string, failure: ChFailure): AdapterError => {
  const what = `${action} database "${database}" on ${server.location}`
  if (failure.status === undefined) {
    const { detail, unreachable } = fetchFailure(failure.cause, failure.timeoutMs)
    if (unreachable) {
      return fail(
        "unreachable",
        scrub(
          server,
          `cannot reach ClickHouse's HTTP interface at ${server.location} to ${action} database "${database}": ${detail}`
        )
      )
    }
    return fail("failed", scrub(server, `could not ${what}: ${detail}`))
  }
  const code = serverCode(failure)
  const detail = scrub(server, serverText(failure) || `HTTP ${failure.status}`)
  if ((code !== undefined && AUTHENTICATION_CODES.has(code)) || failure.status === 401) {
    return fail("authentication", `ClickHouse refused the admin_url credentials; could not ${what}: ${detail}`)
  }
  if (code !== undefined && GRANT_CODES.has(code)) {
    return fail(
      "grant",
      `the admin_url user lacks a privilege (it needs CREATE and DROP); could not ${what}: ${detail}`
    )
  }
  return fail("failed", `could not ${what}: ${detail}`)
}

/**
 * One statement over HTTP, its answer as text. The deadline and the interruption share one signal, joined by hand
 * (`AbortSignal.any` can lose the timeout to the garbage collector on Node 20).
 */
const send = (server: Server, sql: string, timeoutMs = READ_TIMEOUT_MS): Effect.Effect<string, ChFailure> =>
  Effect.tryPromise({
    try: async (interrupt) => {
      const controller = new AbortController()
      const deadline = AbortSignal.timeout(timeoutMs)
      const onDeadline = () => controller.abort(deadline.reason)
      const onInterrupt = () => controller.abort(interrupt.reason)
      deadline.addEventListener("abort", onDeadline, { once: true })
      interrupt.addEventListener("abort", onInterrupt, { once: true })
      try {
        const response = await fetch(server.endpoint, {
          method: "POST",
          body: sql,
          headers: server.authorization === undefined ? {} : { authorization: server.authorization },
          redirect: "error",
          signal: controller.signal
        })
        const text = await response.text()
        if (!response.ok) throw new ChFailure({ status: response.status, text, cause: undefined, timeoutMs })
        return text
      } finally {
        deadline.removeEventListener("abort", onDeadline)
        interrupt.removeEventListener("abort", onInterrupt)
      }
    },
    catch: (cause) =>
      cause instanceof ChFailure ? cause : new ChFailure({ status: undefined, text: "", cause, timeoutMs })
  })

/** Rows of a SELECT, as JSON objects (JSONEachRow: one per line). */
const rows = (server: Server, sql: string): Effect.Effect<ReadonlyArray<Record<string, unknown>>, ChFailure> =>
  Effect.map(send(server, `${sql} FORMAT JSONEachRow`), (text) =>
    text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as Record<string, unknown>)
  )

/** Identifiers are checked names, and catalog names (which may hold anything) have their backticks escaped. */
const ident = (name: string): string => `\`${name.replaceAll("\\", "\\\\").replaceAll("`", "\\`")}\``
const literal = (text: string): string => `'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`

const withServer = <A>(
  adminUrl: string | undefined,
  action: string,
  database: string,
  body: (server: Server) => Effect.Effect<A, ChFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    body(server).pipe(
      Effect.catchTag("ChFailure", (failure) => Effect.fail(classify(server, action, database, failure)))
    )
  )

const ensureMeta = (server: Server): Effect.Effect<void, ChFailure> =>
  Effect.asVoid(send(server, `CREATE DATABASE IF NOT EXISTS ${ident(META_DB)}`))

interface State {
  readonly database: boolean
  /** the installation the mark names, if there is one */
  readonly mark: string | undefined
}

const ownerOf = (expression: unknown): string | undefined => {
  const match = typeof expression === "string" ? /^'([a-z0-9_]*)'$/.exec(expression) : null
  return match?.[1] ?? (typeof expression === "string" ? "" : undefined)
}

const look = (server: Server, name: string): Effect.Effect<State, ChFailure> =>
  Effect.gen(function* () {
    const databases = yield* rows(server, `SELECT name FROM system.databases WHERE name = ${literal(name)}`)
    const marks = yield* rows(
      server,
      `SELECT default_expression AS owner FROM system.columns WHERE database = ${literal(META_DB)} AND table = ${literal(name)} AND name = 'owner'`
    )
    return { database: databases.length > 0, mark: marks.length > 0 ? ownerOf(marks[0]?.owner) : undefined }
  })

const standingOf =
  (owner: string) =>
  (state: State): Standing => {
    if (state.mark !== undefined) {
      if (state.mark !== owner) return "foreign"
      return state.database ? "ours" : "unfinished"
    }
    return state.database ? "foreign" : "missing"
  }

const notOurs = (server: Server, name: string, state: State): string =>
  state.mark !== undefined
    ? `database "${name}" on ${server.location} is a slice of another berth installation`
    : `database "${name}" on ${server.location} is not a berth slice`

/** The mark, in one exclusive statement: false when a mark of that name exists already. */
const mark = (server: Server, owner: string, name: string): Effect.Effect<boolean, ChFailure> =>
  send(
    server,
    `CREATE TABLE ${ident(META_DB)}.${ident(name)} (owner String DEFAULT ${literal(owner)}, slice String DEFAULT ${literal(name)}) ENGINE = Log`
  ).pipe(
    Effect.as(true),
    Effect.catchIf(
      (failure) => serverCode(failure) === TABLE_ALREADY_EXISTS,
      () => Effect.succeed(false)
    )
  )

/** Creates the database; false when it exists already (another provision got there first). */
const createDatabase = (server: Server, name: string): Effect.Effect<boolean, ChFailure> =>
  send(server, `CREATE DATABASE ${ident(name)}`).pipe(
    Effect.as(true),
    Effect.catchIf(
      (failure) => serverCode(failure) === DATABASE_ALREADY_EXISTS,
      () => Effect.succeed(false)
    )
  )

/** Claims `name` for `owner` (or finds the claim ours already) and creates its database. */
const create = (server: Server, owner: string, name: string): Effect.Effect<boolean, ChFailure> =>
  Effect.gen(function* () {
    if (!(yield* mark(server, owner, name)) && (yield* look(server, name)).mark !== owner) return false
    return yield* createDatabase(server, name)
  })

const dropDatabase = (server: Server, name: string): Effect.Effect<void, ChFailure> =>
  Effect.asVoid(send(server, `DROP DATABASE IF EXISTS ${ident(name)}`, WRITE_TIMEOUT_MS))

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, "look at", name, (server) =>
      Effect.map(look(server, name), (state) => ownerStanding(standingOf(slice.owner)(state)))
    )
  )

const provision = Effect.fn("ClickhouseAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withServer(slice.adminUrl, "provision", name, (server) =>
    provisionOwned({
      // the mark's CREATE TABLE is exclusive: it is the lock
      lock: ensureMeta(server),
      look: look(server, name),
      standing: standingOf(slice.owner),
      // a mark without its database: create finishes it
      clear: Effect.void,
      create: create(server, slice.owner, name),
      settle: CREATE_WAIT,
      taken: (state) => fail("taken", `${notOurs(server, name, state)}; drop it or pick another name`),
      vanished: (state) =>
        fail(
          "failed",
          `database "${name}" on ${server.location} ${state.mark === undefined ? "appeared and vanished" : "was being made by another berth operation"} during provision; retry`
        )
    })
  )
})

const resolveUrl = Effect.fn("ClickhouseAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  const url = new URL(server.url.href)
  url.searchParams.set("database", name)
  return url.href
})

const teardown = Effect.fn("ClickhouseAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withServer(slice.adminUrl, "tear down", name, (server) =>
    teardownOwned({
      lock: Effect.void,
      look: look(server, name),
      standing: standingOf(slice.owner),
      // the database first, the mark last: a crash in between leaves a mark that list returns
      drop: Effect.zipRight(
        dropDatabase(server, name),
        send(server, `DROP TABLE IF EXISTS ${ident(META_DB)}.${ident(name)}`)
      ),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving it alone`)
    })
  )
})

/** Copying fails with the object it was copying named. */
class CopyStepFailure extends Data.TaggedError("CopyStepFailure")<{
  readonly what: string
  readonly failure: ChFailure
}> {}

const step = <A>(what: string, effect: Effect.Effect<A, ChFailure>): Effect.Effect<A, CopyStepFailure> =>
  Effect.mapError(effect, (failure) => new CopyStepFailure({ what, failure }))

const copyTables = (
  server: Server,
  source: string,
  target: string
): Effect.Effect<void, CopyStepFailure | AdapterError> =>
  Effect.gen(function* () {
    const tables = yield* step(
      "listing tables",
      rows(server, `SELECT name, engine FROM system.tables WHERE database = ${literal(source)} ORDER BY name`)
    )
    const materialized = tables.filter((t) => t.engine === "MaterializedView").map((t) => String(t.name))
    if (materialized.length > 0) {
      return yield* Effect.fail(
        fail(
          "failed",
          `cannot clone database "${source}": berth does not copy materialized views (${materialized.join(", ")})`
        )
      )
    }
    for (const table of tables.filter((t) => t.engine !== "View")) {
      const name = String(table.name)
      yield* step(
        `creating table "${name}"`,
        send(server, `CREATE TABLE ${ident(target)}.${ident(name)} AS ${ident(source)}.${ident(name)}`)
      )
      yield* step(
        `copying the rows of table "${name}"`,
        send(
          server,
          `INSERT INTO ${ident(target)}.${ident(name)} SELECT * FROM ${ident(source)}.${ident(name)}`,
          WRITE_TIMEOUT_MS
        )
      )
    }
    for (const view of tables.filter((t) => t.engine === "View")) {
      const name = String(view.name)
      const statement = yield* step(
        `reading view "${name}"`,
        Effect.map(rows(server, `SHOW CREATE TABLE ${ident(source)}.${ident(name)}`), (shown) =>
          String(shown[0]?.statement ?? "")
        )
      )
      // `source` is a checked name: no regex metacharacters; only qualified mentions are replaced
      const retargeted = statement.replace(new RegExp(`(\`?)${source}\\1\\.`, "g"), `${ident(target)}.`)
      yield* step(`creating view "${name}"`, send(server, retargeted))
    }
  })

const clone = Effect.fn("ClickhouseAdapter.clone")(function* (from: Slice, to: Slice) {
  const source = yield* checkSlice(from)
  const target = yield* checkSlice(to)
  if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone database "${source}" onto itself`))
  yield* withServer(to.adminUrl ?? from.adminUrl, "clone into", target, (server) =>
    Effect.gen(function* () {
      yield* ensureMeta(server)
      const sourceState = yield* look(server, source)
      const sourceStanding = standingOf(from.owner)(sourceState)
      if (sourceStanding === "missing" || sourceStanding === "unfinished") {
        return yield* Effect.fail(
          fail("failed", `cannot clone: database "${source}" does not exist on ${server.location} (provision it first)`)
        )
      }
      if (sourceStanding === "foreign") {
        return yield* Effect.fail(fail("not-owned", `cannot clone: ${notOurs(server, source, sourceState)}`))
      }
      const targetState = yield* look(server, target)
      if (standingOf(to.owner)(targetState) === "foreign") {
        return yield* Effect.fail(
          fail("not-owned", `cannot clone: ${notOurs(server, target, targetState)}; leaving it alone`)
        )
      }
      // the target starts empty: an owned one (or a claim of ours) is dropped and made again
      yield* dropDatabase(server, target)
      yield* create(server, to.owner, target)
      const now = yield* look(server, target)
      if (standingOf(to.owner)(now) !== "ours") {
        return yield* Effect.fail(
          fail(
            "not-owned",
            `cannot clone: ${notOurs(server, target, now)} (it was claimed meanwhile); leaving it alone`
          )
        )
      }
      yield* copyTables(server, source, target).pipe(
        // never leave a half copy behind: the target goes back to empty (and stays owned)
        Effect.tapError(() =>
          Effect.ignore(Effect.zipRight(dropDatabase(server, target), createDatabase(server, target)))
        ),
        Effect.catchTag("CopyStepFailure", ({ what, failure }) =>
          Effect.fail(classify(server, `clone "${source}" (while ${what}) into`, target, failure))
        )
      )
    })
  )
})

const list = Effect.fn("ClickhouseAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withServer(scope.adminUrl, "list slices from", META_DB, (server) =>
    Effect.map(
      rows(
        server,
        `SELECT table, default_expression AS owner FROM system.columns WHERE database = ${literal(META_DB)} AND name = 'owner' ORDER BY table`
      ),
      // marks without their database too: what a crash left half-made is gc's to drop
      (marks) => marks.filter((row) => ownerOf(row.owner) === owner).map((row) => String(row.table))
    )
  )
})

export const clickhouseAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
