import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { closedPort } from "../conformance.js"
import { scopeOf, sliceMaker } from "../testing.js"
import { classify, copyableSettings, elasticsearchAdapter, prefixOf, retarget, serverOf } from "./index.js"

const sliceOf = sliceMaker({ adapter: "opensearch", service: "search", world: "login", owner: "t1" })

describe("elasticsearchAdapter without a server", () => {
  it.live("resolves to the admin URL with the slice's prefix, credentials kept", () =>
    Effect.gen(function* () {
      expect(yield* elasticsearchAdapter.resolve(sliceOf("acme_search"))).toBe(
        "http://127.0.0.1:9200/?prefix=acme_search-"
      )
      expect(
        yield* elasticsearchAdapter.resolve(
          sliceOf("acme_search", { adminUrl: "https://elastic:p%40ss@es.local:9243/proxy" })
        )
      ).toBe("https://elastic:p%40ss@es.local:9243/proxy?prefix=acme_search-")
    })
  )

  it("gives no slice's prefix inside another's", () => {
    expect(prefixOf("a")).toBe("a-")
    expect(prefixOf("a_b").startsWith(prefixOf("a"))).toBe(false)
  })

  it.live("reaches the REST root under the admin URL's path, without credentials in it", () =>
    Effect.gen(function* () {
      const server = yield* serverOf("https://u:s3cret@es.local/proxy")
      expect(server.endpoint).toBe("https://es.local/proxy/")
      expect(server.location).toBe("es.local:443")
      expect(server.authorization).toBe(`Basic ${Buffer.from("u:s3cret").toString("base64")}`)
      const wrong = yield* Effect.flip(serverOf("mongodb://u:s3cret@h"))
      expect(wrong.kind).toBe("invalid")
      expect(wrong.message).not.toContain("s3cret")
      expect((yield* Effect.flip(elasticsearchAdapter.provision(sliceOf("berth_slices")))).kind).toBe("invalid")
    })
  )

  it("copies an index's settings except those that name or date it", () => {
    expect(
      copyableSettings({
        index: { number_of_shards: "1", uuid: "x", creation_date: "1", provided_name: "p", version: { created: "1" } }
      })
    ).toEqual({ number_of_shards: "1" })
    expect(copyableSettings(undefined)).toEqual({})
  })

  it("gives a copied index's mappings the copy's own mark, keeping the rest", () => {
    const source = {
      properties: { title: { type: "text" } },
      _meta: { app: "x", berth: { managed_by: "berth", owner: "o", slice: "golden" } }
    }
    expect(retarget(source, "o", "copy")).toEqual({
      properties: { title: { type: "text" } },
      _meta: { app: "x", berth: { managed_by: "berth", owner: "o", slice: "copy" } }
    })
    expect(retarget(undefined, "o", "copy")).toEqual({
      _meta: { berth: { managed_by: "berth", owner: "o", slice: "copy" } }
    })
  })

  it("classifies failed exchanges", () => {
    const base = { text: "", cause: undefined, timeoutMs: 10_000 }
    const refused = Object.assign(new Error("fetch failed"), {
      cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" })
    })
    expect(classify("h:9200", "x", { ...base, status: undefined, cause: refused }).kind).toBe("unreachable")
    const timeout = Object.assign(new Error("timed out"), { name: "TimeoutError" })
    expect(classify("h:9200", "x", { ...base, status: undefined, cause: timeout }).kind).toBe("unreachable")
    expect(classify("h:9200", "x", { ...base, status: 401 }).kind).toBe("authentication")
    expect(classify("h:9200", "x", { ...base, status: 403 }).kind).toBe("grant")
    expect(classify("h:9200", "x", { ...base, status: 500 }).kind).toBe("failed")
  })

  it.live("a closed port is unreachable within seconds, named, the password never shown", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(() => closedPort())
      const adminUrl = `http://elastic:s3cret@127.0.0.1:${port}`
      const slice = sliceOf("acme_search", { adminUrl })
      const started = Date.now()
      for (const verb of [
        elasticsearchAdapter.provision(slice),
        elasticsearchAdapter.teardown(slice),
        elasticsearchAdapter.clone(sliceOf("acme_src", { adminUrl }), slice),
        elasticsearchAdapter.list(scopeOf(slice))
      ]) {
        const error = yield* Effect.flip(verb)
        expect(error.kind).toBe("unreachable")
        expect(error.message).toContain(`127.0.0.1:${port}`)
        expect(error.message).not.toContain("s3cret")
      }
      expect(Date.now() - started).toBeLessThan(5_000)
    })
  )
})
