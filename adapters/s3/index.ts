/**
 * The `s3` adapter (also used for `minio`): each world gets a private slice of one S3-compatible server (MinIO,
 * LocalStack, S3Mock, s3rver, AWS S3), reached through the service's `admin_url`, `http(s)://ACCESS_KEY:SECRET@host:port`.
 * Two modes, chosen by the `mode` option:
 *
 * - `"bucket"` (default): the slice is a bucket of its own, named after the slice (`acme_main_files` →
 *   `acme-main-files`).
 * - `"prefix"`: the slice is the key prefix `<slice name>/` in one shared bucket, named by the `bucket` option (made
 *   when missing, never deleted).
 *
 * Ownership: a marker object (`.berth-slice` at the bucket's root, or `<slice name>/.berth-slice` under the prefix)
 * holds `{"owner", "name"}`; nothing without our marker is ever emptied, copied over or listed. Bucket tags would do as
 * well on AWS, but several S3-compatible servers lack them, and an object works everywhere. A bucket is created and then
 * marked (two requests), so an empty unmarked bucket under a slice's name is taken for what a crash left between the
 * two: `provision` claims it and `teardown` removes it (an empty bucket holds nothing to lose); one holding objects is
 * never touched. Concurrent provisions of one slice, from this installation or another sharing the server, settle on
 * one owner through claim objects written before the marker (see `CLAIM`): no lock, and no conditional write, needed.
 *
 * `resolve` gives `s3://ACCESS_KEY:SECRET@<bucket>[/<slice name>/]?endpoint=<http://host:port>&region=<region>&use_path_style=true`:
 * the bucket as the host and the prefix as the path, as the AWS CLI, s3fs/fsspec, Arrow and DuckDB write S3
 * locations; the credentials as userinfo (Arrow's form); `endpoint`, `region` and `use_path_style` as gocloud.dev's
 * s3blob reads them. Local servers need path-style requests, so it is always true.
 *
 * Every verb uses one short-lived client that tries each request at most twice, with connection and request time
 * limits, so a server that is down or goes away mid-verb fails with kind `unreachable` within seconds.
 */
import {
  type BucketLocationConstraint,
  CopyObjectCommand,
  CreateBucketCommand,
  type CreateBucketCommandInput,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client
} from "@aws-sdk/client-s3"
import { randomBytes } from "node:crypto"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
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

const ADAPTER = "s3"
const MARKER = ".berth-slice"
const DEFAULT_REGION = "us-east-1"
const CONNECT_TIMEOUT_MS = 3_000
/** a server that accepts the connection but never answers must not hang a verb; a CopyObject is one request */
const REQUEST_TIMEOUT_MS = 30_000
/** CopyObject, GetObject (list's markers) in flight at once */
const CONCURRENCY = 8
/** DeleteObjects takes at most 1000 keys */
const DELETE_BATCH = 1000

/** Bucket names allow 63 characters: a slice name maps to one character for character. */
const { checkName, checkOwner } = sliceChecks(ADAPTER, "slice", 63)

type Mode = "bucket" | "prefix"

const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: ADAPTER, kind, message })

/** An SDK or transport error, kept raw until the verb classifies it. */
class S3Failure extends Data.TaggedError("S3Failure")<{ readonly cause: unknown }> {}

/** Where the admin URL points, with what must never be printed. */
interface Server {
  /** `http(s)://host:port`, without credentials */
  readonly endpoint: string
  /** `host:port`, for messages */
  readonly location: string
  readonly region: string
  /** as written in the admin URL (percent-encoded), for `resolve` */
  readonly username: string
  readonly password: string
  readonly accessKeyId: string
  readonly secretAccessKey: string
  /** the raw and decoded secret key, scrubbed from every message */
  readonly secrets: ReadonlyArray<string>
}

/** Where a slice lives: its bucket, and the key prefix (`""` for a bucket of its own). */
interface Place {
  readonly bucket: string
  readonly prefix: string
  readonly marker: string
  /** for messages */
  readonly label: string
}

// --- options and names ----------------------------------------------------------------------------------------------

/** S3's rules for bucket names (dots allowed: `bucket` may name any existing bucket). */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/
/** prefixes and suffixes S3 reserves for itself */
const RESERVED = /^(xn--|sthree-|amzn-s3-demo-)|(-s3alias|--ol-s3|--x-s3|--table-s3)$/

const isBucketName = (name: string): boolean =>
  BUCKET.test(name) && !name.includes("..") && !/^\d+\.\d+\.\d+\.\d+$/.test(name) && !RESERVED.test(name)

/** `acme_main_files` → `acme-main-files`: one to one, since slice names hold no `-`. */
const bucketOf = (name: string): Effect.Effect<string, AdapterError> => {
  const bucket = name.replaceAll("_", "-")
  return isBucketName(bucket)
    ? Effect.succeed(bucket)
    : Effect.fail(fail("invalid", `refusing slice name ${JSON.stringify(name)}: ${bucket} is not a valid bucket name`))
}

