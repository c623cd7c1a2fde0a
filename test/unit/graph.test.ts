import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import type { Graph, GraphNode } from "../../src/domain/graph.js"
import { analyse, closure, dependentsClosure, GraphIssue } from "../../src/domain/graph.js"

const RUNS = { numRuns: 500 }

const node = (name: string, ...dependsOn: Array<string>): GraphNode => ({ name, dependsOn })

const graphOf = (nodes: ReadonlyArray<GraphNode>): Graph =>
  Either.getOrThrowWith(analyse(nodes), (issues) => new Error(`unexpected issues: ${JSON.stringify(issues)}`))

const issuesOf = (nodes: ReadonlyArray<GraphNode>): ReadonlyArray<GraphIssue> =>
  Either.match(analyse(nodes), {
    onLeft: (issues) => issues,
    onRight: () => {
      throw new Error("expected issues")
    }
  })

/** web → api → (db, cache), declared dependents first. */
const app = [node("web", "api"), node("api", "db", "cache"), node("db"), node("cache")]

/** Nodes `s0…s(n-1)` where each only depends on lower numbers, declared in a shuffled order. */
const dag = FastCheck.integer({ min: 1, max: 14 }).chain((n) => {
  const ids = Array.from({ length: n }, (_, i) => i)
  return FastCheck.tuple(
    FastCheck.tuple(...ids.map((i) => FastCheck.shuffledSubarray(ids.slice(0, i)))),
    FastCheck.shuffledSubarray(ids, { minLength: n, maxLength: n })
  ).map(([deps, declaration]) => declaration.map((i) => node(`s${i}`, ...deps[i]!.map((d) => `s${d}`))))
})

/** Arbitrary directed graphs without self or duplicate edges, cyclic or not. */
const anyGraph = FastCheck.integer({ min: 1, max: 10 }).chain((n) => {
  const ids = Array.from({ length: n }, (_, i) => i)
  return FastCheck.tuple(...ids.map((i) => FastCheck.shuffledSubarray(ids.filter((j) => j !== i)))).map((deps) =>
    deps.map((out, i) => node(`s${i}`, ...out.map((d) => `s${d}`)))
  )
})

const edgesOf = (nodes: ReadonlyArray<GraphNode>): Map<string, ReadonlyArray<string>> =>
  new Map(nodes.map((n) => [n.name, n.dependsOn]))

/** Independent acyclicity check: repeatedly drop services whose dependencies are all dropped. */
const isAcyclic = (nodes: ReadonlyArray<GraphNode>): boolean => {
  const left = new Set(nodes.map((n) => n.name))
  let progress = true
  while (progress) {
    progress = false
    for (const n of nodes) {
      if (left.has(n.name) && n.dependsOn.every((d) => !left.has(d))) {
        left.delete(n.name)
        progress = true
      }
    }
  }
  return left.size === 0
}

const expectValidGraph = (nodes: ReadonlyArray<GraphNode>, graph: Graph): void => {
  const names = nodes.map((n) => n.name)
  const at = new Map(graph.order.map((name, i) => [name, i]))
  expect([...graph.order].sort()).toEqual([...names].sort())
  for (const n of nodes) {
    for (const dep of n.dependsOn) expect(at.get(dep)!).toBeLessThan(at.get(n.name)!)
  }
  expect(graph.reverse).toEqual([...graph.order].reverse())
  expect(graph.layers.flat().sort()).toEqual([...names].sort())
  const layerOf = new Map(graph.layers.flatMap((layer, k) => layer.map((name) => [name, k] as const)))
  for (const n of nodes) {
    const k = layerOf.get(n.name)!
    const depLayers = n.dependsOn.map((d) => layerOf.get(d)!)
    expect(k).toBe(depLayers.length === 0 ? 0 : Math.max(...depLayers) + 1)
  }
  for (const layer of graph.layers) expect(layer.length).toBeGreaterThan(0)
  for (const n of nodes) {
    expect(graph.dependencies.get(n.name)).toEqual(n.dependsOn)
    expect(graph.dependents.get(n.name)).toEqual(names.filter((m) => edgesOf(nodes).get(m)!.includes(n.name)))
  }
}

const expectRealCycle = (nodes: ReadonlyArray<GraphNode>, path: ReadonlyArray<string>): void => {
  const edges = edgesOf(nodes)
  const declared = nodes.map((n) => n.name)
  expect(path.length).toBeGreaterThanOrEqual(3)
  expect(path[0]).toBe(path[path.length - 1])
  const members = path.slice(0, -1)
  expect(new Set(members).size).toBe(members.length)
  for (let i = 0; i + 1 < path.length; i++) expect(edges.get(path[i]!)).toContain(path[i + 1])
  const earliest = Math.min(...members.map((m) => declared.indexOf(m)))
  expect(path[0]).toBe(declared[earliest])
}

