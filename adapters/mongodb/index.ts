/**
 * The `mongodb` adapter: each world gets its own database on one shared MongoDB server (or replica set), reached with
 * the official `mongodb` driver through the service's `admin_url` (default `mongodb://127.0.0.1:27017`; one host —
 * a `mongodb+srv://` URL names a whole cluster).
 *
 * Ownership is marked in berth's own database `berth_meta`: a document `{ _id: <slice>, owner }` in its collection
 * `slices`. The insert is the claim (`_id` is unique, so two claims of one name never both succeed), and since
 * MongoDB makes a database when its first collection is written, the mark alone is the slice: a crash leaves either
 * nothing or a mark, which `list` returns. A database that exists without this installation's mark (it holds data
 * berth did not write) is never reused (`taken`), dropped (`not-owned`) or listed. Teardown drops the database, then
 * the mark, so a crash in between leaves a mark that gc finds.
 *
 * `clone` copies server-side into a target that starts empty: each collection is created with the source's options
 * (validators, collation), its indexes are created, and its documents are copied by an aggregation ending in `$out`
 * to the target database; views are created again on the copies. Capped and time-series collections cannot be the
 * target of `$out`, so a clone of one fails, naming it. A clone that fails half way leaves the target empty again.
 * `$out` into another database needs MongoDB 4.4 or newer.
 *
 * `resolve` gives the admin URL with the slice's database as its path, and `authSource` set to the database the admin
 * URL authenticated against, so credentials keep working: `mongodb://root:pw@127.0.0.1:27017/acme_login_db?authSource=admin`.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import {
  type Db,
  type Document,
  MongoClient,
  MongoNetworkError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError
} from "mongodb"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { pauses, provisionOwned, type Standing, teardownOwned, ownerStanding } from "../ownership.js"
import { describeCause, errorCode, NETWORK_CODES, parseAdminUrl, secretsOf, sliceChecks } from "../shared.js"

const ADAPTER = "mongodb"
const DEFAULT_URL = "mongodb://127.0.0.1:27017"
/** MongoDB database names are fewer than 64 characters */
export const MAX_NAME = 63
const META_DB = "berth_meta"
const META_COLLECTION = "slices"
/** names a slice may never take: berth's own database and the server's */
const RESERVED: ReadonlySet<string> = new Set([META_DB, "admin", "local", "config"])
/** short, so that a server that is gone is an error in seconds, not the driver's 30 s */
const SELECT_TIMEOUT_MS = 3_000
/** a copy of a large golden may take a while */
const SOCKET_TIMEOUT_MS = 300_000
/** while a concurrent provision that won the mark is still checking the name */
const CREATE_WAIT = pauses(50, 100, 200, 400)

const DUPLICATE_KEY = 11000
const NAMESPACE_NOT_FOUND = 26
const AUTHENTICATION_FAILED = 18
const UNAUTHORIZED = 13

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

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

interface Server {
  readonly url: URL
  /** host:port, for messages */
  readonly location: string
  readonly secrets: ReadonlyArray<string>
}

export const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["mongodb:", "mongodb+srv:"],
      kind: "a mongodb:// or mongodb+srv:// URL",
      example: "mongodb://user:password@host:27017/admin",
      variable: "MONGODB_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    (url) => ({
      url,
      location: url.protocol === "mongodb+srv:" ? url.hostname : `${url.hostname}:${url.port || "27017"}`,
      secrets: secretsOf(url)
    })
  )

