/**
 * The `elasticsearch` / `opensearch` adapter: each world gets an index prefix (`<slice>-`) on one shared cluster,
 * spoken to over the REST API with `fetch` through the service's `admin_url` (default `http://127.0.0.1:9200`).
 * Plain REST rather than `@elastic/elasticsearch`: the official 8.x client refuses to talk to a server that does not
 * say it is Elasticsearch (its product check), so it cannot serve OpenSearch, while the few REST calls berth makes
 * (`_create`, `_cat/indices`, `_index_template`, `_reindex`, index deletion) are the same on both.
 *
 * Ownership is a document `{ owner, slice }` with the slice's name as its id in berth's index `berth_slices`, written
 * with `_create` (exclusive: two claims of one name never both succeed). The claim is the slice: indices appear under
 * the prefix as the world writes them. An index template `berth-<slice>` (pattern `<slice>-*`, low priority) gives
 * every index made under the prefix the owner in its mapping's `_meta`, so the cluster itself says whose an index
 * is. A prefix that holds indices without this installation's mark is never reused (`taken`), dropped (`not-owned`)
 * or listed. Teardown deletes the prefix's indices by name (clusters refuse wildcard deletes by default), then the
 * template, then the mark, so a crash in between leaves a mark that gc finds.
 *
 * `clone` copies server-side into a target that starts empty: each index is created under the target's prefix with
 * the source's mappings and settings, then filled with `_reindex`. Not `_clone`, which needs the source index
 * write-blocked: a golden stays writable.
 *
 * `resolve` gives the admin URL with the prefix as a query parameter: `http://elastic:pw@127.0.0.1:9200/?prefix=<slice>-`;
 * connect to it without the query and name every index with the prefix.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { pauses, provisionOwned, type Standing, teardownOwned, ownerStanding } from "../ownership.js"
import { decodeComponent, fetchFailure, parseAdminUrl, secretsOf, sliceChecks } from "../shared.js"

const ADAPTER = "elasticsearch"
const DEFAULT_URL = "http://127.0.0.1:9200"
/** index names are at most 255 bytes: this leaves the world room for its own part after the prefix */
export const MAX_NAME = 100
const META_INDEX = "berth_slices"
/** names a slice may never take: berth's own index's */
const RESERVED: ReadonlySet<string> = new Set([META_INDEX])
const READ_TIMEOUT_MS = 10_000
/** a reindex of a large golden may take a while */
const WRITE_TIMEOUT_MS = 300_000
const CREATE_WAIT = pauses(50, 100, 200, 400)
/** lower than any template a user would write, so that berth's never shadows theirs */
const TEMPLATE_PRIORITY = 1
/** settings that describe one index and cannot be given to a new one */
const UNCOPYABLE_SETTINGS: ReadonlySet<string> = new Set([
  "uuid",
  "creation_date",
  "provided_name",
  "version",
  "routing",
  "resize",
  "history_uuid",
  "verified_before_close"
])

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

const names = sliceChecks(ADAPTER, "index prefix", MAX_NAME)
const { checkOwner } = names

const checkSlice = (slice: Pick<Slice, "name" | "owner">): Effect.Effect<string, AdapterError> =>
  Effect.zipRight(
    checkOwner(slice.owner),
    Effect.flatMap(names.checkName(slice.name), (name) =>
      RESERVED.has(name)
        ? Effect.fail(fail("invalid", `refusing index prefix "${name}": it is reserved for berth`))
        : Effect.succeed(name)
    )
  )

/** A slice's indices are those named `<slice>-…`: no name has a `-`, so no prefix is inside another's. */
export const prefixOf = (name: string): string => `${name}-`
const templateOf = (name: string): string => `berth-${name}`

interface Server {
  readonly url: URL
  /** the REST root, without credentials */
  readonly endpoint: string
  readonly authorization: string | undefined
  readonly location: string
  readonly secrets: ReadonlyArray<string>
}

