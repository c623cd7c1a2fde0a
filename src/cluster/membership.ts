/**
 * This machine's membership of a cluster (`berth cluster join|leave`): what it remembers in its state database, the
 * checks a join makes before it touches anything, and the sessions it runs while it is a member — one at a time, each
 * started again after it fails, later and later (a refusal ends them). Nothing of the machine's own worlds depends on
 * a session: they keep running while it is retried, and a daemon that is no member works as on one machine.
 */
import { randomUUID } from "node:crypto"
import { hostname, networkInterfaces } from "node:os"
import type * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import {
  addressProblem,
  clusterProxyPort,
  clusterUrlProblem,
  DEFAULT_RUNNER_PORT,
  machineNameProblem
} from "../domain/cluster.js"
import { ClusterRefused, ClusterUnavailable } from "../domain/errors.js"
import { hidePassword } from "../domain/redact.js"
import { canBindOn } from "../services/Ports.js"
import type { RegistryService } from "../services/Registry.js"
import { version } from "../version.js"
import { makeStore, SCHEMA_VERSION, type Store } from "./store.js"
import { type ClusterState, solo, updateView } from "./view.js"

const SETTINGS_KEY = "cluster"

/** What a member remembers in its state database (owner-only: the address may carry a password). */
export const Settings = Schema.Struct({
  url: Schema.String,
  name: Schema.String,
  address: Schema.String,
  runnerPort: Schema.Number,
  /** tells this machine's row from another machine's of the same name */
  machineId: Schema.String
})
export type Settings = typeof Settings.Type

export interface JoinRequest {
  readonly url: string
  readonly name?: string | undefined
  readonly address?: string | undefined
  readonly runnerPort?: number | undefined
  /** make berth's tables in the database first (`cluster init`) */
  readonly init: boolean
  /** take over the name of a machine that is gone */
  readonly replace: boolean
}

/** How long `cluster join` waits for this machine's runner to take its place. */
const JOIN_TIMEOUT = Duration.seconds(20)

/** A session that failed is started again after 0.5 s, then later and later, at most 10 s apart. */
const RETRY_SCHEDULE = Schedule.exponential(Duration.millis(500)).pipe(Schedule.union(Schedule.spaced("10 seconds")))

/** What went wrong, in words: an SqlError's own message is only "Failed to execute statement"; its cause says why. */
export const message = (e: unknown): string => {
  const text = (x: unknown): string | undefined =>
    typeof x === "object" && x !== null && "message" in x && typeof x.message === "string" ? x.message : undefined
  const cause = typeof e === "object" && e !== null && "cause" in e ? text(e.cause) : undefined
  const own = text(e) ?? String(e)
  return cause === undefined || cause === own ? own : `${own}: ${cause}`
}

/** The first address of this machine that another machine could dial (IPv4, not loopback). */
export const guessAddress = (): string | undefined => {
  for (const entries of Object.values(networkInterfaces())) {
    for (const entry of entries ?? []) {
      if (entry.family === "IPv4" && !entry.internal) return entry.address
    }
  }
  return undefined
}

/**
 * The cluster's database client. Loaded when a machine first reaches its cluster, never before: `pg` looks for a
 * Cloudflare runtime as it loads (a `Response` made, which loads Node's whole fetch), a cost every command of the
 * full CLI paid while this import was static.
 */
export const pgLayer = (url: string): ReturnType<typeof PgClient.layer> =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("@effect/sql-pg/PgClient")),
      (pg) =>
        pg.layer({
          url: Redacted.make(url),
          applicationName: "berth",
          maxConnections: 8,
          connectTimeout: Duration.seconds(5)
        })
    )
  )

export const unavailable = (url: string) => (e: unknown) =>
  new ClusterUnavailable({ url: hidePassword(url), reason: message(e) })

/** A short connection to the database, for what join and leave do before and after a session. */
const withStore = <A, E>(url: string, use: (store: Store) => Effect.Effect<A, E>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(pgLayer(url)).pipe(Effect.mapError(unavailable(url)))
      const store = yield* makeStore.pipe(Effect.provide(context))
      return yield* use(store)
    })
  )

