/**
 * External adapters: an adapter name berth has no built-in implementation for is served by an executable
 * `berth-adapter-<name>` found on PATH, run once per verb (`berth-adapter-<name> provision`) with one JSON request on
 * stdin and one JSON reply expected on stdout (the protocol is in `adapters/README.md`; its shapes in `protocol.ts`).
 * Where PATH has none, an adapter written for binky, `binky-adapter-<name>`, serves it unchanged: berth speaks binky's
 * four verbs to it, translating verbs and fields both ways (`binky.ts`).
 *
 * The executable is spawned directly (never through a shell) in a process group of its own, and that whole group is
 * stopped when the verb ends, times out or is interrupted, so no verb leaves a process behind. Whatever it prints is
 * capped, and what of it reaches an error message is scrubbed of passwords. A failed `provision` is followed by one
 * best-effort `teardown`, so a half-made slice is not left on the server.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { constants as fsConstants, accessSync, readdirSync, readFileSync, statSync } from "node:fs"
import { delimiter, isAbsolute, join } from "node:path"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { externalAdapterCommand, isValidAdapterName } from "../../src/domain/adapters.js"
import { isDefunct, parseStat } from "../../src/domain/proc.js"
import {
  adapterErrorKinds,
  type Adapter,
  AdapterError,
  type AdapterErrorKind,
  type Capabilities,
  type ListScope,
  type Slice
} from "../contract.js"
import { describeCause, errorCode } from "../shared.js"
import * as Binky from "./binky.js"
import * as Protocol from "./protocol.js"

export interface ExternalAdapterOptions {
  /** how long each verb may take (default: 120 s for provision and clone, 30 s for the others) */
  readonly timeouts?: Partial<Record<Protocol.Verb, Duration.DurationInput>>
  /** the PATH to search instead of `process.env.PATH` */
  readonly path?: string
  /** how long a process group has between SIGTERM and SIGKILL (default 2 s) */
  readonly grace?: Duration.DurationInput
}

export interface ExternalAdapter extends Adapter {
  /**
   * Asks the executable for its capabilities, once per adapter instance (a failure counts as `{ clone: false }`).
   * `provision` asks first thing; until the answer is known, `capabilities` reads `{ clone: true }` and `clone`
   * checks the real answer itself, failing with kind "invalid" when the executable cannot clone.
   */
  readonly askCapabilities: Effect.Effect<Capabilities>
  /** the executable's answer where its capabilities say it tells whose a name is; "missing" (nothing against it) else */
  readonly standing: (slice: Slice) => Effect.Effect<"missing" | "ours" | "foreign", AdapterError>
  /** the executable that serves it now and the protocol berth speaks to it; undefined while there is none */
  readonly served: Effect.Effect<Served | undefined>
}

/** Which executable serves an external adapter, and in which protocol: berth's own, or binky's. */
export interface Served {
  readonly executable: string
  readonly protocol: "berth" | "binky"
}

const DEFAULT_TIMEOUTS: Record<Protocol.Verb, Duration.Duration> = {
  capabilities: Duration.seconds(30),
  provision: Duration.seconds(120),
  resolve: Duration.seconds(30),
  teardown: Duration.seconds(30),
  clone: Duration.seconds(120),
  list: Duration.seconds(30),
  standing: Duration.seconds(30)
}
const DEFAULT_GRACE = Duration.seconds(2)
/** a reply is one small JSON object: more than this on stdout is a runaway, stopped at once */
const STDOUT_LIMIT = 1024 * 1024
/** stderr is the adapter's log: only its tail is kept, for error messages */
const STDERR_KEPT = 64 * 1024
const STDERR_LINES = 10
const SNIPPET = 200
/** after the process exits, how long its stdout may stay open (a grandchild holding it) before we stop waiting */
const CLOSE_WAIT_MS = 500
const POLL_MS = 25
/** after the final SIGKILL, how long to wait for the kernel to finish the group off */
const KILL_SETTLE_MS = 1_000

