/**
 * Whether a started service is healthy: one probe per attempt (http, tcp, cmd or log), and `waitHealthy`, which polls
 * until a probe passes or the check's timeout is spent. A probe never fails: anything that goes wrong is "not healthy
 * yet". Every attempt is bounded in time and releases what it opened (sockets, processes, file handles) even when it
 * is interrupted, so a caller may race `waitHealthy` against the process exiting.
 *
 * A check passing proves only that something answers: `listenerJudge` asks the Platform whose listener it was, so the
 * ServiceActor does not take another process's answer for its service's.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { open } from "node:fs/promises"
import * as net from "node:net"
import { StringDecoder } from "node:string_decoder"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { defaults, type HealthCheck } from "../domain/config/model.js"
import { bodyComplete, finalHead, finalStatus, MAX_STATUS_SEARCH_BYTES } from "../domain/http-status.js"
import { Platform, type PlatformService } from "./Platform.js"
import { makeProbeLine } from "./probe-line.js"
import {
  firstListenerPollMs,
  LISTENER_POLL_MIN_MS,
  type ListenedBefore,
  listenerPollFamilies,
  listenerPollGapMs,
  listenedNow,
  type LoopbackFamily
} from "../domain/listener-pace.js"
import { judgeListener, type ListenerHolder, type ListenerVerdict } from "../domain/proc.js"

export interface ProbeContext {
  /** the service's port: http and tcp checks need one */
  readonly port?: number | undefined
  /** where a cmd check runs */
  readonly cwd: string
  /** a cmd check's complete environment (the one the service itself gets) */
  readonly env: Readonly<Record<string, string>>
  /** the service's log file, for a log check */
  readonly logFile: string
  /** bytes of the log that predate this start: a log check ignores them */
  readonly logOffset: number
}

export class HealthTimeout extends Data.TaggedError("HealthTimeout")<{
  readonly kind: HealthCheck["kind"]
  readonly target: string
  /** the port an http or tcp check probed */
  readonly port?: number | undefined
  readonly waitedMs: number
  /** why the last passing attempt did not count (another process's listener answered, say) */
  readonly rejected?: string | undefined
}> {
  override get message(): string {
    const on = this.port === undefined || (this.kind !== "tcp" && this.kind !== "http") ? "" : ` on port ${this.port}`
    const what =
      this.kind === "tcp" ? `a tcp connection${on}` : `the ${this.kind} check ${JSON.stringify(this.target)}${on}`
    const waited = `not healthy after ${(this.waitedMs / 1000).toFixed(1)}s`
    return this.rejected === undefined
      ? `${waited}: ${what} never passed`
      : `${waited}: ${what} passed, but ${this.rejected}`
  }
}

/** Follows a log file from an offset, reading each byte once however often it is asked. */
export interface LogWatcher {
  /** reads what was appended since the last call; true once the pattern has appeared (it stays true) */
  readonly matched: Effect.Effect<boolean>
  /** the byte offset read up to */
  readonly cursor: Effect.Effect<number>
}

/** A service with a port is healthy once it accepts connections; one without is healthy once it runs. */
export const defaultCheck = (hasPort: boolean): HealthCheck | undefined =>
  hasPort
    ? { kind: "tcp", target: "", timeoutMs: defaults.healthTimeoutMs, intervalMs: defaults.healthIntervalMs }
    : undefined

/** A network attempt gets a few intervals, never more than 2 s: a hung server must not stall the polling. */
export const networkAttemptMs = (check: HealthCheck): number => Math.max(1, Math.min(2_000, check.intervalMs * 4))

/** Commands (a CLI starting, a client connecting) get longer, but never more than the whole check. */
export const commandAttemptMs = (check: HealthCheck): number =>
  Math.max(1, Math.min(check.timeoutMs, Math.max(5_000, check.intervalMs * 4)))

/**
 * A liveness probe of a service that was healthy gets seconds: under load a sound server may answer late, and a miss
 * there counts toward `unhealthy`. (While starting, a short attempt only means another attempt.)
 */
