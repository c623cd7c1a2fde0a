/** Small pieces every adapter needs: reading an error's code and message, and refusing unsafe slice names. */
import { randomBytes } from "node:crypto"
import { readdirSync } from "node:fs"
import * as Effect from "effect/Effect"
import { AdapterError } from "./contract.js"

/** The `code` of a Node or driver error (`ENOENT`, `SQLITE_BUSY`, a PostgreSQL SQLSTATE), if it has one. */
export const errorCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/** Error codes that mean the server could not be reached at all (kind "unreachable"). */
export const NETWORK_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE"
])

export const describeCause = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/**
 * The longest slice name an embedded store takes: a file name is at most 255 bytes, and scratch names add a dot, the
 * suffix, the pid and a random part (berth's own names are at most 63 characters).
 */
export const MAX_STORAGE_NAME = 200

/** True when `name` can be a file name in a storage folder: see `checkStorageName`. */
export const isStorageName = (name: string): boolean =>
  !(
    name === "" ||
    Buffer.byteLength(name) > MAX_STORAGE_NAME ||
    name.includes("/") ||
    name.includes("\\") ||
    name.includes("..") ||
    name.includes("\0") ||
    name.startsWith(".")
  )

/**
 * Slice names arrive as safe identifiers already; embedded stores check again before using one as a file name, so
 * that no name can leave (or be) their storage folder.
 */
export const checkStorageName = (adapter: string, name: string): Effect.Effect<string, AdapterError> =>
  !isStorageName(name)
    ? Effect.fail(
        new AdapterError({
          adapter,
          kind: "invalid",
          message: `refusing slice name ${JSON.stringify(name)}: it could escape the storage folder, or is longer than ${MAX_STORAGE_NAME} bytes`
        })
      )
    : Effect.succeed(name)

/**
 * The embedded adapters build, copy and delete slices under scratch names that end in this tag: the pid of the
 * process doing it, and a random part. A scratch entry whose process is gone is what a crash left behind.
 */
export const scratchTag = (pid: number = process.pid): string => `${pid}-${randomBytes(6).toString("hex")}`

/** `scratchTag`'s shape in a regular expression; its one group is the pid. */
export const SCRATCH_TAG = "([1-9][0-9]*)-[0-9a-f]{12}"

/**
 * True when the process that made a scratch entry is gone, so nothing will use the entry again. This process, or
 * any other live one (even one that only reused the pid), may still be using it: such an entry stays (a pid reused
 * keeps a leftover a while longer, never loses a live one).
 */
const isLeftover = (pid: number): boolean => {
  if (pid === process.pid) return false
  try {
    process.kill(pid, 0)
    return false
  } catch (cause) {
    // EPERM: alive, someone else's
    return errorCode(cause) === "ESRCH"
  }
}

/**
 * The scratch entries in `storage` that a crash left: those `pattern` matches (its first group the slice's name, its
 * second the pid, as `SCRATCH_TAG` puts it) whose process is gone.
 */
/** The entries of an embedded adapter's storage folder: none while it does not exist yet. */
export const storageEntries = (storage: string): ReadonlyArray<string> => {
  try {
    return readdirSync(storage)
  } catch (cause) {
    if (errorCode(cause) === "ENOENT") return []
    throw cause
  }
}

export const leftovers = (
  storage: string,
  pattern: RegExp
): ReadonlyArray<{ readonly name: string; readonly entry: string }> => {
  const entries = storageEntries(storage)
  return entries.flatMap((entry) => {
    const match = pattern.exec(entry)
    return match?.[1] !== undefined && isStorageName(match[1]) && isLeftover(Number(match[2]))
      ? [{ name: match[1], entry }]
      : []
  })
}

/** `decodeURIComponent`, or the text itself when it is not valid percent-encoding. */
export const decodeComponent = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** A URL's password as written and decoded: scrubbed from every message an adapter makes. */
export const secretsOf = (url: URL): ReadonlyArray<string> =>
  url.password === "" ? [] : [url.password, decodeComponent(url.password)]

