import { afterAll, describe, expect, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as net from "node:net"
import * as Effect from "effect/Effect"
import { runNames, runOwner, sliceMaker } from "../testing.js"
import { rabbitmqAdapter } from "./index.js"

/** A real server: `RABBITMQ_ADMIN_URL` (an administrator) and its management API, or the local ones. */
const adminUrl = process.env.RABBITMQ_ADMIN_URL ?? "amqp://guest:guest@127.0.0.1:5672"
const managementUrl = process.env.RABBITMQ_MANAGEMENT_URL ?? "http://127.0.0.1:15672"
const admin = new URL(adminUrl)
const adminUser = decodeURIComponent(admin.username)
const adminAuth = `Basic ${Buffer.from(`${adminUser}:${decodeURIComponent(admin.password)}`).toString("base64")}`

/** Every vhost and user a test makes starts with `prefix`, so parallel runs never meet and afterAll finds them all. */
const { prefix, fresh } = runNames()

/** this run's installation: another owner's slices are never ours */
const owner = runOwner()

const sliceOf = sliceMaker({
  adapter: "rabbitmq",
  service: "mq",
  owner,
  adminUrl,
  options: { management_url: managementUrl }
})

interface Reply {
  readonly status: number
  readonly body: unknown
}

/** The management API as the admin user, bypassing the adapter. */
const api = (method: string, path: string, body?: unknown, auth = adminAuth): Promise<Reply> =>
  fetch(`${managementUrl}${path}`, {
    method,
    headers: { authorization: auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(30_000)
  }).then(async (response) => {
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      // keep the text
    }
    return { status: response.status, body: parsed }
  })

const call = (method: string, path: string, body?: unknown): Effect.Effect<Reply> =>
  Effect.promise(() => api(method, path, body))

const vhost = (name: string) => `/api/vhosts/${encodeURIComponent(name)}`
const queue = (name: string, q: string) => `/api/queues/${encodeURIComponent(name)}/${encodeURIComponent(q)}`

const listed = (by = owner): Effect.Effect<ReadonlyArray<string>, unknown> =>
  Effect.map(
    rabbitmqAdapter.list({ storage: "/nonexistent", adminUrl, options: { management_url: managementUrl }, owner: by }),
    (names) => names.filter((name) => name.startsWith(prefix))
  )

/** Makes a user with `tags` (and no permissions); afterAll deletes it if the test does not. */
const withUser = <A, E>(tags: string, body: (url: string) => Effect.Effect<A, E>): Effect.Effect<A, E> => {
  const user = fresh("user")
  const password = `pw-${randomBytes(6).toString("hex")}`
  return Effect.acquireUseRelease(
    call("PUT", `/api/users/${user}`, { password, tags }),
    (created) => {
      expect(created.status).toBe(201)
      const url = new URL(adminUrl)
      url.username = user
      url.password = password
      return body(url.href)
    },
    () => call("DELETE", `/api/users/${user}`)
  )
}

/** A port nothing listens on: bound by the system for a moment, then released. */
const closedPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

afterAll(async () => {
  const vhosts = await api("GET", "/api/vhosts?columns=name")
  for (const { name } of vhosts.body as ReadonlyArray<{ name: string }>) {
    if (name.startsWith(prefix)) await api("DELETE", vhost(name))
  }
  const users = await api("GET", "/api/users")
  for (const { name } of users.body as ReadonlyArray<{ name: string }>) {
    if (name.startsWith(prefix)) await api("DELETE", `/api/users/${name}`)
  }
})

// ---------------------------------------------------------------------------------------------------------------
// a minimal AMQP 0-9-1 client: enough to open a connection to a vhost (or be refused) and close it again

const shortString = (text: string): Buffer => {
  const bytes = Buffer.from(text, "utf8")
  return Buffer.concat([Buffer.from([bytes.length]), bytes])
}
const longString = (bytes: Buffer): Buffer => {
  const size = Buffer.alloc(4)
  size.writeUInt32BE(bytes.length)
  return Buffer.concat([size, bytes])
}
const u16 = (value: number): Buffer => {
  const buffer = Buffer.alloc(2)
  buffer.writeUInt16BE(value)
  return buffer
}
const u32 = (value: number): Buffer => {
  const buffer = Buffer.alloc(4)
  buffer.writeUInt32BE(value)
  return buffer
}
/** a method frame on channel 0 of the connection class (10) */
const method = (id: number, ...args: ReadonlyArray<Buffer>): Buffer => {
  const payload = Buffer.concat([u16(10), u16(id), ...args])
  return Buffer.concat([Buffer.from([1]), u16(0), u32(payload.length), payload, Buffer.from([0xce])])
}

/**
 * Connects to `url` (user, password, host, port and vhost from it): "open" when the server opens the vhost, else the
 * code and text of the server's Connection.Close (530 for a vhost that does not exist or is not permitted).
 */
const amqpOpen = (url: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const target = new URL(url)
    const user = decodeURIComponent(target.username)
    const password = decodeURIComponent(target.password)
    const vhostName = decodeURIComponent(target.pathname.slice(1))
    const socket = net.connect(Number(target.port || 5672), target.hostname.replace(/^\[|\]$/g, ""))
    let pending = Buffer.alloc(0)
    let result: string | undefined
    const timer = setTimeout(() => finish(new Error("no AMQP answer within 10 s")), 10_000)
    const finish = (outcome: string | Error) => {
      clearTimeout(timer)
      socket.destroy()
      if (outcome instanceof Error) reject(outcome)
      else resolve(outcome)
    }
    socket.on("error", (error) => finish(error))
    socket.on("close", () => finish(result ?? new Error("the server closed the connection")))
    socket.on("connect", () => socket.write(Buffer.from([0x41, 0x4d, 0x51, 0x50, 0, 0, 9, 1])))
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      while (pending.length >= 7) {
        const size = pending.readUInt32BE(3)
        if (pending.length < 8 + size) return
        const frame = pending.subarray(7, 7 + size)
        const type = pending[0]
        pending = pending.subarray(8 + size)
        if (type !== 1) continue
        const classId = frame.readUInt16BE(0)
        const methodId = frame.readUInt16BE(2)
        if (classId !== 10) continue
        if (methodId === 10) {
          // Start → Start-Ok: no client properties, PLAIN credentials
          socket.write(
            method(
              11,
              u32(0),
              shortString("PLAIN"),
              longString(Buffer.from(`\u0000${user}\u0000${password}`, "utf8")),
              shortString("en_US")
            )
          )
        } else if (methodId === 30) {
          // Tune → Tune-Ok with the server's limits and no heartbeat, then Open the vhost
          socket.write(method(31, u16(frame.readUInt16BE(4)), u32(frame.readUInt32BE(6)), u16(0)))
          socket.write(method(40, shortString(vhostName), shortString(""), Buffer.from([0])))
        } else if (methodId === 41) {
          // Open-Ok → Close, and wait for Close-Ok
          result = "open"
          socket.write(method(50, u16(200), shortString("bye"), u16(0), u16(0)))
        } else if (methodId === 51) {
          finish(result ?? "closed")
        } else if (methodId === 50) {
          const code = frame.readUInt16BE(4)
          const text = frame.subarray(7, 7 + (frame[6] ?? 0)).toString("utf8")
          result = `${code} ${text}`
          socket.write(method(51))
          finish(result)
        }
      }
    })
  })

