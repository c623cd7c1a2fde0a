/**
 * `berth/adapter-sdk`: write a berth adapter in JavaScript or TypeScript. berth runs an adapter it has no built-in
 * implementation for as `berth-adapter-<name> <verb>` from PATH, one process per verb, with one JSON request on stdin
 * and one JSON reply expected on stdout (the protocol is described in berth's `adapters/README.md`). `runAdapter` does
 * that plumbing: it reads and checks the request, calls the matching function of your adapter, writes the reply and
 * exits.
 *
 * ```js
 * #!/usr/bin/env node
 * import { AdapterFailure, runAdapter } from "berth/adapter-sdk"
 * runAdapter({
 *   provision: async (slice) => { ... return created },
 *   resolve: async (slice) => `myserver://…/${slice.name}`,
 *   teardown: async (slice) => { ... }
 * })
 * ```
 *
 * This module has no dependencies (it bundles to one small file): the request is checked by hand-written code here,
 * and berth's own runner (`adapters/external/protocol.ts`, with `effect/Schema`) is type-checked against the types
 * below, so the two cannot drift apart. Its Python twin, `berth_adapter.py` beside this file (shipped as
 * `dist/berth_adapter.py`), answers every request identically; `test/e2e/adapter-sdks.test.ts` compares the two.
 */

/** The protocol version this SDK speaks; berth sends it as `protocol` in every request. */
export const PROTOCOL_VERSION = 1

export const VERBS = ["capabilities", "provision", "resolve", "teardown", "clone", "list", "standing"] as const

/** The verb berth asks for: the executable's only argument. */
export type Verb = (typeof VERBS)[number]

/**
 * What went wrong, as berth understands it: the server could not be reached, refused the credentials, lacks a grant,
 * the slice's name is taken by something berth does not own, the slice is not owned by berth, the request or the
 * adapter's configuration is invalid, or anything else.
 */
export type AdapterErrorKind = "unreachable" | "authentication" | "grant" | "taken" | "not-owned" | "invalid" | "failed"

export const ADAPTER_ERROR_KINDS: ReadonlyArray<AdapterErrorKind> = [
  "unreachable",
  "authentication",
  "grant",
  "taken",
  "not-owned",
  "invalid",
  "failed"
]

/** The adapter-specific keys of the service's table in berth.toml (`admin_url` excepted: see `Slice.adminUrl`). */
export type Config = Readonly<Record<string, unknown>>

/** One world's private piece of a store. */
export interface Slice {
  /** the adapter name as written in berth.toml */
  readonly adapter: string
  readonly project: string
  readonly world: string
  readonly service: string
  /** a safe identifier (`<project>_<world slug>_<service>`, letters, digits and `_`), unique per server */
  readonly name: string
  /**
   * which berth installation asks: mark it on what you create (beside the name), and let `list` return only the
   * slices marked with this owner, so that several installations can share one server
   */
  readonly owner: string
  /** a folder berth made for the project's embedded slices (mode 0700); an adapter may keep its files there */
  readonly storage: string
  /** the service's resolved `admin_url`, when it has one; it may hold a password: never print it */
  readonly adminUrl?: string
  /** the same keys as the request's `config` */
  readonly options: Config
}

/** Where `list` looks: the store of one service, without a particular slice. */
export interface Scope {
  readonly adapter: string
  /** `list` returns only the slices marked with this owner */
  readonly owner: string
  readonly storage: string
  readonly adminUrl?: string
  readonly options: Config
}

export interface Capabilities {
  /** the adapter can make one slice a copy of another (`clone`) */
  readonly clone: boolean
  /** the adapter tells whose a slice's name is (`standing`); absent (older adapters): it cannot */
  readonly standing?: boolean
}

export interface CapabilitiesRequest {
  readonly protocol: 1
  readonly verb: "capabilities"
  readonly config: Config
}

export interface SliceRequest {
  readonly protocol: 1
  readonly verb: "provision" | "resolve" | "teardown" | "standing"
  readonly slice: Slice
  readonly config: Config
}