export const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["http:", "https:"],
      kind: "an http:// or https:// URL of the cluster's REST API",
      example: "http://elastic:password@host:9200",
      variable: "ELASTICSEARCH_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    (url) => {
      const user = decodeComponent(url.username)
      const password = decodeComponent(url.password)
      const port = url.port || (url.protocol === "https:" ? "443" : "80")
      const path = url.pathname.endsWith("/") ? url.pathname : `${url.pathname}/`
      return {
        url,
        endpoint: `${url.protocol}//${url.host}${path}`,
        authorization: user === "" ? undefined : `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
        location: `${url.hostname}:${port}`,
        secrets: secretsOf(url)
      }
    }
  )

/** The slice's URL: the admin URL (credentials kept) with its prefix as a query parameter. */
export const sliceUrl = (admin: URL, name: string): string => {
  const url = new URL(admin.href)
  url.searchParams.set("prefix", prefixOf(name))
  return url.href
}

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** A REST exchange that failed: no answer (`status` undefined), or the server's error. */
class EsFailure extends Data.TaggedError("EsFailure")<{
  readonly status: number | undefined
  /** the error's `type` (`resource_already_exists_exception`), when the server said */
  readonly type: string | undefined
  readonly text: string
  readonly cause: unknown
  readonly timeoutMs: number
}> {}

/** The kind of a failed exchange, and what to say of it. */
export const classify = (
  location: string,
  action: string,
  failure: Pick<EsFailure, "status" | "text" | "cause" | "timeoutMs">
): { kind: AdapterErrorKind; message: string } => {
  if (failure.status === undefined) {
    const { detail, unreachable } = fetchFailure(failure.cause, failure.timeoutMs)
    if (unreachable) {
      return { kind: "unreachable", message: `cannot reach the cluster at ${location} to ${action}: ${detail}` }
    }
    return { kind: "failed", message: `could not ${action} on ${location}: ${detail}` }
  }
  const detail = failure.text.slice(0, 500) || `HTTP ${failure.status}`
  if (failure.status === 401) {
    return {
      kind: "authentication",
      message: `the cluster refused the admin_url credentials; could not ${action}: ${detail}`
    }
  }
  if (failure.status === 403) {
    return {
      kind: "grant",
      message: `the admin_url user lacks a privilege (it needs to manage indices and templates); could not ${action}: ${detail}`
    }
  }
  return { kind: "failed", message: `could not ${action} on ${location}: ${detail}` }
}

/** The `error.type` of an Elasticsearch or OpenSearch error body. */
const errorType = (text: string): string | undefined => {
  try {
    const body: unknown = JSON.parse(text)
    if (typeof body !== "object" || body === null || !("error" in body)) return undefined
    const error = body.error
    return typeof error === "object" && error !== null && "type" in error && typeof error.type === "string"
      ? error.type
      : undefined
  } catch {
    return undefined
  }
}

/**
 * One REST call, its answer parsed. Every path segment is a checked name or is percent-encoded by the caller. The
 * deadline and the interruption share one signal, joined by hand (`AbortSignal.any` can lose the timeout on Node 20).
 */
const send = (
  server: Server,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = READ_TIMEOUT_MS
): Effect.Effect<unknown, EsFailure> =>
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
        if (server.authorization !== undefined) headers.authorization = server.authorization
        if (body !== undefined) headers["content-type"] = "application/json"
        const response = await fetch(`${server.endpoint}${path}`, {
          method,
          headers,
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          redirect: "error",
          signal: controller.signal
        })
        const text = await response.text()
        if (!response.ok) {
          throw new EsFailure({ status: response.status, type: errorType(text), text, cause: undefined, timeoutMs })
        }
        return text === "" ? undefined : (JSON.parse(text) as unknown)
      } finally {
        deadline.removeEventListener("abort", onDeadline)
        interrupt.removeEventListener("abort", onInterrupt)
      }
    },
    catch: (cause) =>
      cause instanceof EsFailure
        ? cause
        : new EsFailure({ status: undefined, type: undefined, text: "", cause, timeoutMs })
  })

const withServer = <A>(
  adminUrl: string | undefined,
  action: string,
  body: (server: Server) => Effect.Effect<A, EsFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    body(server).pipe(
      Effect.catchTag("EsFailure", (failure) => {
        const { kind, message } = classify(server.location, action, failure)
        return Effect.fail(fail(kind, scrub(server, message)))
      })
    )
  )

const field = (value: unknown, key: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined

/** The indices under the prefix, hidden ones included. */
const indicesOf = (server: Server, name: string): Effect.Effect<ReadonlyArray<string>, EsFailure> =>
  Effect.map(send(server, "GET", `_cat/indices/${prefixOf(name)}*?format=json&h=index&expand_wildcards=all`), (rows) =>
    (Array.isArray(rows) ? rows : [])
      .map((row) => field(row, "index"))
      .filter((index): index is string => typeof index === "string" && index.startsWith(prefixOf(name)))
      .sort()
  )

interface State {
  readonly indices: ReadonlyArray<string>
  /** the installation the mark names, if there is one */
  readonly mark: string | undefined
}

const markPath = (name: string): string => `${META_INDEX}/_doc/${encodeURIComponent(name)}`

const look = (server: Server, name: string): Effect.Effect<State, EsFailure> =>
  Effect.gen(function* () {
    const mark = yield* send(server, "GET", markPath(name)).pipe(
      Effect.map((doc) => field(field(doc, "_source"), "owner")),
      Effect.catchIf(
        (failure) => failure.status === 404,
        () => Effect.succeed(undefined)
      )
    )
    const indices = yield* indicesOf(server, name)
    return { indices, mark: mark === undefined ? undefined : String(mark) }
  })

const standingOf =
  (owner: string) =>
  (state: State): Standing => {
    if (state.mark !== undefined) return state.mark === owner ? "ours" : "foreign"
    return state.indices.length > 0 ? "foreign" : "missing"
  }

const notOurs = (server: Server, name: string, state: State): string =>
  state.mark !== undefined
    ? `index prefix "${prefixOf(name)}" on ${server.location} is a slice of another berth installation`
    : `index prefix "${prefixOf(name)}" on ${server.location} holds indices berth did not make (${state.indices.slice(0, 5).join(", ")})`

const ensureMeta = (server: Server): Effect.Effect<void, EsFailure> =>
  send(server, "PUT", META_INDEX, {
    settings: { index: { auto_expand_replicas: "0-1" } },
    mappings: { properties: { owner: { type: "keyword" }, slice: { type: "keyword" } } }
  }).pipe(
    Effect.asVoid,
    Effect.catchIf(
      (failure) => failure.type === "resource_already_exists_exception",
      () => Effect.void
    )
  )

/** The template that marks every index made under the prefix with its owner. */
const putTemplate = (server: Server, owner: string, name: string): Effect.Effect<void, EsFailure> => {
  const meta = { managed_by: "berth", owner, slice: name }
  return Effect.asVoid(
    send(server, "PUT", `_index_template/${templateOf(name)}`, {
      index_patterns: [`${prefixOf(name)}*`],
      priority: TEMPLATE_PRIORITY,
      _meta: meta,
      template: { mappings: { _meta: { berth: meta } } }
    })
  )
}

/**
 * Claims the name: false when a mark exists already, or when indices appeared under the prefix unmarked (someone
 * outside berth wrote there), whose claim is withdrawn again.
 */
const create = (server: Server, owner: string, name: string): Effect.Effect<boolean, EsFailure> =>
  Effect.gen(function* () {
    yield* ensureMeta(server)
    const claimed = yield* send(server, "PUT", `${META_INDEX}/_create/${encodeURIComponent(name)}?refresh=wait_for`, {
      owner,
      slice: name
    }).pipe(
      Effect.as(true),
      Effect.catchIf(
        (failure) => failure.status === 409,
        () => Effect.succeed(false)
      )
    )
    if (!claimed) return false
    if ((yield* indicesOf(server, name)).length > 0) {
      yield* send(server, "DELETE", `${markPath(name)}?refresh=wait_for`)
      return false
    }
    yield* putTemplate(server, owner, name)
    return true
  })

/** Deletes indices by name, a few at a time (a URL has a length limit; clusters refuse wildcard deletes). */
const deleteIndices = (server: Server, indices: ReadonlyArray<string>): Effect.Effect<void, EsFailure> =>
  Effect.forEach(
    Array.from({ length: Math.ceil(indices.length / 20) }, (_, i) => indices.slice(i * 20, i * 20 + 20)),
    (batch) =>
      send(
        server,
        "DELETE",
        `${batch.map(encodeURIComponent).join(",")}?ignore_unavailable=true&expand_wildcards=all`,
        undefined,
        WRITE_TIMEOUT_MS
      ),
    { discard: true }
  )

const emptyPrefix = (server: Server, name: string): Effect.Effect<void, EsFailure> =>
  Effect.flatMap(indicesOf(server, name), (indices) => deleteIndices(server, indices))

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, `look at index prefix "${prefixOf(name)}"`, (server) =>
      Effect.map(look(server, name), (state) => ownerStanding(standingOf(slice.owner)(state)))
    )
  )

const provision = Effect.fn("ElasticsearchAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withServer(slice.adminUrl, `provision index prefix "${prefixOf(name)}"`, (server) =>
    provisionOwned({
      // the mark's _create is exclusive: it is the lock
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
          `index prefix "${prefixOf(name)}" on ${server.location} appeared and vanished during provision; retry`
        )
    })
  )
})

const resolveUrl = Effect.fn("ElasticsearchAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  return sliceUrl(server.url, name)
})

const teardown = Effect.fn("ElasticsearchAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withServer(slice.adminUrl, `tear down index prefix "${prefixOf(name)}"`, (server) =>
    teardownOwned({
      lock: Effect.void,
      look: look(server, name),
      standing: standingOf(slice.owner),
      // the indices and template first, the mark last: a crash in between leaves a mark that list returns
      drop: Effect.gen(function* () {
        yield* emptyPrefix(server, name)
        yield* send(server, "DELETE", `_index_template/${templateOf(name)}`).pipe(
          Effect.catchIf(
            (failure) => failure.status === 404,
            () => Effect.void
          )
        )
        yield* send(server, "DELETE", `${markPath(name)}?refresh=wait_for`).pipe(
          Effect.catchIf(
            (failure) => failure.status === 404,
            () => Effect.void
          )
        )
      }),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving it alone`)
    })
  )
})

