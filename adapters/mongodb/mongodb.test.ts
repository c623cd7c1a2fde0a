import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { MongoNetworkError, MongoServerError } from "mongodb"
import { closedPort } from "../conformance.js"
import { scopeOf, sliceMaker } from "../testing.js"
import { classify, mongodbAdapter, serverOf, sliceUrl } from "./index.js"

const sliceOf = sliceMaker({ adapter: "mongodb", service: "db", world: "login", owner: "t1" })

describe("mongodbAdapter without a server", () => {
  it.live("resolves to the slice's database, authenticating where the admin URL did", () =>
    Effect.gen(function* () {
      expect(yield* mongodbAdapter.resolve(sliceOf("acme_db"))).toBe("mongodb://127.0.0.1:27017/acme_db")
      expect(
        yield* mongodbAdapter.resolve(sliceOf("acme_db", { adminUrl: "mongodb://root:p%40ss@db.local:27018/admin" }))
      ).toBe("mongodb://root:p%40ss@db.local:27018/acme_db?authSource=admin")
      // no database in the admin URL: the driver's default, admin
      expect(yield* mongodbAdapter.resolve(sliceOf("acme_db", { adminUrl: "mongodb://root:pw@db.local" }))).toBe(
        "mongodb://root:pw@db.local/acme_db?authSource=admin"
      )
      // an explicit authSource and other options are kept
      expect(
        yield* mongodbAdapter.resolve(
          sliceOf("acme_db", {
            adminUrl: "mongodb+srv://u:pw@cluster.example.net/ops?authSource=users&retryWrites=true"
          })
        )
      ).toBe("mongodb+srv://u:pw@cluster.example.net/acme_db?authSource=users&retryWrites=true")
    })
  )

  it("builds a slice URL from an admin URL that names its own auth database", () => {
    expect(sliceUrl(new URL("mongodb://a:b@h:1/berth_auth"), "x_y")).toBe("mongodb://a:b@h:1/x_y?authSource=berth_auth")
  })

  it.live("refuses admin URLs of other schemes, and reserved names, without echoing the URL", () =>
    Effect.gen(function* () {
      const wrong = yield* Effect.flip(serverOf("postgres://u:s3cret@h/db"))
      expect(wrong.kind).toBe("invalid")
      expect(wrong.message).not.toContain("s3cret")
      for (const name of ["admin", "local", "config", "berth_meta"]) {
        expect((yield* Effect.flip(mongodbAdapter.provision(sliceOf(name)))).kind).toBe("invalid")
      }
      expect((yield* Effect.flip(mongodbAdapter.resolve(sliceOf("a".repeat(64))))).kind).toBe("invalid")
    })
  )

  it("classifies driver errors", () => {
    const at = "127.0.0.1:27017"
    expect(classify(at, "x", new MongoNetworkError("connection reset")).kind).toBe("unreachable")
    expect(classify(at, "x", Object.assign(new Error("refused"), { code: "ECONNREFUSED" })).kind).toBe("unreachable")
    expect(classify(at, "x", new MongoServerError({ message: "Authentication failed.", code: 18 })).kind).toBe(
      "authentication"
    )
    expect(classify(at, "x", new MongoServerError({ message: "not authorized", code: 13 })).kind).toBe("grant")
    expect(classify(at, "x", new MongoServerError({ message: "boom", code: 2 })).kind).toBe("failed")
  })

  it.live("a closed port is unreachable within seconds, named, the password never shown", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(() => closedPort())
      const adminUrl = `mongodb://root:s3cret@127.0.0.1:${port}/admin`
      const slice = sliceOf("acme_db", { adminUrl })
      const started = Date.now()
      for (const verb of [
        mongodbAdapter.provision(slice),
        mongodbAdapter.teardown(slice),
        mongodbAdapter.clone(sliceOf("acme_src", { adminUrl }), slice),
        mongodbAdapter.list(scopeOf(slice))
      ]) {
        const error = yield* Effect.flip(verb)
        expect(error.kind).toBe("unreachable")
        expect(error.message).toContain(`127.0.0.1:${port}`)
        expect(error.message).not.toContain("s3cret")
      }
      expect(Date.now() - started).toBeLessThan(20_000)
    })
  )
})
