/**
 * binky's adapter protocol, as berth speaks it to an adapter written for binky (`binky-adapter-<name>`): its four verbs,
 * its request fields and its answers, and the translation from and to berth's own verbs (`adapters/README.md`, "Adapters
 * written for binky"). Pure: running the executable is `index.ts`'s, which is the same for both protocols.
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { binkyAdapterCommand } from "../../src/domain/adapters.js"
import type { ListScope, Slice } from "../contract.js"

export const binkyCommand = binkyAdapterCommand

/** binky's verbs, each with the berth verb whose time limit it takes. */
export const binkyVerbs = {
  create: "provision",
  address: "resolve",
  destroy: "teardown",
  list: "list"
} as const

export type BinkyVerb = keyof typeof binkyVerbs

/**
 * berth's slice names are safe identifiers, but an adapter written for binky may well make a file or a database of
 * the name as it comes: a name is checked here before any such adapter sees it.
 */
export const BINKY_NAME = /^[a-z][a-z0-9_]*$/
export const BINKY_NAME_LIMIT = 63

/** The request for one slice, in binky's fields: `slice`, `server`, `data_dir`, `settings`. */
export const sliceRequest = (verb: Exclude<BinkyVerb, "list">, slice: Slice): Record<string, unknown> => ({
  verb,
  slice: slice.name,
  project: slice.project,
  world: slice.world,
  service: slice.service,
  owner: slice.owner,
  ...(slice.adminUrl === undefined ? {} : { server: slice.adminUrl }),
  data_dir: slice.storage,
  settings: slice.options
})

export const listRequest = (scope: ListScope): Record<string, unknown> => ({
  verb: "list",
  owner: scope.owner,
  ...(scope.adminUrl === undefined ? {} : { server: scope.adminUrl }),
  data_dir: scope.storage,
  settings: scope.options
})

export const CreateAnswer = Schema.Struct({
  slice: Schema.optional(Schema.String),
  address: Schema.optional(Schema.String),
  created: Schema.optional(Schema.Boolean)
})

export const AddressAnswer = Schema.Struct({
  slice: Schema.optional(Schema.String),
  address: Schema.NonEmptyString
})

export const DestroyAnswer = Schema.Struct({ slice: Schema.optional(Schema.String) })

export const ListAnswer = Schema.Struct({
  slices: Schema.Array(
    Schema.Union(Schema.String, Schema.Struct({ slice: Schema.String, owner: Schema.optional(Schema.String) }))
  )
})

/**
 * The names `list` gives berth: those whose entry names this installation as owner. An entry without one is left
 * out (and counted): berth cannot tell whose it is, and gc drops what it lists.
 */
export const ownNames = (
  answer: Schema.Schema.Type<typeof ListAnswer>,
  owner: string
): { readonly names: ReadonlyArray<string>; readonly unowned: number } => {
  const names: Array<string> = []
  let unowned = 0
  for (const entry of answer.slices) {
    if (typeof entry === "string" || entry.owner === undefined) unowned++
    else if (entry.owner === owner) names.push(entry.slice)
  }
  return { names, unowned }
}

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const parseJson = (text: string): Option.Option<unknown> => {
  try {
    return Option.some(JSON.parse(text))
  } catch {
    return Option.none()
  }
}

const firstIssue = (error: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return "it does not match"
  return issue.path.length === 0 ? issue.message : `at ${issue.path.join(".")}: ${issue.message}`
}

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/**
 * What an exited binky verb's stdout means: its answer, or why it is not one. binky says a failure by its exit code
 * (the reason on stderr, which the caller quotes) or by an `error` on stdout; it has no kinds of failure.
 * `quote` shows printed text safely (scrubbed, cut short, escaped).
 */
export const readAnswer = <A, I>(
  what: string,
  exit: Exit,
  stdout: string,
  answer: Schema.Schema<A, I>,
  scrub: (text: string) => string,
  quote: (text: string) => string
): Either.Either<A, string> => {
  const text = stdout.trim()
  const parsed = text === "" ? Option.none() : parseJson(text)
  const said =
    Option.isSome(parsed) && isRecord(parsed.value) && typeof parsed.value.error === "string"
      ? scrub(parsed.value.error)
      : undefined
  if (exit.code !== 0) {
    const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`
    return Either.left(`${what} ${how}${said === undefined ? "" : `: ${said}`}`)
  }
  if (said !== undefined) return Either.left(`${what}: ${said}`)
  if (text === "") return Either.left(`${what} exited without an answer on stdout`)
  if (Option.isNone(parsed)) return Either.left(`${what} did not answer with JSON; it printed ${quote(text)}`)
  const decoded = Schema.decodeUnknownEither(answer)(parsed.value)
  return Either.isLeft(decoded)
    ? Either.left(
        `${what} answered ${quote(JSON.stringify(parsed.value))}, which is not an answer of binky's protocol (${firstIssue(decoded.left)})`
      )
    : Either.right(decoded.right)
}

/** An answer's `slice` must be the slice asked for: berth names slices itself, and records the name it chose. */
export const otherSlice = (what: string, asked: string, answered: string | undefined): string | undefined =>
  answered === undefined || answered === asked
    ? undefined
    : `${what} answered for slice ${JSON.stringify(answered)}, not ${JSON.stringify(asked)}: berth names each slice itself`
