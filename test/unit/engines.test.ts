import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import * as semver from "semver"

interface Locked {
  readonly version?: string
  readonly dev?: boolean
  readonly optional?: boolean
  readonly peer?: boolean
  readonly engines?: { readonly node?: string } | ReadonlyArray<string>
}

const root = new URL("../../", import.meta.url)
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as { engines: { node: string } }
const lock = JSON.parse(readFileSync(new URL("package-lock.json", root), "utf8")) as {
  packages: Record<string, Locked>
}

/** the oldest Node 20 that berth's own tools need to build and test it (Vite 7 asks for 20.19) */
const DEVELOPMENT_NODE = "20.19.0"

const nodeRange = (entry: Locked): string | undefined =>
  entry.engines !== undefined && !Array.isArray(entry.engines) && "node" in entry.engines
    ? entry.engines.node
    : undefined

const locked = Object.entries(lock.packages).filter(([path]) => path !== "")

describe("the Node versions berth runs and builds on", () => {
  it("package.json says Node 20 or newer", () => {
    expect(pkg.engines.node).toBe(">=20")
  })

  it("every locked package accepts the Node 20 berth is built on, so npm ci never warns EBADENGINE", () => {
    const refusing = locked.flatMap(([path, entry]) => {
      const range = nodeRange(entry)
      return range === undefined || semver.satisfies(DEVELOPMENT_NODE, range) ? [] : [`${path} (node ${range})`]
    })
    expect(refusing).toEqual([])
  })

  it("what a user's install brings (the SQLite binding and what it needs) accepts the oldest Node package.json allows", () => {
    const floor = semver.minVersion(pkg.engines.node)?.version ?? "20.0.0"
    const installed = locked.filter(([, entry]) => entry.dev !== true && entry.peer !== true)
    const refusing = installed.flatMap(([path, entry]) => {
      const range = nodeRange(entry)
      return range === undefined || semver.satisfies(floor, range) ? [] : [`${path} (node ${range})`]
    })
    expect(refusing).toEqual([])
  })
})
