import { afterAll, describe, expect, layer } from "@effect/vitest"
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fiber from "effect/Fiber"
import type { HealthCheck } from "../../src/domain/config/model.js"
import { Platform, PlatformLive, procPlatform, psPlatformLinux } from "../../src/services/Platform.js"
import {
  defaultCheck,
  Health,
  HealthLive,
  LINE_TURN_MS,
  LIVENESS_ATTEMPT_MS,
  livenessAttemptMs,
  makeLogWatcher,
  networkAttemptMs,
  type ProbeContext
} from "../../src/services/Health.js"

const base = mkdtempSync(join(tmpdir(), "berth-health-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))

/** Containers without IPv6 cannot bind ::1: the ::1-only case is skipped there. */
const hasIpv6Loopback = await new Promise<boolean>((resolve) => {
  const server = net.createServer()
  server.once("error", () => resolve(false))
  server.listen(0, "::1", () => server.close(() => resolve(true)))
})

let count = 0
const fresh = (name: string) => join(base, `${name}-${count++}`)

const check = (kind: HealthCheck["kind"], target = "", timing: Partial<HealthCheck> = {}): HealthCheck => ({
  kind,
  target,
  timeoutMs: 5_000,
  intervalMs: 50,
  ...timing
})

const context = (overrides: Partial<ProbeContext> = {}): ProbeContext => ({
  cwd: base,
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  logFile: join(base, "none.log"),
  logOffset: 0,
  ...overrides
})

/**
 * How long a wait that must end on its own may take, on the busiest machine: far below what it would take if it did
 * not end on its own (a hung server, a 30 s sleep, a 60 s timeout), so it tells the two apart without timing the
 * code. The lower bounds beside it are the contract: a check's budget is used, not cut short.
 */
const ENDS = 10_000

const elapsed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const started = Date.now()
    const value = yield* self
    return { value, ms: Date.now() - started }
  })

/** Listens on an ephemeral port of `host`, and closes every connection when the scope ends. */
const listen = (server: net.Server, host: string) =>
  Effect.acquireRelease(
    Effect.async<number, Error>((resume) => {
      server.once("error", (e) => resume(Effect.fail(e)))
      server.listen(0, host, () => {
        const address = server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
      })
    }),
    () =>
      Effect.async<void>((resume) => {
        if (server instanceof http.Server) server.closeAllConnections()
        for (const socket of sockets.get(server) ?? []) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  )

const sockets = new WeakMap<net.Server, Set<net.Socket>>()
const tracked = <S extends net.Server>(server: S): S => {
  const set = new Set<net.Socket>()
  sockets.set(server, set)
  server.on("connection", (socket: net.Socket) => {
    set.add(socket)
    socket.on("close", () => set.delete(socket))
  })
  return server
}

const httpServer = (host: string, handler: http.RequestListener) => listen(tracked(http.createServer(handler)), host)

const status =
  (code: number): http.RequestListener =>
  (_request, response) => {
    response.writeHead(code, { "content-type": "text/plain" })
    response.end("x".repeat(100_000))
  }

/**
 * A plain TCP server on 127.0.0.1 that writes `answer` once the request's head is in, then closes (`close`) or keeps
 * the connection open until the client ends it (`onClientEnd` hears that).
 */
const rawServer = (answer: string, options: { readonly close: boolean; readonly onClientEnd?: () => void }) =>
  listen(
    tracked(
      net.createServer((socket) => {
        let head = ""
        socket.on("data", (d) => {
          head += d.toString("latin1")
          if (!head.includes("\r\n\r\n")) return
          if (options.close) socket.end(answer)
          else socket.write(answer)
        })
        socket.on("end", () => {
          options.onClientEnd?.()
          socket.end()
        })
      })
    ),
    "127.0.0.1"
  )

/** A port nobody listens on: one that was just free. */
const closedPort = Effect.scoped(listen(net.createServer(), "127.0.0.1"))

/** A process counts as gone when it no longer exists or is a zombie nobody reaped yet. */
const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3))
  } catch {
    return false
  }
}

