/**
 * The `kafka` / `redpanda` adapter: each world gets a topic prefix (`<slice>-`) on one shared cluster, managed with
 * `kafkajs`'s admin client through the service's `admin_url` (default `kafka://127.0.0.1:9092`, the bootstrap broker;
 * `kafka://user:password@host:9092?sasl=scram-sha-256&ssl=true` for SASL — `plain`, `scram-sha-256` or
 * `scram-sha-512` — and TLS). The prefix covers what the world makes on demand: topics and consumer groups named
 * `<slice>-…`. The separator is `-`, not `.`: Kafka refuses a topic whose name differs from another's only by `.`
 * against `_`, and slice names hold `_`.
 *
 * Ownership is a marker topic `berth-mark-<slice>-<owner>` (one partition, compacted, empty): topic configurations
 * take only the broker's own keys, so the owner is in the name. Creating a topic is exclusive and atomic, so a crash
 * leaves a whole mark or none. Two installations claiming one name at once each see the other's mark after creating
 * their own: the smaller owner keeps the name, the other withdraws. A prefix holding topics without this
 * installation's mark is never reused (`taken`), dropped (`not-owned`) or listed. Teardown deletes the prefix's
 * topics and consumer groups, waits until the cluster has forgotten them (deletion is asynchronous), then deletes the
 * mark, so a crash in between leaves a mark that gc finds.
 *
 * No clone: copying a golden would mean replaying its messages, which is not a server-side copy.
 *
 * `resolve` gives the admin URL with the prefix as a query parameter: `kafka://127.0.0.1:9092?prefix=<slice>-`;
 * the client takes the host as its broker (and the `sasl`, `ssl` parameters), and names topics and groups with the
 * prefix.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import {
  type Admin,
  Kafka,
  KafkaJSProtocolError,
  KafkaJSSASLAuthenticationError,
  type KafkaConfig,
  logLevel,
  type SASLOptions
} from "kafkajs"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import { pauses, provisionOwned, type Standing, teardownOwned, ownerStanding } from "../ownership.js"
import {
  decodeComponent,
  describeCause,
  errorCode,
  NETWORK_CODES,
  parseAdminUrl,
  secretsOf,
  sliceChecks
} from "../shared.js"

const ADAPTER = "kafka"
const DEFAULT_URL = "kafka://127.0.0.1:9092"
/** topic names are at most 249 characters: the mark adds 12 and the owner (64); the rest is the world's */
export const MAX_NAME = 100
const MARK_PREFIX = "berth-mark-"
/** a slice named `berth` would have the marks under its prefix */
const RESERVED: ReadonlySet<string> = new Set(["berth"])
/** short, so that a broker that is gone is an error in seconds */
const CONNECT_TIMEOUT_MS = 3_000
const REQUEST_TIMEOUT_MS = 10_000
const CREATE_WAIT = pauses(50, 100, 200, 400)
/** how long a deleted topic may still be listed */
const GONE_WAIT = pauses(100, 200, 400, 800, 1_600, 3_200)
const SASL_MECHANISMS: ReadonlySet<string> = new Set(["plain", "scram-sha-256", "scram-sha-512"])
const GRANT_TYPES: ReadonlySet<string> = new Set([
  "TOPIC_AUTHORIZATION_FAILED",
  "GROUP_AUTHORIZATION_FAILED",
  "CLUSTER_AUTHORIZATION_FAILED"
])

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

const names = sliceChecks(ADAPTER, "topic prefix", MAX_NAME)
const { checkOwner } = names

const checkSlice = (slice: Pick<Slice, "name" | "owner">): Effect.Effect<string, AdapterError> =>
  Effect.zipRight(
    checkOwner(slice.owner),
    Effect.flatMap(names.checkName(slice.name), (name) =>
      RESERVED.has(name)
        ? Effect.fail(fail("invalid", `refusing topic prefix "${name}": it is reserved for berth`))
        : Effect.succeed(name)
    )
  )

