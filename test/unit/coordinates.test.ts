import { describe, expect, it } from "@effect/vitest"
import { withLocalBins } from "../../src/domain/coordinates.js"

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
