import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as Model from "../../src/domain/config/model.js"
import { parseConfig } from "../../src/domain/config/parse.js"
import { coordinates, identityVariables, launch, withLocalBins } from "../../src/domain/coordinates.js"

const world = { project: "shop", name: "login-fix", slug: "login-fix", path: "/src/shop-login-fix" }

describe("identityVariables", () => {
  it("is what a service process gets besides PORT, its config's env and the user's", () => {
    const parsed = parseConfig(
      `[services.api]\ncmd = "node api.js"\nurl = "api"\nenv = { MODE = "dev" }\n`,
      "berth.toml"
    )
    if (Either.isLeft(parsed)) return expect.fail(JSON.stringify(parsed.left))
    const api = Model.processes(parsed.right.config)[0]!
    const coords = coordinates(parsed.right.config, new Map([["api", { main: 4100, named: {} }]]), new Map())
    const { env } = launch(api, world, coords, { HOME: "/home/u", BERTH_WORLD: "stale" }, new Map())
    expect(env).toEqual({
      HOME: "/home/u",
      PATH: withLocalBins(undefined, world.path),
      MODE: "dev",
      PORT: "4100",
      ...identityVariables(world, "api")
    })
  })

  it("names the world and its project, and the service only for a service", () => {
    expect(identityVariables(world, "api")).toEqual({
      BERTH_WORLD: "login-fix",
      BERTH_PROJECT: "shop",
      BERTH_SERVICE: "api"
    })
    expect(identityVariables(world)).toEqual({ BERTH_WORLD: "login-fix", BERTH_PROJECT: "shop" })
  })
})

describe("a process's PATH", () => {
  it("puts node_modules/.bin of the service's folder and each folder above it first, deepest first", () => {
    expect(withLocalBins("/usr/bin:/bin", "/w")).toBe("/w/node_modules/.bin:/usr/bin:/bin")
    expect(withLocalBins("/usr/bin", "/w", "apps/web")).toBe(
      "/w/apps/web/node_modules/.bin:/w/apps/node_modules/.bin:/w/node_modules/.bin:/usr/bin"
    )
  })

  it("reads the folder as a path: dots and slashes do not make entries of their own", () => {
    expect(withLocalBins("/bin", "/w", "./web/")).toBe("/w/web/node_modules/.bin:/w/node_modules/.bin:/bin")
    expect(withLocalBins("/bin", "/w", "web/../api")).toBe("/w/api/node_modules/.bin:/w/node_modules/.bin:/bin")
  })

  it("keeps no empty entry when there was no PATH (an empty entry means the current folder)", () => {
    expect(withLocalBins(undefined, "/w")).toBe("/w/node_modules/.bin")
    expect(withLocalBins("", "/w")).toBe("/w/node_modules/.bin")
  })
})
