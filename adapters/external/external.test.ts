import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import { AdapterFailure, type AdapterDefinition, answer } from "../../src/adapter-sdk/index.js"
import { isDefunct, parseStat } from "../../src/domain/proc.js"
import type { Slice } from "../contract.js"
import { scratch, sliceMaker } from "../testing.js"
import { externalAdapter } from "./index.js"
import * as Protocol from "./protocol.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const fixtures = join(root, "adapters", "external", "fixtures")
const notesFolder = join(root, "examples", "adapters", "notes")
const { folder } = scratch("external")
/** where the echo fixture logs the requests it gets: named after its parent, this test process */
const echoLog = join(tmpdir(), `berth-adapter-echo-${process.pid}.jsonl`)

/**
 * The example and one fixture import the SDK from dist/. Only that one file is bundled here, and moved into place
 * whole, so a parallel run never rebuilds (and so restarts the daemons of) anything else.
 */
beforeAll(async () => {
  const source = join(root, "src", "adapter-sdk", "index.ts")
  const target = join(root, "dist", "adapter-sdk.mjs")
  if (existsSync(target) && statSync(target).mtimeMs >= statSync(source).mtimeMs) return
  const esbuild = await import("esbuild")
  mkdirSync(dirname(target), { recursive: true })
  const scratch = `${target}.${process.pid}.tmp`
  await esbuild.build({
    entryPoints: [source],
    outfile: scratch,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    logLevel: "warning"
  })
  renameSync(scratch, target)
})

afterAll(() => {
  rmSync(echoLog, { force: true })
})

/** the berth installation asking (a slice marked with another is not ours) */
const OWNER = "test-home"

const freshStorage = (): string => folder("storage")

const slice = sliceMaker({ adapter: "notes", service: "notes", owner: OWNER })
const sliceOf = (storage: string, world: string, extra: Partial<Slice> = {}): Slice =>
  slice(`acme_${world}_notes`, { storage, world, ...extra })

const scopeOf = (storage: string) => ({ storage, owner: OWNER, adminUrl: undefined, options: {} })

/** Tight limits, so the misbehaving fixtures cost little time. */
const fixture = (name: string, timeouts: Partial<Record<Protocol.Verb, Duration.DurationInput>> = {}) =>
  externalAdapter(name, { path: fixtures, grace: Duration.millis(200), timeouts })

/** Alive means running code: a killed process its parent has not reaped yet does not count. */
const alive = (pid: number): boolean => {
  try {
    const stat = parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
    return stat !== undefined && !isDefunct(stat)
  } catch {
    return false
  }
}

const pidsIn = (file: string): ReadonlyArray<number> => JSON.parse(readFileSync(file, "utf8"))

const callsIn = (storage: string): ReadonlyArray<string> =>
  existsSync(join(storage, "calls.log")) ? readFileSync(join(storage, "calls.log"), "utf8").trim().split("\n") : []

