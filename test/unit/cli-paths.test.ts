import { describe, expect, it } from "@effect/vitest"
import { absolutePath } from "../../src/cli/fast.js"

describe("absolutePath (the lean path's resolution of a path against the CLI's folder)", () => {
  it("makes a relative path absolute and folds . and ..", () => {
    expect(absolutePath(".", "/home/ann/app")).toBe("/home/ann/app")
    expect(absolutePath("..", "/home/ann/app")).toBe("/home/ann")
    expect(absolutePath("../other/./src/", "/home/ann/app")).toBe("/home/ann/other/src")
    expect(absolutePath("sub//dir", "/")).toBe("/sub/dir")
  })

  it("keeps an absolute path, folded, and never climbs above the root", () => {
    expect(absolutePath("/srv/app/../x", "/home/ann")).toBe("/srv/x")
    expect(absolutePath("../../..", "/a")).toBe("/")
  })
})