const stringOption = (options: Readonly<Record<string, unknown>>, key: string): string | undefined => {
  const value = options[key]
  return typeof value === "string" && value !== "" ? value : undefined
}

const modeOf = (options: Readonly<Record<string, unknown>>): Effect.Effect<Mode, AdapterError> => {
  const mode = options.mode
  if (mode === undefined || mode === "bucket") return Effect.succeed("bucket")
  if (mode === "prefix") return Effect.succeed("prefix")
  return Effect.fail(fail("invalid", `mode must be "bucket" or "prefix", not ${JSON.stringify(mode)}`))
}

const placeOf = (name: string, options: Readonly<Record<string, unknown>>): Effect.Effect<Place, AdapterError> =>
  Effect.gen(function* () {
    const mode = yield* modeOf(options)
    const shared = stringOption(options, "bucket")
    if (mode === "bucket") {
      if (shared !== undefined) {
        return yield* Effect.fail(
          fail("invalid", 'bucket names the shared bucket of mode = "prefix"; remove it or set mode = "prefix"')
        )
      }
      const bucket = yield* bucketOf(name)
      return { bucket, prefix: "", marker: MARKER, label: `bucket ${bucket}` }
    }
    if (shared === undefined) {
      return yield* Effect.fail(fail("invalid", 'mode = "prefix" needs bucket = "<the shared bucket>"'))
    }
    if (!isBucketName(shared)) {
      return yield* Effect.fail(fail("invalid", `bucket ${JSON.stringify(shared)} is not a valid S3 bucket name`))
    }
    const prefix = `${name}/`
    return { bucket: shared, prefix, marker: `${prefix}${MARKER}`, label: `prefix ${shared}/${prefix}` }
  })

/** Parses `admin_url` without ever echoing it: it holds the secret key. */
const serverOf = (
  adminUrl: string | undefined,
  options: Readonly<Record<string, unknown>>
): Effect.Effect<Server, AdapterError> =>
  Effect.flatMap(
    parseAdminUrl(ADAPTER, adminUrl, {
      schemes: ["http:", "https:"],
      kind: "an http:// or https:// URL with the access key and secret as user and password",
      example: "http://ACCESS_KEY:SECRET@127.0.0.1:9000",
      variable: "S3_ADMIN_URL"
    }),
    (url) =>
      url.username === "" || url.password === ""
        ? Effect.fail(
            fail("invalid", "admin_url must carry the access key and secret: http://ACCESS_KEY:SECRET@host:port")
          )
        : Effect.succeed({
            endpoint: url.origin,
            location: url.host,
            region: stringOption(options, "region") ?? DEFAULT_REGION,
            username: url.username,
            password: url.password,
            accessKeyId: decodeComponent(url.username),
            secretAccessKey: decodeComponent(url.password),
            secrets: secretsOf(url)
          })
  )

// --- talking to the server ------------------------------------------------------------------------------------------

const scrub = (server: Server, text: string): string =>
  server.secrets.reduce((acc, secret) => (secret === "" ? acc : acc.split(secret).join("***")), text)

/** The HTTP status of an error the server answered with (the SDK's `$metadata`); undefined for transport errors. */
const statusOf = (cause: unknown): number | undefined => {
  if (typeof cause !== "object" || cause === null || !("$metadata" in cause)) return undefined
  const metadata = cause.$metadata
  return typeof metadata === "object" && metadata !== null && "httpStatusCode" in metadata
    ? typeof metadata.httpStatusCode === "number"
      ? metadata.httpStatusCode
      : undefined
    : undefined
}

/** The S3 error code (`NoSuchBucket`, …) of an answer; the SDK puts it in `name`. */
const s3Code = (cause: unknown): string | undefined =>
  statusOf(cause) !== undefined && cause instanceof Error ? cause.name : undefined

/** The server refused the credentials or the permission: asking again another way would not help. */
const isRefusal = (cause: unknown): boolean => {
  const status = statusOf(cause)
  const code = s3Code(cause)
  return status === 401 || status === 403 || code === "InvalidAccessKeyId" || code === "SignatureDoesNotMatch"
}

const isTransport = (cause: unknown): boolean => {
  const code = errorCode(cause)
  if (code !== undefined && NETWORK_CODES.has(code)) return true
  const name = cause instanceof Error ? cause.name : ""
  return (
    name === "TimeoutError" ||
    name === "AbortError" ||
    /socket hang up|ECONNRESET|ECONNREFUSED|connection|timed? ?out/i.test(describeCause(cause))
  )
}