describe("analyse", () => {
  it("orders dependencies first", () => {
    const graph = graphOf(app)
    expect(graph.order).toEqual(["db", "cache", "api", "web"])
    expect(graph.reverse).toEqual(["web", "api", "cache", "db"])
    expect(graph.layers).toEqual([["db", "cache"], ["api"], ["web"]])
    expect(graph.dependencies.get("api")).toEqual(["db", "cache"])
    expect(graph.dependencies.get("db")).toEqual([])
    expect(graph.dependents.get("db")).toEqual(["api"])
    expect(graph.dependents.get("api")).toEqual(["web"])
    expect(graph.dependents.get("web")).toEqual([])
  })

  it("keeps declaration order when it is already a valid start order", () => {
    const graph = graphOf([node("db"), node("cache"), node("api", "db", "cache"), node("web", "api")])
    expect(graph.order).toEqual(["db", "cache", "api", "web"])
  })

  it("starts the earliest-declared ready service first", () => {
    // once c is up, a (declared first) goes before d, which was ready earlier
    const graph = graphOf([node("a", "c"), node("b"), node("c"), node("d")])
    expect(graph.order).toEqual(["b", "c", "a", "d"])
    expect(graph.layers).toEqual([["b", "c", "d"], ["a"]])
  })

  it("puts services in the layer of their longest dependency chain", () => {
    const graph = graphOf([node("c", "a", "b"), node("b", "a"), node("a"), node("z")])
    expect(graph.layers).toEqual([["a", "z"], ["b"], ["c"]])
  })

  it("handles the empty graph and odd service names", () => {
    expect(graphOf([])).toEqual({ order: [], reverse: [], layers: [], dependencies: new Map(), dependents: new Map() })
    const weird = ["$(rm -rf ~)", "; drop", "`x`", '"q"', "🚀", ""]
    const graph = graphOf(weird.map((name, i) => node(name, ...weird.slice(0, i))))
    expect(graph.order).toEqual(weird)
    expect(graph.layers).toEqual(weird.map((name) => [name]))
  })

  it("reports unknown, self and duplicate dependencies with their position", () => {
    const issues = issuesOf([node("web", "api", "apu", "web"), node("api", "db", "db", "db"), node("db", "dbb")])
    expect(issues).toEqual([
      GraphIssue.UnknownDependency({ service: "web", index: 1, name: "apu" }),
      GraphIssue.SelfDependency({ service: "web", index: 2 }),
      GraphIssue.DuplicateDependency({ service: "api", index: 1, name: "db" }),
      GraphIssue.DuplicateDependency({ service: "api", index: 2, name: "db" }),
      GraphIssue.UnknownDependency({ service: "db", index: 0, name: "dbb" })
    ])
  })

  it("does not report a self dependency as a cycle too", () => {
    expect(issuesOf([node("a", "a")])).toEqual([GraphIssue.SelfDependency({ service: "a", index: 0 })])
  })

  it("reports a cycle as a closed path along depends_on", () => {
    const nodes = [node("api", "db"), node("db", "cache"), node("cache", "api")]
    expect(issuesOf(nodes)).toEqual([GraphIssue.Cycle({ path: ["api", "db", "cache", "api"] })])
  })

  it("starts a cycle at its earliest-declared member", () => {
    const nodes = [node("web"), node("db", "cache"), node("api", "db"), node("cache", "api"), node("x", "api")]
    expect(issuesOf(nodes)).toEqual([GraphIssue.Cycle({ path: ["db", "cache", "api", "db"] })])
  })

  it("reports each distinct cycle once, next to the other issues", () => {
    const nodes = [node("a", "b"), node("b", "a", "c", "nope"), node("c", "d"), node("d", "c"), node("e", "a", "c")]
    expect(issuesOf(nodes)).toEqual([
      GraphIssue.UnknownDependency({ service: "b", index: 2, name: "nope" }),
      GraphIssue.Cycle({ path: ["a", "b", "a"] }),
      GraphIssue.Cycle({ path: ["c", "d", "c"] })
    ])
  })

  it("survives deep chains", () => {
    const nodes = Array.from({ length: 20_000 }, (_, i) => node(`s${i}`, ...(i === 0 ? [] : [`s${i - 1}`])))
    expect(graphOf(nodes).layers).toHaveLength(20_000)
    const cyclic = [node("s0", "s19999"), ...nodes.slice(1)]
    const issues = issuesOf(cyclic)
    expect(issues).toHaveLength(1)
    const [issue] = issues
    expect(issue && GraphIssue.$is("Cycle")(issue) ? issue.path.length : 0).toBe(20_001)
  })

  it("derives consistent orders for random DAGs", () => {
    FastCheck.assert(
      FastCheck.property(dag, (nodes) => {
        expectValidGraph(nodes, graphOf(nodes))
      }),
      RUNS
    )
  })

  it("reports a real cycle when a back edge is added to a DAG", () => {
    FastCheck.assert(
      FastCheck.property(dag, FastCheck.nat(), FastCheck.nat(), (nodes, pickTarget, pickSource) => {
        const graph = graphOf(nodes)
        const target = nodes[pickTarget % nodes.length]!.name
        const below = closure(graph, [target]).filter((name) => name !== target)
        FastCheck.pre(below.length > 0)
        // `source` is a transitive dependency of `target`; making it depend on `target` closes a loop
        const source = below[pickSource % below.length]!
        const cyclic = nodes.map((n) => (n.name === source ? node(n.name, ...n.dependsOn, target) : n))
        const issues = issuesOf(cyclic)
        expect(issues.length).toBeGreaterThan(0)
        for (const issue of issues) {
          if (issue._tag !== "Cycle") throw new Error(`unexpected ${issue._tag}`)
          expectRealCycle(cyclic, issue.path)
          expect(issue.path).toContain(source)
        }
      }),
      RUNS
    )
  })

  it("accepts exactly the acyclic graphs and reports only real, distinct cycles", () => {
    FastCheck.assert(
      FastCheck.property(anyGraph, (nodes) => {
        const result = analyse(nodes)
        expect(Either.isRight(result)).toBe(isAcyclic(nodes))
        if (Either.isRight(result)) {
          expectValidGraph(nodes, result.right)
          return
        }
        const keys = result.left.map((issue) => {
          if (issue._tag !== "Cycle") throw new Error(`unexpected ${issue._tag}`)
          expectRealCycle(nodes, issue.path)
          return issue.path.join(">")
        })
        expect(new Set(keys).size).toBe(keys.length)
        expect(analyse(nodes)).toEqual(result)
      }),
      RUNS
    )
  })
})

