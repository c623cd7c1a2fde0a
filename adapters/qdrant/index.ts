/**
 * The `qdrant` adapter: each world gets a collection prefix (`<slice>-`) on one shared Qdrant server, spoken to over
 * its REST API with `fetch` through the service's `admin_url` (default `http://127.0.0.1:6333`; an API key goes in
 * as the URL's password, `http://:KEY@host:6333`, and is sent as the `api-key` header). No client library: berth
 * needs a handful of calls, and the REST API is the server's own.
 *
 * Ownership is a marker collection `berth-mark-<slice>` whose one (named) vector is called after the owning
 * installation: creating a collection is exclusive (a second create of one name fails), and the owner is part of the
 * same create, so a claim is marked in one step and a crash leaves either nothing or a whole mark. Collections appear
 * under the prefix as the world makes them. A prefix that holds collections without this installation's mark is never
 * reused (`taken`), dropped (`not-owned`) or listed. Teardown deletes the prefix's collections, then the marker, so a
 * crash in between leaves a mark that gc finds.
 *
 * `clone` copies server-side into a target that starts empty: each collection is created under the target's prefix
 * with the source's vector, index and quantization configuration and payload indexes, then its points (vectors and
 * payloads) are scrolled out and upserted in pages. Not snapshots: restoring one needs the server to fetch it from a
 * URL or an upload, where scroll-and-upsert needs nothing but the API.
 *
 * `resolve` gives the admin URL with the prefix as a query parameter: `http://:KEY@127.0.0.1:6333/?prefix=<slice>-`;
 * connect to it without the query and name every collection with the prefix.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { pauses, provisionOwned, type Standing, teardownOwned, ownerStanding } from "../ownership.js"
import { decodeComponent, fetchFailure, parseAdminUrl, secretsOf, sliceChecks } from "../shared.js"

const ADAPTER = "qdrant"
const DEFAULT_URL = "http://127.0.0.1:6333"
/** collection names are at most 255 characters: this leaves the world room for its own part after the prefix */
export const MAX_NAME = 100
const MARK_PREFIX = "berth-mark-"
/** a slice named `berth` would have the marks under its prefix */
const RESERVED: ReadonlySet<string> = new Set(["berth"])
const READ_TIMEOUT_MS = 10_000
/** a page of a large golden's points may take a while to write */
const WRITE_TIMEOUT_MS = 300_000
const CREATE_WAIT = pauses(50, 100, 200, 400)
const PAGE = 256

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

const names = sliceChecks(ADAPTER, "collection prefix", MAX_NAME)
const { checkOwner } = names

const checkSlice = (slice: Pick<Slice, "name" | "owner">): Effect.Effect<string, AdapterError> =>
  Effect.zipRight(
    checkOwner(slice.owner),
    Effect.flatMap(names.checkName(slice.name), (name) =>
      RESERVED.has(name)
        ? Effect.fail(fail("invalid", `refusing collection prefix "${name}": it is reserved for berth`))
        : Effect.succeed(name)
    )
  )

/** A slice's collections are those named `<slice>-…`: no name has a `-`, so no prefix is inside another's. */
export const prefixOf = (name: string): string => `${name}-`
export const markOf = (name: string): string => `${MARK_PREFIX}${name}`

interface Server {
  readonly url: URL
  /** the REST root, without credentials */
  readonly endpoint: string
  readonly apiKey: string | undefined
  readonly location: string
  readonly secrets: ReadonlyArray<string>
}

export const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["http:", "https:"],
      kind: "an http:// or https:// URL of Qdrant's REST API",
      example: "http://:API_KEY@host:6333",
      variable: "QDRANT_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    (url) => {
      const key = decodeComponent(url.password)
      const port = url.port || (url.protocol === "https:" ? "443" : "80")
      const path = url.pathname.endsWith("/") ? url.pathname : `${url.pathname}/`
      return {
        url,
        endpoint: `${url.protocol}//${url.host}${path}`,
        apiKey: key === "" ? undefined : key,
        location: `${url.hostname}:${port}`,
        secrets: secretsOf(url)
      }
    }
  )

/** The slice's URL: the admin URL (its key kept) with its prefix as a query parameter. */
export const sliceUrl = (admin: URL, name: string): string => {
  const url = new URL(admin.href)
  url.searchParams.set("prefix", prefixOf(name))
  return url.href
}

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** A REST exchange that failed: no answer (`status` undefined), or the server's error. */
class QdrantFailure extends Data.TaggedError("QdrantFailure")<{
  readonly status: number | undefined
  readonly text: string
  readonly cause: unknown
  readonly timeoutMs: number
}> {}