export const LIVENESS_ATTEMPT_MS = 5_000

export const livenessAttemptMs = (check: HealthCheck): number =>
  Math.max(LIVENESS_ATTEMPT_MS, check.kind === "cmd" ? commandAttemptMs(check) : networkAttemptMs(check))

/** Loopback as both families: dev servers may listen on only one of them. */
const LOOPBACK = ["127.0.0.1", "::1"] as const

type HttpOutcome = "healthy" | "unhealthy" | "unreachable"

/** Stops an attempt under way: its timer and its socket go. */
type Cancel = () => void

/**
 * One GET over a plain socket (Node's HTTP client costs several times as much per probe, and a probe needs only the
 * status). A 2xx answer is healthy. The answer is read until it is whole — as long as its framing says, so the
 * connection is closed with nothing left unread and the server sees a clean close, without waiting for the server to
 * close it (an idle daemon's probes are mostly wake-ups, and that wait was one more each) — or until it ends or the
 * time is up; an answer that came without a complete body still counts by its status. A connection refused, or
 * closed before any answer, is `unreachable` (the other loopback address is asked then).
 */
/**
 * One socket to `host:port` that settles once: `wire` listens on it and calls `finish`; the time running out settles
 * it with `onTimeout()`. Settled or cancelled, its timer and socket go.
 */
const socketAttempt = <A>(
  host: string,
  port: number,
  timeoutMs: number,
  onTimeout: () => A,
  done: (answer: A) => void,
  wire: (socket: net.Socket, finish: (answer: A) => void) => void
): Cancel => {
  let settled = false
  const socket = net.connect({ host, port })
  const stop = () => {
    settled = true
    clearTimeout(timer)
    socket.destroy()
  }
  const finish = (answer: A) => {
    if (settled) return
    stop()
    done(answer)
  }
  const timer = setTimeout(() => finish(onTimeout()), timeoutMs)
  wire(socket, finish)
  return stop
}

