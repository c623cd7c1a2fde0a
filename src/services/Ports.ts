/**
 * The machine-global port allocator. Every port of a world is chosen before any of its processes starts: a stable
 * preference (a hash of project, world, service and port name) then linear probing (`domain/ports.ts`), skipping
 * ports leased to any world and ports the OS will not let us bind on 127.0.0.1 and ::1. Leases live in the registry
 * and persist through `down`; before reuse each is re-checked, and one taken from outside meanwhile is replaced (with
 * an event naming the holder) — never two processes on one port. One allocation runs at a time.
 */
import * as net from "node:net"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { defaultPortRange, type PortRange, planPorts, portKey } from "../domain/ports.js"
import { type DiskFull, type InternalError, PortRangeExhausted } from "../domain/errors.js"
import { Platform, type PlatformService } from "./Platform.js"
import { Registry } from "./Registry.js"

const RANGE_SETTING = "ports.range"

/** Can a listener bind `port` on `host` right now? Hosts without that address family (no IPv6) do not count. */
/** Whether this process could listen on `port` of `host` now (an address the machine lacks counts as free). */
export const canBindOn = (port: number, host: string) =>
  Effect.async<boolean>((resume) => {
    const server = net.createServer()
    server.unref()
    server.once("error", (e: NodeJS.ErrnoException) => {
      resume(Effect.succeed(e.code === "EADDRNOTAVAIL" || e.code === "EAFNOSUPPORT"))
    })
    server.listen({ port, host, exclusive: true }, () => {
      server.close(() => resume(Effect.succeed(true)))
    })
  })

export const canBind = (port: number) =>
  Effect.zipWith(canBindOn(port, "127.0.0.1"), canBindOn(port, "::1"), (a, b) => a && b, { concurrent: true })

/**
 * Who listens on `port`, as the Platform tells it: `pid N (command)`, or that someone berth cannot see does;
 * undefined when nothing is seen listening (the port may be bound without a listener, or the platform cannot tell).
 */
export const portHolder = (platform: PlatformService, port: number): Effect.Effect<string | undefined> =>
  Effect.gen(function* () {
    const { listening } = yield* platform.portListeners(port, [])
    if (listening === undefined || listening.length === 0) return undefined
    const holder = yield* platform.socketHolder(listening, [])
    return holder === undefined ? "a process berth cannot see" : `pid ${holder.pid} (${holder.command})`
  })

export interface PortRequest {
  readonly service: string
  /** `""` for the service's main port */
  readonly name: string
}

export interface Assigned extends PortRequest {
  readonly port: number
}

/** A lease that had to move: something outside berth took its port. */
export interface ReplacedLease {
  readonly service: string
  /** the port's name ("" for the service's main port) */
  readonly name: string
  readonly port: number
  /** who holds the port now, where the Platform tells */
  readonly holder: string | undefined
}

export interface PortsService {
  /** The range ports are leased from (the `ports.range` setting, or the default). */
  readonly range: () => Effect.Effect<PortRange, InternalError | DiskFull>
  readonly setRange: (r: PortRange) => Effect.Effect<void, InternalError | DiskFull>
  /**
   * Leases every requested port of a world, keeping the ones it already holds when they are still free. `replaced`
   * lists leases that had to move because something outside berth took the port.
   */
  readonly allocate: (
    world: { readonly id: number; readonly project: string; readonly name: string },
    requests: ReadonlyArray<PortRequest>
  ) => Effect.Effect<
    { readonly assigned: ReadonlyArray<Assigned>; readonly replaced: ReadonlyArray<ReplacedLease> },
    PortRangeExhausted | InternalError | DiskFull
  >
  /** Gives back every lease of the world. */
  readonly release: (worldId: number) => Effect.Effect<void, InternalError | DiskFull>
}

export class Ports extends Context.Tag("berth/Ports")<Ports, PortsService>() {}

const make = Effect.gen(function* () {
  const registry = yield* Registry
  const platform = yield* Platform
  const lock = yield* Effect.makeSemaphore(1)

  const range = Effect.fn("Ports.range")(function* () {
    const stored = yield* registry.getSetting(RANGE_SETTING)
    const r = stored as PortRange | undefined
    return r !== undefined && typeof r.from === "number" && typeof r.to === "number" ? r : defaultPortRange
  })

  const setRange = (r: PortRange) => registry.setSetting(RANGE_SETTING, r)

  /**
   * Leases every requested port of a world, keeping the ones it already holds when they are still free.
   * `replaced` lists leases that had to move because something outside berth took the port.
   */
  const allocate = Effect.fn("Ports.allocate")(function* (
    world: { readonly id: number; readonly project: string; readonly name: string },
    requests: ReadonlyArray<PortRequest>
  ) {
    return yield* lock.withPermits(1)(
      Effect.gen(function* () {
        const r = yield* range()
        const all = yield* registry.leases()
        const key = (q: PortRequest) =>
          portKey({ project: world.project, world: world.name, service: q.service, name: q.name })
        const existing = new Map<string, number>()
        const taken = new Set<number>()
        for (const lease of all) {
          if (lease.worldId === world.id) existing.set(key(lease), lease.port)
          else taken.add(lease.port)
        }
        const replaced: Array<ReplacedLease> = []
        for (;;) {
          const plan = planPorts(requests.map(key), r, taken, existing)
          if (Either.isLeft(plan)) {
            return yield* new PortRangeExhausted({ from: r.from, to: r.to, wanted: plan.left.wanted })
          }
          let retry = false
          // every port proven at once: a world's ports are independent, and each proof waits on the event loop
          const bindable = yield* Effect.forEach(requests, (q) => canBind(plan.right.get(key(q))!), {
            concurrency: "unbounded"
          })
          for (const [i, q] of requests.entries()) {
            const port = plan.right.get(key(q))!
            if (bindable[i]) continue
            // taken from outside: never hand it out; a lease we held moves elsewhere
            taken.add(port)
            if (existing.get(key(q)) === port) {
              existing.delete(key(q))
              replaced.push({ service: q.service, name: q.name, port, holder: yield* portHolder(platform, port) })
            }
            retry = true
          }
          if (retry) continue
          const assigned: Array<Assigned> = requests.map((q) => ({ ...q, port: plan.right.get(key(q))! }))
          // a world coming up again holds the same leases: nothing to write (and no change for the routes to follow)
          const same = assigned.length === existing.size && assigned.every((a) => existing.get(key(a)) === a.port)
          if (!same) {
            yield* registry.setLeases(
              world.id,
              assigned.map((a) => ({ port: a.port, worldId: world.id, service: a.service, name: a.name }))
            )
          }
          return { assigned, replaced }
        }
      })
    )
  })

  const release = (worldId: number) => lock.withPermits(1)(registry.releaseLeases(worldId))

  return { range, setRange, allocate, release } satisfies PortsService
})

export const PortsLive: Layer.Layer<Ports, never, Registry | Platform> = Layer.effect(Ports, make)
