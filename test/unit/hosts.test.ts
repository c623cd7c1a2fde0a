import { describe, expect, it } from "@effect/vitest"
import { hostsIn, routedNames, withHosts, withoutHosts } from "../../src/domain/hosts.js"

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

  it("lists only routed names: never a slice's address (a file, a bucket, a remote server) nor a direct URL", () => {
    const service = (name: string, kind: "process" | "slice", url: string | null) => ({ name, kind, url })
    const names = routedNames([
      {
        services: [
          service("web", "process", "http://web.one.shop.localhost:7355"),
          service("api", "process", "https://api.one.shop.test:7356/"),
          service("worker", "process", null),
          service("direct", "process", "http://127.0.0.1:4100"),
          service("local", "process", "http://localhost:4101"),
          service("v6", "process", "http://[::1]:4102"),
          service("db", "slice", "file:///home/u/.berth/slices/shop/shop_one_db.sqlite"),
          service("files", "slice", "s3://shop-one-files/uploads"),
          service("pg", "slice", "postgres://app@db.internal.example:5432/shop_one_pg"),
          service("odd", "process", "not a url")
        ]
      }
    ])
    expect(names).toEqual(["web.one.shop.localhost", "api.one.shop.test"])
  })

  it("never writes a line without a name, nor a name that is not a host name", () => {
    const text = withHosts("", ["", "a.x.localhost", "two words", "b.x.localhost\n10.0.0.1 evil"])
    expect(hostsIn(text)).toEqual(["a.x.localhost"])
    expect(text).not.toMatch(/^127\.0\.0\.1 ?$/m)
  })
})