/** An index's settings as a new index takes them: without what names or dates that one index. */
export const copyableSettings = (settings: unknown): Record<string, unknown> => {
  const index = field(settings, "index")
  if (typeof index !== "object" || index === null) return {}
  return Object.fromEntries(Object.entries(index).filter(([key]) => !UNCOPYABLE_SETTINGS.has(key)))
}

/** An index's mappings for its copy in `target`: the berth mark in `_meta` names the copy's slice and owner. */
export const retarget = (mappings: unknown, owner: string, target: string): Record<string, unknown> => {
  const own = typeof mappings === "object" && mappings !== null ? (mappings as Record<string, unknown>) : {}
  const meta = field(own, "_meta")
  return {
    ...own,
    _meta: {
      ...(typeof meta === "object" && meta !== null ? meta : {}),
      berth: { managed_by: "berth", owner, slice: target }
    }
  }
}

/** Copies every index under `source`'s prefix to the same suffix under `target`'s (which is empty). */
const copyIndices = (server: Server, source: string, target: string, owner: string): Effect.Effect<void, EsFailure> =>
  Effect.gen(function* () {
    for (const index of yield* indicesOf(server, source)) {
      const copy = `${prefixOf(target)}${index.slice(prefixOf(source).length)}`
      const described = yield* send(server, "GET", `${encodeURIComponent(index)}?expand_wildcards=all`)
      const own = field(described, index)
      yield* send(server, "PUT", encodeURIComponent(copy), {
        settings: { index: copyableSettings(field(own, "settings")) },
        mappings: retarget(field(own, "mappings"), owner, target)
      })
      yield* send(
        server,
        "POST",
        "_reindex?wait_for_completion=true&refresh=true",
        { source: { index }, dest: { index: copy } },
        WRITE_TIMEOUT_MS
      )
    }
  })