export interface CloneRequest {
  readonly protocol: 1
  readonly verb: "clone"
  /** the slice to copy (provisioned and owned) */
  readonly from: Slice
  /** the slice to fill: provisioned already; its contents are replaced */
  readonly slice: Slice
  readonly config: Config
}

export interface ListRequest {
  readonly protocol: 1
  readonly verb: "list"
  readonly scope: Scope
  readonly config: Config
}

/** What berth writes on the adapter's stdin. */
export type Request = CapabilitiesRequest | SliceRequest | CloneRequest | ListRequest

export interface FailureReply {
  readonly ok: false
  /** a sentence a person can act on (never a password) */
  readonly error: string
  readonly kind?: AdapterErrorKind
}

export interface CapabilitiesReply {
  readonly ok: true
  readonly clone: boolean
  readonly standing?: boolean
}

export interface ProvisionReply {
  readonly ok: true
  /** true when the slice was made now, false when it was there already */
  readonly created: boolean
}

export interface ResolveReply {
  readonly ok: true
  /** the address behind `${SERVICE.url}` */
  readonly url: string
}

/** The reply to `teardown` and `clone`. */
export interface DoneReply {
  readonly ok: true
}

export interface ListReply {
  readonly ok: true
  /** the names of the slices this adapter owns in the scope */
  readonly names: ReadonlyArray<string>
}

/** Whose the slice's name is on its server now. */
export type Standing = "missing" | "ours" | "foreign"

export interface StandingReply {
  readonly ok: true
  /**
   * "ours": marked with `slice.owner` (half-made included); "foreign": anyone else's, another berth installation's or
   * not berth's; "missing": nothing is there
   */
  readonly standing: Standing
}

/** What the adapter writes on stdout: exactly one JSON object. */
export type Reply =
  | FailureReply
  | CapabilitiesReply
  | ProvisionReply
  | ResolveReply
  | DoneReply
  | ListReply
  | StandingReply

type MaybePromise<A> = A | Promise<A>

/**
 * An adapter: plain (async) functions. Each verb must be idempotent — berth may repeat any of them — and must only ever
 * drop or overwrite what the adapter itself created (mark ownership where the store allows).
 */
export interface AdapterDefinition {
  /** defaults to `{ clone: true }` when `clone` is given, `{ clone: false }` otherwise */
  readonly capabilities?: Capabilities
  /** creates the slice unless it exists; returns true when it was created now */
  readonly provision: (slice: Slice, config: Config) => MaybePromise<boolean>
  /** the slice's address (a URL or a path) */
  readonly resolve: (slice: Slice, config: Config) => MaybePromise<string>
  /** drops the slice if it exists and is ours; nothing to do when it is gone */
  readonly teardown: (slice: Slice, config: Config) => MaybePromise<void>
  /** makes `to` (already provisioned) a copy of `from` */
  readonly clone?: (from: Slice, to: Slice, config: Config) => MaybePromise<void>
  /** the names of the slices in the scope marked with `scope.owner` (berth's gc drops the ones no world claims) */
  readonly list?: (scope: Scope, config: Config) => MaybePromise<ReadonlyArray<string>>
  /**
   * whose `slice.name` is on the server now; optional. With it, a second berth installation of the same project on
   * one server names its slices apart instead of failing on a name the first one holds
   */
  readonly standing?: (slice: Slice, config: Config) => MaybePromise<Standing>
}

/** Throw this from an adapter function to fail with a kind berth understands; any other throw is a crash. */
export class AdapterFailure extends Error {
  readonly kind: AdapterErrorKind
  constructor(kind: AdapterErrorKind, message: string) {
    super(message)
    this.name = "AdapterFailure"
    this.kind = kind
  }
}

// --- checking the request -------------------------------------------------------------------------------------------