/** A slice's topics and groups are those named `<slice>-…`: no name has a `-`, so no prefix is inside another's. */
export const prefixOf = (name: string): string => `${name}-`
export const markOf = (name: string, owner: string): string => `${MARK_PREFIX}${name}-${owner}`
/** the slice and owner a marker topic names (neither holds a `-`) */
export const parseMark = (topic: string): { readonly name: string; readonly owner: string } | undefined => {
  const match = /^berth-mark-([a-z][a-z0-9_]*)-([a-z0-9_]+)$/.exec(topic)
  return match?.[1] === undefined || match[2] === undefined ? undefined : { name: match[1], owner: match[2] }
}

interface Server {
  readonly url: URL
  readonly config: KafkaConfig
  readonly location: string
  readonly secrets: ReadonlyArray<string>
}

/** The client configuration an admin URL describes. */
export const serverOf = (adminUrl: string | undefined): Effect.Effect<Server, AdapterError> =>
  Effect.flatMap(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["kafka:", "redpanda:"],
      kind: "a kafka:// URL of a bootstrap broker",
      example: "kafka://user:password@host:9092?sasl=scram-sha-256&ssl=true",
      variable: "KAFKA_ADMIN_URL",
      fallback: DEFAULT_URL
    }),
    (url) => {
      const location = `${url.hostname}:${url.port || "9092"}`
      const user = decodeComponent(url.username)
      const password = decodeComponent(url.password)
      const mechanism = url.searchParams.get("sasl") ?? (user === "" ? undefined : "plain")
      if (mechanism !== undefined && !SASL_MECHANISMS.has(mechanism)) {
        return Effect.fail(
          fail(
            "invalid",
            `admin_url's sasl must be plain, scram-sha-256 or scram-sha-512, not ${JSON.stringify(mechanism)}`
          )
        )
      }
      const sasl = mechanism === undefined ? undefined : ({ mechanism, username: user, password } as SASLOptions)
      const config: KafkaConfig = {
        clientId: "berth",
        brokers: [location],
        ssl: url.searchParams.get("ssl") === "true",
        ...(sasl === undefined ? {} : { sasl }),
        connectionTimeout: CONNECT_TIMEOUT_MS,
        authenticationTimeout: CONNECT_TIMEOUT_MS,
        requestTimeout: REQUEST_TIMEOUT_MS,
        retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 500 },
        logLevel: logLevel.NOTHING
      }
      return Effect.succeed({ url, config, location, secrets: secretsOf(url) })
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

/** The errors a kafkajs error wraps, outermost first. */
const chain = (cause: unknown): ReadonlyArray<unknown> => {
  const found: Array<unknown> = []
  let current = cause
  while (current !== undefined && current !== null && found.length < 10) {
    found.push(current)
    current =
      typeof current === "object" && "originalError" in current
        ? current.originalError
        : typeof current === "object" && "cause" in current
          ? current.cause
          : undefined
  }
  return found
}

/** What a kafkajs error means to berth. */
export const classify = (
  location: string,
  action: string,
  cause: unknown
): { kind: AdapterErrorKind; message: string } => {
  const detail = describeCause(cause)
  const errors = chain(cause)
  if (errors.some((e) => e instanceof KafkaJSSASLAuthenticationError)) {
    return {
      kind: "authentication",
      message: `the broker refused the admin_url credentials; could not ${action}: ${detail}`
    }
  }
  if (errors.some((e) => e instanceof KafkaJSProtocolError && GRANT_TYPES.has(e.type))) {
    return {
      kind: "grant",
      message: `the admin_url user lacks an ACL (it needs to create and delete topics and groups); could not ${action}: ${detail}`
    }
  }
  const unreachable = errors.some((e) => {
    const name = e instanceof Error ? e.name : ""
    const code = errorCode(e)
    return (
      /Connection|RequestTimeout|BrokerNotFound|NoBrokerAvailable|NumberOfRetriesExceeded/.test(name) ||
      (code !== undefined && NETWORK_CODES.has(code))
    )
  })
  if (unreachable)
    return { kind: "unreachable", message: `cannot reach the broker at ${location} to ${action}: ${detail}` }
  return { kind: "failed", message: `could not ${action} on ${location}: ${detail}` }
}