/** Turns an SDK error into the adapter's vocabulary, naming the slice and server but no secret. */
const classify = (server: Server, action: string, name: string, cause: unknown): AdapterError => {
  const status = statusOf(cause)
  const code = s3Code(cause)
  const detail = scrub(server, `${code === undefined ? "" : `${code}: `}${describeCause(cause) || "unknown error"}`)
  if (code === "InvalidAccessKeyId" || code === "SignatureDoesNotMatch" || status === 401) {
    return fail(
      "authentication",
      `S3 at ${server.location} refused the admin_url credentials; could not ${action} slice "${name}": ${detail}`
    )
  }
  if (code === "AccessDenied" || status === 403) {
    return fail("grant", `S3 at ${server.location} denied what it takes to ${action} slice "${name}": ${detail}`)
  }
  if (status === undefined && isTransport(cause)) {
    return fail("unreachable", `cannot reach S3 at ${server.location} to ${action} slice "${name}": ${detail}`)
  }
  return fail("failed", `could not ${action} slice "${name}" on S3 at ${server.location}: ${detail}`)
}

/**
 * The AWS SDK warns once per process, on the first client, that its later releases need Node 22; berth runs on Node
 * 20 with a pinned release, so the warning would only be noise in the daemon's log. The variable that silences it is
 * set just for that synchronous construction, so nothing else (no world's process) ever sees it.
 */
const quietClient = (make: () => S3Client): S3Client => {
  const key = "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED"
  const before = process.env[key]
  process.env[key] = "true"
  try {
    return make()
  } finally {
    if (before === undefined) delete process.env[key]
    else process.env[key] = before
  }
}

/** One client for the length of the scope, destroyed with its sockets afterwards. */
const clientOf = (server: Server): Effect.Effect<S3Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() =>
      quietClient(
        () =>
          new S3Client({
            endpoint: server.endpoint,
            region: server.region,
            forcePathStyle: true,
            credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
            // a second try covers a kept-alive socket the server closed just as it was reused; more would only delay
            // "unreachable" (a refused connection fails again at once)
            maxAttempts: 2,
            requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
            // checksums only where S3 requires them: several S3-compatible servers reject the newer CRC headers
            requestChecksumCalculation: "WHEN_REQUIRED",
            responseChecksumValidation: "WHEN_REQUIRED"
          })
      )
    ),
    (client) => Effect.sync(() => client.destroy())
  )

/** One request; interrupting the verb aborts it. */
const call = <A>(f: (abortSignal: AbortSignal) => Promise<A>): Effect.Effect<A, S3Failure> =>
  Effect.tryPromise({ try: f, catch: (cause) => new S3Failure({ cause }) })

/** Runs a verb with one client; raw failures become AdapterErrors naming the slice. */
const withServer = <A>(
  server: Server,
  action: string,
  name: string,
  body: (client: S3Client) => Effect.Effect<A, S3Failure | AdapterError>
): Effect.Effect<A, AdapterError> =>
  Effect.scoped(Effect.flatMap(clientOf(server), body)).pipe(
    Effect.catchTag("S3Failure", (failure) => Effect.fail(classify(server, action, name, failure.cause)))
  )

/** Recovers from the S3 errors named in `codes` with `fallback`. */
const unless = <A, B>(
  effect: Effect.Effect<A, S3Failure>,
  codes: ReadonlyArray<string>,
  fallback: (code: string) => B
): Effect.Effect<A | B, S3Failure> =>
  Effect.catchIf(
    effect,
    (failure) => codes.includes(s3Code(failure.cause) ?? ""),
    (failure) => Effect.succeed(fallback(s3Code(failure.cause) ?? ""))
  )

/** Every key under `prefix`, a page at a time. */
const eachPage = (
  client: S3Client,
  bucket: string,
  prefix: string,
  page: (keys: ReadonlyArray<string>) => Effect.Effect<void, S3Failure | AdapterError>
): Effect.Effect<void, S3Failure | AdapterError> =>
  Effect.gen(function* () {
    let token: string | undefined
    do {
      const output: ListObjectsV2CommandOutput = yield* call((abortSignal) =>
        client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }), {
          abortSignal
        })
      )
      const keys = (output.Contents ?? []).flatMap((object) => (object.Key === undefined ? [] : [object.Key]))
      if (keys.length > 0) yield* page(keys)
      token = output.IsTruncated === true ? output.NextContinuationToken : undefined
    } while (token !== undefined)
  })

/**
 * The marker's contents, "missing" without a marker, "no-bucket" without the bucket; "unreadable" when it is empty or
 * not JSON, which is also how a marker looks while a provision is still writing it (s3rver writes an object in place).
 */
type Mark = { readonly owner: unknown; readonly name: unknown } | "unreadable" | "missing" | "no-bucket"

const readMark = (client: S3Client, bucket: string, key: string): Effect.Effect<Mark, S3Failure> =>
  unless(
    Effect.flatMap(
      call((abortSignal) => client.send(new GetObjectCommand({ Bucket: bucket, Key: key }), { abortSignal })),
      (output) =>
        call(async () => {
          const text = (await output.Body?.transformToString("utf8")) ?? ""
          try {
            const parsed: unknown = JSON.parse(text)
            return typeof parsed === "object" && parsed !== null && "owner" in parsed && "name" in parsed
              ? { owner: parsed.owner, name: parsed.name }
              : { owner: undefined, name: undefined }
          } catch {
            return "unreadable" as const
          }
        })
    ),
    ["NoSuchKey", "NoSuchBucket", "NotFound"],
    (code): Mark => (code === "NoSuchBucket" ? "no-bucket" : "missing")
  )