/** Slice names on servers: an identifier every server accepts unquoted (it is quoted anyway). */
const SAFE_NAME = /^[a-z][a-z0-9_]*$/
/** Owners are written into marks as `<owner>:<name>`: no separator may appear in one. */
const SAFE_OWNER = /^[a-z0-9_]+$/
const MAX_OWNER = 64

/** The name and owner checks of a server adapter whose slices are called `noun`s, at most `maxName` long. */
export const sliceChecks = (adapter: string, noun: string, maxName: number) => {
  const invalid = (message: string) => new AdapterError({ adapter, kind: "invalid", message })
  const checkName = (name: string): Effect.Effect<string, AdapterError> =>
    SAFE_NAME.test(name) && name.length <= maxName
      ? Effect.succeed(name)
      : Effect.fail(
          invalid(
            `refusing ${noun} name ${JSON.stringify(name)}: it must match ^[a-z][a-z0-9_]*$ and be at most ${maxName} characters`
          )
        )
  const checkOwner = (owner: string): Effect.Effect<string, AdapterError> =>
    SAFE_OWNER.test(owner) && owner.length <= MAX_OWNER
      ? Effect.succeed(owner)
      : Effect.fail(
          invalid(
            `refusing owner ${JSON.stringify(owner)}: it must match ^[a-z0-9_]+$ and be at most ${MAX_OWNER} characters`
          )
        )
  /** The slice's name, once both it and its owner are safe. */
  const checkSlice = (slice: { readonly name: string; readonly owner: string }): Effect.Effect<string, AdapterError> =>
    Effect.zipRight(checkOwner(slice.owner), checkName(slice.name))
  return { checkName, checkOwner, checkSlice } as const
}

/**
 * Parses an `admin_url` without ever echoing it (it may carry a password): missing (unless there is a `fallback`),
 * malformed and wrong-scheme URLs are `invalid`, each message saying what was expected.
 */
export const parseAdminUrl = (
  adapter: string,
  adminUrl: string | undefined,
  expect: {
    /** accepted protocols, e.g. ["postgres:", "postgresql:"] */
    readonly schemes: ReadonlyArray<string>
    /** for messages: "a postgres:// URL" */
    readonly kind: string
    /** for messages: "postgres://user:password@host:port/db" */
    readonly example: string
    /** the variable the "needs admin_url" hint suggests */
    readonly variable: string
    /** used when admin_url is not set */
    readonly fallback?: string
  }
): Effect.Effect<URL, AdapterError> => {
  const invalid = (message: string) => Effect.fail(new AdapterError({ adapter, kind: "invalid", message }))
  const text = adminUrl === undefined || adminUrl === "" ? expect.fallback : adminUrl
  if (text === undefined) {
    return invalid(`the ${adapter} adapter needs admin_url to be set (e.g. admin_url = "\${env.${expect.variable}}")`)
  }
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return invalid(`admin_url is not a valid URL (expected ${expect.example})`)
  }
  if (!expect.schemes.includes(url.protocol)) {
    return invalid(`admin_url must be ${expect.kind}, not ${url.protocol}//…`)
  }
  return Effect.succeed(url)
}

/**
 * A `fetch` that got no HTTP answer: whether the server is out of reach (a time-out, a network code, undici's own
 * errors, or no code at all) and what to say about it. Shared by the adapters that speak HTTP to their server.
 */
export const fetchFailure = (
  cause: unknown,
  timeoutMs: number
): { readonly unreachable: boolean; readonly detail: string } => {
  const timedOut = typeof cause === "object" && cause !== null && "name" in cause && cause.name === "TimeoutError"
  // fetch wraps the socket's error as its cause
  const inner = cause instanceof Error && cause.cause !== undefined ? cause.cause : cause
  const code = errorCode(inner)
  const described = describeCause(inner)
  const detail = timedOut
    ? `no answer within ${timeoutMs / 1000} s`
    : `${described || code || "unknown error"}${code !== undefined && !described.includes(code) ? ` (${code})` : ""}`
  return {
    unreachable: timedOut || code === undefined || NETWORK_CODES.has(code) || code.startsWith("UND_ERR"),
    detail
  }
}