/** A kafkajs call that failed; `withAdmin` classifies its cause. */
class Failure extends Data.TaggedError("KafkaFailure")<{ readonly cause: unknown }> {}

const call = <A>(f: () => Promise<A>): Effect.Effect<A, Failure> =>
  Effect.tryPromise({ try: f, catch: (cause) => new Failure({ cause }) })

/** Runs `body` with a connected admin client, disconnected afterwards whatever happens. */
const withAdmin = <A>(
  adminUrl: string | undefined,
  action: string,
  body: (admin: Admin, server: Server) => Effect.Effect<A, Failure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.flatMap(serverOf(adminUrl), (server) =>
    Effect.acquireUseRelease(
      call(async () => {
        const admin = new Kafka(server.config).admin()
        try {
          await admin.connect()
          return admin
        } catch (cause) {
          await admin.disconnect().catch(() => undefined)
          throw cause
        }
      }),
      (admin) => body(admin, server),
      (admin) => Effect.promise(() => admin.disconnect().catch(() => undefined))
    ).pipe(
      Effect.catchTag("KafkaFailure", (failure) => {
        const { kind, message } = classify(server.location, action, failure.cause)
        return Effect.fail(fail(kind, scrub(server, message)))
      })
    )
  )

interface State {
  /** topics under the prefix */
  readonly topics: ReadonlyArray<string>
  /** the owners whose marks name the slice, smallest first */
  readonly owners: ReadonlyArray<string>
}

const look = (admin: Admin, name: string): Effect.Effect<State, Failure> =>
  Effect.map(
    call(() => admin.listTopics()),
    (all) => ({
      topics: all.filter((t) => t.startsWith(prefixOf(name))).sort(),
      owners: all
        .map(parseMark)
        .filter((mark) => mark?.name === name)
        .map((mark) => mark?.owner ?? "")
        .sort()
    })
  )

/** Ours when our mark is there and no smaller owner's is (of two claims made at once, the smaller owner's stands). */
const standingOf =
  (owner: string) =>
  (state: State): Standing => {
    if (state.owners.length > 0) return state.owners[0] === owner ? "ours" : "foreign"
    return state.topics.length > 0 ? "foreign" : "missing"
  }

const notOurs = (server: Server, name: string, state: State): string =>
  state.owners.length > 0
    ? `topic prefix "${prefixOf(name)}" on ${server.location} is a slice of another berth installation`
    : `topic prefix "${prefixOf(name)}" on ${server.location} holds topics berth did not make (${state.topics.slice(0, 5).join(", ")})`

/** Repeats `check` until it holds, within `GONE_WAIT`: the cluster forgets deleted topics a moment later. */
const until = (check: Effect.Effect<boolean, Failure>): Effect.Effect<boolean, Failure> =>
  Effect.repeat(check, Schedule.passthrough(Schedule.whileInput(GONE_WAIT, (done: boolean) => !done)))

const deleteTopics = (admin: Admin, topics: ReadonlyArray<string>): Effect.Effect<void, Failure> =>
  topics.length === 0
    ? Effect.void
    : Effect.gen(function* () {
        yield* call(() => admin.deleteTopics({ topics: [...topics], timeout: REQUEST_TIMEOUT_MS }))
        yield* until(
          Effect.map(
            call(() => admin.listTopics()),
            (all) => !all.some((t) => topics.includes(t))
          )
        )
      })

/**
 * Claims the name with a marker topic: false when someone else holds it (a smaller owner's mark, or topics that
 * appeared under the prefix unmarked), whose claim is withdrawn again.
 */
const create = (admin: Admin, owner: string, name: string): Effect.Effect<boolean, Failure> =>
  Effect.gen(function* () {
    const mark = markOf(name, owner)
    const created = yield* call(() =>
      admin.createTopics({
        topics: [{ topic: mark, numPartitions: 1, configEntries: [{ name: "cleanup.policy", value: "compact" }] }],
        timeout: REQUEST_TIMEOUT_MS
      })
    )
    if (!created) {
      // the broker that answers the look may learn of the existing mark a moment after the controller refused ours
      yield* until(Effect.map(look(admin, name), (state) => state.owners.length > 0))
      return false
    }
    const state = yield* look(admin, name)
    // our own mark may not be listed yet: only a smaller owner's, or topics nobody marked, take the name from us
    const lost = state.owners.some((other) => other < owner)
    const unmarked = state.owners.every((other) => other === owner) && state.topics.length > 0
    if (lost || unmarked) {
      yield* deleteTopics(admin, [mark])
      return false
    }
    return true
  })

const groupsOf = (admin: Admin, name: string): Effect.Effect<ReadonlyArray<string>, Failure> =>
  Effect.map(
    call(() => admin.listGroups()),
    ({ groups }) => groups.map((g) => g.groupId).filter((id) => id.startsWith(prefixOf(name)))
  )

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(checkSlice(slice), (name) =>
    withAdmin(slice.adminUrl, `look at topic prefix "${prefixOf(name)}"`, (admin) =>
      Effect.map(look(admin, name), (state) => ownerStanding(standingOf(slice.owner)(state)))
    )
  )

const provision = Effect.fn("KafkaAdapter.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  return yield* withAdmin(slice.adminUrl, `provision topic prefix "${prefixOf(name)}"`, (admin, server) =>
    provisionOwned({
      // creating the marker topic is exclusive: it is the lock
      lock: Effect.void,
      look: look(admin, name),
      standing: standingOf(slice.owner),
      clear: Effect.void,
      create: create(admin, slice.owner, name),
      settle: CREATE_WAIT,
      taken: (state) => fail("taken", `${notOurs(server, name, state)}; delete them or pick another name`),
      vanished: () =>
        fail(
          "failed",
          `topic prefix "${prefixOf(name)}" on ${server.location} appeared and vanished during provision; retry`
        )
    })
  )
})

