/**
 * The `rabbitmq` adapter: each world gets its own virtual host on one shared RabbitMQ server. berth manages vhosts
 * through the server's management HTTP API (the `rabbitmq_management` plugin), with the credentials of the service's
 * `admin_url` (`amqp://user:password@host:5672`, a user with the administrator tag), at the option `management_url`
 * when given, else `http://<host>:15672` (`https://<host>:15671` for an `amqps://` admin URL).
 *
 * Ownership is marked on the vhost itself: its description is `berth:<owner>:<name>` (owner: the berth installation)
 * and it carries the tag `berth`, so a vhost berth did not create — or another installation created — is never
 * listed, deleted or reused. The description alone decides; the tag is for people browsing the management UI.
 *
 * Who created a vhost. `PUT /api/vhosts/<name>` creates *or updates*, and answers 201 to every request that found the
 * vhost absent, so its status cannot say which of two racing provisions made it. Instead:
 * - the PUT is conditional (`If-None-Match: *`), so once the vhost exists the server refuses it (412) rather than
 *   rewrite a description that is not ours;
 * - the description it writes carries a one-time claim, `berth:<owner>:<name> claim:<nonce>`. When two creations
 *   race, the server's own transaction keeps the first record and drops the other's, so the provision that reads its
 *   own nonce back is the one that created the vhost; it then rewrites the description to the plain mark.
 * One case is left: two PUTs that both pass the server's existence check before either commits, where the later one
 * finds the vhost inside the server and updates its description. The later one then reads its own claim and the
 * first may have read its own just before, so both would say "created". That takes two requests within the same
 * instant on the server; berth's own provisions of one slice are serialised by its world actor anyway.
 *
 * Tags are atoms on the server (never freed), so the nonce goes in the description, never in a tag.
 */
import { randomBytes } from "node:crypto"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { type Adapter, AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "../contract.js"
import {
  decodeComponent,
  describeCause,
  errorCode,
  NETWORK_CODES,
  parseAdminUrl,
  secretsOf,
  sliceChecks
} from "../shared.js"

const ADAPTER = "rabbitmq"
/** the same rule as the other server adapters, so one slice name fits every family */
const MAX_NAME = 63
/** what `list` accepts as a slice's vhost name (checked again before anything is done with one) */
const SAFE_NAME = /^[a-z][a-z0-9_]*$/
const TAG = "berth"
/** reads answer at once on a healthy server; a silent one must not hang a verb */
const READ_TIMEOUT_MS = 5_000
/** creating or deleting a vhost waits for every node of a cluster (up to 45 s on the server's side) */
const WRITE_TIMEOUT_MS = 60_000
const PLUGIN_HINT =
  "berth manages vhosts through RabbitMQ's management API: enable it with `rabbitmq-plugins enable rabbitmq_management` (or set management_url to where it listens)"
const FULL_PERMISSIONS = { configure: ".*", write: ".*", read: ".*" } as const

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** A request that got no HTTP answer (refused, reset, timed out), kept raw until it is described. */
class HttpFailure extends Data.TaggedError("HttpFailure")<{
  readonly cause: unknown
  readonly timeoutMs: number
}> {}

interface Reply {
  readonly status: number
  /** the parsed JSON body, or its text when it is not JSON */
  readonly body: unknown
}

/** Where the admin URL and the management API point, with what must never be printed. */
interface Server {
  /** `admin_url`, parsed; `resolve` keeps its user, password, host, port and query */
  readonly admin: URL
  /** the admin URL's user (decoded), granted full permissions on every slice */
  readonly user: string
  /** the management API's base URL, without credentials or a trailing slash; named in messages */
  readonly api: string
  readonly authorization: string
  /** raw and decoded passwords, scrubbed from every message */
  readonly secrets: ReadonlyArray<string>
}

const { checkOwner, checkSlice } = sliceChecks(ADAPTER, "vhost", MAX_NAME)

const basicAuth = (user: string, password: string): string =>
  `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}`

/** Parses `admin_url` and `management_url` without ever echoing them: they may carry a password. */
const serverOf = (
  adminUrl: string | undefined,
  options: Readonly<Record<string, unknown>>
): Effect.Effect<Server, AdapterError> =>
  Effect.flatMap(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["amqp:", "amqps:"],
      kind: "an amqp:// or amqps:// URL",
      example: "amqp://user:password@host:port",
      variable: "RABBITMQ_ADMIN_URL"
    }),
    (admin) => withManagement(admin, options)
  )

