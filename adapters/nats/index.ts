/**
 * The `nats` adapter: each world gets a name prefix on one shared NATS server with JetStream, reached through the
 * service's `admin_url` (default `nats://127.0.0.1:4222`). The slice `acme_login_db` owns the prefix `acme_login_db-`:
 * the JetStream streams whose names start with it, and the KV buckets and object stores whose buckets do (their
 * streams are `KV_<bucket>` and `OBJ_<bucket>`). Names are `[a-z0-9_]`, so the `-` ends a prefix and no slice's
 * prefix starts another's. A world's streams keep their subjects under the prefix too (`acme_login_db-orders.>`; a KV
 * bucket's are `$KV.<bucket>.>` by themselves), so that two worlds' streams never claim the same subjects.
 *
 * `resolve` gives the server's URL with the prefix as a query parameter, `nats://127.0.0.1:4222?prefix=acme_login_db-`
 * (credentials kept as in `admin_url`): a client connects to the URL without its query and names its streams and
 * buckets `<prefix><name>`.
 *
 * Ownership is a key in berth's own KV bucket `berth_slices`: key = the slice's name, value = `{ owner, name }`.
 * `create` on a KV key is atomic (it fails when the key holds a value), so the mark is the claim and no lock is
 * needed: two provisions of one name settle on one owner, and nothing is ever made before its mark. Teardown deletes
 * the prefix's streams, then the mark, so a crash in between leaves a mark that `list` still returns. A prefix that
 * has streams but no mark is someone else's: never reused (`taken`), deleted (`not-owned`) or listed.
 *
 * Why no account per world: NATS accounts exist only in the server's configuration (static `accounts {}` blocks, or
 * operator mode with JWTs and a resolver); a client cannot create one. A prefix on the shared account is what works
 * against a server started as `nats-server -js` with no configuration.
 *
 * `clone` copies the source's stream configurations under the target's prefix (subjects renamed alike); with the
 * option `copy_messages = true` it also copies every stored message, in order, with its headers. Every verb opens one
 * connection (no reconnects) and always closes it.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import {
  connect,
  type ConnectionOptions,
  type JetStreamClient,
  type JetStreamManager,
  type KV,
  type NatsConnection,
  NatsError,
  type StreamConfig
} from "nats"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { provisionOwned, type Standing, teardownOwned, ownerStanding } from "../ownership.js"
import {
  decodeComponent,
  describeCause,
  errorCode,
  NETWORK_CODES,
  parseAdminUrl,
  secretsOf,
  sliceChecks
} from "../shared.js"

const ADAPTER = "nats"
const DEFAULT_URL = "nats://127.0.0.1:4222"
/** a prefix leaves room in a stream's name (a file name on the server) for the world's own part */
const MAX_NAME = 64
const TIMEOUT_MS = 5_000
/** berth's own bucket of ownership marks */
const MARKS = "berth_slices"
/** JetStream's error for a KV create onto a key that holds a value */
const WRONG_LAST_SEQUENCE = 10071
const STREAM_NOT_FOUND = 10059
const NO_MESSAGE_FOUND = 10037

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** A client or server error, kept raw until the verb classifies it. */
class NatsFailure extends Data.TaggedError("NatsFailure")<{
  readonly phase: "connect" | "request"
  readonly cause: unknown
}> {}

interface Server {
  /** the admin URL as given (or the default), for `resolve` */
  readonly url: URL
  readonly options: ConnectionOptions
  /** `host:port`, for messages */
  readonly location: string
  readonly secrets: ReadonlyArray<string>
}

interface Session {
  readonly nc: NatsConnection
  readonly jsm: JetStreamManager
  readonly js: JetStreamClient
  readonly marks: KV
}

const { checkOwner, checkSlice } = sliceChecks(ADAPTER, "prefix", MAX_NAME)

const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.map(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["nats:"],
      kind: "a nats:// URL",
      example: "nats://user:password@host:4222",
      variable: "NATS_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    (url) => {
      const location = `${url.hostname || "127.0.0.1"}:${url.port || "4222"}`
      const user = decodeComponent(url.username)
      const pass = decodeComponent(url.password)
      // a user without a password is a token, as NATS URLs write one
      const auth = user === "" ? {} : pass === "" ? { token: user } : { user, pass }
      return {
        url,
        location,
        secrets: [...secretsOf(url), ...(pass === "" && user !== "" ? [user, url.username] : [])],
        options: { servers: location, timeout: TIMEOUT_MS, reconnect: false, maxReconnectAttempts: 0, ...auth }
      }
    }
  )

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