/** how often, and how many times, an unreadable marker is read again before it is taken for something else's */
const MARK_READ_AGAIN = Schedule.intersect(Schedule.spaced(Duration.millis(50)), Schedule.recurs(20))

/**
 * `readMark`, read again while it is unreadable: a provision writing it finishes within a few requests' time. One that
 * stays unreadable is something else under our marker's key, not ours.
 */
const readMarkSettled = (client: S3Client, bucket: string, key: string): Effect.Effect<Mark, S3Failure> =>
  Effect.repeat(
    readMark(client, bucket, key),
    Schedule.passthrough(Schedule.whileInput(MARK_READ_AGAIN, (mark: Mark) => mark === "unreadable"))
  )

/**
 * A provision's claim on a place, written before its marker: `<marker>.claim.<owner>.<pid>.<random>`. S3-compatible
 * servers differ in what they decide atomically (s3rver ignores `If-None-Match` on PUT and checks then makes a bucket;
 * AWS answers 200 to a repeated CreateBucket in us-east-1), so concurrent provisions settle through claims instead:
 * each writes its claim, then lists the place's marker and claims. Only a provision that sees its own claim and
 * nothing else marks the slice, and it keeps its claim until the marker is written; since a write that returned is
 * seen by every later listing (S3 is strongly consistent), no two provisions can both see only themselves. The others
 * withdraw, except the lowest claim, which looks again until the rest are gone, and wait for the winner's marker.
 */
const CLAIM = /^\.claim\.([a-z0-9_]+)\.([1-9][0-9]*)\.[0-9a-f]{16}$/
/**
 * A claim older than this (by the server's clock, against a fresh one) was left by a crash: a live provision goes
 * from claim to marker in a few requests, each bounded by the client's time limits.
 */
const STALE_CLAIM_MS = 10 * 60_000
/** how often, and how many times, the lowest claim looks again while the others withdraw */
const CLAIM_ROUNDS = { spacing: 50, times: 100 } as const
/** how long a provision that withdrew waits for the winner's marker */
const MARK_WAIT = Schedule.intersect(Schedule.spaced(Duration.millis(100)), Schedule.recurs(100))

interface SeenClaim {
  readonly key: string
  readonly owner: string
  readonly pid: number
  /** the server's time of writing, where the listing gives it */
  readonly modified: number | undefined
}

/** The claim `key` is on the place whose marker is `marker`, if it is one. */
const claimOf = (marker: string, key: string, modified: Date | undefined): SeenClaim | undefined => {
  if (!key.startsWith(marker)) return undefined
  const match = CLAIM.exec(key.slice(marker.length))
  return match?.[1] === undefined || match[2] === undefined
    ? undefined
    : { key, owner: match[1], pid: Number(match[2]), modified: modified?.getTime() }
}

const isClaim = (place: Place, key: string): boolean => claimOf(place.marker, key, undefined) !== undefined

/** True when the process behind a claim of this installation (so of this machine) is gone. */
const processGone = (pid: number): boolean => {
  if (pid === process.pid) return false
  try {
    process.kill(pid, 0)
    return false
  } catch (cause) {
    // EPERM: alive, someone else's
    return errorCode(cause) === "ESRCH"
  }
}

/** What a crash left: a claim too old to be live, or one of ours whose process is gone. */
const isLeftover = (claim: SeenClaim, owner: string, now: number | undefined): boolean =>
  (now !== undefined && claim.modified !== undefined && now - claim.modified > STALE_CLAIM_MS) ||
  (claim.owner === owner && processGone(claim.pid))

/**
 * Whether a crash of this installation left a claim at the place whose marker is `marker` (where there is no marker):
 * `list` returns such a half-made slice, so that gc tears it down.
 */