/** The management API of the server `admin` names (or `management_url`), with the credentials to call it. */
const withManagement = (
  admin: URL,
  options: Readonly<Record<string, unknown>>
): Effect.Effect<Server, AdapterError> => {
  if (admin.username === "") {
    return Effect.fail(
      fail("invalid", "admin_url must name the user berth manages vhosts as (amqp://user:password@host:port)")
    )
  }
  const user = decodeComponent(admin.username)
  const host = admin.hostname || "localhost"
  const managementUrl = options.management_url
  let api: URL
  if (managementUrl === undefined) {
    api = admin.protocol === "amqps:" ? new URL(`https://${host}:15671`) : new URL(`http://${host}:15672`)
  } else {
    if (typeof managementUrl !== "string" || managementUrl === "") {
      return Effect.fail(fail("invalid", "management_url must be a URL string (e.g. http://127.0.0.1:15672)"))
    }
    try {
      api = new URL(managementUrl)
    } catch {
      return Effect.fail(fail("invalid", "management_url is not a valid URL (expected http://host:15672)"))
    }
    if (api.protocol !== "http:" && api.protocol !== "https:") {
      return Effect.fail(fail("invalid", `management_url must be an http:// or https:// URL, not ${api.protocol}//…`))
    }
  }
  // credentials written into management_url are for the API only; the slices still belong to admin_url's user
  const authorization =
    api.username === ""
      ? basicAuth(user, decodeComponent(admin.password))
      : basicAuth(decodeComponent(api.username), decodeComponent(api.password))
  const secrets = [...secretsOf(admin), ...secretsOf(api)]
  // fetch refuses URLs with credentials, and messages must not show them
  api.username = ""
  api.password = ""
  api.search = ""
  api.hash = ""
  return Effect.succeed({
    admin,
    user,
    api: api.href.replace(/\/+$/, ""),
    authorization,
    secrets
  })
}

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** The `reason` (else `error`) of a management API error body, or its text. */
const reasonOf = (body: unknown): string | undefined => {
  if (typeof body === "string") return body.trim() === "" ? undefined : body.trim().slice(0, 300)
  if (typeof body === "object" && body !== null) {
    const record = body as Record<string, unknown>
    if (typeof record.reason === "string" && record.reason !== "") return record.reason
    if (typeof record.error === "string" && record.error !== "") return record.error
  }
  return undefined
}

/** undici's own codes for a connection that broke or never answered */
const SOCKET_CODES: ReadonlySet<string> = new Set([
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_CLOSED"
])

/**
 * What went wrong below HTTP, and whether it means nobody is listening there: fetch rejects with "fetch failed" and
 * the socket's error as its cause. A TLS complaint, say, is no reason to suggest enabling the plugin.
 */
const networkFailure = (failure: HttpFailure): { readonly detail: string; readonly unreachable: boolean } => {
  const { cause } = failure
  if (typeof cause === "object" && cause !== null && "name" in cause && cause.name === "TimeoutError") {
    return { detail: `no answer within ${failure.timeoutMs / 1000} s`, unreachable: true }
  }
  const inner = cause instanceof Error && cause.cause !== undefined ? cause.cause : cause
  const code = errorCode(inner)
  // OpenSSL's messages run over several lines of internals: the first says it
  const text = (describeCause(inner).split("\n")[0] ?? "").trim() || code || "unknown error"
  const detail = code === undefined || text.includes(code) ? text : `${text} (${code})`
  return { detail, unreachable: code === undefined || NETWORK_CODES.has(code) || SOCKET_CODES.has(code) }
}

interface RequestOptions {
  readonly body?: unknown
  readonly headers?: Readonly<Record<string, string>>
  readonly timeoutMs?: number
}

/**
 * Runs `f` with a signal that aborts on interruption or after `timeoutMs`. Joined by hand rather than with
 * `AbortSignal.any`: on Node 20 the garbage collector can take the timeout signal out of `any` before it fires, so a
 * silent server would hang the verb. A timeout signal with a listener of its own is kept alive until it fires.
 */