const apiCode = (cause: unknown): number | undefined =>
  cause instanceof NatsError ? cause.jsError()?.err_code : undefined

const LOST: ReadonlySet<string> = new Set([
  "CONNECTION_REFUSED",
  "CONNECTION_CLOSED",
  "CONNECTION_TIMEOUT",
  "CONNECTION_DRAINING",
  "DISCONNECT",
  "TIMEOUT"
])

const classify = (server: Server, action: string, name: string, failure: NatsFailure): AdapterError => {
  const cause = failure.cause
  const code = errorCode(cause)
  const detail = scrub(server, `${describeCause(cause) || code || "unknown error"}`)
  const what = `${action} prefix "${name}-" on NATS at ${server.location}`
  if (code === "AUTHORIZATION_VIOLATION" || code === "BAD_AUTHENTICATION" || code === "AUTHENTICATION_EXPIRED") {
    return fail("authentication", `NATS refused the admin_url credentials; could not ${what}: ${detail}`)
  }
  if (code === "PERMISSIONS_VIOLATION") {
    return fail("grant", `the admin_url user may not use the JetStream API; could not ${what}: ${detail}`)
  }
  if (code === "503") {
    return fail(
      "failed",
      `JetStream is not enabled on the NATS server at ${server.location} (start it with -js); could not ${what}`
    )
  }
  if (
    (failure.phase === "connect" && apiCode(cause) === undefined) ||
    (code !== undefined && (LOST.has(code) || NETWORK_CODES.has(code)))
  ) {
    return fail("unreachable", `cannot reach NATS at ${server.location} to ${action} prefix "${name}-": ${detail}`)
  }
  return fail("failed", `could not ${what}: ${detail}`)
}

const request = <A>(f: () => Promise<A>): Effect.Effect<A, NatsFailure> =>
  Effect.tryPromise({ try: f, catch: (cause) => new NatsFailure({ phase: "request", cause }) })

/** Closes the connection, or gives up on a polite close after a second (finalizers cannot be interrupted). */
const close = (nc: NatsConnection): Effect.Effect<void> =>
  Effect.promise(() =>
    Promise.race([nc.close().catch(() => undefined), new Promise<void>((resolve) => setTimeout(resolve, 1_000))])
  )

const open = (server: Server): Effect.Effect<Session, NatsFailure, Scope.Scope> =>
  Effect.gen(function* () {
    const nc = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () => connect(server.options),
        catch: (cause) => new NatsFailure({ phase: "connect", cause })
      }),
      close
    )
    const jsm = yield* request(() => nc.jetstreamManager({ timeout: TIMEOUT_MS }))
    const js = nc.jetstream({ timeout: TIMEOUT_MS })
    // made on first use; a second creator with the same configuration is a no-op
    const marks = yield* request(() => js.views.kv(MARKS, { history: 1 }))
    return { nc, jsm, js, marks }
  })

const withServer = <A>(
  adminUrl: string | undefined,
  action: string,
  name: string,
  body: (session: Session, server: Server) => Effect.Effect<A, NatsFailure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    Effect.scoped(Effect.flatMap(open(server), (session) => body(session, server))).pipe(
      Effect.catchTag("NatsFailure", (failure) => Effect.fail(classify(server, action, name, failure)))
    )
  )

const prefixOf = (name: string): string => `${name}-`

/** The streams that belong to slice `name`: its streams, KV buckets and object stores. */
const belongs = (name: string, stream: string): boolean =>
  [prefixOf(name), `KV_${prefixOf(name)}`, `OBJ_${prefixOf(name)}`].some((prefix) => stream.startsWith(prefix))

const streamsOf = (session: Session, name: string): Effect.Effect<ReadonlyArray<string>, NatsFailure> =>
  request(async () => {
    const names: Array<string> = []
    for await (const stream of session.jsm.streams.names()) if (belongs(name, stream)) names.push(stream)
    return names.sort()
  })

interface Mark {
  readonly owner: string
  readonly name: string
}

