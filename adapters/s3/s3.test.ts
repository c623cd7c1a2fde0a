import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client
} from "@aws-sdk/client-s3"
import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { builtinAdapters } from "../../src/domain/adapters.js"
import { parseConfig } from "../../src/domain/config/parse.js"
import type { Slice } from "../contract.js"
import { runNames, runOwner, sliceMaker } from "../testing.js"
import { implementations } from "../index.js"
import { s3Adapter } from "./index.js"
import { type S3rverHandle, startS3rver } from "./s3rver.js"

let server: S3rverHandle
beforeAll(async () => {
  server = await startS3rver()
})
afterAll(() => server.close())

const owner = runOwner()
const { fresh } = runNames("acme_w")
const SHARED = "shared-bucket"

type Mode = "bucket" | "prefix"

const slice = sliceMaker({ adapter: "s3", service: "files", owner })
const sliceOf = (name: string, mode: Mode, extra: Partial<Slice> = {}): Slice =>
  slice(name, {
    adminUrl: server.adminUrl,
    options: mode === "bucket" ? {} : { mode: "prefix", bucket: SHARED },
    ...extra
  })

const listed = (mode: Mode, by = owner) =>
  s3Adapter.list({ storage: "/nonexistent", adminUrl: server.adminUrl, options: sliceOf("x", mode).options, owner: by })

/** What an application does with `${files.url}`: a client and a place built from the resolved URL alone. */
const fromUrl = (text: string) => {
  const url = new URL(text)
  expect(url.protocol).toBe("s3:")
  const client = new S3Client({
    endpoint: url.searchParams.get("endpoint") ?? "",
    region: url.searchParams.get("region") ?? "",
    forcePathStyle: url.searchParams.get("use_path_style") === "true",
    credentials: {
      accessKeyId: decodeURIComponent(url.username),
      secretAccessKey: decodeURIComponent(url.password)
    },
    maxAttempts: 1
  })
  return { client, bucket: url.hostname, prefix: decodeURIComponent(url.pathname.slice(1)) }
}

/** An administrator's client, outside the adapter. */
const admin = (): S3Client =>
  fromUrl(`s3://S3RVER:S3RVER@x/?endpoint=http://127.0.0.1:${server.port}&region=us-east-1&use_path_style=true`).client

const put = (client: S3Client, bucket: string, key: string, body: string) =>
  Effect.promise(() => client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body })))

/** an object that is not there, as the server says it: the one failure a read takes for "none" */
const isMissing = (e: unknown): boolean =>
  e instanceof Error &&
  (e.name === "NoSuchKey" || (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404)

/**
 * An object's text, or undefined when there is none. Any other failure of the test server (a connection it reset
 * while a thousand-object copy loads it) is tried again, and named if it lasts: it never reads as a missing object.
 */
const read = (client: S3Client, bucket: string, key: string): Effect.Effect<string | undefined> =>
  Effect.promise(async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        const output = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))
        return await output.Body?.transformToString()
      } catch (e) {
        if (isMissing(e)) return undefined
        if (attempt >= 3) throw e
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt))
      }
    }
  })

const keysOf = (bucket: string, prefix = ""): Effect.Effect<ReadonlyArray<string>> =>
  Effect.promise(async () => {
    const keys: Array<string> = []
    let token: string | undefined
    do {
      const output = await admin().send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token })
      )
      for (const object of output.Contents ?? []) if (object.Key !== undefined) keys.push(object.Key)
      token = output.IsTruncated === true ? output.NextContinuationToken : undefined
    } while (token !== undefined)
    return keys.sort()
  })

const buckets = (): Effect.Effect<ReadonlyArray<string>> =>
  Effect.promise(() =>
    admin()
      .send(new ListBucketsCommand({}))
      .then((output) => (output.Buckets ?? []).flatMap((bucket) => (bucket.Name === undefined ? [] : [bucket.Name])))
  )

/** The resolved URL's client writes and reads back an object, under the slice's prefix. */
const roundTrip = (slice: Slice) =>
  Effect.gen(function* () {
    const { client, bucket, prefix } = fromUrl(yield* s3Adapter.resolve(slice))
    yield* put(client, bucket, `${prefix}hello.txt`, `hello ${slice.name}`)
    expect(yield* read(client, bucket, `${prefix}hello.txt`)).toBe(`hello ${slice.name}`)
    return { client, bucket, prefix }
  })