const withDeadline = async <A>(
  interrupt: AbortSignal,
  timeoutMs: number,
  f: (signal: AbortSignal) => Promise<A>
): Promise<A> => {
  const controller = new AbortController()
  const deadline = AbortSignal.timeout(timeoutMs)
  const onDeadline = () => controller.abort(deadline.reason)
  const onInterrupt = () => controller.abort(interrupt.reason)
  deadline.addEventListener("abort", onDeadline, { once: true })
  interrupt.addEventListener("abort", onInterrupt, { once: true })
  try {
    return await f(controller.signal)
  } finally {
    deadline.removeEventListener("abort", onDeadline)
    interrupt.removeEventListener("abort", onInterrupt)
  }
}

const request = (
  server: Server,
  method: string,
  path: string,
  options: RequestOptions
): Effect.Effect<Reply, HttpFailure> => {
  const timeoutMs = options.timeoutMs ?? READ_TIMEOUT_MS
  return Effect.tryPromise({
    try: (interrupt) =>
      withDeadline(interrupt, timeoutMs, async (signal) => {
        const headers: Record<string, string> = { authorization: server.authorization, ...options.headers }
        const init: RequestInit = { method, headers, redirect: "error", signal }
        if (options.body !== undefined) {
          headers["content-type"] = "application/json"
          init.body = JSON.stringify(options.body)
        }
        const response = await fetch(`${server.api}${path}`, init)
        // the body is read under the same deadline
        const text = await response.text()
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          // not JSON: keep the text for the message
        }
        return { status: response.status, body }
      }),
    catch: (cause) => new HttpFailure({ cause, timeoutMs })
  })
}

/**
 * Calls the management API on behalf of a verb. No answer → "unreachable" with the plugin hint; refused credentials
 * → "authentication"; a user without the rights → "grant" (RabbitMQ answers 401 for both and tells them apart only
 * by the reason). Every other status is the verb's to judge.
 */
type Call = (method: string, path: string, options?: RequestOptions) => Effect.Effect<Reply, AdapterError>

const caller =
  (server: Server, action: string, subject: string): Call =>
  (method, path, options = {}) =>
    request(server, method, path, options).pipe(
      Effect.catchTag("HttpFailure", (failure) => {
        const { detail, unreachable } = networkFailure(failure)
        if (detail === "bad port") {
          // fetch never connects to the ports browsers block (1, 25, 6000, …)
          return Effect.fail(
            fail("invalid", `the management API address ${server.api} uses a port that fetch refuses to connect to`)
          )
        }
        return Effect.fail(
          unreachable
            ? fail(
                "unreachable",
                scrub(
                  server,
                  `cannot reach RabbitMQ's management API at ${server.api} to ${action} ${subject}: ${detail}; ${PLUGIN_HINT}`
                )
              )
            : fail(
                "failed",
                scrub(
                  server,
                  `could not ${action} ${subject} through RabbitMQ's management API at ${server.api}: ${detail}`
                )
              )
        )
      }),
      Effect.flatMap((reply) => {
        if (reply.status !== 401 && reply.status !== 403) return Effect.succeed(reply)
        const reason = reasonOf(reply.body)
        if (reply.status === 401 && (reason === undefined || /login failed/i.test(reason))) {
          return Effect.fail(
            fail(
              "authentication",
              scrub(
                server,
                `RabbitMQ at ${server.api} refused the admin_url credentials of user "${server.user}"; could not ${action} ${subject}: ${reason ?? "HTTP 401"}`
              )
            )
          )
        }
        return Effect.fail(
          fail(
            "grant",
            scrub(
              server,
              `RabbitMQ at ${server.api} does not let user "${server.user}" ${action} ${subject}: ${reason ?? `HTTP ${reply.status}`}; managing vhosts needs the administrator tag (rabbitmqctl set_user_tags <user> administrator)`
            )
          )
        )
      })
    )