describe("the example notes adapter, through externalAdapter", () => {
  const notes = externalAdapter("notes", { path: notesFolder })

  it.live("provisions once, resolves, keeps slices apart, lists and tears down idempotently", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const a = sliceOf(storage, "a")
      const b = sliceOf(storage, "b")
      expect(yield* notes.provision(a)).toBe(true)
      expect(yield* notes.provision(a)).toBe(false)
      expect(yield* notes.provision(b)).toBe(true)
      expect(notes.capabilities).toEqual({ clone: true })

      const urlA = yield* notes.resolve(a)
      const urlB = yield* notes.resolve(b)
      expect(urlA).toBe(`file://${storage}/acme_a_notes.notes/`)
      writeFileSync(join(fileURLToPath(urlA), "hello.json"), JSON.stringify({ text: "only in a" }))
      expect(readdirSync(fileURLToPath(urlA))).toContain("hello.json")
      expect(readdirSync(fileURLToPath(urlB))).not.toContain("hello.json")

      expect(yield* notes.list(scopeOf(storage))).toEqual(["acme_a_notes", "acme_b_notes"])
      yield* notes.teardown(a)
      yield* notes.teardown(a)
      expect(existsSync(fileURLToPath(urlA))).toBe(false)
      expect(yield* notes.list(scopeOf(storage))).toEqual(["acme_b_notes"])
      expect(readdirSync(storage)).toEqual(["acme_b_notes.notes"])
    })
  )

  it.live("tells whose a name is; an adapter written before standing is taken as saying nothing against it", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const mine = sliceOf(storage, "mine")
      expect(yield* notes.standing(mine)).toBe("missing")
      yield* notes.provision(mine)
      expect(yield* notes.standing(mine)).toBe("ours")
      expect(yield* notes.standing({ ...mine, owner: "another-home" })).toBe("foreign")
      // the echo fixture's capabilities do not mention standing: it is never asked
      const echo = fixture("echo")
      expect(yield* echo.standing(sliceOf(freshStorage(), "x"))).toBe("missing")
      const asked = readFileSync(echoLog, "utf8")
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { verb: string }).verb)
      expect(asked).not.toContain("standing")
    })
  )

  it.live("clones one slice into another, which then lives on its own", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const golden = sliceOf(storage, "golden")
      const copy = sliceOf(storage, "copy")
      yield* notes.provision(golden)
      const goldenFolder = fileURLToPath(yield* notes.resolve(golden))
      writeFileSync(join(goldenFolder, "seed.json"), JSON.stringify({ text: "seeded" }))
      yield* notes.provision(copy)
      yield* notes.clone(golden, copy)
      const copyFolder = fileURLToPath(yield* notes.resolve(copy))
      expect(JSON.parse(readFileSync(join(copyFolder, "seed.json"), "utf8"))).toEqual({ text: "seeded" })
      expect(JSON.parse(readFileSync(join(copyFolder, ".berth-notes"), "utf8"))).toEqual({
        name: "acme_copy_notes",
        owner: OWNER
      })
      writeFileSync(join(copyFolder, "mine.json"), "{}")
      expect(existsSync(join(goldenFolder, "mine.json"))).toBe(false)
      expect(yield* notes.list(scopeOf(storage))).toEqual(["acme_copy_notes", "acme_golden_notes"])
    })
  )

  it.live("refuses folders it does not own, with the kind kept, and leaves them alone", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "foreign")
      const folder = join(storage, "acme_foreign_notes.notes")
      mkdirSync(folder)
      writeFileSync(join(folder, "precious.txt"), "not berth's")
      const taken = yield* Effect.flip(notes.provision(slice))
      expect(taken.kind).toBe("taken")
      expect(taken.message).toContain("is not this berth's notes slice")
      // "taken" means nothing of ours was made: no teardown follows
      expect(taken.message).not.toContain("teardown")
      const notOwned = yield* Effect.flip(notes.teardown(slice))
      expect(notOwned.kind).toBe("not-owned")
      expect(readFileSync(join(folder, "precious.txt"), "utf8")).toBe("not berth's")

      // another berth installation's slice is not ours either, and not listed
      const theirs = sliceOf(storage, "theirs", { owner: "another-home" })
      expect(yield* notes.provision(theirs)).toBe(true)
      expect((yield* Effect.flip(notes.teardown({ ...theirs, owner: OWNER }))).kind).toBe("not-owned")
      expect(yield* notes.list(scopeOf(storage))).toEqual([])
      expect(yield* notes.list({ ...scopeOf(storage), owner: "another-home" })).toEqual(["acme_theirs_notes"])
    })
  )
})

