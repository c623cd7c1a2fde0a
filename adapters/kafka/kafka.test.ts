import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { KafkaJSConnectionError, KafkaJSProtocolError, KafkaJSSASLAuthenticationError } from "kafkajs"
import { closedPort } from "../conformance.js"
import { scopeOf, sliceMaker } from "../testing.js"
import { classify, kafkaAdapter, markOf, parseMark, prefixOf, serverOf } from "./index.js"

const sliceOf = sliceMaker({ adapter: "redpanda", service: "events", world: "login", owner: "t1" })

describe("kafkaAdapter without a server", () => {
  it.live("resolves to the admin URL with the slice's prefix, credentials and parameters kept", () =>
    Effect.gen(function* () {
      expect(yield* kafkaAdapter.resolve(sliceOf("acme_ev"))).toBe("kafka://127.0.0.1:9092?prefix=acme_ev-")
      expect(
        yield* kafkaAdapter.resolve(
          sliceOf("acme_ev", { adminUrl: "kafka://app:s3cret@broker.local:9093?sasl=scram-sha-512&ssl=true" })
        )
      ).toBe("kafka://app:s3cret@broker.local:9093?sasl=scram-sha-512&ssl=true&prefix=acme_ev-")
    })
  )

  it.live("builds the client configuration from the admin URL", () =>
    Effect.gen(function* () {
      const plain = yield* serverOf("kafka://broker.local:9093")
      expect(plain.config.brokers).toEqual(["broker.local:9093"])
      expect(plain.config.ssl).toBe(false)
      expect(plain.config.sasl).toBeUndefined()
      const secured = yield* serverOf("kafka://app:p%40ss@broker.local?sasl=scram-sha-256&ssl=true")
      expect(secured.config.brokers).toEqual(["broker.local:9092"])
      expect(secured.config.ssl).toBe(true)
      expect(secured.config.sasl).toEqual({ mechanism: "scram-sha-256", username: "app", password: "p@ss" })
      // a user alone means SASL/PLAIN
      expect((yield* serverOf("redpanda://app:pw@h:9092")).config.sasl).toEqual({
        mechanism: "plain",
        username: "app",
        password: "pw"
      })
      const wrong = yield* Effect.flip(serverOf("kafka://app:s3cret@h?sasl=gssapi"))
      expect(wrong.kind).toBe("invalid")
      expect(wrong.message).not.toContain("s3cret")
      expect((yield* Effect.flip(serverOf("http://h:9092"))).kind).toBe("invalid")
    })
  )

  it("names marks so that slice and owner read back, and no prefix covers a mark or another prefix", () => {
    expect(markOf("acme_ev", "c1")).toBe("berth-mark-acme_ev-c1")
    expect(parseMark(markOf("acme_ev", "c1"))).toEqual({ name: "acme_ev", owner: "c1" })
    expect(parseMark("acme_ev-orders")).toBeUndefined()
    expect(parseMark("berth-mark-a-b-c")).toBeUndefined()
    expect(prefixOf("a_b").startsWith(prefixOf("a"))).toBe(false)
    expect(markOf("acme", "c1").startsWith(prefixOf("acme"))).toBe(false)
  })

  it.live("refuses the name that would cover the marks, and cannot clone", () =>
    Effect.gen(function* () {
      expect((yield* Effect.flip(kafkaAdapter.provision(sliceOf("berth")))).kind).toBe("invalid")
      expect((yield* Effect.flip(kafkaAdapter.clone(sliceOf("a"), sliceOf("b")))).kind).toBe("invalid")
    })
  )

  it("classifies kafkajs errors", () => {
    const at = "h:9092"
    expect(classify(at, "x", new KafkaJSConnectionError("Connection error: connect ECONNREFUSED")).kind).toBe(
      "unreachable"
    )
    // the declared constructors take less than the real ones: the errors as the library raises them
    const SaslError = KafkaJSSASLAuthenticationError as unknown as new (message: string) => Error
    expect(classify(at, "x", new SaslError("SASL SCRAM authentication failed")).kind).toBe("authentication")
    const ProtocolError = KafkaJSProtocolError as unknown as new (e: {
      message: string
      type: string
      code: number
      retriable: boolean
    }) => Error
    const denied = new ProtocolError({
      message: "Not authorized to access topics",
      type: "TOPIC_AUTHORIZATION_FAILED",
      code: 29,
      retriable: false
    })
    expect(classify(at, "x", denied).kind).toBe("grant")
    expect(classify(at, "x", new Error("boom")).kind).toBe("failed")
  })

  it.live("a closed port is unreachable within seconds, named, the password never shown", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(() => closedPort())
      const adminUrl = `kafka://app:s3cret@127.0.0.1:${port}`
      const slice = sliceOf("acme_ev", { adminUrl })
      const started = Date.now()
      for (const verb of [
        kafkaAdapter.provision(slice),
        kafkaAdapter.teardown(slice),
        kafkaAdapter.list(scopeOf(slice))
      ]) {
        const error = yield* Effect.flip(verb)
        expect(error.kind, error.message).toBe("unreachable")
        expect(error.message).toContain(`127.0.0.1:${port}`)
        expect(error.message).not.toContain("s3cret")
      }
      expect(Date.now() - started).toBeLessThan(15_000)
    })
  )
})
