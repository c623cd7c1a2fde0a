/**
 * The contract every adapter keeps, as one suite run against each adapter's real server (`conformance.test.ts` holds
 * the table). A subject says how to reach its server, how to write and read a value through a resolved URL with the
 * server's own client, and — where it has such a thing — how to make something of the slice's name that berth did not
 * make. Everything else is the same for all: provision and teardown are idempotent, another installation's and
 * unmarked slices are never touched or listed, clones are copies that live on their own, concurrent provisions settle
 * on one owner, unsafe names are refused before anything is made, and a server that is gone (a closed port, or a
 * connection cut mid-way) is a typed `unreachable` error, never a hang.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { mkdtempSync, realpathSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { Adapter, AdapterError, ListScope, Slice } from "./contract.js"
import { runNames, runOwner, sliceMaker, titled } from "./testing.js"

/** Writes and reads one value through a slice's resolved URL, with the server's own client. */
export interface Probe {
  readonly put: (url: string, key: string, value: string) => Promise<void>
  /** undefined when the key (or anything the probe makes) is not there */
  readonly get: (url: string, key: string) => Promise<string | undefined>
}

/** Something under a slice's name that berth did not make: the server's own command, bypassing the adapter. */
export interface Unmarked {
  readonly make: (slice: Slice) => Promise<void>
  readonly exists: (slice: Slice) => Promise<boolean>
  readonly remove: (slice: Slice) => Promise<void>
}

export interface Subject {
  /** what the suite is called in the report: `postgres`, `redis (prefix)` */
  readonly label: string
  /** the adapter name slices carry (`mariadb` for the mysql family, say) */
  readonly adapterName: string
  readonly adapter: Adapter
  /** the admin URL of the real server; undefined for embedded stores */
  readonly adminUrl: string | undefined
  readonly options?: Readonly<Record<string, unknown>>
  /** the longest slice name the adapter takes */
  readonly maxName: number
  readonly probe: Probe
  readonly unmarked?: Unmarked
  /**
   * For server adapters: the port the adapter talks to, and the admin URL and options that point it at another port
   * on 127.0.0.1 instead (a closed one, or a proxy the suite cuts).
   */
  readonly server?: {
    readonly port: number
    readonly at: (port: number) => { readonly adminUrl: string; readonly options?: Readonly<Record<string, unknown>> }
    /** the client's chunk at which the cutting proxy drops the connection (default 2: after the handshake) */
    readonly cutAt?: number
  }
  /** how many provisions run at once in the concurrency cases (default 5) */
  readonly concurrency?: number
  /**
   * why the suite cannot run here (no server of this kind on the machine): the subject is then reported as skipped
   * with this reason in its title, never as passed
   */
  readonly skip?: string | undefined
}

/** Names every adapter refuses: empty, escaping a folder, hidden, with a NUL. */
export const COMMON_HOSTILE: ReadonlyArray<string> = ["", "../escape", "a/b", ".hidden", "a\u0000b", "a\\b"]

/** Names every server adapter refuses too: quotes, spaces, globs and wildcards, shell and non-ASCII characters. */
export const SERVER_HOSTILE: ReadonlyArray<string> = [
  ...COMMON_HOSTILE,
  'x"; DROP DATABASE postgres; --',
  "a b",
  "a'b",
  "a`b",
  "a*",
  "a>",
  "a$(id)",
  "ünïcode"
]

/** No verb may take longer than this against a server that is gone. */
const NO_HANG = Duration.seconds(20)

/** A port on 127.0.0.1 that nothing listens on (bound, then closed). */
export const closedPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

/**
 * A TCP proxy to `port` on 127.0.0.1 that lets each connection start and then drops it — both sides destroyed — when
 * the client sends its `cutAt`-th chunk: the server going away in the middle of a verb.
 */