const unexpected = (server: Server, action: string, subject: string, reply: Reply): AdapterError => {
  const reason = reasonOf(reply.body)
  // what a server that is not RabbitMQ's management API (or a wrong path prefix) answers
  const hint = reply.status === 404 || reply.status === 405 ? "; is management_url right?" : ""
  return fail(
    "failed",
    scrub(
      server,
      `could not ${action} ${subject} on RabbitMQ at ${server.api}: HTTP ${reply.status}${reason === undefined ? "" : ` (${reason})`}${hint}`
    )
  )
}

const vhostPath = (name: string): string => `/api/vhosts/${encodeURIComponent(name)}`

const markOf = (owner: string, name: string): string => `berth:${owner}:${name}`
const claimOf = (owner: string, name: string, nonce: string): string => `${markOf(owner, name)} claim:${nonce}`

/** A description left with a claim (a provision that stopped between creating and tidying) still marks ours. */
const isOurs = (description: unknown, owner: string, name: string): boolean =>
  typeof description === "string" &&
  (description === markOf(owner, name) || description.startsWith(`${markOf(owner, name)} claim:`))

type Ownership = { readonly state: "missing" } | { readonly state: "ours" | "foreign"; readonly description: string }

const descriptionOf = (body: unknown): string => {
  const description =
    typeof body === "object" && body !== null ? (body as Record<string, unknown>).description : undefined
  return typeof description === "string" ? description : ""
}

const ownership = (
  call: Call,
  server: Server,
  action: string,
  owner: string,
  name: string
): Effect.Effect<Ownership, AdapterError> =>
  Effect.flatMap(call("GET", `${vhostPath(name)}?disable_stats=true`), (reply) => {
    if (reply.status === 404) return Effect.succeed<Ownership>({ state: "missing" })
    if (reply.status !== 200) return Effect.fail(unexpected(server, action, `vhost "${name}"`, reply))
    const description = descriptionOf(reply.body)
    return Effect.succeed<Ownership>({ state: isOurs(description, owner, name) ? "ours" : "foreign", description })
  })

const grant = (call: Call, server: Server, name: string): Effect.Effect<void, AdapterError> =>
  Effect.flatMap(
    call("PUT", `/api/permissions/${encodeURIComponent(name)}/${encodeURIComponent(server.user)}`, {
      body: FULL_PERMISSIONS
    }),
    (reply) =>
      reply.status === 201 || reply.status === 204
        ? Effect.void
        : Effect.fail(unexpected(server, "grant permissions to the admin_url user on", `vhost "${name}"`, reply))
  )

/** Deletes a vhost; one that is already gone is fine. */
const remove = (call: Call, server: Server, name: string): Effect.Effect<void, AdapterError> =>
  Effect.flatMap(call("DELETE", vhostPath(name), { timeoutMs: WRITE_TIMEOUT_MS }), (reply) =>
    reply.status === 204 || reply.status === 200 || reply.status === 404
      ? Effect.void
      : Effect.fail(unexpected(server, "delete", `vhost "${name}"`, reply))
  )

const taken = (server: Server, name: string): AdapterError =>
  fail(
    "taken",
    `vhost "${name}" already exists on RabbitMQ at ${server.api} and is not a berth slice of this installation; delete it or pick another name`
  )

/** Creates the vhost unless it exists; true when this very call created it (see the module comment). */
const create = (call: Call, server: Server, owner: string, name: string): Effect.Effect<boolean, AdapterError> =>
  Effect.gen(function* () {
    const subject = `vhost "${name}"`
    const nonce = randomBytes(8).toString("hex")
    const put = yield* call("PUT", vhostPath(name), {
      body: { description: claimOf(owner, name, nonce), tags: TAG },
      headers: { "if-none-match": "*" },
      timeoutMs: WRITE_TIMEOUT_MS
    })
    // 412: it appeared since we looked; 201/204: our PUT went through (but maybe not our description)
    if (put.status !== 201 && put.status !== 204 && put.status !== 412) {
      return yield* Effect.fail(unexpected(server, "create", subject, put))
    }
    const after = yield* ownership(call, server, "provision", owner, name)
    if (after.state === "missing") {
      return yield* Effect.fail(
        fail("failed", `vhost "${name}" on RabbitMQ at ${server.api} appeared and vanished during provision; retry`)
      )
    }
    if (after.state === "foreign") return yield* Effect.fail(taken(server, name))
    return after.description === claimOf(owner, name, nonce)
  })