/** The kind of a failed exchange, and what to say of it. */
export const classify = (
  location: string,
  action: string,
  failure: Pick<QdrantFailure, "status" | "text" | "cause" | "timeoutMs">
): { kind: AdapterErrorKind; message: string } => {
  if (failure.status === undefined) {
    const { detail, unreachable } = fetchFailure(failure.cause, failure.timeoutMs)
    if (unreachable) {
      return { kind: "unreachable", message: `cannot reach Qdrant at ${location} to ${action}: ${detail}` }
    }
    return { kind: "failed", message: `could not ${action} on ${location}: ${detail}` }
  }
  const detail = failure.text.slice(0, 500) || `HTTP ${failure.status}`
  if (failure.status === 401) {
    return { kind: "authentication", message: `Qdrant refused the admin_url's API key; could not ${action}: ${detail}` }
  }
  if (failure.status === 403) {
    return {
      kind: "grant",
      message: `the admin_url's API key may not manage collections (a read-only key?); could not ${action}: ${detail}`
    }
  }
  return { kind: "failed", message: `could not ${action} on ${location}: ${detail}` }
}

/**
 * One REST call, its `result`. Every path segment is a checked name or is percent-encoded by the caller. The deadline
 * and the interruption share one signal, joined by hand (`AbortSignal.any` can lose the timeout on Node 20).
 */
const send = (
  server: Server,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = READ_TIMEOUT_MS
): Effect.Effect<unknown, QdrantFailure> =>
  Effect.tryPromise({
    try: async (interrupt) => {
      const controller = new AbortController()
      const deadline = AbortSignal.timeout(timeoutMs)
      const onDeadline = () => controller.abort(deadline.reason)
      const onInterrupt = () => controller.abort(interrupt.reason)
      deadline.addEventListener("abort", onDeadline, { once: true })
      interrupt.addEventListener("abort", onInterrupt, { once: true })
      try {
        const headers: Record<string, string> = {}
        if (server.apiKey !== undefined) headers["api-key"] = server.apiKey
        if (body !== undefined) headers["content-type"] = "application/json"
        const response = await fetch(`${server.endpoint}${path}`, {
          method,
          headers,
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          redirect: "error",
          signal: controller.signal
        })
        const text = await response.text()
        if (!response.ok) throw new QdrantFailure({ status: response.status, text, cause: undefined, timeoutMs })
        return field(text === "" ? undefined : (JSON.parse(text) as unknown), "result")
      } finally {
        deadline.removeEventListener("abort", onDeadline)
        interrupt.removeEventListener("abort", onInterrupt)
      }
    },
    catch: (cause) =>
      cause instanceof QdrantFailure ? cause : new QdrantFailure({ status: undefined, text: "", cause, timeoutMs })
  })

const withServer = <A>(
  adminUrl: string | undefined,
  action: string,
  body: (server: Server) => Effect.Effect<A, QdrantFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    body(server).pipe(
      Effect.catchTag("QdrantFailure", (failure) => {
        const { kind, message } = classify(server.location, action, failure)
        return Effect.fail(fail(kind, scrub(server, message)))
      })
    )
  )

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined

const collectionPath = (collection: string): string => `collections/${encodeURIComponent(collection)}`

/** Every collection on the server. */
const collections = (server: Server): Effect.Effect<ReadonlyArray<string>, QdrantFailure> =>
  Effect.map(send(server, "GET", "collections"), (result) => {
    const found = field(result, "collections")
    return (Array.isArray(found) ? found : [])
      .map((c) => field(c, "name"))
      .filter((name): name is string => typeof name === "string")
      .sort()
  })

const under = (all: ReadonlyArray<string>, name: string): ReadonlyArray<string> =>
  all.filter((c) => c.startsWith(prefixOf(name)))

/** The owner a marker collection names: its one vector's name. */
export const ownerOfMark = (info: unknown): string | undefined => {
  const vectors = field(field(field(info, "config"), "params"), "vectors")
  if (typeof vectors !== "object" || vectors === null || "size" in vectors) return undefined
  const keys = Object.keys(vectors)
  return keys.length === 1 ? keys[0] : undefined
}

interface State {
  readonly collections: ReadonlyArray<string>
  /** the installation the mark names ("" for a marker berth cannot read), if there is one */
  readonly mark: string | undefined
}

const markOwner = (server: Server, name: string): Effect.Effect<string | undefined, QdrantFailure> =>
  send(server, "GET", collectionPath(markOf(name))).pipe(
    Effect.map((info) => ownerOfMark(info) ?? ""),
    Effect.catchIf(
      (failure) => failure.status === 404,
      () => Effect.succeed(undefined)
    )
  )

