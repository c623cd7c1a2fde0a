import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import { builtinAdapters } from "../src/domain/adapters.js"
import { lintConfig } from "../src/domain/config/lint.js"
import type * as Model from "../src/domain/config/model.js"
import { parseConfig } from "../src/domain/config/parse.js"
import { implementations } from "./index.js"

const parse = (text: string) => parseConfig(text, "berth.toml")

describe("the adapter catalogue", () => {
  it("has an implementation for every built-in family, with the clone capability the catalogue declares", async () => {
    for (const info of builtinAdapters.values()) {
      const load = implementations.get(info.family)
      expect(load, info.name).toBeDefined()
      if (load !== undefined) expect((await load()).capabilities.clone, info.name).toBe(info.canClone)
    }
  })

  it("berth check accepts nats and clickhouse slices with their keys, and refuses a wrong copy_messages", () => {
    const text = `[services.bus]
adapter = "nats"
admin_url = "nats://127.0.0.1:4222"
copy_messages = true
clone_from = "golden"
seed = "node seed.js"

[services.olap]
adapter = "clickhouse"
admin_url = "http://default@127.0.0.1:8123"
clone_from = "golden"
migrate = "node migrate.js"
`
    const result = parse(text)
    if (Either.isLeft(result)) throw new Error(result.left.map((d) => d.message).join("\n"))
    const [bus, olap] = result.right.config.services as ReadonlyArray<Model.SliceService>
    expect(bus?.options).toEqual({ copy_messages: true })
    expect(olap?.adapter).toBe("clickhouse")
    expect(lintConfig(result.right, { env: () => undefined, onPath: () => false })).toEqual([])
    const wrong = parse(`[services.bus]\nadapter = "nats"\ncopy_messages = "yes"\n`)
    expect(Either.isLeft(wrong) && wrong.left[0]?.path).toBe("services.bus.copy_messages")
  })

  it("berth check accepts the mongodb, elasticsearch, opensearch, qdrant, kafka and redpanda slices", () => {
    const adapters = ["mongodb", "elasticsearch", "opensearch", "qdrant", "kafka", "redpanda"]
    const text = adapters
      .map((adapter) => `[services.${adapter}_svc]\nadapter = "${adapter}"\nadmin_url = "\${env.ADMIN_URL}"\n`)
      .join("\n")
    const result = parse(text)
    if (Either.isLeft(result)) throw new Error(result.left.map((d) => d.message).join("\n"))
    const services = result.right.config.services as ReadonlyArray<Model.SliceService>
    expect(services.map((service) => service.adapter)).toEqual(adapters)
    expect(lintConfig(result.right, { env: () => "x", onPath: () => false })).toEqual([])
    expect(builtinAdapters.get("opensearch")?.family).toBe("elasticsearch")
    expect(builtinAdapters.get("redpanda")?.family).toBe("kafka")
    expect(builtinAdapters.get("kafka")?.canClone).toBe(false)
  })
})