/** The slice's URL: the admin URL with the database as its path, authenticating where the admin URL did. */
export const sliceUrl = (admin: URL, database: string): string => {
  const url = new URL(admin.href)
  if (url.username !== "" && !url.searchParams.has("authSource")) {
    const authDb = decodeURIComponent(admin.pathname.replace(/^\//, ""))
    url.searchParams.set("authSource", authDb === "" ? "admin" : authDb)
  }
  url.pathname = `/${encodeURIComponent(database)}`
  return url.href
}

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** What a driver error means to berth. */
export const classify = (
  location: string,
  action: string,
  cause: unknown
): { kind: AdapterErrorKind; message: string } => {
  const detail = describeCause(cause)
  const code = errorCode(cause)
  if (
    cause instanceof MongoNetworkError ||
    cause instanceof MongoServerSelectionError ||
    cause instanceof MongoTopologyClosedError ||
    (code !== undefined && NETWORK_CODES.has(code))
  ) {
    return { kind: "unreachable", message: `cannot reach MongoDB at ${location} to ${action}: ${detail}` }
  }
  if (cause instanceof MongoServerError) {
    if (cause.code === AUTHENTICATION_FAILED) {
      return {
        kind: "authentication",
        message: `MongoDB refused the admin_url credentials; could not ${action}: ${detail}`
      }
    }
    if (cause.code === UNAUTHORIZED) {
      return {
        kind: "grant",
        message: `the admin_url user lacks a privilege (it needs readWriteAnyDatabase and dropDatabase); could not ${action}: ${detail}`
      }
    }
  }
  return { kind: "failed", message: `could not ${action} on ${location}: ${detail}` }
}

/** A driver call that failed; `withClient` classifies its cause. */
class Failure extends Data.TaggedError("MongoFailure")<{ readonly cause: unknown }> {}

const call = <A>(f: () => Promise<A>): Effect.Effect<A, Failure> =>
  Effect.tryPromise({ try: f, catch: (cause) => new Failure({ cause }) })

/** Runs `body` with a connected client, closed afterwards whatever happens; driver failures are classified. */
const withClient = <A>(
  adminUrl: string | undefined,
  action: string,
  body: (client: MongoClient, server: Server) => Effect.Effect<A, Failure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    Effect.acquireUseRelease(
      call(async () => {
        const client = new MongoClient(server.url.href, {
          serverSelectionTimeoutMS: SELECT_TIMEOUT_MS,
          connectTimeoutMS: SELECT_TIMEOUT_MS,
          socketTimeoutMS: SOCKET_TIMEOUT_MS,
          appName: "berth"
        })
        try {
          return await client.connect()
        } catch (cause) {
          await client.close().catch(() => undefined)
          throw cause
        }
      }),
      (client) => body(client, server),
      (client) => Effect.promise(() => client.close(true).catch(() => undefined))
    ).pipe(
      Effect.catchTag("MongoFailure", (failure) => {
        const { kind, message } = classify(server.location, action, failure.cause)
        return Effect.fail(fail(kind, scrub(server, message)))
      })
    )
  )

interface State {
  /** the database holds at least one collection */
  readonly database: boolean
  /** the installation the mark names, if there is one */
  readonly mark: string | undefined
}

const marks = (client: MongoClient) => client.db(META_DB).collection<{ _id: string; owner: string }>(META_COLLECTION)

const databaseExists = (client: MongoClient, name: string): Effect.Effect<boolean, Failure> =>
  call(async () => (await client.db(name).listCollections({}, { nameOnly: true }).toArray()).length > 0)

const look = (client: MongoClient, name: string): Effect.Effect<State, Failure> =>
  Effect.gen(function* () {
    const mark = yield* call(() => marks(client).findOne({ _id: name }))
    const database = yield* databaseExists(client, name)
    return { database, mark: mark === null ? undefined : String(mark.owner) }
  })

const standingOf =
  (owner: string) =>
  (state: State): Standing => {
    if (state.mark !== undefined) return state.mark === owner ? "ours" : "foreign"
    return state.database ? "foreign" : "missing"
  }

const notOurs = (server: Server, name: string, state: State): string =>
  state.mark !== undefined
    ? `database "${name}" on ${server.location} is a slice of another berth installation`
    : `database "${name}" on ${server.location} is not a berth slice`

/**
 * Claims the name: false when a mark exists already, or when a database of that name appeared unmarked (someone
 * outside berth wrote to it), whose claim is withdrawn again.
 */
const create = (client: MongoClient, owner: string, name: string): Effect.Effect<boolean, Failure> =>
  Effect.gen(function* () {
    const inserted = yield* call(() => marks(client).insertOne({ _id: name, owner })).pipe(
      Effect.as(true),
      Effect.catchIf(
        (failure) => failure.cause instanceof MongoServerError && failure.cause.code === DUPLICATE_KEY,
        () => Effect.succeed(false)
      )
    )
    if (!inserted) return false
    if (yield* databaseExists(client, name)) {
      yield* call(() => marks(client).deleteOne({ _id: name, owner }))
      return false
    }
    return true
  })

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withClient(slice.adminUrl, `look at database "${name}"`, (client) =>
      Effect.map(look(client, name), (state) => ownerStanding(standingOf(slice.owner)(state)))
    )
  )

const provision = Effect.fn("MongodbAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withClient(slice.adminUrl, `provision database "${name}"`, (client, server) =>
    provisionOwned({
      // the mark's insert is exclusive: it is the lock
      lock: Effect.void,
      look: look(client, name),
      standing: standingOf(slice.owner),
      clear: Effect.void,
      create: create(client, slice.owner, name),
      settle: CREATE_WAIT,
      taken: (state) => fail("taken", `${notOurs(server, name, state)}; drop it or pick another name`),
      vanished: () =>
        fail("failed", `database "${name}" on ${server.location} appeared and vanished during provision; retry`)
    })
  )
})

const resolveUrl = Effect.fn("MongodbAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  return sliceUrl(server.url, name)
})

