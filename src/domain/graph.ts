/**
 * The `depends_on` graph of a world's services: validation (unknown, self, duplicate references and cycles, all
 * reported at once so a user can fix the file in one go) and the derived start/stop orders.
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"

export interface GraphNode {
  readonly name: string
  readonly dependsOn: ReadonlyArray<string>
}

/** Problems with `depends_on`; `index` is the position inside that service's `depends_on` list. */
export type GraphIssue = Data.TaggedEnum<{
  UnknownDependency: { readonly service: string; readonly index: number; readonly name: string }
  SelfDependency: { readonly service: string; readonly index: number }
  DuplicateDependency: { readonly service: string; readonly index: number; readonly name: string }
  /** Follows `depends_on` edges; starts and ends with the earliest-declared member, e.g. `["api", "db", "api"]`. */
  Cycle: { readonly path: ReadonlyArray<string> }
}>

export const GraphIssue = Data.taggedEnum<GraphIssue>()

export interface Graph {
  /** Start order: dependencies first; among services that are ready, the earliest declared goes first. */
  readonly order: ReadonlyArray<string>
  /** Stop order: `order` reversed, so nothing is stopped while something still depending on it runs. */
  readonly reverse: ReadonlyArray<string>
  /** Layer k holds the services whose longest dependency chain has length k (in declaration order). */
  readonly layers: ReadonlyArray<ReadonlyArray<string>>
  /** Direct dependencies of each service, in `depends_on` order. */
  readonly dependencies: ReadonlyMap<string, ReadonlyArray<string>>
  /** Direct dependents of each service, in declaration order. */
  readonly dependents: ReadonlyMap<string, ReadonlyArray<string>>
}

/**
 * Validates the graph and derives its orders. Services are assumed to have distinct names (config keys); should a
 * name repeat anyway, its first declaration wins.
 */
export const analyse = (nodes: ReadonlyArray<GraphNode>): Either.Either<Graph, ReadonlyArray<GraphIssue>> => {
  const position = new Map<string, number>()
  const services: Array<GraphNode> = []
  for (const node of nodes) {
    if (position.has(node.name)) continue
    position.set(node.name, services.length)
    services.push(node)
  }

  const issues: Array<GraphIssue> = []
  // edges[i] = positions of the distinct, known, non-self dependencies of services[i]
  const edges: Array<Array<number>> = services.map((node) => {
    const seen = new Set<number>()
    const out: Array<number> = []
    node.dependsOn.forEach((name, index) => {
      const target = position.get(name)
      if (name === node.name) {
        issues.push(GraphIssue.SelfDependency({ service: node.name, index }))
      } else if (target === undefined) {
        issues.push(GraphIssue.UnknownDependency({ service: node.name, index, name }))
      } else if (seen.has(target)) {
        issues.push(GraphIssue.DuplicateDependency({ service: node.name, index, name }))
      } else {
        seen.add(target)
        out.push(target)
      }
    })
    return out
  })

  for (const cycle of findCycles(edges)) {
    issues.push(GraphIssue.Cycle({ path: cycle.map((i) => services[i]!.name) }))
  }
  if (issues.length > 0) return Either.left(issues)

  const names = services.map((node) => node.name)
  const order = topologicalOrder(edges)
  const depth = new Array<number>(services.length).fill(0)
  for (const i of order) {
    for (const dep of edges[i]!) depth[i] = Math.max(depth[i]!, depth[dep]! + 1)
  }
  const layers: Array<Array<string>> = []
  services.forEach((node, i) => {
    const k = depth[i]!
    while (layers.length <= k) layers.push([])
    layers[k]!.push(node.name)
  })

  const dependencies = new Map<string, ReadonlyArray<string>>()
  const dependents = new Map<string, Array<string>>(names.map((name) => [name, []]))
  services.forEach((node, i) => {
    const direct = edges[i]!.map((dep) => names[dep]!)
    dependencies.set(node.name, direct)
    for (const dep of direct) dependents.get(dep)!.push(node.name)
  })

  const start = order.map((i) => names[i]!)
  return Either.right({
    order: start,
    reverse: [...start].reverse(),
    layers,
    dependencies,
    dependents
  })
}