const markOf = (session: Session, name: string): Effect.Effect<Mark | undefined, NatsFailure> =>
  request(async () => {
    const entry = await session.marks.get(name)
    if (entry === null || entry.operation !== "PUT") return undefined
    try {
      const value: unknown = entry.json()
      return typeof value === "object" && value !== null && "owner" in value && typeof value.owner === "string"
        ? { owner: value.owner, name }
        : { owner: "", name }
    } catch {
      // not a mark berth wrote: nobody's, so never ours
      return { owner: "", name }
    }
  })

interface State {
  readonly mark: Mark | undefined
  readonly streams: ReadonlyArray<string>
}

const look = (session: Session, name: string): Effect.Effect<State, NatsFailure> =>
  Effect.all({ mark: markOf(session, name), streams: streamsOf(session, name) })

const standingOf =
  (owner: string) =>
  (state: State): Standing =>
    state.mark !== undefined
      ? state.mark.owner === owner
        ? "ours"
        : "foreign"
      : state.streams.length > 0
        ? "foreign"
        : "missing"

const notOurs = (server: Server, name: string, state: State): string =>
  state.mark !== undefined
    ? `prefix "${name}-" on NATS at ${server.location} is a slice of another berth installation`
    : `streams under prefix "${name}-" exist on NATS at ${server.location} (${state.streams.join(", ")}) and are not a berth slice`

/** Writes the mark; false when the key holds one already (another provision won). */
const claim = (session: Session, owner: string, name: string): Effect.Effect<boolean, NatsFailure> =>
  request(() => session.marks.create(name, JSON.stringify({ owner, name, created: new Date().toISOString() }))).pipe(
    Effect.as(true),
    Effect.catchIf(
      (failure) => apiCode(failure.cause) === WRONG_LAST_SEQUENCE,
      () => Effect.succeed(false)
    )
  )

const deleteStreams = (session: Session, name: string): Effect.Effect<void, NatsFailure> =>
  Effect.flatMap(streamsOf(session, name), (streams) =>
    Effect.forEach(
      streams,
      (stream) =>
        request(() => session.jsm.streams.delete(stream)).pipe(
          Effect.catchIf(
            (failure) => apiCode(failure.cause) === STREAM_NOT_FOUND,
            () => Effect.void
          )
        ),
      { discard: true }
    )
  )

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withServer(slice.adminUrl, "look at", name, (session) =>
      Effect.map(look(session, name), (state) => ownerStanding(standingOf(slice.owner)(state)))
    )
  )

const provision = Effect.fn("NatsAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withServer(slice.adminUrl, "provision", name, (session, server) =>
    provisionOwned({
      // the mark's create is atomic: no lock needed
      lock: Effect.void,
      look: look(session, name),
      standing: standingOf(slice.owner),
      clear: Effect.void,
      create: claim(session, slice.owner, name),
      taken: (state) => fail("taken", `${notOurs(server, name, state)}; delete them or pick another name`),
      vanished: () =>
        fail(
          "failed",
          `prefix "${name}-" on NATS at ${server.location} was claimed and released during provision; retry`
        )
    })
  )
})

const resolveUrl = Effect.fn("NatsAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  const url = new URL(server.url.href)
  url.searchParams.set("prefix", prefixOf(name))
  return url.href
})