const leftClaim = (
  client: S3Client,
  bucket: string,
  marker: string,
  owner: string
): Effect.Effect<boolean, S3Failure> =>
  Effect.map(
    call((abortSignal) =>
      client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${marker}.claim.${owner}.` }), { abortSignal })
    ),
    (output) =>
      (output.Contents ?? []).some((object) => {
        const claim = object.Key === undefined ? undefined : claimOf(marker, object.Key, undefined)
        return claim !== undefined && isLeftover(claim, owner, undefined)
      })
  )

/** Whether anything but the marker and claims lies under the place; and whether claims do. */
const contentsOf = (
  client: S3Client,
  place: Place
): Effect.Effect<{ readonly marked: boolean; readonly objects: boolean; readonly claims: boolean }, S3Failure> =>
  Effect.map(
    call((abortSignal) =>
      // one page of the server's default size: a smaller MaxKeys makes s3rver on Node 20 fail (its continuation
      // tokens need OpenSSL's legacy DES)
      client.send(new ListObjectsV2Command({ Bucket: place.bucket, Prefix: place.prefix }), { abortSignal })
    ),
    (output) => {
      const keys = (output.Contents ?? []).flatMap((object) =>
        object.Key === undefined || object.Key === place.marker ? [] : [object.Key]
      )
      return {
        marked: (output.Contents ?? []).some((object) => object.Key === place.marker),
        objects: keys.some((key) => !isClaim(place, key)),
        claims: keys.some((key) => isClaim(place, key))
      }
    }
  )

/**
 * What is at a slice's place: nothing, our slice, or something else — another installation's (or another slice's)
 * marker, or objects without a marker. A place that holds nothing but claims, or an empty bucket of its own, is
 * `unmarked`: being made right now, or what a crash left before the marker.
 */
type State = "no-bucket" | "missing" | "owned" | "unmarked" | "foreign"

const stateOf = (
  client: S3Client,
  place: Place,
  slice: { readonly owner: string; readonly name: string }
): Effect.Effect<State, S3Failure> =>
  Effect.gen(function* () {
    // a marker still unreadable after the wait is something else's
    const marked = (mark: Mark): State | undefined =>
      mark === "unreadable"
        ? "foreign"
        : typeof mark !== "object"
          ? undefined
          : mark.owner === slice.owner && mark.name === slice.name
            ? "owned"
            : "foreign"
    const mark = yield* readMarkSettled(client, place.bucket, place.marker)
    if (mark === "no-bucket") return "no-bucket"
    const first = marked(mark)
    if (first !== undefined) return first
    const contents = yield* contentsOf(client, place)
    // marked since it was read, and the winner's claim perhaps gone already: read the marker again
    const now = contents.marked ? marked(yield* readMarkSettled(client, place.bucket, place.marker)) : undefined
    if (now !== undefined) return now
    if (contents.objects) return "foreign"
    // a bucket of its own exists, empty: a crash between making and marking it; an empty prefix is simply nothing
    return place.prefix === "" || contents.claims ? "unmarked" : "missing"
  })

const standingOf = (state: State): Standing =>
  state === "owned" ? "ours" : state === "foreign" ? "foreign" : state === "unmarked" ? "unfinished" : "missing"

const notOurs = (server: Server, place: Place, name: string, action: string) =>
  `cannot ${action} slice "${name}": ${place.label} on S3 at ${server.location} is not marked as this berth installation's slice; leaving it alone`

const putMark = (
  client: S3Client,
  place: Place,
  slice: { readonly owner: string; readonly name: string }
): Effect.Effect<boolean, S3Failure> =>
  unless(
    Effect.as(
      call((abortSignal) =>
        client.send(
          new PutObjectCommand({
            Bucket: place.bucket,
            Key: place.marker,
            Body: `${JSON.stringify({ owner: slice.owner, name: slice.name })}\n`,
            ContentType: "application/json",
            // where the server honours it, two installations racing for one name cannot both mark it
            IfNoneMatch: "*"
          }),
          { abortSignal }
        )
      ),
      true
    ),
    ["PreconditionFailed"],
    () => false
  )

const createBucket = (client: S3Client, server: Server, bucket: string): Effect.Effect<void, S3Failure> => {
  const input: CreateBucketCommandInput =
    server.region === DEFAULT_REGION
      ? { Bucket: bucket }
      : // the SDK lists the regions it knew when it was released; S3-compatible servers name their own
        { Bucket: bucket, CreateBucketConfiguration: { LocationConstraint: server.region as BucketLocationConstraint } }
  return Effect.asVoid(
    unless(
      call((abortSignal) => client.send(new CreateBucketCommand(input), { abortSignal })),
      ["BucketAlreadyOwnedByYou", "BucketAlreadyExists"],
      () => undefined
    )
  )
}

/** Deletes one batch with DeleteObjects; a key the server could not delete fails the verb (else emptying would never end). */
const deleteBatch = (client: S3Client, bucket: string, batch: ReadonlyArray<string>): Effect.Effect<void, S3Failure> =>
  Effect.flatMap(
    call((abortSignal) =>
      client.send(
        new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
        { abortSignal }
      )
    ),
    (output) => {
      const error = output.Errors?.[0]
      return error === undefined
        ? Effect.void
        : Effect.fail(
            new S3Failure({ cause: new Error(`could not delete ${error.Key}: ${error.Code} ${error.Message}`) })
          )
    }
  )

/**
 * Deletes the given keys, a DeleteObjects request per thousand. Where the server answers that request with an error
 * other than a refusal (some S3-compatible servers lack it, s3rver fails it for two keys in one folder), the batch is
 * deleted one key at a time instead, in order, which every server supports.
 */
const deleteKeys = (client: S3Client, bucket: string, keys: ReadonlyArray<string>): Effect.Effect<void, S3Failure> => {
  const oneByOne = (batch: ReadonlyArray<string>) =>
    Effect.forEach(
      batch,
      (Key) => call((abortSignal) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key }), { abortSignal })),
      { discard: true }
    )
  return Effect.forEach(
    Array.from({ length: Math.ceil(keys.length / DELETE_BATCH) }, (_, i) =>
      keys.slice(i * DELETE_BATCH, (i + 1) * DELETE_BATCH)
    ),
    (batch) =>
      batch.length === 1
        ? oneByOne(batch)
        : Effect.catchIf(
            deleteBatch(client, bucket, batch),
            (failure) => (statusOf(failure.cause) ?? 0) >= 400 && !isRefusal(failure.cause),
            () => oneByOne(batch)
          ),
    { discard: true }
  )
}