const look = (server: Server, name: string): Effect.Effect<State, QdrantFailure> =>
  Effect.gen(function* () {
    const mark = yield* markOwner(server, name)
    return { collections: under(yield* collections(server), name), mark }
  })

const standingOf =
  (owner: string) =>
  (state: State): Standing => {
    if (state.mark !== undefined) return state.mark === owner ? "ours" : "foreign"
    return state.collections.length > 0 ? "foreign" : "missing"
  }

const notOurs = (server: Server, name: string, state: State): string =>
  state.mark !== undefined
    ? `collection prefix "${prefixOf(name)}" on ${server.location} is a slice of another berth installation`
    : `collection prefix "${prefixOf(name)}" on ${server.location} holds collections berth did not make (${state.collections.slice(0, 5).join(", ")})`

/** Qdrant says a collection exists already with a 409 (newer) or a 400 naming it (older). */
const alreadyExists = (failure: QdrantFailure): boolean =>
  failure.status === 409 || (failure.status === 400 && /already exists/i.test(failure.text))

/**
 * Claims the name with its marker collection: false when the marker exists already, or when collections appeared
 * under the prefix unmarked (someone outside berth made them), whose claim is withdrawn again.
 */
const create = (server: Server, owner: string, name: string): Effect.Effect<boolean, QdrantFailure> =>
  Effect.gen(function* () {
    const claimed = yield* send(server, "PUT", collectionPath(markOf(name)), {
      vectors: { [owner]: { size: 1, distance: "Dot" } }
    }).pipe(
      Effect.as(true),
      Effect.catchIf(alreadyExists, () => Effect.succeed(false))
    )
    if (!claimed) return false
    if (under(yield* collections(server), name).length > 0) {
      yield* send(server, "DELETE", collectionPath(markOf(name)))
      return false
    }
    return true
  })

const deleteCollections = (server: Server, names: ReadonlyArray<string>): Effect.Effect<void, QdrantFailure> =>
  Effect.forEach(names, (c) => send(server, "DELETE", collectionPath(c), undefined, WRITE_TIMEOUT_MS), {
    discard: true
  })

const emptyPrefix = (server: Server, name: string): Effect.Effect<void, QdrantFailure> =>
  Effect.flatMap(collections(server), (all) => deleteCollections(server, under(all, name)))

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, `look at collection prefix "${prefixOf(name)}"`, (server) =>
      Effect.map(look(server, name), (state) => ownerStanding(standingOf(slice.owner)(state)))
    )
  )

const provision = Effect.fn("QdrantAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withServer(slice.adminUrl, `provision collection prefix "${prefixOf(name)}"`, (server) =>
    provisionOwned({
      // creating the marker collection is exclusive: it is the lock
      lock: Effect.void,
      look: look(server, name),
      standing: standingOf(slice.owner),
      clear: Effect.void,
      create: create(server, slice.owner, name),
      settle: CREATE_WAIT,
      taken: (state) => fail("taken", `${notOurs(server, name, state)}; delete them or pick another name`),
      vanished: () =>
        fail(
          "failed",
          `collection prefix "${prefixOf(name)}" on ${server.location} appeared and vanished during provision; retry`
        )
    })
  )
})

const resolveUrl = Effect.fn("QdrantAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  return sliceUrl(server.url, name)
})