type Checked<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: string }

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const checkSliceLike = (value: unknown, at: string, keys: ReadonlyArray<string>): string | undefined => {
  if (!isRecord(value)) return `${at} must be an object`
  for (const key of keys) if (typeof value[key] !== "string") return `${at}.${key} must be a string`
  if (value.adminUrl !== undefined && typeof value.adminUrl !== "string") return `${at}.adminUrl must be a string`
  if (!isRecord(value.options)) return `${at}.options must be an object`
  return undefined
}

const SLICE_KEYS = ["adapter", "project", "world", "service", "name", "owner", "storage"]
const SCOPE_KEYS = ["adapter", "owner", "storage"]

/** Checks that `input` is a request of this protocol; the verb must be the one the executable was started with. */
export const checkRequest = (input: unknown, verb: string | undefined): Checked<Request> => {
  const fail = (error: string): Checked<Request> => ({ ok: false, error })
  if (!isRecord(input)) return fail("the request is not a JSON object")
  if (input.protocol !== PROTOCOL_VERSION) {
    return fail(
      `this adapter speaks protocol ${PROTOCOL_VERSION}; the request is for ${JSON.stringify(input.protocol)}`
    )
  }
  if (typeof input.verb !== "string" || !(VERBS as ReadonlyArray<string>).includes(input.verb)) {
    return fail(`unknown verb ${JSON.stringify(input.verb)} (expected one of ${VERBS.join(", ")})`)
  }
  if (verb !== undefined && input.verb !== verb) {
    return fail(`started as \`${verb}\` but the request is for ${JSON.stringify(input.verb)}`)
  }
  if (!isRecord(input.config)) return fail("request.config must be an object")
  const problem =
    input.verb === "capabilities"
      ? undefined
      : input.verb === "list"
        ? checkSliceLike(input.scope, "request.scope", SCOPE_KEYS)
        : (checkSliceLike(input.slice, "request.slice", SLICE_KEYS) ??
          (input.verb === "clone" ? checkSliceLike(input.from, "request.from", SLICE_KEYS) : undefined))
  // checked field by field just above
  return problem === undefined ? { ok: true, value: input as unknown as Request } : fail(problem)
}

// --- answering ------------------------------------------------------------------------------------------------------

/** A reply, the exit code to end with (1 after a crash of the adapter's own code), and what to print on stderr. */
export interface Answer {
  readonly reply: Reply
  readonly exitCode: 0 | 1
  readonly stderr?: string
}

const refuse = (kind: AdapterErrorKind, error: string): Answer => ({ reply: { ok: false, error, kind }, exitCode: 0 })

/** A function of the adapter returned something of the wrong type: a bug in the adapter, reported like a crash. */
class BadResult extends Error {}

const expect = <A>(verb: string, what: string, value: unknown, test: (value: unknown) => value is A): A => {
  if (!test(value)) throw new BadResult(`${verb} returned ${describe(value)}, not ${what}`)
  return value
}

const describe = (value: unknown): string =>
  value === undefined ? "undefined" : Array.isArray(value) ? "an array" : `${typeof value} ${JSON.stringify(value)}`

const isBoolean = (value: unknown): value is boolean => typeof value === "boolean"
const isAddress = (value: unknown): value is string => typeof value === "string" && value !== ""
const isNames = (value: unknown): value is ReadonlyArray<string> =>
  Array.isArray(value) && value.every((name) => typeof name === "string")

const isStanding = (value: unknown): value is Standing => value === "missing" || value === "ours" || value === "foreign"

const capabilitiesOf = (definition: AdapterDefinition): Capabilities => ({
  // an adapter without a clone function cannot clone, whatever it declares
  clone: definition.clone !== undefined && (definition.capabilities?.clone ?? true),
  standing: definition.standing !== undefined
})