/** Deletes every object of the place but its marker. */
const empty = (client: S3Client, place: Place): Effect.Effect<void, S3Failure | AdapterError> =>
  eachPage(client, place.bucket, place.prefix, (keys) =>
    deleteKeys(
      client,
      place.bucket,
      keys.filter((key) => key !== place.marker)
    )
  )

// --- verbs ----------------------------------------------------------------------------------------------------------

interface Prepared {
  readonly name: string
  readonly server: Server
  readonly place: Place
}

const prepare = (slice: Slice): Effect.Effect<Prepared, AdapterError> =>
  Effect.gen(function* () {
    yield* checkOwner(slice.owner)
    const name = yield* checkName(slice.name)
    const place = yield* placeOf(name, slice.options)
    const server = yield* serverOf(slice.adminUrl, slice.options)
    return { name, server, place }
  })

/** Writes this provision's claim, making the bucket first where it is missing (the shared one is never deleted). */
const writeClaim = (
  client: S3Client,
  server: Server,
  place: Place,
  key: string,
  slice: { readonly owner: string; readonly name: string }
): Effect.Effect<void, S3Failure> => {
  // not empty: the SDK warns about a body of unknown length otherwise
  const body = `${JSON.stringify({ owner: slice.owner, name: slice.name })}\n`
  const put = call((abortSignal) =>
    client.send(new PutObjectCommand({ Bucket: place.bucket, Key: key, Body: body }), { abortSignal })
  )
  return Effect.asVoid(
    Effect.catchIf(
      put,
      (failure) => s3Code(failure.cause) === "NoSuchBucket",
      () => Effect.zipRight(createBucket(client, server, place.bucket), put)
    )
  )
}

/** The place's marker, if written, and every claim on it, in one listing. */
const claimsAt = (
  client: S3Client,
  place: Place
): Effect.Effect<{ readonly marked: boolean; readonly claims: ReadonlyArray<SeenClaim> }, S3Failure> =>
  Effect.map(
    call((abortSignal) =>
      client.send(new ListObjectsV2Command({ Bucket: place.bucket, Prefix: place.marker }), { abortSignal })
    ),
    (output) => ({
      marked: (output.Contents ?? []).some((object) => object.Key === place.marker),
      claims: (output.Contents ?? []).flatMap((object) => {
        const claim = object.Key === undefined ? undefined : claimOf(place.marker, object.Key, object.LastModified)
        return claim === undefined ? [] : [claim]
      })
    })
  )

/**
 * Claims the place and marks it when this provision is the one to (see `CLAIM`): true when it marked the slice, false
 * when another provision marks it (or nobody won, which the settling look then reports). The claim is deleted in
 * every case, after the marker when this one won.
 */
const createMarked = (
  client: S3Client,
  server: Server,
  place: Place,
  slice: { readonly owner: string; readonly name: string }
): Effect.Effect<boolean, S3Failure> => {
  const mine = `${place.marker}.claim.${slice.owner}.${process.pid}.${randomBytes(8).toString("hex")}`
  const round: Effect.Effect<"won" | "lost" | "wait", S3Failure> = Effect.gen(function* () {
    const seen = yield* claimsAt(client, place)
    if (seen.marked) return "lost"
    const own = seen.claims.find((claim) => claim.key === mine)
    if (own === undefined) return "wait"
    const leftovers = seen.claims.filter((claim) => claim.key !== mine && isLeftover(claim, slice.owner, own.modified))
    const rivals = seen.claims.filter((claim) => claim.key !== mine && !leftovers.includes(claim))
    if (rivals.length > 0) return rivals.some((claim) => claim.key < mine) ? "lost" : "wait"
    // where the server honours If-None-Match, it decides too
    if (!(yield* putMark(client, place, slice))) return "lost"
    yield* deleteKeys(
      client,
      place.bucket,
      leftovers.map((claim) => claim.key)
    )
    return "won"
  })
  return Effect.gen(function* () {
    yield* writeClaim(client, server, place, mine, slice)
    let outcome = yield* round
    for (let i = 1; i < CLAIM_ROUNDS.times && outcome === "wait"; i++) {
      yield* Effect.sleep(Duration.millis(CLAIM_ROUNDS.spacing))
      outcome = yield* round
    }
    return outcome === "won"
  }).pipe(Effect.ensuring(Effect.ignore(deleteKeys(client, place.bucket, [mine]))))
}