/**
 * Elementary cycles found through DFS back edges (not necessarily every cycle, but at least one whenever the graph
 * is cyclic). Each is rotated to start at its earliest-declared member and reported once, closed (first = last).
 */
const findCycles = (edges: ReadonlyArray<ReadonlyArray<number>>): ReadonlyArray<ReadonlyArray<number>> => {
  const WHITE = 0
  const GREY = 1
  const BLACK = 2
  const colour = new Array<number>(edges.length).fill(WHITE)
  const cycles: Array<ReadonlyArray<number>> = []
  const seen = new Set<string>()
  // iterative DFS: long dependency chains must not overflow the call stack
  for (let root = 0; root < edges.length; root++) {
    if (colour[root] !== WHITE) continue
    const path: Array<number> = [root]
    const next: Array<number> = [0]
    colour[root] = GREY
    while (path.length > 0) {
      const top = path.length - 1
      const node = path[top]!
      const out = edges[node]!
      const k = next[top]!
      if (k >= out.length) {
        colour[node] = BLACK
        path.pop()
        next.pop()
        continue
      }
      next[top] = k + 1
      const target = out[k]!
      if (colour[target] === WHITE) {
        colour[target] = GREY
        path.push(target)
        next.push(0)
      } else if (colour[target] === GREY) {
        const members = path.slice(path.indexOf(target))
        const first = members.indexOf(Math.min(...members))
        const rotated = [...members.slice(first), ...members.slice(0, first)]
        const key = rotated.join(",")
        if (!seen.has(key)) {
          seen.add(key)
          cycles.push([...rotated, rotated[0]!])
        }
      }
    }
  }
  return cycles
}

/** Kahn's algorithm that always takes the earliest-declared ready service, so an already sorted file keeps its order. */
const topologicalOrder = (edges: ReadonlyArray<ReadonlyArray<number>>): ReadonlyArray<number> => {
  const waitingOn = edges.map((out) => out.length)
  const unblocks: Array<Array<number>> = edges.map(() => [])
  edges.forEach((out, i) => {
    for (const dep of out) unblocks[dep]!.push(i)
  })
  // ready positions kept sorted ascending; graphs are small, so a sorted array beats a heap in clarity
  const ready = waitingOn.flatMap((count, i) => (count === 0 ? [i] : []))
  const order: Array<number> = []
  while (ready.length > 0) {
    const i = ready.shift()!
    order.push(i)
    for (const dependent of unblocks[i]!) {
      waitingOn[dependent] = waitingOn[dependent]! - 1
      if (waitingOn[dependent] === 0) {
        const at = ready.findIndex((r) => r > dependent)
        ready.splice(at === -1 ? ready.length : at, 0, dependent)
      }
    }
  }
  return order
}

const reach = (
  graph: Graph,
  roots: Iterable<string>,
  step: ReadonlyMap<string, ReadonlyArray<string>>
): ReadonlyArray<string> => {
  const found = new Set<string>()
  const stack: Array<string> = []
  for (const root of roots) {
    if (step.has(root) && !found.has(root)) {
      found.add(root)
      stack.push(root)
    }
  }
  while (stack.length > 0) {
    for (const next of step.get(stack.pop()!) ?? []) {
      if (!found.has(next)) {
        found.add(next)
        stack.push(next)
      }
    }
  }
  return graph.order.filter((name) => found.has(name))
}

/** `roots` and everything they transitively depend on, in start order: what `up <service>` must start. */
export const closure = (graph: Graph, roots: Iterable<string>): ReadonlyArray<string> =>
  reach(graph, roots, graph.dependencies)

/** `roots` and everything that transitively depends on them, in start order: what a restart must bounce. */
export const dependentsClosure = (graph: Graph, roots: Iterable<string>): ReadonlyArray<string> =>
  reach(graph, roots, graph.dependents)