describe("closure", () => {
  const graph = graphOf(app)

  it("adds transitive dependencies, in start order", () => {
    expect(closure(graph, ["web"])).toEqual(["db", "cache", "api", "web"])
    expect(closure(graph, ["api"])).toEqual(["db", "cache", "api"])
    expect(closure(graph, ["cache", "db"])).toEqual(["db", "cache"])
    expect(closure(graph, [])).toEqual([])
  })

  it("ignores names that are not services", () => {
    expect(closure(graph, ["nope", "db"])).toEqual(["db"])
  })

  it("is closed under dependencies and follows the start order", () => {
    FastCheck.assert(
      FastCheck.property(dag, FastCheck.array(FastCheck.nat()), (nodes, picks) => {
        const g = graphOf(nodes)
        const roots = picks.map((p) => nodes[p % nodes.length]!.name)
        const result = closure(g, roots)
        const set = new Set(result)
        for (const root of roots) expect(set.has(root)).toBe(true)
        for (const name of result) for (const dep of g.dependencies.get(name)!) expect(set.has(dep)).toBe(true)
        expect(result).toEqual(g.order.filter((name) => set.has(name)))
      }),
      RUNS
    )
  })
})

describe("dependentsClosure", () => {
  const graph = graphOf(app)

  it("adds everything that transitively depends on the roots, in start order", () => {
    expect(dependentsClosure(graph, ["db"])).toEqual(["db", "api", "web"])
    expect(dependentsClosure(graph, ["web"])).toEqual(["web"])
    expect(dependentsClosure(graph, ["cache", "db"])).toEqual(["db", "cache", "api", "web"])
    expect(dependentsClosure(graph, ["nope"])).toEqual([])
  })

  it("is closed under dependents and follows the start order", () => {
    FastCheck.assert(
      FastCheck.property(dag, FastCheck.array(FastCheck.nat()), (nodes, picks) => {
        const g = graphOf(nodes)
        const roots = picks.map((p) => nodes[p % nodes.length]!.name)
        const result = dependentsClosure(g, roots)
        const set = new Set(result)
        for (const root of roots) expect(set.has(root)).toBe(true)
        for (const name of result) for (const dep of g.dependents.get(name)!) expect(set.has(dep)).toBe(true)
        expect(result).toEqual(g.order.filter((name) => set.has(name)))
      }),
      RUNS
    )
  })
})