/** Makes the slice unless it is there; true when made now. */
const ensure = (
  client: S3Client,
  { name, server, place }: Prepared,
  owner: string
): Effect.Effect<boolean, S3Failure | AdapterError> => {
  const slice = { owner, name }
  return provisionOwned({
    // none: the claims settle concurrent provisions, of this installation or another
    lock: Effect.void,
    look: stateOf(client, place, slice),
    standing: standingOf,
    // an empty bucket is reused as it is; a crash's claims are passed over, and deleted by the next winner
    clear: Effect.void,
    create: createMarked(client, server, place, slice),
    // a marker of another installation's ends the wait at once
    settle: Schedule.whileInput(MARK_WAIT, (state: State) => state !== "foreign"),
    taken: () =>
      fail(
        "taken",
        `${place.label} on S3 at ${server.location} exists and is not this berth installation's slice "${name}"; move it away or rename the service`
      ),
    vanished: () =>
      fail(
        "failed",
        `${place.label} on S3 at ${server.location} was being made by another provision that did not finish; retry`
      )
  })
}

/** Whose the name is now (see `Adapter.standing`). */
const standing = (slice: Slice): Effect.Effect<"missing" | "ours" | "foreign", AdapterError> =>
  Effect.flatMap(prepare(slice), (prepared) =>
    withServer(prepared.server, "look at", prepared.name, (client) =>
      Effect.map(stateOf(client, prepared.place, { owner: slice.owner, name: prepared.name }), (state) =>
        ownerStanding(standingOf(state))
      )
    )
  )

const provision = (slice: Slice): Effect.Effect<boolean, AdapterError> =>
  Effect.flatMap(prepare(slice), (prepared) =>
    withServer(prepared.server, "provision", prepared.name, (client) => ensure(client, prepared, slice.owner))
  )

const resolve = (slice: Slice): Effect.Effect<string, AdapterError> =>
  Effect.map(prepare(slice), ({ server, place }) => {
    // built as http(s) and switched: the WHATWG URL parser keeps userinfo and host of special schemes only
    const url = new URL(`https://${place.bucket}/${place.prefix}`)
    url.username = server.username
    url.password = server.password
    url.searchParams.set("endpoint", server.endpoint)
    url.searchParams.set("region", server.region)
    url.searchParams.set("use_path_style", "true")
    return `s3:${url.href.slice("https:".length)}`
  })

const teardown = (slice: Slice): Effect.Effect<void, AdapterError> =>
  Effect.flatMap(prepare(slice), ({ name, server, place }) =>
    withServer(server, "tear down", name, (client) =>
      teardownOwned({
        lock: Effect.void,
        look: stateOf(client, place, { owner: slice.owner, name }),
        standing: standingOf,
        drop: Effect.gen(function* () {
          yield* empty(client, place)
          // the marker goes last, so a teardown cut short is still recognisably ours
          yield* deleteKeys(client, place.bucket, [place.marker])
          if (place.prefix === "") {
            yield* unless(
              call((abortSignal) => client.send(new DeleteBucketCommand({ Bucket: place.bucket }), { abortSignal })),
              ["NoSuchBucket"],
              () => undefined
            )
          }
        }),
        notOwned: () => fail("not-owned", notOurs(server, place, name, "tear down"))
      })
    )
  )

/** Copies every object of `from` (its marker excepted) into `to`, server-side, keeping the keys below the prefix. */
const copyAll = (client: S3Client, from: Place, to: Place): Effect.Effect<void, S3Failure | AdapterError> =>
  eachPage(client, from.bucket, from.prefix, (keys) =>
    Effect.forEach(
      keys.filter((key) => key !== from.marker),
      (key) => {
        const target = `${to.prefix}${key.slice(from.prefix.length)}`
        // the copy source is `bucket/key`, URL-encoded, its slashes kept
        const source = `${from.bucket}/${key.split("/").map(encodeURIComponent).join("/")}`
        return call((abortSignal) =>
          client.send(new CopyObjectCommand({ Bucket: to.bucket, Key: target, CopySource: source }), { abortSignal })
        )
      },
      { concurrency: CONCURRENCY, discard: true }
    )
  )

