/**
 * The web dashboard's server: plain `node:http` on an ephemeral port of 127.0.0.1, reached through the proxy as
 * `berth.localhost` (the Router adds that one route). It serves the page, the state stream and a service's log as
 * server-sent events, and actions as POSTs.
 *
 * Who may act: any page open in the user's browser can send a request to a loopback address, so an action is taken
 * only with the per-daemon token (which only the dashboard's own page holds: another origin cannot read it) in a
 * header, and with an `Origin` that is the dashboard's own (`http(s)://berth.localhost[:proxy port]`); anything else
 * is 403. Every request must also name `berth.localhost` as its Host, so a page that rebinds its own name to
 * 127.0.0.1 (DNS rebinding) reaches nothing. The token is compared in constant time.
 */
import { randomBytes, timingSafeEqual } from "node:crypto"
import * as http from "node:http"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { dashboardHost, normalizeHost } from "../../domain/routes.js"
import { Router } from "../proxy/Router.js"
import { dashboardPage } from "./page.js"

export const ACTIONS = ["up", "down", "reload", "remove", "restart"] as const
export type DashboardAction = (typeof ACTIONS)[number]

export interface ActionRequest {
  readonly world: number
  readonly action: DashboardAction
  readonly service?: string | undefined
}

/** What the server needs from the daemon, given as values so this module needs nothing above the services. */
export interface DashboardBackend<R> {
  /** the state stream, each message already encoded as plain JSON */
  readonly watch: Stream.Stream<unknown, unknown, R>
  /** a service's log, its last lines then following */
  readonly logs: (world: number, service: string) => Stream.Stream<string, unknown, R>
  /** takes an action; answers a line saying what became of the world */
  readonly act: (request: ActionRequest) => Effect.Effect<string, { readonly message: string }, R>
}