const resolveUrl = Effect.fn("KafkaAdapter.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl)
  return sliceUrl(server.url, name)
})

const teardown = Effect.fn("KafkaAdapter.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  yield* withAdmin(slice.adminUrl, `tear down topic prefix "${prefixOf(name)}"`, (admin, server) =>
    teardownOwned({
      lock: Effect.void,
      look: look(admin, name),
      standing: standingOf(slice.owner),
      // topics and groups first, the mark last: a crash in between leaves a mark that list returns
      drop: Effect.gen(function* () {
        const groups = yield* groupsOf(admin, name)
        if (groups.length > 0) yield* call(() => admin.deleteGroups([...groups]))
        yield* deleteTopics(admin, (yield* look(admin, name)).topics)
        yield* deleteTopics(admin, [markOf(name, slice.owner)])
      }),
      notOwned: (state) => fail("not-owned", `${notOurs(server, name, state)}; leaving it alone`)
    })
  )
})

const clone = (from: Slice, _to: Slice) =>
  Effect.fail(fail("invalid", `the kafka adapter cannot clone (asked to copy "${from.name}"): it copies no messages`))

const list = Effect.fn("KafkaAdapter.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  return yield* withAdmin(scope.adminUrl, "list slices", (admin) =>
    Effect.map(
      call(() => admin.listTopics()),
      (all) =>
        all
          .map(parseMark)
          .filter((mark) => mark?.owner === owner)
          .map((mark) => mark?.name ?? "")
          .sort()
    )
  )
})

export const kafkaAdapter: Adapter = {
  capabilities: { clone: false },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