const clone = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  Effect.gen(function* () {
    const target = yield* prepare(to)
    const source = yield* prepare({ ...from, adminUrl: from.adminUrl ?? to.adminUrl })
    if (source.place.bucket === target.place.bucket && source.place.prefix === target.place.prefix) {
      return yield* Effect.fail(fail("invalid", `cannot clone slice "${source.name}" onto itself`))
    }
    if (from.owner !== to.owner) {
      return yield* Effect.fail(fail("invalid", "cannot clone a slice of another berth installation"))
    }
    if (source.server.endpoint !== target.server.endpoint) {
      return yield* Effect.fail(fail("invalid", "cannot clone between two S3 servers: CopyObject works within one"))
    }
    yield* withServer(target.server, "clone into", target.name, (client) =>
      Effect.gen(function* () {
        const state = yield* stateOf(client, source.place, { owner: from.owner, name: source.name })
        if (state === "foreign") {
          return yield* Effect.fail(fail("not-owned", notOurs(source.server, source.place, source.name, "clone from")))
        }
        if (state !== "owned") {
          return yield* Effect.fail(
            fail(
              "failed",
              `cannot clone: slice "${source.name}" (${source.place.label}) is not provisioned on S3 at ${source.server.location}`
            )
          )
        }
        if ((yield* stateOf(client, target.place, { owner: to.owner, name: target.name })) === "foreign") {
          return yield* Effect.fail(fail("not-owned", notOurs(target.server, target.place, target.name, "clone into")))
        }
        // a missing target is made first
        yield* ensure(client, target, to.owner)
        yield* empty(client, target.place)
        yield* copyAll(client, source.place, target.place)
      })
    )
  })

/**
 * The slice at a listed place, if it is this owner's: marked as `name` by it, or unmarked with a claim a crash of
 * this installation left there (half-made, so that gc tears it down).
 */
const ownedAt = (
  client: S3Client,
  bucket: string,
  marker: string,
  name: string,
  owner: string,
  mark: Mark
): Effect.Effect<ReadonlyArray<string>, S3Failure> => {
  if (typeof mark === "object") return Effect.succeed(mark.owner === owner && mark.name === name ? [name] : [])
  if (mark === "unreadable" || mark === "no-bucket" || !/^[a-z][a-z0-9_]*$/.test(name) || name.length > 63)
    return Effect.succeed([])
  return Effect.map(leftClaim(client, bucket, marker, owner), (left) => (left ? [name] : []))
}

/** This owner's slices among every bucket of the server (mode "bucket"). */
const listBuckets = (client: S3Client, owner: string): Effect.Effect<ReadonlyArray<string>, S3Failure> =>
  Effect.gen(function* () {
    const output = yield* call((abortSignal) => client.send(new ListBucketsCommand({}), { abortSignal }))
    const buckets = (output.Buckets ?? []).flatMap((bucket) =>
      bucket.Name !== undefined && /^[a-z][a-z0-9-]*$/.test(bucket.Name) ? [bucket.Name] : []
    )
    const names = yield* Effect.forEach(
      buckets,
      (bucket) =>
        // a bucket we may not read (another account's, another region's) is simply not ours
        Effect.catchIf(
          Effect.flatMap(readMarkSettled(client, bucket, MARKER), (mark) =>
            ownedAt(client, bucket, MARKER, bucket.replaceAll("-", "_"), owner, mark)
          ),
          (failure) => statusOf(failure.cause) !== undefined,
          () => Effect.succeed<ReadonlyArray<string>>([])
        ),
      { concurrency: CONCURRENCY }
    )
    return names.flat().sort()
  })

/** This owner's slices among the top-level prefixes of the shared bucket (mode "prefix"). */
const listPrefixes = (
  client: S3Client,
  bucket: string,
  owner: string
): Effect.Effect<ReadonlyArray<string>, S3Failure> =>
  Effect.gen(function* () {
    const prefixes: Array<string> = []
    let token: string | undefined
    do {
      const output: ListObjectsV2CommandOutput = yield* unless(
        call((abortSignal) =>
          client.send(new ListObjectsV2Command({ Bucket: bucket, Delimiter: "/", ContinuationToken: token }), {
            abortSignal
          })
        ),
        ["NoSuchBucket"],
        (): ListObjectsV2CommandOutput => ({ $metadata: {} })
      )
      for (const common of output.CommonPrefixes ?? []) if (common.Prefix !== undefined) prefixes.push(common.Prefix)
      token = output.IsTruncated === true ? output.NextContinuationToken : undefined
    } while (token !== undefined)
    const names = yield* Effect.forEach(
      prefixes,
      (prefix) => {
        const marker = `${prefix}${MARKER}`
        return Effect.flatMap(readMarkSettled(client, bucket, marker), (mark) =>
          ownedAt(client, bucket, marker, prefix.slice(0, -1), owner, mark)
        )
      },
      { concurrency: CONCURRENCY }
    )
    return names.flat().sort()
  })

const list = (scope: ListScope): Effect.Effect<ReadonlyArray<string>, AdapterError> =>
  Effect.gen(function* () {
    const owner = yield* checkOwner(scope.owner)
    const mode = yield* modeOf(scope.options)
    // any valid name gives the shared bucket of mode "prefix"
    const place = yield* placeOf("list", scope.options)
    const server = yield* serverOf(scope.adminUrl, scope.options)
    return yield* withServer(server, "list", place.label, (client) =>
      mode === "bucket" ? listBuckets(client, owner) : listPrefixes(client, place.bucket, owner)
    )
  })

export const s3Adapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve,
  teardown,
  clone,
  list,
  standing
}
