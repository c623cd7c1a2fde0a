/**
 * What the proxy counts for the daemon: requests per route (the metrics), when each world last saw one
 * (`idle_suspend`'s clock), and when each service last answered one (a passed liveness probe: the service's watcher
 * skips a probe the proxy has just made for it). `seen` and `answered` run on every proxied request, so they are O(1)
 * and allocate nothing: each target gets its counter when its table is made, and counters outlive tables, so a route
 * keeps its count across rebuilds.
 */
import type { RouteTarget } from "../../domain/routes.js"

interface WorldClock {
  /** epoch ms of the last request; 0: none since the daemon started */
  last: number
}

interface ServiceClock {
  /** epoch ms of the service's last answer through the proxy; 0: none since the daemon started */
  answered: number
}

interface RouteCounter {
  count: number
  readonly world: WorldClock | undefined
  readonly service: ServiceClock | undefined
}

const routeKey = (target: RouteTarget): string => `${target.service}.${target.world}.${target.project}`
const serviceKey = (worldId: number, label: string): string => `${worldId}/${label}`

export class Traffic {
  private readonly routes = new Map<string, RouteCounter>()
  private readonly worlds = new Map<number, WorldClock>()
  /** by world id and the service's host label */
  private readonly services = new Map<string, ServiceClock>()
  private readonly byTarget = new WeakMap<RouteTarget, RouteCounter>()

  /** Gives each target its counter; called when a table is made, so that `seen` only looks one up. */
  prepare(targets: Iterable<RouteTarget>): void {
    for (const target of targets) this.counterOf(target)
  }

  /** Counts a request routed to `target`. */
  readonly seen = (target: RouteTarget): void => {
    const counter = this.byTarget.get(target) ?? this.counterOf(target)
    counter.count++
    if (counter.world !== undefined) counter.world.last = Date.now()
  }

  /** Notes an answer from `target`'s service (any status below 500, or a protocol switch): it is alive. */
  readonly answered = (target: RouteTarget): void => {
    const counter = this.byTarget.get(target) ?? this.counterOf(target)
    if (counter.service !== undefined) counter.service.answered = Date.now()
  }

  /** Requests per route (`service.world.project`) since the daemon started. */
  requests(): Map<string, number> {
    const out = new Map<string, number>()
    for (const [key, counter] of this.routes) if (counter.count > 0) out.set(key, counter.count)
    return out
  }

  /** When a world's routes last saw a request; undefined: none since the daemon started. */
  lastRequest(worldId: number): number | undefined {
    const last = this.worlds.get(worldId)?.last ?? 0
    return last === 0 ? undefined : last
  }

  /** When a service (by its host label) last answered through the proxy; undefined: not since the daemon started. */
  lastAnswer(worldId: number, label: string): number | undefined {
    const last = this.services.get(serviceKey(worldId, label))?.answered ?? 0
    return last === 0 ? undefined : last
  }

  private counterOf(target: RouteTarget): RouteCounter {
    const known = this.byTarget.get(target)
    if (known !== undefined) return known
    const key = routeKey(target)
    let counter = this.routes.get(key)
    const id = target.worldId
    if (counter === undefined || (id !== undefined && counter.world !== this.worlds.get(id))) {
      let world: WorldClock | undefined
      let service: ServiceClock | undefined
      if (id !== undefined) {
        world = this.worlds.get(id)
        if (world === undefined) {
          world = { last: 0 }
          this.worlds.set(id, world)
        }
        const key = serviceKey(id, target.service)
        service = this.services.get(key)
        if (service === undefined) {
          service = { answered: 0 }
          this.services.set(key, service)
        }
      }
      // a route whose world was made again (same names, a new id) keeps its count
      counter = { count: counter?.count ?? 0, world, service }
      this.routes.set(key, counter)
    }
    this.byTarget.set(target, counter)
    return counter
  }
}