// --- finding the executable -------------------------------------------------------------------------------------------

type Located =
  | { readonly _tag: "Found"; readonly path: string }
  | { readonly _tag: "Missing"; readonly notExecutable: ReadonlyArray<string> }

/**
 * A plain PATH lookup. Empty and relative entries are skipped: they would name the daemon's working directory,
 * which is no place to pick executables from.
 */
const locate = (command: string, searchPath: string): Located => {
  const notExecutable: Array<string> = []
  for (const dir of searchPath.split(delimiter)) {
    if (dir === "" || !isAbsolute(dir)) continue
    const candidate = join(dir, command)
    try {
      if (!statSync(candidate).isFile()) continue
    } catch {
      continue
    }
    try {
      accessSync(candidate, fsConstants.X_OK)
      return { _tag: "Found", path: candidate }
    } catch {
      notExecutable.push(candidate)
    }
  }
  return { _tag: "Missing", notExecutable }
}

// --- secrets ------------------------------------------------------------------------------------------------------------

/** A URL's password; undefined when it has none or is no URL (the generic rule in `scrub` still applies then). */
const passwordOf = (url: string): string | undefined => {
  try {
    const password = new URL(url).password
    return password === "" ? undefined : password
  } catch {
    return undefined
  }
}

const decoded = (text: string): string => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** The passwords of admin URLs (as written, decoded, JSON-escaped), longest first so a longer one goes whole. */
const secretsOf = (urls: ReadonlyArray<string | undefined>): ReadonlyArray<string> => {
  const out = new Set<string>()
  for (const url of urls) {
    if (url === undefined) continue
    const password = passwordOf(url)
    if (password === undefined) continue
    for (const form of [password, decoded(password)]) {
      out.add(form)
      // as it appears inside a JSON string, for replies quoted back as JSON
      out.add(JSON.stringify(form).slice(1, -1))
    }
  }
  return [...out].filter((s) => s !== "").sort((a, b) => b.length - a.length)
}

/** Removes the known passwords, and the password of any `scheme://user:password@` written out, from adapter output. */
const scrub = (text: string, secrets: ReadonlyArray<string>): string => {
  let out = text
  for (const secret of secrets) out = out.replaceAll(secret, "***")
  return out.replace(/([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi, "$1***@")
}

// --- running one verb ---------------------------------------------------------------------------------------------------

type Outcome =
  | { readonly _tag: "Exited"; readonly code: number | null; readonly signal: NodeJS.Signals | null }
  | { readonly _tag: "SpawnFailed"; readonly reason: string }
  | { readonly _tag: "Overflow" }

interface Running {
  readonly child: ChildProcess
  readonly outcome: Promise<Outcome>
  readonly stdout: () => string
  readonly stderr: () => string
}

/** The process could not be started at all: nothing can be half-made, so a failed provision needs no teardown. */
class NotStarted extends Data.TaggedError("NotStarted")<{ readonly error: AdapterError }> {}

const start = (executable: string, verb: string, input: string): Running => {
  const child = spawn(executable, [verb], { detached: true, stdio: ["pipe", "pipe", "pipe"] })
  let settle: (outcome: Outcome) => void = () => {}
  const outcome = new Promise<Outcome>((resolve) => {
    settle = resolve
  })
  const out: Array<Buffer> = []
  let outBytes = 0
  let err: Array<Buffer> = []
  let errBytes = 0
  let errTrimmed = false
  child.once("error", (cause) => settle({ _tag: "SpawnFailed", reason: describeCause(cause) }))
  child.stdout?.on("data", (chunk: Buffer) => {
    if (outBytes + chunk.length > STDOUT_LIMIT) {
      settle({ _tag: "Overflow" })
      child.stdout?.destroy()
      return
    }
    out.push(chunk)
    outBytes += chunk.length
  })
  child.stderr?.on("data", (chunk: Buffer) => {
    err.push(chunk)
    errBytes += chunk.length
    if (errBytes > 2 * STDERR_KEPT) {
      const kept = Buffer.concat(err).subarray(-STDERR_KEPT)
      err = [kept]
      errBytes = kept.length
      errTrimmed = true
    }
  })
  child.once("exit", (code, signal) => {
    setTimeout(() => settle({ _tag: "Exited", code, signal }), CLOSE_WAIT_MS).unref()
  })
  child.once("close", (code: number | null, signal: NodeJS.Signals | null) => settle({ _tag: "Exited", code, signal }))
  // an adapter may exit without reading its request
  child.stdin?.on("error", () => {})
  child.stdin?.end(input)
  return {
    child,
    outcome,
    stdout: () => Buffer.concat(out).toString("utf8"),
    stderr: () => {
      const kept = Buffer.concat(err)
      if (!errTrimmed && kept.length <= STDERR_KEPT) return kept.toString("utf8")
      // the first line kept may be the end of a longer one: dropped, as it could hold the end of a password
      const text = kept.subarray(-STDERR_KEPT).toString("utf8")
      return text.slice(text.indexOf("\n") + 1)
    }
  }
}

/** Whether anything in the process group still runs code (a zombie waiting to be reaped does not). */
const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (cause) {
    return errorCode(cause) !== "ESRCH" && errorCode(cause) !== "EPERM"
  }
  let entries: ReadonlyArray<string>
  try {
    entries = readdirSync("/proc")
  } catch {
    return true
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    let text: string
    try {
      text = readFileSync(`/proc/${entry}/stat`, "utf8")
    } catch {
      continue
    }
    const stat = parseStat(text)
    if (stat !== undefined && stat.pgrp === pgid && !isDefunct(stat)) return true
  }
  return false
}

const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: gone already; EPERM: not ours to signal
  }
}

