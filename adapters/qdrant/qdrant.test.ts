import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { closedPort } from "../conformance.js"
import { scopeOf, sliceMaker } from "../testing.js"
import {
  classify,
  creationOf,
  markOf,
  ownerOfMark,
  payloadIndexesOf,
  prefixOf,
  qdrantAdapter,
  serverOf
} from "./index.js"

const sliceOf = sliceMaker({ adapter: "qdrant", service: "vectors", world: "login", owner: "t1" })

describe("qdrantAdapter without a server", () => {
  it.live("resolves to the admin URL with the slice's prefix, its API key kept", () =>
    Effect.gen(function* () {
      expect(yield* qdrantAdapter.resolve(sliceOf("acme_vec"))).toBe("http://127.0.0.1:6333/?prefix=acme_vec-")
      expect(yield* qdrantAdapter.resolve(sliceOf("acme_vec", { adminUrl: "https://:k3y@q.local:6334" }))).toBe(
        "https://:k3y@q.local:6334/?prefix=acme_vec-"
      )
    })
  )

  it.live("sends the URL's password as the API key, and reserves the marks' prefix", () =>
    Effect.gen(function* () {
      const server = yield* serverOf("http://:s3cret@q.local:6333")
      expect(server.apiKey).toBe("s3cret")
      expect(server.endpoint).toBe("http://q.local:6333/")
      expect((yield* serverOf(undefined)).apiKey).toBeUndefined()
      const wrong = yield* Effect.flip(serverOf("redis://:s3cret@h"))
      expect(wrong.kind).toBe("invalid")
      expect(wrong.message).not.toContain("s3cret")
      expect((yield* Effect.flip(qdrantAdapter.provision(sliceOf("berth")))).kind).toBe("invalid")
      expect(markOf("acme").startsWith(prefixOf("acme"))).toBe(false)
    })
  )

  it("reads the owner from a marker's one named vector, and nothing else as a mark", () => {
    const info = (vectors: unknown) => ({ config: { params: { vectors } } })
    expect(ownerOfMark(info({ c1234: { size: 1, distance: "Dot" } }))).toBe("c1234")
    expect(ownerOfMark(info({ size: 1, distance: "Dot" }))).toBeUndefined()
    expect(ownerOfMark(info({ a: {}, b: {} }))).toBeUndefined()
    expect(ownerOfMark(undefined)).toBeUndefined()
  })

  it("re-creates a collection from its info: vectors, storage, index, quantization and payload indexes", () => {
    const info = {
      config: {
        params: {
          vectors: { size: 4, distance: "Cosine" },
          shard_number: 1,
          on_disk_payload: true,
          sparse_vectors: null
        },
        hnsw_config: { m: 16 },
        optimizer_config: { indexing_threshold: 20000 },
        quantization_config: null
      },
      payload_schema: {
        city: { data_type: "keyword", points: 3 },
        text: { data_type: "text", params: { type: "text" } }
      }
    }
    expect(creationOf(info)).toEqual({
      vectors: { size: 4, distance: "Cosine" },
      shard_number: 1,
      on_disk_payload: true,
      hnsw_config: { m: 16 },
      optimizers_config: { indexing_threshold: 20000 }
    })
    expect(payloadIndexesOf(info)).toEqual([
      { field_name: "city", field_schema: "keyword" },
      { field_name: "text", field_schema: { type: "text" } }
    ])
  })

  it("classifies failed exchanges", () => {
    const base = { text: "", cause: undefined, timeoutMs: 10_000 }
    const refused = Object.assign(new Error("fetch failed"), {
      cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" })
    })
    expect(classify("h:6333", "x", { ...base, status: undefined, cause: refused }).kind).toBe("unreachable")
    expect(classify("h:6333", "x", { ...base, status: 401 }).kind).toBe("authentication")
    expect(classify("h:6333", "x", { ...base, status: 403 }).kind).toBe("grant")
    expect(classify("h:6333", "x", { ...base, status: 500 }).kind).toBe("failed")
  })

  it.live("a closed port is unreachable within seconds, named, the key never shown", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(() => closedPort())
      const adminUrl = `http://:s3cret@127.0.0.1:${port}`
      const slice = sliceOf("acme_vec", { adminUrl })
      const started = Date.now()
      for (const verb of [
        qdrantAdapter.provision(slice),
        qdrantAdapter.teardown(slice),
        qdrantAdapter.clone(sliceOf("acme_src", { adminUrl }), slice),
        qdrantAdapter.list(scopeOf(slice))
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