describe("externalAdapter", () => {
  it.live("sends each verb its request on stdin, and asks capabilities once per instance", () =>
    Effect.gen(function* () {
      rmSync(echoLog, { force: true })
      const echo = fixture("echo")
      const storage = freshStorage()
      const adminUrl = "postgres://admin:pw@127.0.0.1:5432/postgres"
      const a = sliceOf(storage, "a", { adapter: "echo", adminUrl, options: { region: "eu", size: 3 } })
      const b = sliceOf(storage, "b", { adapter: "echo" })
      expect(echo.capabilities).toEqual({ clone: true })
      expect(yield* echo.provision(a)).toBe(true)
      expect(yield* echo.provision(b)).toBe(true)
      expect(yield* echo.resolve(a)).toBe("echo://somewhere")
      yield* echo.clone(a, b)
      expect(yield* echo.list({ storage, owner: OWNER, adminUrl, options: {} })).toEqual(["a", "b"])
      yield* echo.teardown(b)

      const logged: ReadonlyArray<{ verb: string; request: unknown }> = readFileSync(echoLog, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line))
      expect(logged.map((l) => l.verb)).toEqual([
        "capabilities",
        "provision",
        "provision",
        "resolve",
        "clone",
        "list",
        "teardown"
      ])
      for (const { verb, request } of logged) {
        expect(Schema.decodeUnknownSync(Protocol.Request)(request).verb).toBe(verb)
      }
      const wireA = { ...a, adminUrl, options: { region: "eu", size: 3 } }
      const { adminUrl: _none, ...wireB } = b
      expect(logged[0]?.request).toEqual({ protocol: 1, verb: "capabilities", config: {} })
      expect(logged[1]?.request).toEqual({
        protocol: 1,
        verb: "provision",
        slice: wireA,
        config: { region: "eu", size: 3 }
      })
      expect(logged[2]?.request).toEqual({ protocol: 1, verb: "provision", slice: wireB, config: {} })
      expect(logged[4]?.request).toEqual({ protocol: 1, verb: "clone", from: wireA, slice: wireB, config: {} })
      expect(logged[5]?.request).toEqual({
        protocol: 1,
        verb: "list",
        scope: { adapter: "echo", owner: OWNER, storage, adminUrl, options: {} },
        config: {}
      })
    })
  )

  it.live("names a missing executable, a non-executable one and a bad name clearly", () =>
    Effect.gen(function* () {
      const empty = freshStorage()
      const name = `missing-${process.pid}-${basename(empty)}`
      const missing = externalAdapter(name, { path: `${empty}:relative/bin:` })
      const error = yield* Effect.flip(missing.provision(sliceOf(freshStorage(), "m")))
      expect(error.kind).toBe("invalid")
      expect(error.message).toContain(`no built-in adapter "${name}"`)
      expect(error.message).toContain(`no executable berth-adapter-${name} on PATH`)
      expect(yield* missing.askCapabilities).toEqual({ clone: false })
      expect(missing.capabilities).toEqual({ clone: false })

      writeFileSync(join(empty, "berth-adapter-noexec"), "#!/bin/sh\necho '{}'\n")
      chmodSync(join(empty, "berth-adapter-noexec"), 0o644)
      const noexec = yield* Effect.flip(externalAdapter("noexec", { path: empty }).resolve(sliceOf(empty, "n")))
      expect(noexec.message).toContain(`${join(empty, "berth-adapter-noexec")} exists but is not executable`)

      const badName = yield* Effect.flip(externalAdapter("../notes", { path: fixtures }).resolve(sliceOf(empty, "e")))
      expect(badName.kind).toBe("invalid")
      expect(badName.message).toContain("not a valid adapter name")
    })
  )

  it.live("reports an adapter that prints garbage (showing only its start) or a reply of the wrong shape", () =>
    Effect.gen(function* () {
      const garbage = fixture("garbage")
      const storage = freshStorage()
      const error = yield* Effect.flip(garbage.resolve(sliceOf(storage, "g")))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain("berth-adapter-garbage resolve did not reply with JSON")
      expect(error.message).toContain("Hello from a confused adapter!")
      expect(error.message.split("blah").length - 1).toBeLessThan(45)
      // the failed capabilities count as "cannot clone"
      expect(yield* garbage.askCapabilities).toEqual({ clone: false })
      const provision = yield* Effect.flip(garbage.provision(sliceOf(storage, "g")))
      expect(provision.message).toContain("clean-up with berth-adapter-garbage teardown also failed")
      const list = yield* Effect.flip(garbage.list(scopeOf(storage)))
      expect(list.message).toContain(`berth-adapter-garbage list replied {"ok":true,"names":"not a list"}`)
      expect(list.message).toContain("which is not a valid reply (at names:")
    })
  )

  it.live("stops an adapter that hangs, its whole process group, then undoes the provision", () =>
    Effect.gen(function* () {
      const hang = fixture("hang", { provision: Duration.millis(1500) })
      const storage = freshStorage()
      const error = yield* Effect.flip(hang.provision(sliceOf(storage, "h")))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain("berth-adapter-hang provision did not answer within 1.5 s")
      expect(error.message).toContain("berth ran berth-adapter-hang teardown")
      expect(callsIn(storage)).toEqual(["teardown"])
      const pids = pidsIn(join(storage, "provision.pids"))
      expect(pids).toHaveLength(2)
      // both ignore SIGTERM: only the SIGKILL to the group ends them
      expect(pids.filter(alive)).toEqual([])
    })
  )

  it.live("leaves no process behind when the verb is interrupted", () =>
    Effect.gen(function* () {
      const hang = fixture("hang")
      const storage = freshStorage()
      const fiber = yield* Effect.fork(hang.resolve(sliceOf(storage, "i")))
      const pidsFile = join(storage, "resolve.pids")
      for (let i = 0; i < 400 && !existsSync(pidsFile); i++) yield* Effect.sleep(Duration.millis(25))
      const pids = pidsIn(pidsFile)
      expect(pids.filter(alive)).toEqual(pids)
      yield* Fiber.interrupt(fiber)
      expect(pids.filter(alive)).toEqual([])
    })
  )

  it.live("reports a non-zero exit with its code and the tail of stderr, and a death by signal", () =>
    Effect.gen(function* () {
      const crash = fixture("crash")
      const storage = freshStorage()
      const error = yield* Effect.flip(crash.provision(sliceOf(storage, "c")))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain("berth-adapter-crash provision exited with code 3")
      expect(error.message).toContain("crash log line 30")
      expect(error.message).toContain("crash log line 21")
      expect(error.message).not.toContain("crash log line 20")
      expect(error.message).toContain("berth ran berth-adapter-crash teardown")
      expect(callsIn(storage)).toEqual(["teardown"])

      const killed = yield* Effect.flip(crash.resolve(sliceOf(storage, "c")))
      expect(killed.message).toContain("berth-adapter-crash resolve was killed by SIGKILL")

      expect(crash.capabilities).toEqual({ clone: false })
      const clone = yield* Effect.flip(crash.clone(sliceOf(storage, "c"), sliceOf(storage, "d")))
      expect(clone.kind).toBe("invalid")
      expect(clone.message).toContain("cannot clone")
    })
  )

  it.live("keeps the kind of an ok:false reply, and never shows the admin URL's password", () =>
    Effect.gen(function* () {
      const refuse = fixture("refuse")
      const adminUrl = "postgres://admin:s3cret-Pw%2F9@127.0.0.1:5432/postgres"
      const withKind = (storage: string, options: Record<string, unknown>) =>
        sliceOf(storage, "r", { adapter: "refuse", adminUrl, options })

      const auth = freshStorage()
      const error = yield* Effect.flip(refuse.provision(withKind(auth, { kind: "authentication" })))
      expect(error.kind).toBe("authentication")
      expect(error.message).toContain("berth-adapter-refuse provision: the server at postgres://admin:***@127.0.0.1")
      expect(callsIn(auth)).toEqual(["teardown"])

      const taken = freshStorage()
      const takenError = yield* Effect.flip(refuse.provision(withKind(taken, { kind: "taken" })))
      expect(takenError.kind).toBe("taken")
      expect(callsIn(taken)).toEqual([])

      const weird = yield* Effect.flip(refuse.provision(withKind(freshStorage(), { kind: "weird" })))
      expect(weird.kind).toBe("failed")

      // a non-zero exit quotes stderr too: scrubbed as well
      const exited = yield* Effect.flip(refuse.provision(withKind(freshStorage(), { kind: "grant", exit: 2 })))
      expect(exited.kind).toBe("grant")
      expect(exited.message).toContain("exited with code 2: the server at")
      expect(exited.message).toContain("connecting to postgres://admin:***@127.0.0.1")
      for (const e of [error, takenError, weird, exited]) {
        expect(e.message).not.toContain("s3cret")
      }
    })
  )

  it.live("undoes a provision that crashed halfway (an SDK adapter: exit 1, the stack on stderr)", () =>
    Effect.gen(function* () {
      const halfmade = fixture("halfmade")
      const storage = freshStorage()
      const error = yield* Effect.flip(halfmade.provision(sliceOf(storage, "x")))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain("berth-adapter-halfmade provision exited with code 1: disk full halfway through")
      expect(error.message).toContain("Error: disk full halfway through")
      expect(error.message).toContain("berth ran berth-adapter-halfmade teardown")
      expect(callsIn(storage)).toEqual(["teardown"])
      expect(readdirSync(storage)).toEqual(["calls.log"])
    })
  )

  it.live("stops an adapter that floods stdout", () =>
    Effect.gen(function* () {
      const flood = fixture("flood")
      const storage = freshStorage()
      const error = yield* Effect.flip(flood.resolve(sliceOf(storage, "f")))
      expect(error.kind).toBe("failed")
      expect(error.message).toContain("berth-adapter-flood resolve printed more than 1 MiB on stdout and was stopped")
      expect(error.message.length).toBeLessThan(1000)
      expect(pidsIn(join(storage, "resolve.pids")).filter(alive)).toEqual([])
    })
  )
})