/** A session: resolves `ready` once the runner has its place; runs until it fails (or is interrupted). */
export type Session = (
  settings: Settings,
  ready: Deferred.Deferred<void, ClusterUnavailable | ClusterRefused>
) => Effect.Effect<void, unknown>

/**
 * Runs sessions until the membership ends: a failed one is said in the view and the log and tried again, later and
 * later; a refused one is not tried again. `ready` fails with the first session's failure.
 */
export const sessions = (
  session: Session,
  settings: Settings,
  ready: Deferred.Deferred<void, ClusterUnavailable | ClusterRefused>,
  state: ClusterState
): Effect.Effect<void> =>
  session(settings, ready).pipe(
    Effect.mapError((e) =>
      e instanceof ClusterRefused || e instanceof ClusterUnavailable ? e : unavailable(settings.url)(e)
    ),
    Effect.tapErrorCause((cause) =>
      Effect.gen(function* () {
        const failure = Cause.failureOption(cause)
        const refused = Option.isSome(failure) && failure.value instanceof ClusterRefused
        const reason = Option.match(failure, { onNone: () => Cause.pretty(cause), onSome: message })
        yield* updateView(state, (v) => ({ ...v, state: refused ? "refused" : "retrying", error: reason }))
        yield* Deferred.failCause(ready, cause)
        yield* Effect.logWarning(`berth cluster: the session with the cluster ended: ${reason}`)
      })
    ),
    Effect.retry({ while: (e) => !(e instanceof ClusterRefused), schedule: RETRY_SCHEDULE }),
    Effect.ignore
  )

export interface MembershipOptions {
  readonly registry: Pick<RegistryService, "getSetting" | "setSetting">
  readonly state: ClusterState
  readonly session: Session
  /** where the sessions run: the daemon's life, not a command's */
  readonly daemonScope: Scope.Scope
}