const dispatch = async (definition: AdapterDefinition, request: Request): Promise<Reply> => {
  switch (request.verb) {
    case "capabilities":
      return { ok: true, ...capabilitiesOf(definition) }
    case "provision": {
      const created = await definition.provision(request.slice, request.config)
      return { ok: true, created: expect("provision", "a boolean", created, isBoolean) }
    }
    case "resolve": {
      const url = await definition.resolve(request.slice, request.config)
      return { ok: true, url: expect("resolve", "a non-empty string", url, isAddress) }
    }
    case "teardown":
      await definition.teardown(request.slice, request.config)
      return { ok: true }
    case "clone":
      if (definition.clone === undefined || !capabilitiesOf(definition).clone) {
        return { ok: false, kind: "invalid", error: "this adapter cannot clone" }
      }
      await definition.clone(request.from, request.slice, request.config)
      return { ok: true }
    case "list": {
      if (definition.list === undefined) {
        return { ok: false, kind: "invalid", error: "this adapter does not list its slices" }
      }
      const names = await definition.list(request.scope, request.config)
      return { ok: true, names: [...expect("list", "an array of strings", names, isNames)] }
    }
    case "standing": {
      if (definition.standing === undefined) {
        return { ok: false, kind: "invalid", error: "this adapter does not tell whose a name is" }
      }
      const standing = await definition.standing(request.slice, request.config)
      return { ok: true, standing: expect("standing", '"missing", "ours" or "foreign"', standing, isStanding) }
    }
  }
}

/**
 * Answers one request (the text read from stdin) for the verb the executable was started with. Never throws: an
 * `AdapterFailure` becomes `{ ok: false, error, kind }` with exit code 0; any other error a reply without a kind, exit
 * code 1 and its stack for stderr.
 */
export const answer = async (
  definition: AdapterDefinition,
  verb: string | undefined,
  input: string
): Promise<Answer> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(input)
  } catch {
    return refuse("invalid", "the request on stdin is not JSON")
  }
  const request = checkRequest(parsed, verb)
  if (!request.ok) return refuse("invalid", request.error)
  try {
    return { reply: await dispatch(definition, request.value), exitCode: 0 }
  } catch (cause) {
    if (cause instanceof AdapterFailure) return refuse(cause.kind, cause.message)
    const error = cause instanceof Error ? cause.message || cause.name : String(cause)
    const stack = cause instanceof Error && cause.stack !== undefined ? cause.stack : error
    return { reply: { ok: false, error }, exitCode: 1, stderr: `${stack}\n` }
  }
}

/** Requests are small; anything bigger is not from berth. */
const INPUT_LIMIT = 4 * 1024 * 1024

const readInput = async (stream: NodeJS.ReadableStream): Promise<string> => {
  const chunks: Array<Buffer> = []
  let size = 0
  for await (const chunk of stream) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk
    size += buffer.length
    if (size > INPUT_LIMIT) throw new Error(`the request on stdin is larger than ${INPUT_LIMIT} bytes`)
    chunks.push(buffer)
  }
  return Buffer.concat(chunks).toString("utf8")
}

const write = (stream: NodeJS.WritableStream, text: string): Promise<void> =>
  new Promise((resolve) => {
    stream.write(text, () => resolve())
  })

/**
 * Runs the adapter as berth's executable: reads the request from stdin, answers it with one line of JSON on stdout and
 * exits — also when the adapter's code left timers or connections open, which would otherwise keep berth waiting.
 */
export const runAdapter = async (definition: AdapterDefinition): Promise<void> => {
  const verb = process.argv[2]
  if (process.stdin.isTTY) {
    process.stderr.write(
      `usage: ${process.argv[1] ?? "berth-adapter"} <${VERBS.join("|")}> < request.json\n` +
        "berth runs this program itself, one verb at a time, with a JSON request on stdin.\n"
    )
    process.exit(2)
  }
  let result: Answer
  try {
    result = await answer(definition, verb, await readInput(process.stdin))
  } catch (cause) {
    result = refuse("invalid", cause instanceof Error ? cause.message : String(cause))
  }
  if (result.stderr !== undefined) await write(process.stderr, result.stderr)
  await write(process.stdout, `${JSON.stringify(result.reply)}\n`)
  process.exit(result.exitCode)
}