/** Equal in constant time (for the token): lengths differ only when it is wrong anyway. */
export const sameSecret = (given: string | undefined, secret: string): boolean => {
  if (given === undefined) return false
  const a = Buffer.from(given)
  const b = Buffer.from(secret)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** Whether a request comes from the dashboard's own page: its Origin is one of the dashboard's origins, exactly. */
export const fromOwnOrigin = (origin: string | undefined, origins: ReadonlyArray<string>): boolean =>
  origin !== undefined && origins.includes(origin)

/** Parses an action's JSON body; undefined when it is not one. */
export const parseAction = (body: string): ActionRequest | undefined => {
  let value: unknown
  try {
    value = JSON.parse(body)
  } catch {
    return undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  const v = value as Record<string, unknown>
  const action = ACTIONS.find((a) => a === v.action)
  if (typeof v.world !== "number" || !Number.isInteger(v.world) || action === undefined) return undefined
  if (v.service !== undefined && typeof v.service !== "string") return undefined
  if (action === "restart" && typeof v.service !== "string") return undefined
  return { world: v.world, action, service: v.service as string | undefined }
}

const SECURITY_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer"
}

const MAX_BODY = 16 * 1024

/**
 * Serves the dashboard while the scope lives and routes `berth.localhost` to it. A failure to listen is logged and
 * leaves the daemon without a web dashboard, never without its API.
 */
export const serveDashboard = <R>(backend: DashboardBackend<R>): Effect.Effect<void, never, Router | Scope.Scope | R> =>
  Effect.gen(function* () {
    const router = yield* Router
    const runtime = yield* Effect.runtime<R>()
    const token = randomBytes(32).toString("hex")
    const host = dashboardHost()
    const streams = new Set<Fiber.RuntimeFiber<unknown, unknown>>()

    const json = (res: http.ServerResponse, status: number, body: unknown) =>
      res.writeHead(status, { ...SECURITY_HEADERS, "content-type": "application/json" }).end(JSON.stringify(body))

    /** Sends `stream` as server-sent events until the client goes (or the daemon stops). */
    const events = (
      req: http.IncomingMessage,
      res: http.ServerResponse,
      stream: Stream.Stream<unknown, unknown, R>
    ) => {
      res.writeHead(200, { ...SECURITY_HEADERS, "content-type": "text/event-stream", connection: "keep-alive" })
      res.write(": berth\n\n")
      const fiber = Runtime.runFork(runtime)(
        Stream.merge(
          stream.pipe(Stream.map((data) => `data: ${JSON.stringify(data)}\n\n`)),
          // a comment now and then, so nothing between here and the browser takes the stream for idle
          Stream.tick("15 seconds").pipe(Stream.as(": ping\n\n"))
        ).pipe(
          Stream.runForEach((chunk) => Effect.sync(() => res.write(chunk))),
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logWarning("web dashboard: a stream failed", cause)
          ),
          Effect.ensuring(Effect.sync(() => res.end()))
        )
      )
      streams.add(fiber)
      const stop = () => {
        streams.delete(fiber)
        Runtime.runFork(runtime)(Fiber.interrupt(fiber))
      }
      req.once("close", stop)
    }

    const handle = (req: http.IncomingMessage, res: http.ServerResponse, origins: ReadonlyArray<string>) => {
      const url = new URL(req.url ?? "/", "http://berth.localhost")
      if (normalizeHost(req.headers.host) !== host) {
        return res.writeHead(403, SECURITY_HEADERS).end("berth's dashboard answers only as berth.localhost\n")
      }
      if (req.method === "GET" && url.pathname === "/") {
        const nonce = randomBytes(16).toString("base64")
        return res
          .writeHead(200, {
            ...SECURITY_HEADERS,
            "content-type": "text/html; charset=utf-8",
            "content-security-policy": `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`
          })
          .end(dashboardPage(token, nonce))
      }
      if (req.method === "GET" && (url.pathname === "/events" || url.pathname === "/logs")) {
        if (!sameSecret(url.searchParams.get("token") ?? undefined, token)) {
          return json(res, 403, { error: "this stream needs the dashboard's token" })
        }
        if (url.pathname === "/events") return events(req, res, backend.watch)
        const world = Number(url.searchParams.get("world"))
        const service = url.searchParams.get("service") ?? ""
        if (!Number.isInteger(world) || service === "") return json(res, 400, { error: "which world and service?" })
        return events(req, res, backend.logs(world, service))
      }
      if (url.pathname === "/actions") {
        if (req.method !== "POST") return json(res, 405, { error: "actions are POSTs" })
        const given = req.headers["x-berth-token"]
        if (
          !fromOwnOrigin(req.headers.origin, origins) ||
          !sameSecret(typeof given === "string" ? given : undefined, token)
        ) {
          req.resume()
          return json(res, 403, { error: "only the dashboard's own page may act" })
        }
        let body = ""
        req.setEncoding("utf8")
        req.on("data", (chunk: string) => {
          body += chunk
          if (body.length > MAX_BODY) req.destroy()
        })
        req.on("end", () => {
          const action = parseAction(body)
          if (action === undefined) return json(res, 400, { error: "expected { world, action, service? }" })
          Runtime.runFork(runtime)(
            backend.act(action).pipe(
              Effect.match({
                onFailure: (e) => json(res, 422, { error: e.message }),
                onSuccess: (message) => json(res, 200, { message })
              })
            )
          )
        })
        return
      }
      return json(res, 404, { error: "not found" })
    }

    const server = http.createServer((req, res) => {
      try {
        // read per request: the proxy's ports move with `berth port`
        handle(req, res, Runtime.runSync(runtime)(router.dashboardOrigins))
      } catch {
        if (!res.headersSent) json(res, 500, { error: "the dashboard failed on this request" })
        else res.destroy()
      }
    })
    const port = yield* Effect.async<number | undefined>((resume) => {
      server.once("error", () => resume(Effect.succeed(undefined)))
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : undefined))
      })
    })
    if (port === undefined) {
      yield* Effect.logWarning("the web dashboard could not listen on 127.0.0.1")
      return
    }
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        yield* Effect.forEach([...streams], Fiber.interrupt, { discard: true })
        yield* Effect.sync(() => {
          server.closeAllConnections()
          server.close()
        })
      })
    )
    yield* router.setDashboard(port).pipe(Effect.ignore)
  })