const httpGet = (
  host: string,
  port: number,
  path: string,
  timeoutMs: number,
  done: (outcome: HttpOutcome) => void
): Cancel => {
  let status: number | undefined
  // the answer so far, while its head or its body's end is still to be read from it (then `undefined`: the rest
  // is read to the close, unlooked at)
  let received: string | undefined = ""
  let head: ReturnType<typeof finalHead> = null
  const judged = (): HttpOutcome =>
    status === undefined ? "unhealthy" : status >= 200 && status < 300 ? "healthy" : "unhealthy"
  return socketAttempt(host, port, timeoutMs, judged, done, (socket, finish) => {
    socket.setEncoding("latin1")
    socket.once("connect", () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nhost: localhost:${port}\r\nconnection: close\r\nuser-agent: berth-health\r\n\r\n`,
        "latin1"
      )
    })
    socket.on("data", (chunk: string) => {
      if (received === undefined) return
      received += chunk
      if (status === undefined) {
        const read = finalStatus(received)
        if (read === null) return
        // bytes that are no HTTP answer: the service answers, but not as asked
        if (read === undefined) return finish("unhealthy")
        status = read
      }
      head ??= finalHead(received)
      if (head !== null && bodyComplete(head.framing, received.slice(head.bodyAt))) return finish(judged())
      // a head that will not end, a long body or one that runs to the close: read on to the end, unkept
      if (head?.framing._tag === "UntilClose" || received.length > MAX_STATUS_SEARCH_BYTES) received = undefined
    })
    socket.once("end", () => finish(status === undefined ? "unreachable" : judged()))
    socket.once("error", () => finish(status === undefined ? "unreachable" : judged()))
  })
}

const tcpConnect = (host: string, port: number, timeoutMs: number, done: (ok: boolean) => void): Cancel =>
  socketAttempt(
    host,
    port,
    timeoutMs,
    () => false,
    done,
    (socket, finish) => {
      socket.once("connect", () => finish(true))
      socket.once("error", () => finish(false))
    }
  )

/**
 * A network attempt as one effect over plain callbacks: a ready service is probed for as long as it runs, so the
 * attempt carries no generator, clock reads or span of its own around the socket.
 */
const callbackAttempt = (run: (done: (ok: boolean) => void) => Cancel): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const cancel = run((ok) => resume(Effect.succeed(ok)))
    return Effect.sync(cancel)
  })

/** Asks 127.0.0.1, then ::1 with the time left only when 127.0.0.1 was unreachable. */
const onLoopback =
  <A>(
    ask: (host: string, timeoutMs: number, done: (answer: A) => void) => Cancel,
    unreachable: (answer: A) => boolean,
    timeoutMs: number
  ) =>
  (done: (answer: A) => void): Cancel => {
    const started = performance.now()
    let cancel = ask(LOOPBACK[0], timeoutMs, (answer) => {
      const left = timeoutMs - (performance.now() - started)
      if (!unreachable(answer) || left <= 0) return done(answer)
      cancel = ask(LOOPBACK[1], left, done)
    })
    return () => cancel()
  }

/** ::1 is asked only when 127.0.0.1 refused: a server that answered badly or hung there is the answer. */
const probeHttp = (port: number, target: string, timeoutMs: number): Effect.Effect<boolean> => {
  const path = target.startsWith("/") ? target : `/${target}`
  const get = onLoopback<HttpOutcome>(
    (host, ms, done) => httpGet(host, port, path, ms, done),
    (outcome) => outcome === "unreachable",
    timeoutMs
  )
  return callbackAttempt((done) => get((outcome) => done(outcome === "healthy")))
}

const probeTcp = (port: number, timeoutMs: number): Effect.Effect<boolean> =>
  callbackAttempt(
    onLoopback<boolean>(
      (host, ms, done) => tcpConnect(host, port, ms, done),
      (ok) => !ok,
      timeoutMs
    )
  )

const killGroup = (pid: number | undefined) => {
  if (pid === undefined) return
  try {
    process.kill(-pid, "SIGKILL")
  } catch {
    // the group is already gone
  }
}

/**
 * `sh -c target` in its own process group. The whole group is killed when the attempt overruns or is interrupted,
 * and also after the shell exits, so a helper it left in the background does not outlive the attempt.
 */
const probeCmd = (target: string, cwd: string, env: Readonly<Record<string, string>>, timeoutMs: number) =>
  Effect.async<boolean>((resume) => {
    let settled = false
    let child: ChildProcess
    try {
      child = spawn("/bin/sh", ["-c", target], { cwd, env: { ...env }, detached: true, stdio: "ignore" })
    } catch {
      // arguments node refuses outright (a NUL byte, say)
      return resume(Effect.succeed(false))
    }
    const finish = (ok: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      killGroup(child.pid)
      resume(Effect.succeed(ok))
    }
    const timer = setTimeout(() => finish(false), timeoutMs)
    child.once("error", () => finish(false))
    child.once("exit", (code) => finish(code === 0))
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
      killGroup(child.pid)
    })
  })

const CHUNK_BYTES = 1024 * 1024
/** Text kept from the previous read, so a match split across two reads is still found. */
const CARRY_CHARS = 64 * 1024

/** The pattern with `m` (so `^` and `$` work per line) and without `g`/`y` (whose lastIndex makes test() stateful). */
const compilePattern = (pattern: string | RegExp): RegExp | undefined => {
  const source = typeof pattern === "string" ? pattern : pattern.source
  const flags = typeof pattern === "string" ? "" : pattern.flags.replace(/[gym]/g, "")
  try {
    return new RegExp(source, `${flags}m`)
  } catch {
    return undefined
  }
}

/**
 * Follows `file` from `offset`: each call reads only the bytes appended since the previous one (in 1 MiB chunks,
 * keeping a 64 KiB carry between them), so a large log costs its new bytes per attempt, not its size. A file that
 * shrank was truncated or replaced: it is read again from its start. A missing file is "not yet".
 */
export const makeLogWatcher = (file: string, pattern: string | RegExp, offset: number): Effect.Effect<LogWatcher> =>
  Effect.sync(() => {
    const regex = compilePattern(pattern)
    let cursor = Math.max(0, offset)
    let decoder = new StringDecoder("utf8")
    let carry = ""
    let matched = false

    const scan = async (): Promise<boolean> => {
      if (matched || regex === undefined) return matched
      let handle: Awaited<ReturnType<typeof open>>
      try {
        handle = await open(file, "r")
      } catch {
        return false
      }
      try {
        const { size } = await handle.stat()
        if (size < cursor) {
          cursor = 0
          decoder = new StringDecoder("utf8")
          carry = ""
        }
        const buffer = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, Math.max(1, size - cursor)))
        while (cursor < size) {
          const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - cursor), cursor)
          if (bytesRead === 0) break
          cursor += bytesRead
          const text = carry + decoder.write(buffer.subarray(0, bytesRead))
          if (regex.test(text)) {
            matched = true
            carry = ""
            return true
          }
          carry = text.slice(-CARRY_CHARS)
        }
        return false
      } catch {
        return false
      } finally {
        await handle.close().catch(() => undefined)
      }
    }

    // calls run one after another even when an interrupted one is still reading in the background
    let queue: Promise<boolean> = Promise.resolve(false)
    const matchedEffect = Effect.promise(() => {
      queue = queue.then(scan, scan)
      return queue
    })
    return { matched: matchedEffect, cursor: Effect.sync(() => cursor) } satisfies LogWatcher
  })

const missingPort = (check: HealthCheck) =>
  Effect.logWarning(`a ${check.kind} health check needs a port; this service has none`).pipe(Effect.as(false))

const logProbe = (check: HealthCheck, ctx: ProbeContext): Effect.Effect<Effect.Effect<boolean>> =>
  compilePattern(check.target) === undefined
    ? Effect.logWarning(`the log health check ${JSON.stringify(check.target)} is not a valid regular expression`).pipe(
        Effect.as(Effect.succeed(false))
      )
    : Effect.map(makeLogWatcher(ctx.logFile, check.target, ctx.logOffset), (watcher) => watcher.matched)

/** One attempt of a stateless kind (every kind but log), in `attemptMs` or the kind's own time. */
const attempt = (check: HealthCheck, ctx: ProbeContext, attemptMs?: number): Effect.Effect<boolean> => {
  switch (check.kind) {
    case "http":
      return ctx.port === undefined
        ? missingPort(check)
        : probeHttp(ctx.port, check.target, attemptMs ?? networkAttemptMs(check))
    case "tcp":
      return ctx.port === undefined ? missingPort(check) : probeTcp(ctx.port, attemptMs ?? networkAttemptMs(check))
    case "cmd":
      return probeCmd(check.target, ctx.cwd, ctx.env, attemptMs ?? commandAttemptMs(check))
    case "log":
      return Effect.flatten(logProbe(check, ctx))
  }
}

/** Loopback addresses by family, as the listener wait asks them. */
const LOOPBACK_OF: Readonly<Record<LoopbackFamily, string>> = { v4: LOOPBACK[0], v6: LOOPBACK[1] }

/** How many services' listen times are remembered (one per world's service; the oldest is forgotten first). */
const LISTENED_BEFORE_MAX = 4_096

interface PortWait {
  readonly port: number
  /** the service's log file: one per world's service, so what it took to listen is remembered across its starts */
  readonly key: string
  readonly started: number
  readonly before: ListenedBefore | undefined
  readonly wakers: Set<() => void>
  dueAt: number
  tries: number
  inFlight: boolean
}

/**
 * Waits until a port on loopback accepts a connection: what a starting service's network check needs before an
 * attempt can pass. One plain timer tries every port that is due, where an attempt per service on a schedule costs a
 * fiber's timer, a schedule step and a span besides the sockets. Each port is tried at the pace of
 * `src/domain/listener-pace.ts`: briskly at first, less often as the wait grows, and for a service that listened
 * before, not until most of the time it took then has passed, on the address family that answered then.
 * (The kernel's listener tables are no cheaper to read: with no IPv6 connections, finding the end of the tcp6 table
 * walks the whole empty hash of them, about 1 ms here.)
 */
const makeListenerWait = () => {
  const waiting = new Map<number, PortWait>()
  const listenedBefore = new Map<string, ListenedBefore>()
  /** the family of the first of `families` that accepts a connection on the port, or undefined when none does */
  const accepts = (
    port: number,
    families: ReadonlyArray<LoopbackFamily>,
    done: (family: LoopbackFamily | undefined) => void
  ): void => {
    const [family, ...rest] = families
    if (family === undefined) {
      done(undefined)
      return
    }
    const socket = net.connect({ host: LOOPBACK_OF[family], port })
    const settle = (ok: boolean) => {
      socket.removeAllListeners()
      socket.on("error", () => {})
      socket.destroy()
      if (ok) done(family)
      else accepts(port, rest, done)
    }
    socket.setTimeout(LISTENER_POLL_MIN_MS * 10, () => settle(false))
    socket.once("connect", () => settle(true))
    socket.once("error", () => settle(false))
  }
  let timer: NodeJS.Timeout | undefined
  let timerAt = Number.POSITIVE_INFINITY
  /** the timer runs for the earliest try due, and only while a port waits */
  const arm = () => {
    let next = Number.POSITIVE_INFINITY
    for (const w of waiting.values()) if (!w.inFlight && w.dueAt < next) next = w.dueAt
    if (next === timerAt) return
    clearTimeout(timer)
    timer = undefined
    timerAt = next
    if (next === Number.POSITIVE_INFINITY) return
    timer = setTimeout(tick, Math.max(0, next - performance.now()))
    timer.unref()
  }
  const tick = () => {
    timer = undefined
    timerAt = Number.POSITIVE_INFINITY
    const now = performance.now()
    for (const w of waiting.values()) {
      if (w.inFlight || w.dueAt > now) continue
      w.inFlight = true
      accepts(w.port, listenerPollFamilies(w.tries, w.before), (family) => {
        w.inFlight = false
        w.tries++
        if (waiting.get(w.port) !== w) return
        const at = performance.now()
        if (family !== undefined) {
          waiting.delete(w.port)
          listenedBefore.delete(w.key)
          const remembered = listenedNow(w.before, { tries: w.tries, afterMs: at - w.started, family })
          if (remembered !== undefined) listenedBefore.set(w.key, remembered)
          if (listenedBefore.size > LISTENED_BEFORE_MAX) {
            const oldest = listenedBefore.keys().next()
            if (oldest.done !== true) listenedBefore.delete(oldest.value)
          }
          for (const wake of w.wakers) wake()
        } else {
          w.dueAt = at + listenerPollGapMs(at - w.started, w.before)
        }
        arm()
      })
    }
    arm()
  }
  return (port: number, key: string): Effect.Effect<void> =>
    Effect.async<void>((resume) => {
      const wake = () => resume(Effect.void)
      let w = waiting.get(port)
      if (w === undefined) {
        const started = performance.now()
        const before = listenedBefore.get(key)
        w = {
          port,
          key,
          started,
          before,
          wakers: new Set(),
          dueAt: started + firstListenerPollMs(before),
          tries: 0,
          inFlight: false
        }
        waiting.set(port, w)
      }
      const entry = w
      entry.wakers.add(wake)
      arm()
      return Effect.sync(() => {
        entry.wakers.delete(wake)
        if (entry.wakers.size === 0 && waiting.get(port) === entry) {
          waiting.delete(port)
          arm()
        }
      })
    })
}

/**
 * A judge of whose listener answers on `port`, for a service whose leader started at `serviceStartTime`; call it with
 * the pids of the service's group each time its check passes. Finding the holder of a socket outside the group scans
 * every process's fds, so it is remembered per socket: a service waiting behind another's listener costs one scan.
 */
const makeListenerJudge = (platform: PlatformService, port: number, serviceStartTime: string) =>
  Effect.sync(() => {
    const holders = new Map<string, ListenerHolder | undefined>()
    return (group: ReadonlyArray<number>, options?: { readonly partial?: boolean }): Effect.Effect<ListenerVerdict> =>
      // part of the group can prove the listener ours, never someone else's: cheap, so it is asked first
      options?.partial === true
        ? Effect.map(platform.listensOn(group, port), (ours): ListenerVerdict => ({ _tag: ours ? "Ours" : "Unknown" }))
        : Effect.gen(function* () {
            const { listening, groupSockets, groupUnreadable } = yield* platform.portListeners(port, group)
            let holder: ListenerHolder | undefined
            if (listening !== undefined && listening.length > 0 && !listening.some((i) => groupSockets.includes(i))) {
              const key = [...listening].sort().join(",")
              if (!holders.has(key)) holders.set(key, yield* platform.socketHolder(listening, group))
              holder = holders.get(key)
            }
            return judgeListener({ listening, groupSockets, groupUnreadable, holder, serviceStartTime })
          })
  })

/**
 * Most services come up within a second: probe briskly (every 10 ms, never slower than the interval) for the first
 * half second, so `up` returns soon after the service is ready, then settle to the configured interval. A refused
 * connection on loopback costs a fraction of a millisecond.
 */
export const startupSchedule = (intervalMs: number) =>
  Schedule.andThen(
    Schedule.spaced(Duration.millis(Math.min(10, intervalMs))).pipe(Schedule.intersect(Schedule.recurs(50))),
    Schedule.spaced(Duration.millis(intervalMs))
  )

/**
 * Runs `once` every `intervalMs` (the first one at once, briskly at first: `startupSchedule`) until one passes;
 * fails with HealthTimeout once `timeoutMs` has passed, interrupting the attempt in flight. `confirm` runs after each
 * passing attempt: it answers why the pass does not count (the listener is someone else's, say), or undefined when it
 * does. Exported so that a fake Health polls exactly as the real one does.
 */
export const pollUntilHealthy = (
  check: HealthCheck,
  once: Effect.Effect<boolean>,
  confirm: Effect.Effect<string | undefined> = Effect.succeed(undefined),
  /** the port an http or tcp check probes, named when it never passes */
  port?: number
): Effect.Effect<void, HealthTimeout> =>
  Effect.gen(function* () {
    let rejected: string | undefined
    const confirmed = Effect.flatMap(once, (ok) =>
      ok
        ? Effect.map(confirm, (why) => {
            rejected = why
            return why === undefined
          })
        : Effect.succeed(false)
    )
    const started = yield* Clock.currentTimeMillis
    const result = yield* confirmed.pipe(
      Effect.repeat({ schedule: startupSchedule(check.intervalMs), until: (ok) => ok }),
      Effect.timeoutOption(Duration.millis(check.timeoutMs))
    )
    if (Option.isNone(result)) {
      const waitedMs = (yield* Clock.currentTimeMillis) - started
      return yield* new HealthTimeout({ kind: check.kind, target: check.target, port, waitedMs, rejected })
    }
  })

/**
 * The longest a probe holds the probe line: one that has not answered by then goes on beside the next, so a service
 * slow to answer holds up the others this long at most. A loopback probe of an idle service answers in about 1 ms.
 */
export const LINE_TURN_MS = 50

export interface HealthService {
  /**
   * One attempt. A log check read this way starts at `logOffset` each time: to poll, use `prober` (or
   * `makeLogWatcher`), which keeps its place in the file.
   */
  readonly probe: (check: HealthCheck, ctx: ProbeContext) => Effect.Effect<boolean>
  /**
   * A repeatable attempt that keeps state between runs (a log check's cursor). `attemptMs` replaces the kind's own
   * time for one attempt (liveness probes get `livenessAttemptMs`).
   */
  readonly prober: (
    check: HealthCheck,
    ctx: ProbeContext,
    options?: { readonly attemptMs?: number | undefined }
  ) => Effect.Effect<Effect.Effect<boolean>>
  /** Polls until an attempt passes and `confirm` accepts it, or the check's timeout: see `pollUntilHealthy`. */
  readonly waitHealthy: (
    check: HealthCheck,
    ctx: ProbeContext,
    confirm?: Effect.Effect<string | undefined>
  ) => Effect.Effect<void, HealthTimeout>
  /**
   * Runs a backed-off liveness probe in the probe line (`probe-line.ts`): the probes that fall due on one tick of the
   * probe grid go one after another, each as the one before it answers (or has had its `LINE_TURN_MS`).
   */
  readonly inLine: <A>(probe: Effect.Effect<A>) => Effect.Effect<A>
  /** the module's `defaultCheck` */
  readonly defaultCheck: (hasPort: boolean) => HealthCheck | undefined
  /** the module's `makeLogWatcher` */
  readonly makeLogWatcher: (file: string, pattern: string | RegExp, offset: number) => Effect.Effect<LogWatcher>
  /**
   * A judge of whose listener answers on `port`, for a service whose leader started at `serviceStartTime`: call it
   * with the pids of the service's group each time its check passes. With `partial`, the pids are only part of the
   * group (read cheaply): the verdict is then `Ours` or `Unknown`, never `Foreign`.
   */
  readonly listenerJudge: (
    port: number,
    serviceStartTime: string
  ) => Effect.Effect<
    (group: ReadonlyArray<number>, options?: { readonly partial?: boolean }) => Effect.Effect<ListenerVerdict>
  >
  /** The TCP ports the processes `group` listen on (from the Platform; none where it cannot tell). */
  readonly listeningPorts: (group: ReadonlyArray<number>) => Effect.Effect<ReadonlyArray<number>>
}

export class Health extends Context.Tag("berth/Health")<Health, HealthService>() {}

const make = Effect.gen(function* () {
  const platform = yield* Platform
  const listenerOn = makeListenerWait()
  const probe = Effect.fn("Health.probe")(function* (check: HealthCheck, ctx: ProbeContext) {
    return yield* attempt(check, ctx)
  })

  const prober = Effect.fn("Health.prober")(function* (
    check: HealthCheck,
    ctx: ProbeContext,
    options: { readonly attemptMs?: number | undefined } = {}
  ) {
    if (check.kind === "log") return yield* logProbe(check, ctx)
    // no span per attempt: a ready service is probed for as long as it runs
    return attempt(check, ctx, options.attemptMs)
  })

  const waitHealthy = Effect.fn("Health.waitHealthy")(function* (
    check: HealthCheck,
    ctx: ProbeContext,
    confirm: Effect.Effect<string | undefined> = Effect.succeed(undefined)
  ) {
    const once = yield* prober(check, ctx)
    const port = ctx.port
    // a network check cannot pass before something listens on its port: the attempts start once something does
    const network = port !== undefined && (check.kind === "tcp" || check.kind === "http")
    return yield* pollUntilHealthy(
      check,
      network ? Effect.zipRight(listenerOn(port, ctx.logFile), once) : once,
      confirm,
      port
    )
  })

  const inLine = makeProbeLine(LINE_TURN_MS)

  return {
    probe,
    prober,
    waitHealthy,
    inLine,
    defaultCheck,
    makeLogWatcher,
    listenerJudge: (port: number, serviceStartTime: string) => makeListenerJudge(platform, port, serviceStartTime),
    listeningPorts: platform.listeningPorts
  } satisfies HealthService
})

/** Health on the Platform it is given (see layers/index.ts). */
export const HealthLive: Layer.Layer<Health, never, Platform> = Layer.effect(Health, make)
