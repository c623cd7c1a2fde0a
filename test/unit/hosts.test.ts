import { describe, expect, it } from "@effect/vitest"
import { hostsIn, withHosts, withoutHosts } from "../../src/domain/hosts.js"

describe("the hosts file block", () => {
  it("replaces its own block, sorted and once per name, and leaves every other line", () => {
    const base = "127.0.0.1 localhost\n# mine\n10.0.0.1 nas\n"
    const once = withHosts(base, ["b.x.localhost", "A.x.localhost", "b.x.localhost"])
    expect(hostsIn(once)).toEqual(["a.x.localhost", "b.x.localhost"])
    const twice = withHosts(once, ["c.x.localhost"])
    expect(hostsIn(twice)).toEqual(["c.x.localhost"])
    expect(twice.split("# >>> berth routes").length).toBe(2)
    expect(withoutHosts(twice)).toBe(base)
    // no routes: no block at all
    expect(withHosts(twice, [])).toBe(base)
  })
})