// ---------------------------------------------------------------------------------------------------------------

describe("rabbitmqAdapter", () => {
  it.live("marks the vhost it provisions, grants the admin user, lists it", () =>
    Effect.gen(function* () {
      const name = fresh("main")
      expect(yield* rabbitmqAdapter.provision(sliceOf(name))).toBe(true)
      const info = yield* call("GET", vhost(name))
      expect(info.status).toBe(200)
      expect(info.body).toMatchObject({ name, description: `berth:${owner}:${name}`, tags: ["berth"] })
      const permissions = yield* call("GET", `/api/permissions/${name}/${encodeURIComponent(adminUser)}`)
      expect(permissions.body).toMatchObject({ configure: ".*", write: ".*", read: ".*" })
      expect(yield* listed()).toContain(name)
    })
  )

  it.live("derives the management API from admin_url when management_url is not given", () =>
    Effect.gen(function* () {
      // only when the test server's API is where berth would look for it
      if (managementUrl !== `http://${admin.hostname}:15672`) return
      const name = fresh("default_api")
      const slice = { ...sliceOf(name), options: {} }
      expect(yield* rabbitmqAdapter.provision(slice)).toBe(true)
      yield* rabbitmqAdapter.teardown(slice)
      expect((yield* call("GET", vhost(name))).status).toBe(404)
    })
  )

  it.live("resolves to the admin URL with the slice's vhost, keeping user, password, host, port and query", () =>
    Effect.gen(function* () {
      const name = fresh("resolve")
      const resolved = new URL(yield* rabbitmqAdapter.resolve(sliceOf(name)))
      expect(resolved.protocol).toBe("amqp:")
      expect(resolved.username).toBe(admin.username)
      expect(resolved.password).toBe(admin.password)
      expect(resolved.host).toBe(admin.host)
      expect(resolved.pathname).toBe(`/${name}`)
      expect(
        yield* rabbitmqAdapter.resolve(
          sliceOf("acme_mq", { adminUrl: "amqp://app:s3cret@mq.local:5673/?heartbeat=30" })
        )
      ).toBe("amqp://app:s3cret@mq.local:5673/acme_mq?heartbeat=30")
      expect(yield* rabbitmqAdapter.resolve(sliceOf("acme_mq", { adminUrl: "amqps://app:s%40cret@mq.local" }))).toBe(
        "amqps://app:s%40cret@mq.local/acme_mq"
      )
    })
  )

  it.live("the resolved URL opens an AMQP connection to the vhost, and is refused once it is torn down", () =>
    Effect.gen(function* () {
      const name = fresh("amqp")
      yield* rabbitmqAdapter.provision(sliceOf(name))
      const url = yield* rabbitmqAdapter.resolve(sliceOf(name))
      expect(yield* Effect.promise(() => amqpOpen(url))).toBe("open")
      yield* rabbitmqAdapter.teardown(sliceOf(name))
      expect(yield* Effect.promise(() => amqpOpen(url))).toMatch(/^530 /)
    })
  )

  it.live("tears down an owned vhost with its queues", () =>
    Effect.gen(function* () {
      const name = fresh("gone")
      yield* rabbitmqAdapter.provision(sliceOf(name))
      yield* call("PUT", queue(name, "jobs"), { durable: true })
      yield* rabbitmqAdapter.teardown(sliceOf(name))
      expect((yield* call("GET", vhost(name))).status).toBe(404)
      expect((yield* call("GET", queue(name, "jobs"))).status).toBe(404)
      expect(yield* listed()).not.toContain(name)
    })
  )

  it.live("a provision killed after creating its vhost: listed, finished by provision, deleted by teardown", () =>
    Effect.gen(function* () {
      const name = fresh("crash")
      const claim = { description: `berth:${owner}:${name} claim:0123456789abcdef`, tags: "berth" }
      // the provision's first request alone: the vhost is born marked, with a claim and no permissions yet
      expect((yield* call("PUT", vhost(name), claim)).status).toBe(201)
      expect(yield* listed()).toContain(name)
      expect(yield* rabbitmqAdapter.provision(sliceOf(name))).toBe(false)
      expect((yield* call("GET", `/api/permissions/${encodeURIComponent(name)}/${adminUser}`)).status).toBe(200)
      const url = yield* rabbitmqAdapter.resolve(sliceOf(name))
      expect(yield* Effect.promise(() => amqpOpen(url))).toBe("open")
      yield* call("PUT", vhost(name), claim)
      yield* rabbitmqAdapter.teardown(sliceOf(name))
      expect((yield* call("GET", vhost(name))).status).toBe(404)
      expect(yield* listed()).not.toContain(name)
      // another installation's half-made vhost stays theirs
      const theirs = fresh("crash_theirs")
      yield* call("PUT", vhost(theirs), { description: `berth:someone_else:${theirs} claim:0123456789abcdef` })
      expect(yield* listed()).not.toContain(theirs)
      expect((yield* Effect.flip(rabbitmqAdapter.provision(sliceOf(theirs)))).kind).toBe("taken")
      expect((yield* Effect.flip(rabbitmqAdapter.teardown(sliceOf(theirs)))).kind).toBe("not-owned")
      expect((yield* call("GET", vhost(theirs))).status).toBe(200)
    })
  )

  it.live("refuses unsafe names and owners before reaching the server", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const unsafe = ["", "Upper", "1abc", "a-b", "a/b", "../x", "a b", "%2f", "a".repeat(64)]
      for (const name of unsafe) {
        // a dead management URL: a name that got past the check would fail "unreachable" instead
        const slice = sliceOf(name, { options: { management_url: `http://127.0.0.1:${port}` } })
        for (const verb of [rabbitmqAdapter.provision, rabbitmqAdapter.teardown, rabbitmqAdapter.resolve]) {
          const error = yield* Effect.flip(verb(slice))
          expect(error.kind).toBe("invalid")
        }
      }
      expect(yield* rabbitmqAdapter.resolve(sliceOf("a".repeat(63)))).toContain(`/${"a".repeat(63)}`)
      const badOwner = yield* Effect.flip(rabbitmqAdapter.provision({ ...sliceOf(fresh("x")), owner: "a:b" }))
      expect(badOwner.kind).toBe("invalid")
    })
  )

  it.live("refuses a missing or malformed admin_url or management_url without echoing the password", () =>
    Effect.gen(function* () {
      const cases: ReadonlyArray<[string | undefined, Record<string, unknown>]> = [
        [undefined, {}],
        ["", {}],
        ["not a url hunter2", {}],
        ["http://guest:hunter2@127.0.0.1:15672", {}],
        ["amqp://127.0.0.1:5672", {}],
        ["amqp://guest:hunter2@127.0.0.1:5672", { management_url: "nope hunter2" }],
        ["amqp://guest:hunter2@127.0.0.1:5672", { management_url: "ftp://guest:hunter2@127.0.0.1" }],
        ["amqp://guest:hunter2@127.0.0.1:5672", { management_url: 15672 }]
      ]
      for (const [url, options] of cases) {
        const error = yield* Effect.flip(
          rabbitmqAdapter.provision({ ...sliceOf(fresh("bad")), adminUrl: url, options })
        )
        expect(error.kind).toBe("invalid")
        expect(error.message).not.toContain("hunter2")
        const listing = yield* Effect.flip(rabbitmqAdapter.list({ storage: "/x", adminUrl: url, options, owner }))
        expect(listing.kind).toBe("invalid")
      }
    })
  )

  it.live("reports a closed management port as unreachable, with the plugin hint and no password", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const slice = sliceOf(fresh("down"), {
        adminUrl: "amqp://guest:hunter2@127.0.0.1:5672",
        options: { management_url: `http://127.0.0.1:${port}` }
      })
      for (const verb of [rabbitmqAdapter.provision, rabbitmqAdapter.teardown]) {
        const error = yield* Effect.flip(verb(slice))
        expect(error.kind).toBe("unreachable")
        expect(error.message).toContain(`http://127.0.0.1:${port}`)
        expect(error.message).toContain("ECONNREFUSED")
        expect(error.message).toContain("rabbitmq-plugins enable rabbitmq_management")
        expect(error.message).not.toContain("hunter2")
      }
      const listing = yield* Effect.flip(
        rabbitmqAdapter.list({ storage: "/x", adminUrl: slice.adminUrl, options: slice.options, owner })
      )
      expect(listing.kind).toBe("unreachable")
      // credentials written into management_url are never shown either
      const inline = yield* Effect.flip(
        rabbitmqAdapter.provision(
          sliceOf(fresh("down"), { options: { management_url: `http://u:hunter2@127.0.0.1:${port}` } })
        )
      )
      expect(inline.kind).toBe("unreachable")
      expect(inline.message).not.toContain("hunter2")
    })
  )

  it.live("never takes a wrong management_url path for an absent vhost", () =>
    Effect.gen(function* () {
      const name = fresh("wrong_path")
      yield* rabbitmqAdapter.provision(sliceOf(name))
      const wrong = sliceOf(name, { options: { management_url: `${managementUrl}/not-the-api` } })
      for (const verb of [rabbitmqAdapter.provision, rabbitmqAdapter.teardown]) {
        const error = yield* Effect.flip(verb(wrong))
        expect(error.kind).toBe("failed")
        expect(error.message).toContain("management_url")
      }
      expect((yield* call("GET", vhost(name))).status).toBe(200)
    })
  )

  it.live("reports a management port that never answers as unreachable once the request times out", () =>
    Effect.gen(function* () {
      const sockets = new Set<net.Socket>()
      const server = net.createServer((socket) => {
        sockets.add(socket)
        socket.on("error", () => undefined)
      })
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      const { port } = server.address() as net.AddressInfo
      const error = yield* Effect.flip(
        rabbitmqAdapter.provision(sliceOf(fresh("silent"), { options: { management_url: `http://127.0.0.1:${port}` } }))
      ).pipe(
        Effect.ensuring(
          Effect.promise(() => {
            for (const socket of sockets) socket.destroy()
            return new Promise<void>((resolve) => server.close(() => resolve()))
          })
        )
      )
      expect(error.kind).toBe("unreachable")
      expect(error.message).toContain("no answer within")
      expect(error.message).toContain("rabbitmq-plugins enable rabbitmq_management")
    })
  )

  it.live("reports a wrong password as an authentication failure without the password", () =>
    Effect.gen(function* () {
      const url = new URL(adminUrl)
      url.password = "hunter2-wrong"
      for (const verb of [rabbitmqAdapter.provision, rabbitmqAdapter.teardown]) {
        const error = yield* Effect.flip(verb(sliceOf(fresh("auth"), { adminUrl: url.href })))
        expect(error.kind).toBe("authentication")
        expect(error.message).not.toContain("hunter2")
      }
      const listing = yield* Effect.flip(
        rabbitmqAdapter.list({ storage: "/x", adminUrl: url.href, options: { management_url: managementUrl }, owner })
      )
      expect(listing.kind).toBe("authentication")
    })
  )

  it.live("reports a user without the administrator tag as lacking a grant", () =>
    Effect.gen(function* () {
      for (const tags of ["management", ""]) {
        yield* withUser(tags, (url) =>
          Effect.gen(function* () {
            const name = fresh("grant")
            const error = yield* Effect.flip(rabbitmqAdapter.provision(sliceOf(name, { adminUrl: url })))
            expect(error.kind).toBe("grant")
            expect(error.message).toContain("administrator")
            expect(error.message).not.toContain(new URL(url).password)
            expect((yield* call("GET", vhost(name))).status).toBe(404)
          })
        )
      }
    })
  )
})
