import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import { analyse, type GraphNode } from "../../src/domain/graph.js"
import { covers, type Selection, selectedServices, selectsAll, widen } from "../../src/domain/selection.js"

const node = (name: string, ...dependsOn: Array<string>): GraphNode => ({ name, dependsOn })
const graph = Either.getOrThrow(
  analyse([node("web", "api"), node("api", "db"), node("db"), node("worker", "db"), node("docs")])
)
const config = {
  file: "berth.toml",
  graph,
  services: [
    { name: "web", groups: ["front"] },
    { name: "api", groups: ["back"] },
    { name: "db", groups: [] },
    { name: "worker", groups: ["back"] },
    { name: "docs", groups: [] }
  ]
}
const sel = (services: ReadonlyArray<string>, groups: ReadonlyArray<string> = []): Selection => ({ services, groups })

describe("selectedServices", () => {
  it("starts everything when nothing is named", () => {
    expect(selectedServices(config, sel([]))).toEqual(Either.right(graph.order))
  })

  it("starts what is named and what it depends on, in start order", () => {
    expect(selectedServices(config, sel(["web"]))).toEqual(Either.right(["db", "api", "web"]))
    expect(selectedServices(config, sel([], ["back"]))).toEqual(Either.right(["db", "api", "worker"]))
  })

  it("refuses an unknown service and a group no service is in, naming what there is", () => {
    const service = Either.flip(selectedServices(config, sel(["wbe"])))
    expect(Either.getOrThrow(service)._tag).toBe("UnknownService")
    expect(Either.getOrThrow(service).message).toBe(
      'no service "wbe" in berth.toml; services: web, api, db, worker, docs'
    )
    const group = Either.flip(selectedServices(config, sel([], ["frnt"])))
    expect(Either.getOrThrow(group)._tag).toBe("UnknownGroup")
    expect(Either.getOrThrow(group).message).toBe('no service is in group "frnt" in berth.toml; groups: back, front')
  })
})

describe("widen", () => {
  const names = FastCheck.uniqueArray(FastCheck.constantFrom("web", "api", "db", "worker", "docs"), { maxLength: 3 })
  const groups = FastCheck.uniqueArray(FastCheck.constantFrom("front", "back"), { maxLength: 2 })
  const selection = FastCheck.record({ services: names, groups })
  const started = (s: Selection) => new Set(Either.getOrThrow(selectedServices(config, s)))

  it("starts what either selection starts, and no more", () => {
    FastCheck.assert(
      FastCheck.property(selection, selection, (a, b) => {
        const both = started(widen(a, b))
        const either = new Set([...started(a), ...started(b)])
        expect(both).toEqual(selectsAll(a) || selectsAll(b) ? new Set(graph.order) : either)
      })
    )
  })

  it("is idempotent, and a selection of everything absorbs any other", () => {
    FastCheck.assert(
      FastCheck.property(selection, (a) => {
        expect(started(widen(a, a))).toEqual(started(a))
        expect(selectsAll(widen(a, sel([])))).toBe(true)
        expect(selectsAll(widen(sel([]), a))).toBe(true)
      })
    )
  })
})

describe("covers", () => {
  it("says whether a selection already starts all another names", () => {
    expect(covers(sel([]), sel(["web"]))).toBe(true)
    expect(covers(sel(["web", "api"]), sel(["api"]))).toBe(true)
    expect(covers(sel(["api"]), sel(["web"]))).toBe(false)
    expect(covers(sel(["api"]), sel([]))).toBe(false)
    expect(covers(sel([], ["back"]), sel([], ["back"]))).toBe(true)
  })
})