/** The membership: `join`, `leave`, and a member's sessions, started again at the daemon's start. */
export const makeMembership = (options: MembershipOptions) =>
  Effect.gen(function* () {
    const { registry, state } = options
    const member = yield* Ref.make(
      Option.none<{ readonly fiber: Fiber.RuntimeFiber<void>; readonly settings: Settings }>()
    )

    const start = (settings: Settings) =>
      Effect.gen(function* () {
        const ready = yield* Deferred.make<void, ClusterUnavailable | ClusterRefused>()
        yield* updateView(state, () => ({
          ...solo,
          state: "connecting",
          url: hidePassword(settings.url),
          name: settings.name,
          address: settings.address,
          runnerPort: settings.runnerPort
        }))
        const fiber = yield* sessions(options.session, settings, ready, state).pipe(Effect.forkIn(options.daemonScope))
        yield* Ref.set(member, Option.some({ fiber, settings }))
        return ready
      })

    const stop = Effect.gen(function* () {
      const current = yield* Ref.getAndSet(member, Option.none())
      if (Option.isNone(current)) return
      yield* Fiber.interrupt(current.value.fiber)
      yield* updateView(state, () => solo)
    })

    const stored = registry.getSetting(SETTINGS_KEY).pipe(Effect.map(Schema.decodeUnknownOption(Settings)))

    /** A member stays one across daemon restarts: its sessions start again with the daemon. */
    const resume = Effect.gen(function* () {
      const settings = yield* stored
      if (Option.isSome(settings)) yield* start(settings.value)
    })

    /** What a join asks, checked before anything is touched: the settings it would keep, or why not. */
    const checked = (request: JoinRequest) =>
      Effect.gen(function* () {
        const problem = clusterUrlProblem(request.url)
        if (problem !== undefined) {
          return yield* new ClusterRefused({ reason: problem, hint: "see `berth cluster --help`" })
        }
        const name = request.name ?? hostname().toLowerCase()
        const nameProblem = machineNameProblem(name)
        if (nameProblem !== undefined) {
          return yield* new ClusterRefused({ reason: `${JSON.stringify(name)}: ${nameProblem}`, hint: "pass --name" })
        }
        const address = request.address ?? guessAddress()
        if (address === undefined) {
          return yield* new ClusterRefused({
            reason: "this machine has no network address another machine could reach",
            hint: "pass --address with the address of this machine on the network its peers share"
          })
        }
        const addressTrouble = addressProblem(address)
        if (addressTrouble !== undefined) {
          return yield* new ClusterRefused({ reason: addressTrouble, hint: "pass --address" })
        }
        return { name, address, runnerPort: request.runnerPort ?? DEFAULT_RUNNER_PORT }
      })

    const join = (request: JoinRequest) =>
      Effect.gen(function* () {
        const { name, address, runnerPort } = yield* checked(request)
        const current = yield* Ref.get(member)
        if (Option.isSome(current)) {
          const { settings } = current.value
          if (settings.url === request.url && settings.name === name) return yield* state.view.get
          return yield* new ClusterRefused({
            reason: `this machine is already in the cluster at ${hidePassword(settings.url)} as ${settings.name}`,
            hint: "run `berth cluster leave` first"
          })
        }
        // the runner listens on its port and the cluster's URLs on the next: a port another program holds would fail
        // only once the session starts, told as the database being unusable
        for (const [port, what] of [
          [runnerPort, "the runner port"],
          [clusterProxyPort(runnerPort), "the port after the runner port (the cluster's URLs)"]
        ] as const) {
          if (!(yield* canBindOn(port, address))) {
            return yield* new ClusterRefused({
              reason: `port ${port} on ${address}, ${what}, is taken by another program`,
              hint: `pass --runner-port with a port whose next port is free too (the default is ${DEFAULT_RUNNER_PORT}), or stop what holds ${port}`
            })
          }
        }
        const previous = yield* stored
        const settings: Settings = {
          url: request.url,
          name,
          address,
          runnerPort,
          machineId: Option.match(previous, { onNone: () => randomUUID(), onSome: (p) => p.machineId })
        }
        yield* withStore(request.url, (store) =>
          Effect.gen(function* () {
            if (request.init) yield* store.migrate
            const schema = yield* store.schemaVersion
            if (schema === undefined) {
              return yield* new ClusterRefused({
                reason: `the database ${hidePassword(request.url)} holds no berth cluster`,
                hint: `make one there with \`berth cluster init ${hidePassword(request.url)}\``
              })
            }
            if (schema > SCHEMA_VERSION) {
              return yield* new ClusterRefused({
                reason: `the cluster was made by a newer berth (its tables are at version ${schema}, this berth knows ${SCHEMA_VERSION})`,
                hint: "update berth on this machine"
              })
            }
            yield* store.claim({ ...settings, proxyPort: null, version, replace: request.replace })
          }).pipe(Effect.mapError((e) => (e._tag === "SqlError" ? unavailable(request.url)(e) : e)))
        )
        yield* registry.setSetting(SETTINGS_KEY, settings)
        const ready = yield* start(settings)
        const joined = yield* Deferred.await(ready).pipe(
          Effect.timeoutFail({
            duration: JOIN_TIMEOUT,
            onTimeout: () => unavailable(request.url)(`this machine's runner did not take its place within 20 s`)
          }),
          Effect.exit
        )
        if (Exit.isFailure(joined)) {
          // a machine that cannot take its place is not left half a member
          yield* stop
          yield* registry.setSetting(SETTINGS_KEY, null)
          yield* withStore(request.url, (store) => store.remove(settings.name, settings.machineId)).pipe(Effect.ignore)
          return yield* Effect.failCause(joined.cause)
        }
        return yield* state.view.get
      })

    /** Leaves: the runner hands over and unregisters, the machine's rows go; its worlds keep running here. */
    const leave = Effect.gen(function* () {
      const current = yield* Ref.get(member)
      if (Option.isNone(current)) {
        return yield* new ClusterRefused({
          reason: "this machine is not in a cluster",
          hint: "`berth cluster join <postgres url>` makes it one"
        })
      }
      const { settings } = current.value
      yield* stop
      yield* registry.setSetting(SETTINGS_KEY, null)
      yield* withStore(settings.url, (store) => store.remove(settings.name, settings.machineId)).pipe(
        Effect.mapError((e) => (e._tag === "SqlError" ? unavailable(settings.url)(e) : e))
      )
    })

    return { join, leave, resume, stop }
  })