describe("s3Adapter", () => {
  it("declares clone", () => {
    expect(s3Adapter.capabilities).toEqual({ clone: true })
  })

  it.live("resolves to an s3:// URL with the endpoint, region and path style, credentials as userinfo", () =>
    Effect.gen(function* () {
      const url = new URL(yield* s3Adapter.resolve(sliceOf("acme_main_files", "bucket")))
      expect(url.hostname).toBe("acme-main-files")
      expect(url.pathname).toBe("/")
      expect(url.username).toBe("S3RVER")
      expect(url.searchParams.get("endpoint")).toBe(`http://127.0.0.1:${server.port}`)
      expect(url.searchParams.get("region")).toBe("us-east-1")
      expect(url.searchParams.get("use_path_style")).toBe("true")
      const prefixed = new URL(yield* s3Adapter.resolve(sliceOf("acme_main_files", "prefix")))
      expect(prefixed.hostname).toBe(SHARED)
      expect(prefixed.pathname).toBe("/acme_main_files/")
      // a secret with URL delimiters in it comes back as it was
      const encoded = new URL(
        yield* s3Adapter.resolve(
          sliceOf("acme_main_files", "bucket", { adminUrl: "http://AK:se%2Fc%40r%3Fet@127.0.0.1:9000" })
        )
      )
      expect([encoded.hostname, decodeURIComponent(encoded.password)]).toEqual(["acme-main-files", "se/c@r?et"])
    })
  )

  it.live("makes buckets in the region the service names", () =>
    Effect.gen(function* () {
      const slice = sliceOf(fresh("region"), "bucket", { options: { region: "eu-central-1" } })
      expect(yield* s3Adapter.provision(slice)).toBe(true)
      expect(new URL(yield* s3Adapter.resolve(slice)).searchParams.get("region")).toBe("eu-central-1")
      yield* roundTrip(slice)
      yield* s3Adapter.teardown(slice)
    })
  )

  for (const mode of ["bucket", "prefix"] as const) {
    describe(`mode "${mode}"`, () => {
      it.live("clones every object server-side; the copy is its own afterwards", () =>
        Effect.gen(function* () {
          const golden = sliceOf(fresh("golden"), mode)
          const copy = sliceOf(fresh("copy"), mode)
          yield* s3Adapter.provision(golden)
          yield* s3Adapter.provision(copy)
          const g = fromUrl(yield* s3Adapter.resolve(golden))
          const c = fromUrl(yield* s3Adapter.resolve(copy))
          yield* put(g.client, g.bucket, `${g.prefix}odd name/with space %.txt`, "odd")
          // a missing target is made by the clone (while the golden is small)
          const third = sliceOf(fresh("third"), mode)
          yield* s3Adapter.clone(golden, third)
          const t = fromUrl(yield* s3Adapter.resolve(third))
          expect(yield* read(t.client, t.bucket, `${t.prefix}odd name/with space %.txt`)).toBe("odd")
          // more than a listing page (1000) in one mode, so the copy pages through; flat keys, which s3rver deletes
          // in one DeleteObjects (two keys in one folder make it fail that request, and the adapter go key by key)
          const many = mode === "bucket" ? 1005 : 20
          const keys = Array.from({ length: many }, (_, i) => `data-${String(i).padStart(4, "0")}.txt`)
          yield* Effect.forEach(keys, (key) => put(g.client, g.bucket, `${g.prefix}${key}`, key), {
            concurrency: 16,
            discard: true
          })
          yield* put(c.client, c.bucket, `${c.prefix}stale.txt`, "stale")
          yield* s3Adapter.clone(golden, copy)
          const copied = (yield* keysOf(c.bucket, c.prefix)).map((key) => key.slice(c.prefix.length))
          expect(copied).toEqual([".berth-slice", ...keys, "odd name/with space %.txt"].sort())
          expect(yield* read(c.client, c.bucket, `${c.prefix}data-0003.txt`)).toBe("data-0003.txt")
          expect(yield* read(c.client, c.bucket, `${c.prefix}odd name/with space %.txt`)).toBe("odd")
          // the copy keeps its own marker: it is still listed as itself
          expect(yield* listed(mode)).toContain(copy.name)
          // independent both ways
          yield* put(c.client, c.bucket, `${c.prefix}data-0003.txt`, "changed")
          expect(yield* read(g.client, g.bucket, `${g.prefix}data-0003.txt`)).toBe("data-0003.txt")
          yield* put(g.client, g.bucket, `${g.prefix}later.txt`, "later")
          expect(yield* read(c.client, c.bucket, `${c.prefix}later.txt`)).toBeUndefined()
          for (const slice of [golden, copy, third]) yield* s3Adapter.teardown(slice)
          // nothing is left on the server: no object, no claim, no bucket of a slice's own
          if (mode === "bucket") expect(yield* buckets()).not.toContain(c.bucket)
          else expect(yield* keysOf(c.bucket, c.prefix)).toEqual([])
        })
      )
    })
  }

  it.live(
    "takes an empty unmarked bucket under a slice's name for what a crash left between creating and marking",
    () =>
      Effect.gen(function* () {
        const name = fresh("halfmade")
        yield* Effect.promise(() => admin().send(new CreateBucketCommand({ Bucket: name.replaceAll("_", "-") })))
        // teardown removes it; provision claims it
        yield* s3Adapter.teardown(sliceOf(name, "bucket"))
        expect(yield* buckets()).not.toContain(name.replaceAll("_", "-"))
        yield* Effect.promise(() => admin().send(new CreateBucketCommand({ Bucket: name.replaceAll("_", "-") })))
        expect(yield* s3Adapter.provision(sliceOf(name, "bucket"))).toBe(true)
        expect(yield* listed("bucket")).toContain(name)
        yield* s3Adapter.teardown(sliceOf(name, "bucket"))
      })
  )

  it.live("lists what a provision killed between its claim and its marker, tears it down, and provisions over it", () =>
    Effect.gen(function* () {
      // no process has pid 99999999: the claim's provision is gone
      const claim = `.berth-slice.claim.${owner}.99999999.0123456789abcdef`
      const name = fresh("crashed")
      const bucket = name.replaceAll("_", "-")
      yield* Effect.promise(() => admin().send(new CreateBucketCommand({ Bucket: bucket })))
      yield* put(admin(), bucket, claim, "{}")
      expect(yield* listed("bucket")).toContain(name)
      expect(yield* listed("bucket", "elsewhere")).not.toContain(name)
      expect(yield* s3Adapter.provision(sliceOf(name, "bucket"))).toBe(true)
      expect(yield* keysOf(bucket)).toEqual([".berth-slice"])
      yield* s3Adapter.teardown(sliceOf(name, "bucket"))
      const inPrefix = fresh("crashed")
      yield* Effect.promise(() =>
        admin()
          .send(new CreateBucketCommand({ Bucket: SHARED }))
          .catch(() => undefined)
      )
      yield* put(admin(), SHARED, `${inPrefix}/${claim}`, "{}")
      expect(yield* listed("prefix")).toContain(inPrefix)
      yield* s3Adapter.teardown(sliceOf(inPrefix, "prefix"))
      expect(yield* keysOf(SHARED, `${inPrefix}/`)).toEqual([])
      expect(yield* listed("prefix")).not.toContain(inPrefix)
    })
  )

  it.live("waits out a marker read while its provision still writes it, and still refuses one that stays cut off", () =>
    Effect.gen(function* () {
      // s3rver writes an object in place: a look between its start and end reads it empty or cut off (seen in CI as
      // "exists and is not this berth installation's slice" from concurrent provisions of one slice)
      const name = fresh("halfwritten")
      const bucket = name.replaceAll("_", "-")
      yield* Effect.promise(() => admin().send(new CreateBucketCommand({ Bucket: bucket })))
      yield* put(admin(), bucket, ".berth-slice", "")
      const finished = yield* put(admin(), bucket, ".berth-slice", `${JSON.stringify({ owner, name })}\n`).pipe(
        Effect.delay("150 millis"),
        Effect.fork
      )
      // the winner's marker, once written: ours, made by the other provision
      expect(yield* s3Adapter.provision(sliceOf(name, "bucket"))).toBe(false)
      yield* finished.await
      yield* s3Adapter.teardown(sliceOf(name, "bucket"))

      const broken = fresh("cutoff")
      yield* Effect.promise(() => admin().send(new CreateBucketCommand({ Bucket: broken.replaceAll("_", "-") })))
      yield* put(admin(), broken.replaceAll("_", "-"), ".berth-slice", '{"owner":')
      const refused = yield* Effect.flip(s3Adapter.provision(sliceOf(broken, "bucket")))
      expect(refused.kind).toBe("taken")
    })
  )

  it.live("refuses hostile names and bad options before reaching any server", () =>
    Effect.gen(function* () {
      // nothing listens on port 1: reaching it would be "unreachable", not "invalid"
      const nowhere = "http://key:hunter2@127.0.0.1:1"
      const hostile = ["../etc", "a/b", "Acme", "x y", "a;rm", "", "xn__abc", "ab", `a${"b".repeat(63)}`, "a-b"]
      for (const mode of ["bucket", "prefix"] as const) {
        for (const name of hostile) {
          for (const verb of [s3Adapter.provision, s3Adapter.resolve, s3Adapter.teardown]) {
            if (mode === "prefix" && (name === "xn__abc" || name === "ab")) continue
            const error = yield* Effect.flip(verb(sliceOf(name, mode, { adminUrl: nowhere })))
            expect(error.kind, `${mode} ${JSON.stringify(name)}`).toBe("invalid")
            expect(error.message).not.toContain("hunter2")
          }
        }
      }
      const bad = (options: Record<string, unknown>, url = nowhere) =>
        Effect.flip(s3Adapter.provision(sliceOf(fresh("bad"), "bucket", { adminUrl: url, options })))
      expect((yield* bad({ mode: "cluster" })).kind).toBe("invalid")
      expect((yield* bad({ mode: "prefix" })).kind).toBe("invalid")
      expect((yield* bad({ mode: "prefix", bucket: "../etc" })).kind).toBe("invalid")
      expect((yield* bad({ bucket: SHARED })).kind).toBe("invalid")
      expect((yield* bad({}, "http://127.0.0.1:1")).kind).toBe("invalid")
      expect((yield* bad({}, "redis://key:hunter2@127.0.0.1:1")).kind).toBe("invalid")
      const owner = yield* Effect.flip(
        s3Adapter.provision(sliceOf(fresh("x"), "bucket", { adminUrl: nowhere, owner: "a:b" }))
      )
      expect(owner.kind).toBe("invalid")
    })
  )

  it.live("refuses wrong credentials as authentication, without echoing the secret", () =>
    Effect.gen(function* () {
      // s3rver checks the access key, not the signature
      const url = `http://WRONG:hunter2@127.0.0.1:${server.port}`
      const error = yield* Effect.flip(s3Adapter.provision(sliceOf(fresh("auth"), "bucket", { adminUrl: url })))
      expect(error.kind).toBe("authentication")
      expect(error.message).not.toContain("hunter2")
    })
  )

  it.live("reports a server that goes away mid-clone as unreachable, quickly", () =>
    Effect.gen(function* () {
      const dying = yield* Effect.promise(() => startS3rver())
      // a proxy in front of it, which kills the server once some copies went through
      let copies = 0
      let killedAt = 0
      const sockets = new Set<Socket>()
      const proxy: Server = createServer((socket) => {
        const upstream = tcpConnect(dying.port, "127.0.0.1")
        sockets.add(socket)
        sockets.add(upstream)
        socket.on("error", () => undefined)
        upstream.on("error", () => undefined)
        socket.on("data", (chunk: Buffer) => {
          if (chunk.toString("latin1").includes("x-amz-copy-source") && ++copies === 10) {
            killedAt = Date.now()
            dying.kill()
            for (const open of sockets) open.destroy()
            proxy.close()
          }
        })
        socket.pipe(upstream)
        upstream.pipe(socket)
      })
      const port = yield* Effect.promise(
        () =>
          new Promise<number>((resolve) =>
            proxy.listen(0, "127.0.0.1", () => {
              const address = proxy.address()
              resolve(typeof address === "object" && address !== null ? address.port : 0)
            })
          )
      )
      const url = `http://S3RVER:S3RVER@127.0.0.1:${port}`
      const golden = sliceOf(fresh("dying"), "bucket", { adminUrl: url })
      yield* s3Adapter.provision(golden)
      const g = fromUrl(yield* s3Adapter.resolve(golden))
      yield* Effect.forEach(
        Array.from({ length: 60 }, (_, i) => `k${i}`),
        (key) => put(g.client, g.bucket, key, key),
        { concurrency: 8, discard: true }
      )
      const error = yield* Effect.flip(
        s3Adapter.clone(golden, sliceOf(fresh("dying_copy"), "bucket", { adminUrl: url }))
      )
      expect(copies).toBeGreaterThanOrEqual(10)
      expect(error.kind).toBe("unreachable")
      // the verb ends as soon as its requests fail: no retries, no waiting out a time limit
      expect(Date.now() - killedAt).toBeLessThan(3_000)
      yield* Effect.promise(() => dying.close())
    })
  )
})

describe("the s3 catalogue entry", () => {
  it("serves s3 and minio with one implementation that clones, and checks their keys", async () => {
    for (const name of ["s3", "minio"]) {
      expect(builtinAdapters.get(name)).toMatchObject({ family: "s3", canClone: true, embedded: false })
    }
    expect(await implementations.get("s3")?.()).toBe(s3Adapter)
    const parsed = parseConfig(
      `[services.files]\nadapter = "minio"\nadmin_url = "\${env.S3_ADMIN_URL}"\nmode = "prefix"\nbucket = "dev"\nregion = "eu-west-1"\n`,
      "berth.toml"
    )
    expect(Either.isRight(parsed)).toBe(true)
    if (Either.isRight(parsed)) {
      expect(parsed.right.config.services[0]).toMatchObject({
        options: { mode: "prefix", bucket: "dev", region: "eu-west-1" }
      })
    }
    const refused = parseConfig(`[services.files]\nadapter = "s3"\nmode = "db"\n`, "berth.toml")
    expect(Either.isLeft(refused) && refused.left[0]?.path).toBe("services.files.mode")
  })
})
