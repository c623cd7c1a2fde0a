/**
 * What the proxy counts for the daemon: requests per route (the metrics) and when each world last saw one
 * (`idle_suspend`'s clock). `seen` runs on every proxied request, so it is O(1) and allocates nothing: each target
 * gets its counter when its table is made, and counters outlive tables, so a route keeps its count across rebuilds.
 */
import type { RouteTarget } from "../../domain/routes.js"

interface WorldClock {
  /** epoch ms of the last request; 0: none since the daemon started */
  last: number
}

interface RouteCounter {
  count: number
  readonly world: WorldClock | undefined
}

const routeKey = (target: RouteTarget): string => `${target.service}.${target.world}.${target.project}`

export class Traffic {
  private readonly routes = new Map<string, RouteCounter>()
  private readonly worlds = new Map<number, WorldClock>()
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

  private counterOf(target: RouteTarget): RouteCounter {
    const known = this.byTarget.get(target)
    if (known !== undefined) return known
    const key = routeKey(target)
    let counter = this.routes.get(key)
    const id = target.worldId
    if (counter === undefined || (id !== undefined && counter.world !== this.worlds.get(id))) {
      let world: WorldClock | undefined
      if (id !== undefined) {
        world = this.worlds.get(id)
        if (world === undefined) {
          world = { last: 0 }
          this.worlds.set(id, world)
        }
      }
      // a route whose world was made again (same names, a new id) keeps its count
      counter = { count: counter?.count ?? 0, world }
      this.routes.set(key, counter)
    }
    this.byTarget.set(target, counter)
    return counter
  }
}