export const cuttingProxy = (
  port: number,
  cutAt: number
): Promise<{ readonly port: number; readonly close: () => Promise<void> }> =>
  new Promise((resolve, reject) => {
    const sockets = new Set<net.Socket>()
    const server = net.createServer((client) => {
      const upstream = net.connect(port, "127.0.0.1")
      sockets.add(client)
      sockets.add(upstream)
      let chunks = 0
      const cut = () => {
        client.destroy()
        upstream.destroy()
      }
      client.on("error", cut)
      upstream.on("error", cut)
      client.on("close", cut)
      upstream.on("close", cut)
      client.on("data", (data) => {
        chunks++
        if (chunks >= cutAt) cut()
        else upstream.write(data)
      })
      upstream.on("data", (data) => client.write(data))
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port: proxyPort } = server.address() as net.AddressInfo
      resolve({
        port: proxyPort,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })

/** Registers the conformance cases of one subject. */
export const conformance = (subject: Subject): void => {
  const { adapter, probe } = subject
  /** this run's installation, and another one sharing the server */
  const owner = runOwner()
  const otherOwner = `${owner}other`
  const base = realpathSync(mkdtempSync(join(tmpdir(), "berth-conformance-")))
  const { prefix, fresh } = runNames("cf")
  const made: Array<Slice> = []

  const make = sliceMaker({
    adapter: subject.adapterName,
    project: "conformance",
    service: "svc",
    adminUrl: subject.adminUrl,
    options: { ...subject.options }
  })
  const sliceOf = (
    name: string,
    by: string = owner,
    at?: { readonly adminUrl: string; readonly options?: Readonly<Record<string, unknown>> }
  ): Slice => {
    const slice = make(name, {
      owner: by,
      // embedded stores keep each installation's slices under its own BERTH_HOME
      storage: join(base, by),
      ...(at === undefined ? {} : { adminUrl: at.adminUrl, options: { ...subject.options, ...at.options } })
    })
    made.push(slice)
    return slice
  }
  const scopeOf = (by: string = owner): ListScope => ({
    storage: join(base, by),
    adminUrl: subject.adminUrl,
    options: { ...subject.options },
    owner: by
  })
  const listed = (by: string = owner) =>
    Effect.map(adapter.list(scopeOf(by)), (names) => names.filter((n) => n.startsWith(prefix)))
  const put = (slice: Slice, key: string, value: string) =>
    Effect.flatMap(adapter.resolve(slice), (url) => Effect.promise(() => probe.put(url, key, value)))
  const get = (slice: Slice, key: string) =>
    Effect.flatMap(adapter.resolve(slice), (url) => Effect.promise(() => probe.get(url, key)))
  /** an AdapterError's kind, or "ok" */
  const outcome = <A>(effect: Effect.Effect<A, AdapterError>) =>
    Effect.map(Effect.either(effect), (result) => (Either.isLeft(result) ? result.left.kind : "ok"))

  afterAll(async () => {
    for (const slice of made) {
      // hostile names included: a remove that throws at once is as ignorable as one that rejects
      const remove = subject.unmarked?.remove
      if (remove !== undefined)
        await Promise.resolve()
          .then(() => remove(slice))
          .catch(() => undefined)
      await Effect.runPromise(Effect.ignore(adapter.teardown(slice)))
    }
    rmSync(base, { recursive: true, force: true })
  })

  describe.skipIf(subject.skip !== undefined)(titled(`${subject.label} conformance`, subject.skip), () => {
    it.live("provisions once, lists it, tears down idempotently, and can provision again", () =>
      Effect.gen(function* () {
        const slice = sliceOf(fresh("main"))
        expect(yield* adapter.provision(slice)).toBe(true)
        expect(yield* adapter.provision(slice)).toBe(false)
        expect(yield* listed()).toContain(slice.name)
        yield* adapter.teardown(slice)
        yield* adapter.teardown(slice)
        expect(yield* listed()).not.toContain(slice.name)
        expect(yield* adapter.provision(slice)).toBe(true)
        yield* adapter.teardown(slice)
      })
    )

    it.live("resolves to a URL the server's own client uses, private to the slice", () =>
      Effect.gen(function* () {
        const a = sliceOf(fresh("res_a"))
        const b = sliceOf(fresh("res_b"))
        yield* adapter.provision(a)
        yield* adapter.provision(b)
        expect(yield* adapter.resolve(a)).toBe(yield* adapter.resolve(a))
        yield* put(a, "k", "in-a")
        expect(yield* get(a, "k")).toBe("in-a")
        expect(yield* get(b, "k")).toBeUndefined()
        yield* adapter.teardown(a)
        yield* adapter.teardown(b)
      })
    )

    it.live("never touches, tears down or lists another installation's slice", () =>
      Effect.gen(function* () {
        const name = fresh("theirs")
        const theirs = sliceOf(name, otherOwner)
        const ours = sliceOf(name)
        expect(yield* adapter.provision(theirs)).toBe(true)
        yield* put(theirs, "k", "theirs")
        expect(yield* listed()).not.toContain(name)
        expect(["ok", "not-owned"]).toContain(yield* outcome(adapter.teardown(ours)))
        const provisioned = yield* outcome(adapter.provision(ours))
        expect(["ok", "taken"]).toContain(provisioned)
        if (provisioned === "ok") {
          // a slice of its own elsewhere (another storage folder, another DB): it is empty, theirs is untouched
          expect(yield* get(ours, "k")).toBeUndefined()
          yield* adapter.teardown(ours)
        }
        expect(yield* get(theirs, "k")).toBe("theirs")
        expect(yield* listed(otherOwner)).toContain(name)
        yield* adapter.teardown(theirs)
        expect(yield* listed(otherOwner)).not.toContain(name)
      })
    )

    if (adapter.standing !== undefined) {
      const standing = adapter.standing
      it.live(
        "tells whose a name is: missing, ours once made, another installation's as foreign (where names collide)",
        () =>
          Effect.gen(function* () {
            const name = fresh("standing")
            const ours = sliceOf(name)
            const theirs = sliceOf(name, otherOwner)
            expect(yield* standing(ours)).toBe("missing")
            yield* adapter.provision(ours)
            const mine = yield* standing(ours)
            const seenByOther = yield* standing(theirs)
            // "missing" only where the server keeps installations apart under one name (a Redis DB is allocated to the
            // name as each installation tags it): then the other installation makes a slice of its own
            const apart = seenByOther === "missing" ? yield* outcome(adapter.provision(theirs)) : "not asked"
            if (apart === "ok") yield* adapter.teardown(theirs)
            yield* adapter.teardown(ours)
            expect(mine).toBe("ours")
            expect(seenByOther === "foreign" || apart === "ok", `another installation sees ${seenByOther}`).toBe(true)
            expect(yield* standing(ours)).toBe("missing")
          })
      )
    }

    if (subject.unmarked !== undefined) {
      const unmarked = subject.unmarked
      it.live("never reuses, tears down, clones into or lists what berth did not make", () =>
        Effect.gen(function* () {
          const slice = sliceOf(fresh("unmarked"))
          yield* Effect.promise(() => unmarked.make(slice))
          if (adapter.standing !== undefined) expect(yield* adapter.standing(slice)).toBe("foreign")
          expect(yield* outcome(adapter.provision(slice))).toBe("taken")
          expect(yield* outcome(adapter.teardown(slice))).toBe("not-owned")
          expect(yield* listed()).not.toContain(slice.name)
          if (adapter.capabilities.clone) {
            const source = sliceOf(fresh("unmarked_src"))
            yield* adapter.provision(source)
            expect(yield* outcome(adapter.clone(source, slice))).toBe("not-owned")
            expect(yield* outcome(adapter.clone(slice, source))).toBe("not-owned")
            yield* adapter.teardown(source)
          }
          expect(yield* Effect.promise(() => unmarked.exists(slice))).toBe(true)
          yield* Effect.promise(() => unmarked.remove(slice))
        })
      )
    }

    it.live("lists exactly this installation's slices", () =>
      Effect.gen(function* () {
        const ours = [sliceOf(fresh("list_a")), sliceOf(fresh("list_b"))]
        const theirs = sliceOf(fresh("list_c"), otherOwner)
        for (const slice of [...ours, theirs]) yield* adapter.provision(slice)
        const names = yield* listed()
        for (const slice of ours) expect(names).toContain(slice.name)
        expect(names).not.toContain(theirs.name)
        expect(yield* listed(otherOwner)).toEqual([theirs.name])
        for (const slice of [...ours, theirs]) yield* adapter.teardown(slice)
        expect(yield* listed()).toEqual([])
      })
    )

    if (adapter.capabilities.clone) {
      it.live("clones a slice into another, which lives on its own afterwards", () =>
        Effect.gen(function* () {
          const source = sliceOf(fresh("golden"))
          const target = sliceOf(fresh("copy"))
          yield* adapter.provision(source)
          yield* adapter.provision(target)
          yield* put(source, "a", "1")
          yield* put(target, "old", "gone")
          yield* adapter.clone(source, target)
          expect(yield* get(target, "a")).toBe("1")
          // the target is replaced, not merged
          expect(yield* get(target, "old")).toBeUndefined()
          yield* put(source, "b", "2")
          yield* put(target, "c", "3")
          expect(yield* get(target, "b")).toBeUndefined()
          expect(yield* get(source, "c")).toBeUndefined()
          expect(yield* get(source, "a")).toBe("1")
          // still one slice each, both ours
          const names = yield* listed()
          expect(names).toContain(source.name)
          expect(names).toContain(target.name)
          expect(yield* outcome(adapter.clone(source, source))).toBe("invalid")
          yield* adapter.teardown(source)
          yield* adapter.teardown(target)
          expect(yield* outcome(adapter.clone(source, target))).not.toBe("ok")
        })
      )
    } else {
      it.live("cannot clone, and says so", () =>
        Effect.gen(function* () {
          expect(yield* outcome(adapter.clone(sliceOf(fresh("from")), sliceOf(fresh("to"))))).toBe("invalid")
        })
      )
    }

    it.live("concurrent provisions: distinct slices are all made; one slice is made exactly once", () =>
      Effect.gen(function* () {
        const n = subject.concurrency ?? 5
        const distinct = Array.from({ length: n }, (_, i) => sliceOf(fresh(`many${i}`)))
        const created = yield* Effect.all(
          distinct.map((slice) => adapter.provision(slice)),
          { concurrency: "unbounded" }
        )
        expect(created).toEqual(distinct.map(() => true))
        const names = yield* listed()
        for (const slice of distinct) expect(names).toContain(slice.name)
        yield* Effect.all(
          distinct.map((slice) => adapter.teardown(slice)),
          { concurrency: "unbounded" }
        )
        const one = sliceOf(fresh("one"))
        const results = yield* Effect.all(
          Array.from({ length: n }, () => adapter.provision(one)),
          { concurrency: "unbounded" }
        )
        expect(results.filter((made) => made)).toHaveLength(1)
        yield* put(one, "k", "v")
        expect(yield* get(one, "k")).toBe("v")
        yield* adapter.teardown(one)
        expect(yield* listed()).toEqual([])
      })
    )

    it.live("takes a name at the length limit and refuses one past it, making nothing", () =>
      Effect.gen(function* () {
        const longest = fresh("long")
        const atLimit = sliceOf(longest.padEnd(subject.maxName, "x"))
        expect(atLimit.name).toHaveLength(subject.maxName)
        expect(yield* adapter.provision(atLimit)).toBe(true)
        yield* put(atLimit, "k", "v")
        expect(yield* get(atLimit, "k")).toBe("v")
        expect(yield* listed()).toContain(atLimit.name)
        yield* adapter.teardown(atLimit)
        const past = sliceOf(`${atLimit.name}x`)
        expect(yield* outcome(adapter.provision(past))).toBe("invalid")
        expect(yield* listed()).toEqual([])
      })
    )

    it.live("refuses hostile names with kind invalid before making anything", () =>
      Effect.gen(function* () {
        const names = subject.server === undefined ? COMMON_HOSTILE : SERVER_HOSTILE
        const before = yield* adapter.list(scopeOf())
        for (const name of names) {
          const slice = sliceOf(name)
          for (const verb of [adapter.provision, adapter.resolve, adapter.teardown] as const) {
            const error = yield* Effect.flip(verb(slice))
            expect(error.kind, JSON.stringify(name)).toBe("invalid")
          }
          if (adapter.capabilities.clone) {
            const safe = sliceOf(fresh("hostile_peer"))
            expect(yield* outcome(adapter.clone(safe, slice))).toBe("invalid")
            expect(yield* outcome(adapter.clone(slice, safe))).toBe("invalid")
          }
        }
        expect(yield* adapter.list(scopeOf())).toEqual(before)
      })
    )

    if (subject.server !== undefined) {
      const server = subject.server
      /** every verb that talks to the server, against a slice pointed elsewhere: kind unreachable, in time */
      const allUnreachable = (port: number) =>
        Effect.gen(function* () {
          const at = server.at(port)
          const slice = sliceOf(fresh("gone"), owner, at)
          const verbs: Array<[string, Effect.Effect<unknown, AdapterError>]> = [
            ["provision", adapter.provision(slice)],
            ["teardown", adapter.teardown(slice)],
            ["list", adapter.list({ ...scopeOf(), adminUrl: at.adminUrl, options: slice.options })]
          ]
          if (adapter.capabilities.clone)
            verbs.push(["clone", adapter.clone(sliceOf(fresh("gone_src"), owner, at), slice)])
          for (const [verb, effect] of verbs) {
            const error = yield* Effect.flip(effect).pipe(
              Effect.timeoutFail({ duration: NO_HANG, onTimeout: () => new Error(`${verb} hung`) })
            )
            expect(error.kind, `${verb}: ${error.message}`).toBe("unreachable")
            expect(error.message, verb).toContain(`127.0.0.1:${port}`)
          }
        })

      it.live("a closed port is unreachable, named in the message, with no hang", () =>
        Effect.flatMap(
          Effect.promise(() => closedPort()),
          allUnreachable
        )
      )

      it.live("a server that drops the connection mid-verb is unreachable, with no hang", () =>
        Effect.acquireUseRelease(
          Effect.promise(() => cuttingProxy(server.port, server.cutAt ?? 2)),
          (proxy) => allUnreachable(proxy.port),
          (proxy) => Effect.promise(() => proxy.close())
        )
      )
    }
  })
}