const waitUntil = (condition: () => boolean, ms = 2_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (!condition() && Date.now() < deadline) yield* Effect.sleep("20 millis")
    return condition()
  })

layer(HealthLive.pipe(Layer.provide(PlatformLive)), { excludeTestServices: true })("Health", (it) => {
  describe("http", () => {
    it.scoped("is healthy on 2xx only", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const ok = yield* httpServer("127.0.0.1", status(204))
        const bad = yield* httpServer("127.0.0.1", status(500))
        const seen: Array<string> = []
        const paths = yield* httpServer("127.0.0.1", (request, response) => {
          seen.push(`${request.method} ${request.url} ${request.headers.host}`)
          response.end("ok")
        })
        expect(yield* health.probe(check("http", "/healthz"), context({ port: ok }))).toBe(true)
        expect(yield* health.probe(check("http", "/healthz"), context({ port: bad }))).toBe(false)
        expect(yield* health.probe(check("http", "/ready?x=1"), context({ port: paths }))).toBe(true)
        expect(seen).toEqual([`GET /ready?x=1 localhost:${paths}`])
        expect(yield* health.probe(check("http", "/"), context({ port: yield* closedPort }))).toBe(false)
        expect(yield* health.probe(check("http", "/"), context())).toBe(false)
      })
    )

    it.scoped("judges the final answer after an interim one; bytes that are no HTTP, or a close, are no pass", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const raw = (answer: string) => rawServer(answer, { close: true })
        const early = yield* raw("HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\n\r\nok")
        const early500 = yield* raw("HTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 500 Oops\r\n\r\n")
        const noHttp = yield* raw("SSH-2.0-OpenSSH_9.2\r\n")
        const closes = yield* raw("")
        const old = yield* raw("HTTP/1.0 200 OK\r\n\r\nok")
        expect(yield* health.probe(check("http", "/"), context({ port: early }))).toBe(true)
        expect(yield* health.probe(check("http", "/"), context({ port: early500 }))).toBe(false)
        expect(yield* health.probe(check("http", "/"), context({ port: noHttp }))).toBe(false)
        expect(yield* health.probe(check("http", "/"), context({ port: closes }))).toBe(false)
        expect(yield* health.probe(check("http", "/"), context({ port: old }))).toBe(true)
      })
    )

    it.scoped("closes its connection once the whole answer is in, without waiting for the server to close it", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const closedBy: Array<string> = []
        // keeps the connection open, as some servers ignore `connection: close`
        const keeps = (answer: string) =>
          rawServer(answer, { close: false, onClientEnd: () => closedBy.push("client") })
        const answers = [
          ["HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", true],
          ["HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", true],
          ["HTTP/1.1 204 No Content\r\n\r\n", true],
          ["HTTP/1.1 503 Busy\r\ncontent-length: 4\r\n\r\nbusy", false]
        ] as const
        for (const [answer, healthy] of answers) {
          const port = yield* keeps(answer)
          // an attempt of a minute: one that waited for the server's close would take all of it
          const attempt = yield* health.prober(check("http", "/"), context({ port }), { attemptMs: 60_000 })
          const { value, ms } = yield* elapsed(attempt)
          expect(value).toBe(healthy)
          expect(ms).toBeLessThan(ENDS)
        }
        expect(yield* waitUntil(() => closedBy.length === answers.length)).toBe(true)
      })
    )

    it.scoped("gives up on a server that accepts but never answers, within the attempt's time", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const hung = yield* httpServer("127.0.0.1", () => undefined)
        // interval 100 ms: an attempt may take min(2 s, 4 × 100 ms)
        const { value, ms } = yield* elapsed(
          health.probe(check("http", "/", { intervalMs: 100 }), context({ port: hung }))
        )
        expect(value).toBe(false)
        expect(ms).toBeGreaterThanOrEqual(350)
        expect(ms).toBeLessThan(ENDS)
        // a long interval is still capped at 2 s
        const capped = yield* elapsed(health.probe(check("http", "/", { intervalMs: 10_000 }), context({ port: hung })))
        expect(capped.ms).toBeGreaterThanOrEqual(1_900)
        expect(capped.ms).toBeLessThan(ENDS)
      })
    )

    it.scoped.skipIf(!hasIpv6Loopback)("reaches a dev server that listens only on ::1", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const port = yield* httpServer("::1", status(200))
        expect(yield* health.probe(check("http", "/"), context({ port }))).toBe(true)
        expect(yield* health.probe(check("tcp"), context({ port }))).toBe(true)
      })
    )
  })

  describe("liveness attempts", () => {
    it.scoped("wait seconds: an answer slower than a readiness attempt (400 ms) still passes", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const port = yield* httpServer("127.0.0.1", (_request, response) => {
          setTimeout(() => response.end("ok"), 700)
        })
        const slow = check("http", "/", { intervalMs: 100 })
        expect(networkAttemptMs(slow)).toBe(400)
        expect(LIVENESS_ATTEMPT_MS).toBeGreaterThanOrEqual(2_000)
        expect(livenessAttemptMs(slow)).toBe(LIVENESS_ATTEMPT_MS)
        // a cmd check that may take longer than that keeps its own time
        expect(livenessAttemptMs(check("cmd", "x", { timeoutMs: 60_000, intervalMs: 5_000 }))).toBe(20_000)
        expect(yield* health.probe(slow, context({ port }))).toBe(false)
        const live = yield* health.prober(slow, context({ port }), { attemptMs: livenessAttemptMs(slow) })
        expect(yield* live).toBe(true)
      })
    )
  })

  describe("tcp", () => {
    it.scoped("passes when the port accepts, fails when nobody listens", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const open = yield* listen(tracked(net.createServer()), "127.0.0.1")
        expect(yield* health.probe(check("tcp"), context({ port: open }))).toBe(true)
        expect(yield* health.probe(check("tcp"), context({ port: yield* closedPort }))).toBe(false)
      })
    )
  })

  describe("cmd", () => {
    it.effect("passes on exit 0, in cwd with env", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const dir = fresh("cwd")
        mkdirSync(dir)
        writeFileSync(join(dir, "present.txt"), "")
        // the context's env is the whole environment: the daemon's own variables do not leak in
        process.env.BERTH_HEALTH_LEAK = "leaked"
        const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", WANTED: "yes it's set" }
        const ctx = context({ cwd: dir, env })
        expect(yield* health.probe(check("cmd", "true"), ctx)).toBe(true)
        expect(yield* health.probe(check("cmd", "exit 1"), ctx)).toBe(false)
        expect(yield* health.probe(check("cmd", `test "$WANTED" = "yes it's set" && test -f present.txt`), ctx)).toBe(
          true
        )
        expect(yield* health.probe(check("cmd", 'test -z "$BERTH_HEALTH_LEAK"'), ctx)).toBe(true)
        delete process.env.BERTH_HEALTH_LEAK
        expect(yield* health.probe(check("cmd", "true"), context({ cwd: join(base, "missing") }))).toBe(false)
      })
    )

    it.effect("kills a command that hangs, with what it started", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const pids = fresh("pids")
        // a grandchild in the background and the shell waiting on it: both must die
        const hang = check("cmd", `sleep 30 & echo $! > '${pids}'; echo $$ >> '${pids}'; wait`, { timeoutMs: 600 })
        const { value, ms } = yield* elapsed(health.probe(hang, context()))
        expect(value).toBe(false)
        expect(ms).toBeGreaterThanOrEqual(550)
        expect(ms).toBeLessThan(ENDS)
        const started = readFileSync(pids, "utf8").trim().split("\n").map(Number)
        expect(started).toHaveLength(2)
        expect(yield* waitUntil(() => started.every((pid) => !alive(pid)))).toBe(true)
      })
    )

    it.effect("kills the command when the attempt is interrupted", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const pids = fresh("pids")
        const fiber = yield* Effect.fork(health.probe(check("cmd", `echo $$ > '${pids}'; exec sleep 30`), context()))
        expect(yield* waitUntil(() => existsSync(pids) && readFileSync(pids, "utf8").endsWith("\n"))).toBe(true)
        const pid = Number(readFileSync(pids, "utf8").trim())
        expect(alive(pid)).toBe(true)
        yield* Fiber.interrupt(fiber)
        expect(yield* waitUntil(() => !alive(pid))).toBe(true)
      })
    )
  })

  describe("log", () => {
    it.effect("matches only what was written after logOffset, as it is appended", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const logFile = fresh("service.log")
        writeFileSync(logFile, "listening on 3000, server ready\n")
        const ctx = context({ logFile, logOffset: readFileSync(logFile).length })
        const ready = check("log", "^.*server ready$", { intervalMs: 20, timeoutMs: 5_000 })
        expect(yield* health.probe(ready, ctx)).toBe(false)
        expect(yield* health.probe(ready, context({ logFile, logOffset: 0 }))).toBe(true)

        const fiber = yield* Effect.fork(health.waitHealthy(ready, ctx))
        appendFileSync(logFile, "compiling…\n")
        yield* Effect.sleep("100 millis")
        appendFileSync(logFile, "listening on 3000, server re")
        yield* Effect.sleep("100 millis")
        expect(fiber.unsafePoll()).toBeNull()
        appendFileSync(logFile, "ady\n")
        // passed, not timed out: the check's own timeout (5 s) would fail the wait
        yield* Fiber.join(fiber)
      })
    )

    it.effect("waits for a file that does not exist yet", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const logFile = fresh("later.log")
        const fiber = yield* Effect.fork(
          health.waitHealthy(check("log", "up", { intervalMs: 20 }), context({ logFile }))
        )
        yield* Effect.sleep("100 millis")
        writeFileSync(logFile, "it is up\n")
        yield* Fiber.join(fiber)
      })
    )

    it.effect("reads each byte once, across chunk boundaries, and again after a truncation", () =>
      Effect.gen(function* () {
        const logFile = fresh("big.log")
        const noise = `${"x".repeat(99)}\n`.repeat(30_000)
        writeFileSync(logFile, "READY before the offset\n")
        const offset = readFileSync(logFile).length
        // the line straddles the 1 MiB read boundary, then 3 MB of noise follow
        appendFileSync(logFile, `${"x".repeat(1024 * 1024 - 4)}\nREADY\n${noise}`)
        const watcher = yield* makeLogWatcher(logFile, /^READY$/g, offset)
        expect(yield* watcher.matched).toBe(true)

        const slow = yield* makeLogWatcher(logFile, "never", offset)
        expect(yield* slow.matched).toBe(false)
        const size = readFileSync(logFile).length
        expect(yield* slow.cursor).toBe(size)
        appendFileSync(logFile, "a little more\n")
        expect(yield* slow.matched).toBe(false)
        expect(yield* slow.cursor).toBe(size + 14)

        writeFileSync(logFile, "rotated: never mind\n")
        expect(yield* slow.matched).toBe(true)
      })
    )
  })

  describe("waitHealthy", () => {
    it.scoped("polls until the server turns healthy", () =>
      Effect.gen(function* () {
        const health = yield* Health
        let answers = 0
        const port = yield* httpServer("127.0.0.1", (_request, response) => {
          answers++
          response.writeHead(answers < 4 ? 503 : 200)
          response.end()
        })
        yield* health.waitHealthy(check("http", "/", { intervalMs: 30 }), context({ port }))
        expect(answers).toBe(4)
      })
    )

    it.effect("fails with HealthTimeout once timeoutMs has passed", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const port = yield* closedPort
        const { value: error, ms } = yield* elapsed(
          Effect.flip(health.waitHealthy(check("tcp", "", { timeoutMs: 400, intervalMs: 50 }), context({ port })))
        )
        expect(error._tag).toBe("HealthTimeout")
        expect(error.kind).toBe("tcp")
        expect(error.waitedMs).toBeGreaterThanOrEqual(390)
        expect(ms).toBeLessThan(ENDS)
        expect(error.message).toMatch(/^not healthy after 0\.\ds: a tcp connection on port \d+ never passed$/)

        const cmd = yield* Effect.flip(health.waitHealthy(check("cmd", "exit 3", { timeoutMs: 200 }), context()))
        expect(cmd.message).toMatch(/the cmd check "exit 3" never passed/)
      })
    )

    it.effect("can be interrupted, e.g. by the process exiting first", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const port = yield* closedPort
        const { value, ms } = yield* elapsed(
          Effect.race(
            health.waitHealthy(check("tcp", "", { timeoutMs: 60_000 }), context({ port })).pipe(Effect.as("healthy")),
            Effect.sleep("150 millis").pipe(Effect.as("exited"))
          )
        )
        expect(value).toBe("exited")
        expect(ms).toBeLessThan(ENDS)
      })
    )

    it.scoped(
      "waits for several ports at once: each passes once its own port opens (on ::1 too); one withdrawn stops no other",
      () =>
        Effect.gen(function* () {
          const health = yield* Health
          const ports = [yield* closedPort, yield* closedPort, yield* closedPort]
          // one clock for both sides: when each wait passed and when its port began to listen, from the same start
          // (a wait timed from its own fiber's start, which a loaded machine delays, read early)
          const started = Date.now()
          const waits = yield* Effect.forEach(ports, (port) =>
            Effect.fork(
              Effect.map(health.waitHealthy(check("tcp", "", { timeoutMs: 10_000 }), context({ port })), () => ({
                ms: Date.now() - started
              }))
            )
          )
          // one withdrawn half-way (its process exited, say) stops nobody else's wait
          const withdrawn = yield* Effect.fork(
            health.waitHealthy(check("tcp", "", { timeoutMs: 10_000 }), context({ port: ports[2]! }))
          )
          const opened: Array<number> = []
          for (const [i, port] of ports.entries()) {
            yield* Effect.sleep("150 millis")
            if (i === 1) yield* Fiber.interrupt(withdrawn)
            const host = i === 2 && hasIpv6Loopback ? "::1" : "127.0.0.1"
            const server = tracked(net.createServer())
            // before the listen: no connection can pass before it
            opened.push(Date.now() - started)
            yield* Effect.acquireRelease(
              Effect.async<void>((resume) => {
                server.listen(port, host, () => resume(Effect.void))
              }),
              () =>
                Effect.async<void>((resume) => {
                  server.close(() => resume(Effect.void))
                })
            )
          }
          for (const [i, wait] of waits.entries()) {
            // each passed (none timed out), and not before its port opened
            const { ms } = yield* Fiber.join(wait)
            expect(ms).toBeGreaterThanOrEqual(opened[i]!)
          }
        })
    )
  })

  describe("the wait for a listener, learned", () => {
    it.scoped(
      "finds a service's listener again on its next starts: sooner, later, and moved to the other loopback address",
      () =>
        Effect.gen(function* () {
          const health = yield* Health
          // one service (its log file names it) started four times, its listener opened at different times and
          // addresses: each wait passes once the listener is there, and not before
          const logFile = fresh("learned")
          const starts: ReadonlyArray<{ readonly afterMs: number; readonly host: string }> = [
            { afterMs: 300, host: "127.0.0.1" },
            { afterMs: 50, host: "127.0.0.1" },
            { afterMs: 400, host: hasIpv6Loopback ? "::1" : "127.0.0.1" },
            { afterMs: 0, host: "127.0.0.1" }
          ]
          for (const { afterMs, host } of starts) {
            const port = yield* closedPort
            const started = Date.now()
            const wait = yield* Effect.fork(
              Effect.map(health.waitHealthy(check("tcp", "", { timeoutMs: 10_000 }), context({ port, logFile })), () =>
                Date.now()
              )
            )
            yield* Effect.sleep(`${afterMs} millis`)
            const server = tracked(net.createServer())
            const opened = Date.now()
            yield* Effect.async<void>((resume) => {
              server.listen(port, host, () => resume(Effect.void))
            })
            const passed = yield* Fiber.join(wait)
            expect(passed).toBeGreaterThanOrEqual(opened)
            expect(passed - started).toBeLessThan(ENDS)
            yield* Effect.async<void>((resume) => {
              server.close(() => resume(Effect.void))
            })
          }
        })
    )

    it.scoped("does not try a service that listened late before until most of that time has passed", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const logFile = fresh("late")
        const port = yield* closedPort
        // the first start listens 300 ms in: remembered
        const first = yield* Effect.fork(
          health.waitHealthy(check("tcp", "", { timeoutMs: 10_000 }), context({ port, logFile }))
        )
        yield* Effect.sleep("300 millis")
        const server = tracked(net.createServer())
        yield* Effect.acquireRelease(
          Effect.async<void>((resume) => {
            server.listen(port, "127.0.0.1", () => resume(Effect.void))
          }),
          () =>
            Effect.async<void>((resume) => {
              server.close(() => resume(Effect.void))
            })
        )
        yield* Fiber.join(first)
        // the next start finds the listener there from the start, yet is first tried only after 70 % of those
        // 300 ms (a lower bound, which a loaded machine only makes later)
        const { ms } = yield* elapsed(
          health.waitHealthy(check("tcp", "", { timeoutMs: 10_000 }), context({ port, logFile }))
        )
        expect(ms).toBeGreaterThanOrEqual(190)
        expect(ms).toBeLessThan(ENDS)
      })
    )
  })

  describe("the probe line", () => {
    /** a probe that takes `ms`, noting when it runs; its answer is its name */
    const timed = (name: string, ms: number, runs: Array<string>) =>
      Effect.gen(function* () {
        runs.push(`${name} start`)
        yield* Effect.sleep(ms)
        runs.push(`${name} end`)
        return name
      })

    it.scoped("runs the probes that come together one after another, each with its own answer", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const runs: Array<string> = []
        const answers = yield* Effect.all(
          ["a", "b", "c"].map((name) => health.inLine(timed(name, 20, runs))),
          { concurrency: "unbounded" }
        )
        expect(answers).toEqual(["a", "b", "c"])
        expect(runs).toEqual(["a start", "a end", "b start", "b end", "c start", "c end"])
      })
    )

    it.scoped(`lets the next probe go after ${LINE_TURN_MS} ms when one has not answered`, () =>
      Effect.gen(function* () {
        const health = yield* Health
        const runs: Array<string> = []
        const slow = yield* Effect.fork(health.inLine(timed("slow", 1_000, runs)))
        yield* Effect.sleep(5)
        const [ms, answer] = yield* Effect.timed(health.inLine(timed("next", 1, runs)))
        expect(answer).toBe("next")
        expect(Duration.toMillis(ms)).toBeLessThan(500)
        expect(runs).toEqual(["slow start", "next start", "next end"])
        // the slow one still gives its own answer when it comes
        expect(yield* Fiber.join(slow)).toBe("slow")
      })
    )

    it.scoped("leaves out a probe interrupted while it waits for its turn", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const runs: Array<string> = []
        const first = yield* Effect.fork(health.inLine(timed("first", 30, runs)))
        yield* Effect.sleep(5)
        const second = yield* Effect.fork(health.inLine(timed("second", 1, runs)))
        const third = yield* Effect.fork(health.inLine(timed("third", 1, runs)))
        yield* Effect.sleep(5)
        yield* Fiber.interrupt(second)
        expect(yield* Fiber.join(first)).toBe("first")
        expect(yield* Fiber.join(third)).toBe("third")
        expect(runs).toEqual(["first start", "first end", "third start", "third end"])
      })
    )

    it.scoped("ends a probe that is interrupted while it runs, and the line goes on", () =>
      Effect.gen(function* () {
        const health = yield* Health
        const runs: Array<string> = []
        const hung = yield* Effect.fork(
          health.inLine(
            Effect.onInterrupt(timed("hung", 60_000, runs), () => Effect.sync(() => runs.push("hung interrupted")))
          )
        )
        yield* Effect.sleep(5)
        yield* Fiber.interrupt(hung)
        expect(runs).toEqual(["hung start", "hung interrupted"])
        expect(yield* health.inLine(Effect.succeed("after"))).toBe("after")
      })
    )
  })

  describe("defaultCheck", () => {
    it.effect("is tcp with the model's defaults for a service with a port, none otherwise", () =>
      Effect.gen(function* () {
        const health = yield* Health
        expect(health.defaultCheck(true)).toEqual({ kind: "tcp", target: "", timeoutMs: 60_000, intervalMs: 100 })
        expect(defaultCheck(false)).toBeUndefined()
      })
    )
  })
})