const clone = Effect.fn("ElasticsearchAdapter.clone")(function* (from: Slice, to: Slice) {
  const source = yield* checkSlice(from)
  const target = yield* checkSlice(to)
  if (source === target)
    return yield* Effect.fail(fail("invalid", `cannot clone index prefix "${source}-" onto itself`))
  yield* withServer(
    to.adminUrl ?? from.adminUrl,
    `clone index prefix "${prefixOf(source)}" into "${prefixOf(target)}"`,
    (server) =>
      Effect.gen(function* () {
        const sourceState = yield* look(server, source)
        const sourceStanding = standingOf(from.owner)(sourceState)
        if (sourceStanding === "missing" || sourceStanding === "unfinished") {
          return yield* Effect.fail(
            fail(
              "failed",
              `cannot clone: index prefix "${prefixOf(source)}" is not a slice on ${server.location} (provision it first)`
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
            fail("not-owned", `cannot clone: index prefix "${prefixOf(target)}" was claimed meanwhile`)
          )
        }
        // the target starts empty (and stays marked)
        yield* emptyPrefix(server, target)
        yield* copyIndices(server, source, target, to.owner).pipe(
          // never leave a half copy behind
          Effect.tapError(() => Effect.ignore(emptyPrefix(server, target)))
        )
      })
  )
})

const list = Effect.fn("ElasticsearchAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withServer(scope.adminUrl, "list slices", (server) =>
    send(server, "POST", `${META_INDEX}/_search`, {
      query: { term: { owner } },
      _source: false,
      size: 10_000
    }).pipe(
      Effect.map((found) => {
        const hits = field(field(found, "hits"), "hits")
        return (Array.isArray(hits) ? hits : [])
          .map((hit) => field(hit, "_id"))
          .filter((id): id is string => typeof id === "string")
          .sort()
      }),
      Effect.catchIf(
        (failure) => failure.status === 404,
        () => Effect.succeed([])
      )
    )
  )
})

export const elasticsearchAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