describe("the adapter SDK", () => {
  const slice = {
    adapter: "x",
    project: "acme",
    world: "main",
    service: "db",
    name: "acme_main_db",
    owner: "home",
    storage: "/tmp/x",
    options: {}
  }
  const definition: AdapterDefinition = {
    provision: (s) => s.name === "acme_main_db",
    resolve: () => {
      throw new AdapterFailure("unreachable", "the server is down")
    },
    teardown: () => {
      throw new TypeError("oops")
    }
  }
  const ask = (verb: string, request: unknown) => answer(definition, verb, JSON.stringify(request))

  it("answers a verb, and declares no clone without a clone function (nor standing without one)", async () => {
    expect(await ask("provision", { protocol: 1, verb: "provision", slice, config: {} })).toEqual({
      reply: { ok: true, created: true },
      exitCode: 0
    })
    expect((await ask("capabilities", { protocol: 1, verb: "capabilities", config: {} })).reply).toEqual({
      ok: true,
      clone: false,
      standing: false
    })
    expect((await ask("standing", { protocol: 1, verb: "standing", slice, config: {} })).reply).toMatchObject({
      ok: false,
      kind: "invalid"
    })
    expect((await ask("clone", { protocol: 1, verb: "clone", from: slice, slice, config: {} })).reply).toMatchObject({
      ok: false,
      kind: "invalid"
    })
  })

  it("turns an AdapterFailure into its kind, and a crash into exit 1 with the stack", async () => {
    expect(await ask("resolve", { protocol: 1, verb: "resolve", slice, config: {} })).toEqual({
      reply: { ok: false, error: "the server is down", kind: "unreachable" },
      exitCode: 0
    })
    const crash = await ask("teardown", { protocol: 1, verb: "teardown", slice, config: {} })
    expect(crash.reply).toEqual({ ok: false, error: "oops" })
    expect(crash.exitCode).toBe(1)
    expect(crash.stderr).toContain("TypeError: oops")
  })

  it("refuses requests of another protocol, another verb or another shape", async () => {
    const reply = async (verb: string, request: unknown) => (await ask(verb, request)).reply
    expect(await reply("provision", { protocol: 2, verb: "provision", slice, config: {} })).toMatchObject({
      kind: "invalid",
      error: "this adapter speaks protocol 1; the request is for 2"
    })
    expect(await reply("resolve", { protocol: 1, verb: "provision", slice, config: {} })).toMatchObject({
      error: 'started as `resolve` but the request is for "provision"'
    })
    expect(
      await reply("provision", { protocol: 1, verb: "provision", slice: { ...slice, name: 7 }, config: {} })
    ).toMatchObject({ error: "request.slice.name must be a string" })
    expect((await answer(definition, "provision", "{not json")).reply).toMatchObject({ kind: "invalid" })
  })
})