const teardown = Effect.fn("NatsAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withServer(slice.adminUrl, "tear down", name, (session, server) =>
    teardownOwned({
      lock: Effect.void,
      look: look(session, name),
      standing: standingOf(slice.owner),
      // streams first, the mark last: a crash in between leaves a mark that list returns
      drop: Effect.zipRight(
        deleteStreams(session, name),
        request(() => session.marks.purge(name))
      ),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving them alone`)
    })
  )
})

/** `subject` under the target's prefix: each token that starts with the source's prefix is renamed. */
const rename = (text: string, source: string, target: string): string =>
  text
    .split(".")
    .map((token) => {
      for (const head of [prefixOf(source), `KV_${prefixOf(source)}`, `OBJ_${prefixOf(source)}`]) {
        if (token.startsWith(head))
          return `${head.replace(prefixOf(source), prefixOf(target))}${token.slice(head.length)}`
      }
      return token
    })
    .join(".")

const wantsMessages = (options: Readonly<Record<string, unknown>>): boolean =>
  options.copy_messages === true || options.copy_messages === "true"

const copyStream = (
  session: Session,
  server: Server,
  stream: string,
  source: string,
  target: string,
  messages: boolean
): Effect.Effect<void, NatsFailure | AdapterError> =>
  Effect.gen(function* () {
    const info = yield* request(() => session.jsm.streams.info(stream))
    const subjects = (info.config.subjects ?? []).map((subject) => rename(subject, source, target))
    const overlapping = subjects.filter((subject, i) => subject === info.config.subjects?.[i])
    if (overlapping.length > 0) {
      return yield* Effect.fail(
        fail(
          "invalid",
          `cannot clone stream "${stream}" on NATS at ${server.location}: its subjects ${overlapping.join(", ")} are not under the prefix "${source}-", so a copy would claim the same subjects; name them "${source}-…"`
        )
      )
    }
    const config: StreamConfig = {
      ...info.config,
      name: rename(stream, source, target),
      subjects,
      ...(info.config.mirror === undefined
        ? {}
        : { mirror: { ...info.config.mirror, name: rename(info.config.mirror.name, source, target) } }),
      ...(info.config.sources === undefined
        ? {}
        : { sources: info.config.sources.map((s) => ({ ...s, name: rename(s.name, source, target) })) })
    }
    yield* request(() => session.jsm.streams.add(config))
    // a mirror or a sourcing stream fills itself from its (renamed) origin
    if (!messages || config.mirror !== undefined || config.sources !== undefined) return
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const stored = yield* request(() => session.jsm.streams.getMessage(stream, { seq })).pipe(
        Effect.catchIf(
          (failure) => apiCode(failure.cause) === NO_MESSAGE_FOUND,
          () => Effect.succeed(undefined)
        )
      )
      if (stored === undefined) continue
      yield* request(() =>
        session.js.publish(
          rename(stored.subject, source, target),
          stored.data,
          stored.header === undefined ? {} : { headers: stored.header }
        )
      )
    }
  })

const clone = Effect.fn("NatsAdapter.clone")(function* (from: Slice, to: Slice) {
  const source = yield* checkSlice(from)
  const target = yield* checkSlice(to)
  if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone prefix "${source}-" onto itself`))
  yield* withServer(to.adminUrl ?? from.adminUrl, "clone into", target, (session, server) =>
    Effect.gen(function* () {
      const sourceState = yield* look(session, source)
      const sourceStanding = standingOf(from.owner)(sourceState)
      if (sourceStanding === "missing") {
        return yield* Effect.fail(
          fail(
            "failed",
            `cannot clone: prefix "${source}-" is not a slice on NATS at ${server.location} (provision it first)`
          )
        )
      }
      if (sourceStanding !== "ours") {
        return yield* Effect.fail(fail("not-owned", `cannot clone: ${notOurs(server, source, sourceState)}`))
      }
      const targetState = yield* look(session, target)
      const targetStanding = standingOf(to.owner)(targetState)
      if (targetStanding === "foreign") {
        return yield* Effect.fail(
          fail("not-owned", `cannot clone: ${notOurs(server, target, targetState)}; leaving them alone`)
        )
      }
      if (targetStanding === "missing" && !(yield* claim(session, to.owner, target))) {
        const now = yield* look(session, target)
        if (standingOf(to.owner)(now) !== "ours") {
          return yield* Effect.fail(
            fail("not-owned", `cannot clone: ${notOurs(server, target, now)}; leaving them alone`)
          )
        }
      }
      // the target is replaced wholesale
      yield* deleteStreams(session, target)
      const messages = wantsMessages(to.options)
      yield* Effect.forEach(
        sourceState.streams,
        (stream) => copyStream(session, server, stream, source, target, messages),
        { discard: true }
      ).pipe(Effect.tapError(() => Effect.ignore(deleteStreams(session, target))))
    })
  )
})

const list = Effect.fn("NatsAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withServer(scope.adminUrl, "list slices from", MARKS, (session) =>
    request(async () => {
      const keys: Array<string> = []
      for await (const key of await session.marks.keys()) keys.push(key)
      const names: Array<string> = []
      for (const key of keys) {
        const entry = await session.marks.get(key)
        if (entry === null || entry.operation !== "PUT") continue
        try {
          const value: unknown = entry.json()
          if (typeof value === "object" && value !== null && "owner" in value && value.owner === owner) names.push(key)
        } catch {
          // not berth's: not listed
        }
      }
      return names.sort()
    })
  )
})

export const natsAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