const waitUntilGone = (pgid: number, ms: number): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (groupAlive(pgid)) {
      if (Date.now() >= deadline) return false
      yield* Effect.sleep(Duration.millis(POLL_MS))
    }
    return true
  })

/**
 * Ends the verb's process group: SIGTERM, the grace, then SIGKILL. Also after a normal exit, so that nothing the
 * adapter started outlives its verb. Bounded in time, as finalizers cannot be interrupted.
 */
const stopGroup = (running: Running, grace: Duration.Duration): Effect.Effect<void> =>
  Effect.gen(function* () {
    const pgid = running.child.pid
    // a detached child leads its own group; never signal init's group or our own
    if (pgid === undefined || pgid <= 1 || pgid === process.pid) return
    if (!groupAlive(pgid)) return
    signalGroup(pgid, "SIGTERM")
    if (yield* waitUntilGone(pgid, Duration.toMillis(grace))) return
    signalGroup(pgid, "SIGKILL")
    yield* waitUntilGone(pgid, KILL_SETTLE_MS)
  })

// --- describing what happened -------------------------------------------------------------------------------------------

const formatDuration = (duration: Duration.Duration): string => {
  const ms = Duration.toMillis(duration)
  if (ms < 1000) return `${ms} ms`
  const seconds = ms / 1000
  return `${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)} s`
}

const clip = (text: string): string => (text.length > SNIPPET ? `${text.slice(0, SNIPPET)}…` : text)

/** The start of what an adapter printed, quoted so that control characters and line breaks show as escapes. */
const snippet = (text: string): string => JSON.stringify(clip(text))

const stderrTail = (stderr: string): string => {
  const lines = stderr
    .split("\n")
    .map((line) => line.trimEnd())
    .filter((line) => line !== "")
  if (lines.length === 0) return ""
  const tail = lines.slice(-STDERR_LINES).map((line) => (line.length > 300 ? `${line.slice(0, 300)}…` : line))
  return `\n  its stderr ended with:\n    ${tail.join("\n    ")}`
}

const firstIssue = (error: ParseResult.ParseError): string => {
  const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  if (issue === undefined) return "it does not match"
  return issue.path.length === 0 ? issue.message : `at ${issue.path.join(".")}: ${issue.message}`
}