/**
 * The listener proof runs on both Linux implementations of the Platform: /proc (socket inodes) and `lsof` (the
 * commands macOS answers with). They must reach the same verdicts here.
 */
describe.each([procPlatform, psPlatformLinux])("Health's listener proof on $name", (platform) => {
  layer(HealthLive.pipe(Layer.provide(Layer.succeed(Platform, platform))), { excludeTestServices: true })(
    "listener",
    (it) => {
      it.scoped("tells the group's listener from another process's, and says when it cannot tell", () =>
        Effect.gen(function* () {
          const health = yield* Health
          const port = yield* listen(tracked(net.createServer()), "127.0.0.1")
          // a start time as this Platform reads it (/proc's ticks since boot, ps's seconds since the epoch)
          const selfStart = (yield* platform.startTime(process.pid)) ?? ""
          // this process is the group: the listener is ours
          const ours = yield* health.listenerJudge(port, selfStart)
          expect(yield* ours([process.pid])).toEqual({ _tag: "Ours" })
          // a service started after this process, whose group does not hold it: this process is the foreign holder
          const later = yield* health.listenerJudge(port, `${BigInt(selfStart) + 1n}`)
          const verdict = yield* later([])
          expect(verdict._tag).toBe("Foreign")
          if (verdict._tag === "Foreign") {
            expect(verdict.holder.pid).toBe(process.pid)
            expect(verdict.holder.startTime).toBe(selfStart)
            expect(verdict.holder.command).toContain("node")
          }
          // asked again: the same answer (from what it remembered)
          expect((yield* later([]))._tag).toBe("Foreign")
          // started before the holder: a helper it spawned may hold it
          const earlier = yield* health.listenerJudge(port, "0")
          expect(yield* earlier([])).toEqual({ _tag: "Unknown" })
          // nobody listens
          const none = yield* health.listenerJudge(yield* closedPort, selfStart)
          expect(yield* none([process.pid])).toEqual({ _tag: "Unknown" })
          // part of the group proves the listener ours, and never names a holder: one outside that part may be a member
          expect(yield* ours([process.pid], { partial: true })).toEqual({ _tag: "Ours" })
          expect(yield* later([], { partial: true })).toEqual({ _tag: "Unknown" })
          expect(yield* none([process.pid], { partial: true })).toEqual({ _tag: "Unknown" })
        })
      )
    }
  )
})