const teardown = Effect.fn("QdrantAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withServer(slice.adminUrl, `tear down collection prefix "${prefixOf(name)}"`, (server) =>
    teardownOwned({
      lock: Effect.void,
      look: look(server, name),
      standing: standingOf(slice.owner),
      // the collections first, the mark last: a crash in between leaves a mark that list returns
      drop: Effect.zipRight(emptyPrefix(server, name), deleteCollections(server, [markOf(name)])),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving it alone`)
    })
  )
})

/** What creating a copy of a collection takes from its info: its vectors, storage, index and quantization. */
export const creationOf = (info: unknown): Record<string, unknown> => {
  const config = field(info, "config")
  const params = field(config, "params")
  const body: Record<string, unknown> = {}
  for (const key of [
    "vectors",
    "sparse_vectors",
    "shard_number",
    "replication_factor",
    "write_consistency_factor",
    "on_disk_payload"
  ]) {
    const value = field(params, key)
    if (value !== undefined && value !== null) body[key] = value
  }
  for (const [from, to] of [
    ["hnsw_config", "hnsw_config"],
    ["optimizer_config", "optimizers_config"],
    ["quantization_config", "quantization_config"]
  ] as const) {
    const value = field(config, from)
    if (value !== undefined && value !== null) body[to] = value
  }
  return body
}

/** The payload indexes of a collection, as `PUT …/index` bodies. */
export const payloadIndexesOf = (info: unknown): ReadonlyArray<Record<string, unknown>> => {
  const schema = field(info, "payload_schema")
  if (typeof schema !== "object" || schema === null) return []
  return Object.entries(schema).map(([fieldName, described]) => ({
    field_name: fieldName,
    field_schema: field(described, "params") ?? field(described, "data_type")
  }))
}

/** Copies one collection's points, a page at a time. */
const copyPoints = (server: Server, from: string, to: string): Effect.Effect<void, QdrantFailure> =>
  Effect.gen(function* () {
    let offset: unknown = null
    do {
      const page = yield* send(server, "POST", `${collectionPath(from)}/points/scroll`, {
        limit: PAGE,
        with_payload: true,
        with_vector: true,
        ...(offset === null ? {} : { offset })
      })
      const points = field(page, "points")
      const batch = (Array.isArray(points) ? points : []).map((point) => ({
        id: field(point, "id"),
        payload: field(point, "payload") ?? {},
        vector: field(point, "vector") ?? {}
      }))
      if (batch.length > 0) {
        yield* send(server, "PUT", `${collectionPath(to)}/points?wait=true`, { points: batch }, WRITE_TIMEOUT_MS)
      }
      offset = field(page, "next_page_offset") ?? null
    } while (offset !== null)
  })

/** Copies every collection under `source`'s prefix to the same suffix under `target`'s (which is empty). */
const copyCollections = (server: Server, source: string, target: string): Effect.Effect<void, QdrantFailure> =>
  Effect.gen(function* () {
    for (const collection of under(yield* collections(server), source)) {
      const copy = `${prefixOf(target)}${collection.slice(prefixOf(source).length)}`
      const info = yield* send(server, "GET", collectionPath(collection))
      yield* send(server, "PUT", collectionPath(copy), creationOf(info), WRITE_TIMEOUT_MS)
      for (const index of payloadIndexesOf(info)) {
        yield* send(server, "PUT", `${collectionPath(copy)}/index?wait=true`, index)
      }
      yield* copyPoints(server, collection, copy)
    }
  })

const clone = Effect.fn("QdrantAdapter.clone")(function* (from: Slice, to: Slice) {
  const source = yield* checkSlice(from)
  const target = yield* checkSlice(to)
  if (source === target) {
    return yield* Effect.fail(fail("invalid", `cannot clone collection prefix "${prefixOf(source)}" onto itself`))
  }
  yield* withServer(
    to.adminUrl ?? from.adminUrl,
    `clone collection prefix "${prefixOf(source)}" into "${prefixOf(target)}"`,
    (server) =>
      Effect.gen(function* () {
        const sourceState = yield* look(server, source)
        const sourceStanding = standingOf(from.owner)(sourceState)
        if (sourceStanding === "missing" || sourceStanding === "unfinished") {
          return yield* Effect.fail(
            fail(
              "failed",
              `cannot clone: collection prefix "${prefixOf(source)}" is not a slice on ${server.location} (provision it first)`
            )
          )
        }
        if (sourceStanding === "foreign") {
          return yield* Effect.fail(fail("not-owned", `cannot clone: ${notOurs(server, source, sourceState)}`))
        }
        const targetState = yield* look(server, target)
        const targetStanding = standingOf(to.owner)(targetState)
        if (targetStanding === "foreign") {
          return yield* Effect.fail(
            fail("not-owned", `cannot clone: ${notOurs(server, target, targetState)}; leaving it alone`)
          )
        }
        if (targetStanding === "missing" && !(yield* create(server, to.owner, target))) {
          return yield* Effect.fail(
            fail("not-owned", `cannot clone: collection prefix "${prefixOf(target)}" was claimed meanwhile`)
          )
        }
        // the target starts empty (and stays marked)
        yield* emptyPrefix(server, target)
        yield* copyCollections(server, source, target).pipe(
          // never leave a half copy behind
          Effect.tapError(() => Effect.ignore(emptyPrefix(server, target)))
        )
      })
  )
})

const list = Effect.fn("QdrantAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withServer(scope.adminUrl, "list slices", (server) =>
    Effect.gen(function* () {
      const marked = (yield* collections(server))
        .filter((c) => c.startsWith(MARK_PREFIX))
        .map((c) => c.slice(MARK_PREFIX.length))
      const owners = yield* Effect.forEach(marked, (name) => markOwner(server, name))
      return marked.filter((_, i) => owners[i] === owner)
    })
  )
})

export const qdrantAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