const KINDS: ReadonlySet<string> = new Set<AdapterErrorKind>(adapterErrorKinds)

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** `{ ok: false, error }` as the adapter wrote it; a kind berth does not know counts as "failed". */
const failureOf = (value: unknown): { readonly error: string; readonly kind: AdapterErrorKind } | undefined => {
  if (!isRecord(value) || value.ok !== false || typeof value.error !== "string") return undefined
  const kind = typeof value.kind === "string" && KINDS.has(value.kind) ? (value.kind as AdapterErrorKind) : "failed"
  return { error: value.error, kind }
}

const parseJson = (text: string): Option.Option<unknown> => {
  try {
    return Option.some(JSON.parse(text))
  } catch {
    return Option.none()
  }
}

/**
 * What an exited verb's stdout means: its reply, or why it is not one (the exit status first: a non-zero exit is a
 * failure even after an `ok: true`; the adapter's own words and kind are kept when it wrote an `ok: false`).
 */
const readReply = <A>(
  what: string,
  exit: { readonly code: number | null; readonly signal: NodeJS.Signals | null },
  stdout: string,
  reply: Schema.Schema<A>,
  secrets: ReadonlyArray<string>
): Either.Either<A, { readonly kind: AdapterErrorKind; readonly message: string }> => {
  // scrubbed before anything is cut short or escaped, so no part of a password survives
  const refuse = (kind: AdapterErrorKind, message: string) => Either.left({ kind, message: scrub(message, secrets) })
  const quote = (printed: string) => snippet(scrub(printed, secrets))
  const text = stdout.trim()
  const parsed = text === "" ? Option.none() : parseJson(text)
  const failure = Option.isSome(parsed) ? failureOf(parsed.value) : undefined
  if (exit.code !== 0) {
    const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`
    const said = failure === undefined ? "" : `: ${scrub(failure.error, secrets)}`
    return refuse(failure?.kind ?? "failed", `${what} ${how}${said}`)
  }
  if (text === "") return refuse("failed", `${what} exited without a reply on stdout`)
  if (Option.isNone(parsed)) return refuse("failed", `${what} did not reply with JSON; it printed ${quote(text)}`)
  if (failure !== undefined) return refuse(failure.kind, `${what}: ${scrub(failure.error, secrets)}`)
  const decoded = Schema.decodeUnknownEither(reply)(parsed.value)
  return Either.isLeft(decoded)
    ? refuse(
        "failed",
        `${what} replied ${clip(scrub(JSON.stringify(parsed.value), secrets))}, which is not a valid reply ` +
          `(${firstIssue(decoded.left)})`
      )
    : Either.right(decoded.right)
}

// --- the adapter --------------------------------------------------------------------------------------------------------

/** The slice as sent: the fields the protocol names (no more), `adminUrl` only when there is one. */
const toWire = (slice: Slice): Protocol.Slice => {
  const { adapter, project, world, service, name, owner, storage, adminUrl, options } = slice
  const wire = { adapter, project, world, service, name, owner, storage, options }
  return adminUrl === undefined ? wire : { ...wire, adminUrl }
}

/** Drives `berth-adapter-<name>` from PATH (or from `options.path`) as an adapter. */
export const externalAdapter = (name: string, options: ExternalAdapterOptions = {}): ExternalAdapter => {
  const command = externalAdapterCommand(name)
  const grace = Duration.decode(options.grace ?? DEFAULT_GRACE)
  const timeoutOf = (verb: Protocol.Verb): Duration.Duration => {
    const custom = options.timeouts?.[verb]
    return custom === undefined ? DEFAULT_TIMEOUTS[verb] : Duration.decode(custom)
  }
  const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: name, kind, message })

  /** `berth-adapter-<name>` anywhere on PATH, else `binky-adapter-<name>`: berth's own protocol wins. */
  const locateSync = (): Either.Either<Located & { readonly _tag: "Found" } & Served, AdapterError> => {
    if (!isValidAdapterName(name)) {
      return Either.left(
        fail("invalid", `"${name}" is not a valid adapter name (lowercase letters, digits, "-" and "_")`)
      )
    }
    const searchPath = options.path ?? process.env.PATH ?? ""
    const own = locate(command, searchPath)
    if (own._tag === "Found") return Either.right({ ...own, executable: own.path, protocol: "berth" })
    const binky = locate(Binky.binkyCommand(name), searchPath)
    if (binky._tag === "Found") return Either.right({ ...binky, executable: binky.path, protocol: "binky" })
    const notExecutable = [...own.notExecutable, ...binky.notExecutable]
    const hint =
      notExecutable.length > 0
        ? ` (${notExecutable[0]} exists but is not executable: chmod +x it)`
        : `; install one there (or an adapter written for binky, ${Binky.binkyCommand(name)}), or check the adapter's name in berth.toml`
    return Either.left(
      fail("invalid", `berth has no built-in adapter "${name}" and there is no executable ${command} on PATH${hint}`)
    )
  }
  const find = Effect.suspend(() => locateSync())

  /** Runs one verb of `found` to its end (or its time limit), then reads what it printed with `read`. */
  const exchange = <A>(
    found: Served,
    verb: string,
    limitOf: Protocol.Verb,
    input: unknown,
    read: (
      what: string,
      exit: Binky.Exit,
      stdout: string
    ) => Either.Either<A, { kind: AdapterErrorKind; message: string }>,
    secrets: ReadonlyArray<string>
  ): Effect.Effect<A, AdapterError | NotStarted> =>
    Effect.gen(function* () {
      const executable = found.executable
      const shown = found.protocol === "berth" ? command : Binky.binkyCommand(name)
      const limit = timeoutOf(limitOf)
      const finished = yield* Effect.scoped(
        Effect.gen(function* () {
          const running = yield* Effect.acquireRelease(
            Effect.try({
              try: () => start(executable, verb, `${JSON.stringify(input)}\n`),
              catch: (cause) =>
                new NotStarted({ error: fail("failed", `could not run ${executable}: ${describeCause(cause)}`) })
            }),
            (running) => stopGroup(running, grace)
          )
          const outcome = yield* Effect.promise(() => running.outcome).pipe(Effect.timeoutOption(limit))
          return { outcome, stdout: running.stdout(), stderr: running.stderr() }
        })
      )
      const what = `${shown} ${verb}`
      const tail = stderrTail(scrub(finished.stderr, secrets))
      if (Option.isNone(finished.outcome)) {
        return yield* Effect.fail(fail("failed", `${what} did not answer within ${formatDuration(limit)}${tail}`))
      }
      const outcome = finished.outcome.value
      switch (outcome._tag) {
        case "SpawnFailed":
          return yield* Effect.fail(
            new NotStarted({ error: fail("failed", `could not run ${executable}: ${outcome.reason}`) })
          )
        case "Overflow":
          return yield* Effect.fail(
            fail(
              "failed",
              `${what} printed more than ${STDOUT_LIMIT / 1024 / 1024} MiB on stdout and was stopped ` +
                `(a reply is one JSON object; logs belong on stderr)${tail}`
            )
          )
        case "Exited": {
          const result = read(what, outcome, finished.stdout)
          if (result._tag === "Left") return yield* Effect.fail(fail(result.left.kind, `${result.left.message}${tail}`))
          if (tail !== "") yield* Effect.logDebug(`${what} said on stderr:${tail}`)
          return result.right
        }
      }
    })

  /** One verb of berth's own protocol. */
  const call = <A extends { readonly ok: true }>(
    request: Protocol.Request,
    reply: Schema.Schema<A>,
    secrets: ReadonlyArray<string>
  ): Effect.Effect<A, AdapterError | NotStarted> =>
    Effect.flatMap(find.pipe(Effect.mapError((error) => new NotStarted({ error }))), (found) =>
      exchange(
        found,
        request.verb,
        request.verb,
        request,
        (what, exit, stdout) => readReply(what, exit, stdout, reply, secrets),
        secrets
      )
    )

  const run = <A extends { readonly ok: true }>(
    request: Protocol.Request,
    reply: Schema.Schema<A>,
    secrets: ReadonlyArray<string>
  ): Effect.Effect<A, AdapterError> =>
    call(request, reply, secrets).pipe(Effect.catchTag("NotStarted", (e) => Effect.fail(e.error)))

  // --- binky's protocol ---------------------------------------------------------------------------------------------

  /** One verb of binky's protocol; binky has no kinds of failure, so every one is "failed". */
  const binkyCall = <A, I>(
    found: Served,
    verb: Binky.BinkyVerb,
    input: Record<string, unknown>,
    answer: Schema.Schema<A, I>,
    secrets: ReadonlyArray<string>
  ): Effect.Effect<A, AdapterError | NotStarted> =>
    exchange(
      found,
      verb,
      Binky.binkyVerbs[verb],
      input,
      (what, exit, stdout) =>
        Either.mapLeft(
          Binky.readAnswer(
            what,
            exit,
            stdout,
            answer,
            (text) => scrub(text, secrets),
            (text) => snippet(scrub(text, secrets))
          ),
          (message) => ({ kind: "failed" as const, message })
        ),
      secrets
    )

  const binkyRun = <A, I>(
    found: Served,
    verb: Binky.BinkyVerb,
    input: Record<string, unknown>,
    answer: Schema.Schema<A, I>,
    secrets: ReadonlyArray<string>
  ): Effect.Effect<A, AdapterError> =>
    binkyCall(found, verb, input, answer, secrets).pipe(Effect.catchTag("NotStarted", (e) => Effect.fail(e.error)))

  /** The name berth chose, checked before an adapter written for binky (which may use it as a path) sees it. */
  const binkyName = (slice: Slice): Effect.Effect<void, AdapterError> =>
    Binky.BINKY_NAME.test(slice.name) && slice.name.length <= Binky.BINKY_NAME_LIMIT
      ? Effect.void
      : Effect.fail(
          fail(
            "invalid",
            `refusing slice name ${JSON.stringify(slice.name)}: it must match ^[a-z][a-z0-9_]*$ and be at most ${Binky.BINKY_NAME_LIMIT} characters`
          )
        )

  const binkyAddress = (found: Served, slice: Slice) =>
    Effect.gen(function* () {
      const what = `${Binky.binkyCommand(name)} address`
      const reply = yield* binkyRun(
        found,
        "address",
        Binky.sliceRequest("address", slice),
        Binky.AddressAnswer,
        secretsOf([slice.adminUrl])
      )
      const other = Binky.otherSlice(what, slice.name, reply.slice)
      if (other !== undefined) return yield* Effect.fail(fail("failed", other))
      return reply.address
    })

  const binkyProvision = (found: Served, slice: Slice) =>
    Effect.gen(function* () {
      yield* binkyName(slice)
      const secrets = secretsOf([slice.adminUrl])
      const command = Binky.binkyCommand(name)
      const made = binkyCall(found, "create", Binky.sliceRequest("create", slice), Binky.CreateAnswer, secrets).pipe(
        Effect.flatMap((reply) => {
          const other = Binky.otherSlice(`${command} create`, slice.name, reply.slice)
          return other === undefined ? Effect.succeed(reply) : Effect.fail(fail("failed", other))
        })
      )
      const reply = yield* made.pipe(
        Effect.catchAll((e) =>
          e._tag === "NotStarted"
            ? Effect.fail(e.error)
            : // a failed create may have made part of the slice: one best-effort destroy, its outcome noted
              binkyRun(found, "destroy", Binky.sliceRequest("destroy", slice), Binky.DestroyAnswer, secrets).pipe(
                Effect.match({
                  onSuccess: () => `\n  (berth ran ${command} destroy to undo whatever was half-made)`,
                  onFailure: (undo) => `\n  (berth's clean-up with ${command} destroy also failed: ${undo.message})`
                }),
                Effect.flatMap((note) => Effect.fail(fail(e.kind, `${e.message}${note}`)))
              )
        )
      )
      return reply.created
    })

  /** whether the adapter written for binky says in its answer to create whether it made the slice */
  let saysCreated = false
  const binkyVerbsOf = (found: Served) => ({
    provision: (slice: Slice) =>
      Effect.gen(function* () {
        yield* binkyName(slice)
        // an adapter that does not say whether it made the slice: one it could address before already existed
        const existed = saysCreated
          ? undefined
          : yield* binkyAddress(found, slice).pipe(
              Effect.as(true),
              Effect.orElseSucceed(() => false)
            )
        const created = yield* binkyProvision(found, slice)
        if (created !== undefined) saysCreated = true
        return created ?? existed !== true
      }),
    resolve: (slice: Slice) => Effect.zipRight(binkyName(slice), binkyAddress(found, slice)),
    teardown: (slice: Slice) =>
      Effect.gen(function* () {
        yield* binkyName(slice)
        const reply = yield* binkyRun(
          found,
          "destroy",
          Binky.sliceRequest("destroy", slice),
          Binky.DestroyAnswer,
          secretsOf([slice.adminUrl])
        )
        const other = Binky.otherSlice(`${Binky.binkyCommand(name)} destroy`, slice.name, reply.slice)
        if (other !== undefined) return yield* Effect.fail(fail("failed", other))
      }),
    list: (scope: ListScope) =>
      Effect.gen(function* () {
        const reply = yield* binkyRun(
          found,
          "list",
          Binky.listRequest(scope),
          Binky.ListAnswer,
          secretsOf([scope.adminUrl])
        )
        const { names, unowned } = Binky.ownNames(reply, scope.owner)
        if (unowned > 0) {
          yield* Effect.logWarning(
            `${Binky.binkyCommand(name)} list named ${unowned} slice(s) without an owner: berth cannot tell whose they are, so gc leaves them alone`
          )
        }
        return names
      })
  })

  /** the capabilities of the executable that answered them (asked again if another one serves the name now) */
  let known: { readonly executable: string | undefined; readonly capabilities: Capabilities } | undefined
  /** whether the executable answers `standing` (its capabilities say so; those written before it do not) */
  let tellsStanding = false
  const lock = Effect.unsafeMakeSemaphore(1)
  /** binky's protocol has neither clone nor standing: nothing to ask */
  const binkyCapabilities: Capabilities = { clone: false }
  const askCapabilities: Effect.Effect<Capabilities> = lock.withPermits(1)(
    Effect.suspend(() => {
      const found = Either.getOrUndefined(locateSync())
      if (found?.protocol === "binky") {
        tellsStanding = false
        return Effect.succeed(binkyCapabilities)
      }
      if (known !== undefined && (found === undefined || found.executable === known.executable)) {
        return Effect.succeed(known.capabilities)
      }
      return run({ protocol: 1, verb: "capabilities", config: {} }, Protocol.CapabilitiesReply, []).pipe(
        Effect.map((reply): Capabilities => {
          tellsStanding = reply.standing === true
          return { clone: reply.clone }
        }),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning(`${command} capabilities failed; taking it as unable to clone: ${error.message}`),
            { clone: false }
          )
        ),
        Effect.tap((capabilities) => {
          known = { executable: found?.executable, capabilities }
        })
      )
    })
  )

  const sliceRequest = (verb: "provision" | "resolve" | "teardown" | "standing", slice: Slice): Protocol.Request => ({
    protocol: 1,
    verb,
    slice: toWire(slice),
    config: slice.options
  })

  /** A failed provision may have made part of the slice: one best-effort teardown, its outcome noted. */
  const undo = (slice: Slice, error: AdapterError): Effect.Effect<never, AdapterError> =>
    run(sliceRequest("teardown", slice), Protocol.DoneReply, secretsOf([slice.adminUrl])).pipe(
      Effect.match({
        onSuccess: () => `\n  (berth ran ${command} teardown to undo whatever was half-made)`,
        onFailure: (e) => `\n  (berth's clean-up with ${command} teardown also failed: ${e.message})`
      }),
      Effect.flatMap((note) => Effect.fail(fail(error.kind, `${error.message}${note}`)))
    )

  const provision = Effect.fn("ExternalAdapter.provision")(function* (slice: Slice) {
    const found = yield* find
    if (found.protocol === "binky") return yield* binkyVerbsOf(found).provision(slice)
    yield* askCapabilities
    const reply = yield* call(
      sliceRequest("provision", slice),
      Protocol.ProvisionReply,
      secretsOf([slice.adminUrl])
    ).pipe(
      Effect.catchAll((e) =>
        e._tag === "NotStarted"
          ? Effect.fail(e.error)
          : // the name is held by something else: nothing of ours was made, and nothing there is ours to drop
            e.kind === "taken" || e.kind === "not-owned"
            ? Effect.fail(e)
            : undo(slice, e)
      )
    )
    return reply.created
  })

  const resolve = Effect.fn("ExternalAdapter.resolve")(function* (slice: Slice) {
    const found = yield* find
    if (found.protocol === "binky") return yield* binkyVerbsOf(found).resolve(slice)
    return (yield* run(sliceRequest("resolve", slice), Protocol.ResolveReply, secretsOf([slice.adminUrl]))).url
  })

  const teardown = Effect.fn("ExternalAdapter.teardown")(function* (slice: Slice) {
    const found = yield* find
    if (found.protocol === "binky") return yield* binkyVerbsOf(found).teardown(slice)
    yield* run(sliceRequest("teardown", slice), Protocol.DoneReply, secretsOf([slice.adminUrl]))
  })

  const clone = Effect.fn("ExternalAdapter.clone")(function* (from: Slice, to: Slice) {
    const found = yield* find
    if (found.protocol === "binky") {
      return yield* Effect.fail(
        fail("invalid", `${Binky.binkyCommand(name)} cannot clone (binky's protocol has no clone)`)
      )
    }
    if (!(yield* askCapabilities).clone) {
      return yield* Effect.fail(fail("invalid", `${command} cannot clone (its capabilities say clone: false)`))
    }
    yield* run(
      { protocol: 1, verb: "clone", from: toWire(from), slice: toWire(to), config: to.options },
      Protocol.DoneReply,
      secretsOf([from.adminUrl, to.adminUrl])
    )
  })

  const list = Effect.fn("ExternalAdapter.list")(function* (scope: ListScope) {
    const found = yield* find
    if (found.protocol === "binky") return yield* binkyVerbsOf(found).list(scope)
    const wire = { adapter: name, owner: scope.owner, storage: scope.storage, options: scope.options }
    const reply = yield* run(
      {
        protocol: 1,
        verb: "list",
        scope: scope.adminUrl === undefined ? wire : { ...wire, adminUrl: scope.adminUrl },
        config: scope.options
      },
      Protocol.ListReply,
      secretsOf([scope.adminUrl])
    )
    return reply.names
  })

  const standing = Effect.fn("ExternalAdapter.standing")(function* (slice: Slice) {
    // binky's protocol cannot tell (askCapabilities says so): every slice takes its usual name
    yield* askCapabilities
    // one that cannot tell says nothing against the usual name: its provision says if the name is taken
    if (!tellsStanding) return "missing" as const
    return (yield* run(sliceRequest("standing", slice), Protocol.StandingReply, secretsOf([slice.adminUrl]))).standing
  })

  return {
    get capabilities(): Capabilities {
      const found = Either.getOrUndefined(locateSync())
      if (found?.protocol === "binky") return binkyCapabilities
      return known?.capabilities ?? { clone: true }
    },
    askCapabilities,
    provision,
    resolve,
    teardown,
    clone,
    list,
    standing,
    present: Effect.asVoid(find),
    served: Effect.sync(() =>
      Either.getOrUndefined(
        Either.map(locateSync(), (found): Served => ({ executable: found.executable, protocol: found.protocol }))
      )
    )
  }
}
