import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { connect, type NatsConnection } from "nats"
import { runNames, runOwner, sliceMaker } from "../testing.js"
import { natsAdapter } from "./index.js"

/** A real server with JetStream: `NATS_ADMIN_URL`, or the local one. */
const adminUrl = process.env.NATS_ADMIN_URL ?? "nats://127.0.0.1:4222"
const { prefix, fresh } = runNames()
const owner = runOwner()
const sliceOf = sliceMaker({ adapter: "nats", service: "bus", owner, adminUrl })

const withNats = <A>(f: (nc: NatsConnection) => Promise<A>): Effect.Effect<A> =>
  Effect.promise(async () => {
    const url = new URL(adminUrl)
    const nc = await connect({ servers: `${url.hostname}:${url.port || 4222}` })
    try {
      return await f(nc)
    } finally {
      await nc.close()
    }
  })

const streams = (): Effect.Effect<ReadonlyArray<string>> =>
  withNats(async (nc) => {
    const names: Array<string> = []
    for await (const name of (await nc.jetstreamManager()).streams.names()) if (name.includes(prefix)) names.push(name)
    return names.sort()
  })

afterAll(async () => {
  const url = new URL(adminUrl)
  const nc = await connect({ servers: `${url.hostname}:${url.port || 4222}` })
  const jsm = await nc.jetstreamManager()
  for await (const name of jsm.streams.names()) if (name.includes(prefix)) await jsm.streams.delete(name)
  const marks = await nc.jetstream().views.kv("berth_slices")
  // collected first: purging while the key listing's consumer runs cuts the listing short
  const keys: Array<string> = []
  for await (const key of await marks.keys()) keys.push(key)
  for (const key of keys) if (key.startsWith(prefix)) await marks.purge(key)
  await nc.close()
})

describe("natsAdapter", () => {
  it.live("resolves to the server's URL with the prefix as a query parameter, keeping credentials", () =>
    Effect.gen(function* () {
      expect(yield* natsAdapter.resolve(sliceOf("acme_db", { adminUrl: "nats://app:s3cret@bus.local:4333" }))).toBe(
        "nats://app:s3cret@bus.local:4333?prefix=acme_db-"
      )
      expect(yield* natsAdapter.resolve(sliceOf("acme_db", { adminUrl: undefined }))).toBe(
        "nats://127.0.0.1:4222?prefix=acme_db-"
      )
    })
  )

  it.live("tears down the prefix's streams and KV buckets, and only those", () =>
    Effect.gen(function* () {
      const name = fresh("world")
      const neighbour = `${name}_b`
      yield* natsAdapter.provision(sliceOf(name))
      yield* natsAdapter.provision(sliceOf(neighbour))
      yield* withNats(async (nc) => {
        const jsm = await nc.jetstreamManager()
        await jsm.streams.add({ name: `${name}-orders`, subjects: [`${name}-orders.>`] })
        await nc.jetstream().views.kv(`${name}-cache`)
        // a slice whose name extends another's: its prefix is not under the other's
        await jsm.streams.add({ name: `${neighbour}-orders`, subjects: [`${neighbour}-orders.>`] })
      })
      expect(yield* streams()).toEqual([`${name}-orders`, `${neighbour}-orders`, `KV_${name}-cache`].sort())
      yield* natsAdapter.teardown(sliceOf(name))
      expect(yield* streams()).toEqual([`${neighbour}-orders`])
      yield* natsAdapter.teardown(sliceOf(neighbour))
      expect(yield* streams()).toEqual([])
    })
  )

  it.live("clones stream configurations under the new prefix; messages only with copy_messages", () =>
    Effect.gen(function* () {
      const golden = fresh("golden")
      const bare = fresh("bare")
      const full = fresh("full")
      for (const name of [golden, bare, full]) yield* natsAdapter.provision(sliceOf(name))
      yield* withNats(async (nc) => {
        const jsm = await nc.jetstreamManager()
        await jsm.streams.add({ name: `${golden}-orders`, subjects: [`${golden}-orders.>`], max_msgs: 1000 })
        const js = nc.jetstream()
        await js.publish(`${golden}-orders.created`, new TextEncoder().encode("one"))
        await js.publish(`${golden}-orders.paid`, new TextEncoder().encode("two"))
      })
      yield* natsAdapter.clone(sliceOf(golden), sliceOf(bare))
      yield* natsAdapter.clone(sliceOf(golden), sliceOf(full, { options: { copy_messages: true } }))
      const infos = yield* withNats(async (nc) => {
        const jsm = await nc.jetstreamManager()
        return Promise.all([`${bare}-orders`, `${full}-orders`].map((s) => jsm.streams.info(s)))
      })
      expect(infos.map((info) => info.config.subjects)).toEqual([[`${bare}-orders.>`], [`${full}-orders.>`]])
      expect(infos.map((info) => info.config.max_msgs)).toEqual([1000, 1000])
      expect(infos.map((info) => info.state.messages)).toEqual([0, 2])
      const copied = yield* withNats(async (nc) => {
        const message = await (await nc.jetstreamManager()).streams.getMessage(`${full}-orders`, { seq: 1 })
        return [message.subject, message.string()]
      })
      expect(copied).toEqual([`${full}-orders.created`, "one"])
    })
  )

  it.live("refuses to clone a stream whose subjects are outside the prefix, and leaves the target empty", () =>
    Effect.gen(function* () {
      const golden = fresh("loose")
      const copy = fresh("loose_copy")
      yield* natsAdapter.provision(sliceOf(golden))
      yield* natsAdapter.provision(sliceOf(copy))
      yield* withNats(async (nc) => {
        await (await nc.jetstreamManager()).streams.add({ name: `${golden}-events`, subjects: [`events_${golden}.>`] })
      })
      const error = yield* Effect.flip(natsAdapter.clone(sliceOf(golden), sliceOf(copy)))
      expect(error.kind).toBe("invalid")
      expect(error.message).toContain(`under the prefix "${golden}-"`)
      expect((yield* streams()).filter((s) => s.startsWith(copy))).toEqual([])
    })
  )

  it.live("refuses a non-nats admin_url", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(natsAdapter.provision(sliceOf(fresh("bad"), { adminUrl: "http://x:4222" })))
      expect(error.kind).toBe("invalid")
    })
  )
})