const dropDatabase = (client: MongoClient, name: string): Effect.Effect<void, Failure> =>
  Effect.asVoid(call(() => client.db(name).dropDatabase()))

const teardown = Effect.fn("MongodbAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withClient(slice.adminUrl, `tear down database "${name}"`, (client, server) =>
    teardownOwned({
      lock: Effect.void,
      look: look(client, name),
      standing: standingOf(slice.owner),
      // the database first, the mark last: a crash in between leaves a mark that list returns
      drop: Effect.zipRight(
        dropDatabase(client, name),
        Effect.asVoid(call(() => marks(client).deleteOne({ _id: name, owner: slice.owner })))
      ),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving it alone`)
    })
  )
})

/** Collection options `createCollection` takes again: what `listCollections` reports minus the server's own. */
const creatable = (options: Document): Document => {
  const { uuid: _uuid, ...rest } = options
  return rest
}

/** Copies every collection (options, indexes, documents) and view of `source` into the empty `target`. */
const copyDatabase = (source: Db, target: Db): Effect.Effect<void, Failure | AdapterError> =>
  Effect.gen(function* () {
    const all = yield* call(() => source.listCollections({}, { nameOnly: false }).toArray())
    const entries = all.filter((c) => !c.name.startsWith("system."))
    const unsupported = entries.filter(
      (c) => c.type === "timeseries" || (c.type === "collection" && c.options?.capped === true)
    )
    if (unsupported.length > 0) {
      return yield* Effect.fail(
        fail(
          "failed",
          `cannot clone database "${source.databaseName}": berth does not copy capped or time-series collections (${unsupported.map((c) => c.name).join(", ")})`
        )
      )
    }
    for (const entry of entries.filter((c) => c.type === "collection")) {
      const name = entry.name
      yield* call(() => target.createCollection(name, creatable(entry.options ?? {})))
      const indexes = yield* call(() => source.collection(name).listIndexes().toArray())
      const secondary = indexes
        .filter((index) => index.name !== "_id_")
        .map(({ v: _v, ns: _ns, ...index }) => index as Document & { key: Document })
      if (secondary.length > 0) {
        yield* call(() => target.command({ createIndexes: name, indexes: secondary }))
      }
      // $out replaces the collection made above, keeping its options and indexes
      yield* call(() =>
        source
          .collection(name)
          .aggregate([{ $out: { db: target.databaseName, coll: name } }], { allowDiskUse: true })
          .toArray()
      )
    }
    for (const view of entries.filter((c) => c.type === "view")) {
      yield* call(() => target.createCollection(view.name, creatable(view.options ?? {})))
    }
  })

const clone = Effect.fn("MongodbAdapter.clone")(function* (from: Slice, to: Slice) {
  const source = yield* checkSlice(from)
  const target = yield* checkSlice(to)
  if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone database "${source}" onto itself`))
  yield* withClient(to.adminUrl ?? from.adminUrl, `clone database "${source}" into "${target}"`, (client, server) =>
    Effect.gen(function* () {
      const sourceState = yield* look(client, source)
      const sourceStanding = standingOf(from.owner)(sourceState)
      if (sourceStanding === "missing" || sourceStanding === "unfinished") {
        return yield* Effect.fail(
          fail("failed", `cannot clone: database "${source}" is not a slice on ${server.location} (provision it first)`)
        )
      }
      if (sourceStanding === "foreign") {
        return yield* Effect.fail(fail("not-owned", `cannot clone: ${notOurs(server, source, sourceState)}`))
      }
      const targetState = yield* look(client, target)
      const targetStanding = standingOf(to.owner)(targetState)
      if (targetStanding === "foreign") {
        return yield* Effect.fail(
          fail("not-owned", `cannot clone: ${notOurs(server, target, targetState)}; leaving it alone`)
        )
      }
      if (targetStanding === "missing" && !(yield* create(client, to.owner, target))) {
        return yield* Effect.fail(fail("not-owned", `cannot clone: database "${target}" was claimed meanwhile`))
      }
      // the target starts empty (and stays marked)
      yield* dropDatabase(client, target)
      yield* copyDatabase(client.db(source), client.db(target)).pipe(
        // never leave a half copy behind
        Effect.tapError(() => Effect.ignore(dropDatabase(client, target)))
      )
    })
  )
})

const list = Effect.fn("MongodbAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withClient(scope.adminUrl, "list slices", (client) =>
    call(async () => {
      const found = await marks(client)
        .find({ owner }, { projection: { _id: 1 } })
        .sort({ _id: 1 })
        .toArray()
      return found.map((mark) => mark._id)
    }).pipe(
      Effect.catchIf(
        (failure) => failure.cause instanceof MongoServerError && failure.cause.code === NAMESPACE_NOT_FOUND,
        () => Effect.succeed([])
      )
    )
  )
})

export const mongodbAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