/** Replaces the claim by the plain mark; `If-Match: *` so that a vhost deleted meanwhile is never re-created. */
const tidy = (call: Call, server: Server, owner: string, name: string): Effect.Effect<void, AdapterError> =>
  Effect.flatMap(
    call("PUT", vhostPath(name), {
      body: { description: markOf(owner, name), tags: TAG },
      headers: { "if-match": "*" },
      timeoutMs: WRITE_TIMEOUT_MS
    }),
    (reply) =>
      reply.status === 204 || reply.status === 201
        ? Effect.void
        : Effect.fail(unexpected(server, "mark", `vhost "${name}"`, reply))
  )

/** Whose the vhost's name is now (see `Adapter.standing`). */
const standing = Effect.fn("rabbitmq.standing")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl, slice.options)
  const call = caller(server, "look at", `vhost "${name}"`)
  return (yield* ownership(call, server, "look at", slice.owner, name)).state
})

const provision = Effect.fn("rabbitmq.provision")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl, slice.options)
  const call = caller(server, "provision", `vhost "${name}"`)
  const before = yield* ownership(call, server, "provision", slice.owner, name)
  if (before.state === "foreign") return yield* Effect.fail(taken(server, name))
  const created = before.state === "missing" ? yield* create(call, server, slice.owner, name) : false
  if (!created) {
    // granted again on every provision: the slice may have been made by another admin user
    yield* grant(call, server, name)
    return false
  }
  // should the vhost we just made stay half set up, delete it so that a retry starts clean (and runs migrate)
  yield* Effect.zipRight(tidy(call, server, slice.owner, name), grant(call, server, name)).pipe(
    Effect.tapError(() => Effect.ignore(remove(call, server, name)))
  )
  return true
})

const resolveUrl = Effect.fn("rabbitmq.resolve")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl, slice.options)
  const url = new URL(server.admin.href)
  url.pathname = `/${encodeURIComponent(name)}`
  url.hash = ""
  return url.href
})

const teardown = Effect.fn("rabbitmq.teardown")(function* (slice: Slice) {
  const name = yield* checkSlice(slice)
  const server = yield* serverOf(slice.adminUrl, slice.options)
  const call = caller(server, "tear down", `vhost "${name}"`)
  const state = yield* ownership(call, server, "tear down", slice.owner, name)
  if (state.state === "missing") {
    // a wrong path prefix in management_url answers 404 too: make sure "absent" came from the API itself
    const whoami = yield* call("GET", "/api/whoami")
    if (whoami.status !== 200) return yield* Effect.fail(unexpected(server, "tear down", `vhost "${name}"`, whoami))
    return
  }
  if (state.state === "foreign") {
    return yield* Effect.fail(
      fail(
        "not-owned",
        `vhost "${name}" on RabbitMQ at ${server.api} is not a berth slice of this installation; leaving it alone`
      )
    )
  }
  yield* remove(call, server, name)
})

const clone = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  Effect.fail(
    fail(
      "invalid",
      `the rabbitmq adapter cannot clone (vhost "${from.name}" into "${to.name}"): RabbitMQ has no server-side copy of a vhost; provision the slice and let its seed fill it`
    )
  )

const list = Effect.fn("rabbitmq.list")(function* (scope: ListScope) {
  const owner = yield* checkOwner(scope.owner)
  const server = yield* serverOf(scope.adminUrl, scope.options)
  const action = "list"
  const subject = "berth's vhosts"
  const reply = yield* caller(server, action, subject)("GET", "/api/vhosts?columns=name,description")
  if (reply.status !== 200 || !Array.isArray(reply.body)) {
    return yield* Effect.fail(unexpected(server, action, subject, reply))
  }
  const names: Array<string> = []
  for (const entry of reply.body as ReadonlyArray<unknown>) {
    if (typeof entry !== "object" || entry === null) continue
    const { name, description } = entry as Record<string, unknown>
    if (typeof name === "string" && SAFE_NAME.test(name) && isOurs(description, owner, name)) names.push(name)
  }
  return names.sort()
})

export const rabbitmqAdapter: Adapter = {
  capabilities: { clone: false },
  provision,
  resolve: resolveUrl,
  teardown,
  clone,
  list,
  standing
}
