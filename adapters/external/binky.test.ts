import { describe, expect, it } from "@effect/vitest"
import { chmodSync, existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { conformance } from "../conformance.js"
import type { Adapter, Slice } from "../contract.js"
import { scratch, sliceMaker } from "../testing.js"
import { externalAdapter } from "./index.js"

const fixtures = fileURLToPath(new URL("./fixtures", import.meta.url))
const { folder: fresh } = scratch("binky")

const OWNER = "test_home"

const slice = sliceMaker({ adapter: "drawer", service: "files", owner: OWNER, options: { depth: 2 } })
const sliceOf = (storage: string, world: string, extra: Partial<Slice> = {}): Slice =>
  slice(`acme_${world}_files`, { storage, world, ...extra })

const scopeOf = (storage: string) => ({ storage, owner: OWNER, adminUrl: undefined, options: { depth: 2 } })

/** A folder holding one executable written here, for an adapter that misbehaves in one given way. */
const adapterFolder = (files: Readonly<Record<string, string>>): string => {
  const dir = fresh("bin")
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(dir, name), text)
    chmodSync(join(dir, name), 0o755)
  }
  return dir
}

const drawer = externalAdapter("drawer", { path: fixtures, grace: Duration.millis(200) })

describe("an adapter written for binky, through externalAdapter", () => {
  it.live("creates once, addresses, lists this installation's, destroys idempotently", () =>
    Effect.gen(function* () {
      const storage = fresh("drawer")
      const a = sliceOf(storage, "a")
      const b = sliceOf(storage, "b")
      expect(yield* drawer.provision(a)).toBe(true)
      expect(yield* drawer.provision(a)).toBe(false)
      expect(yield* drawer.provision(b)).toBe(true)
      const url = yield* drawer.resolve(a)
      expect(url).toBe(`file://${storage}/acme_a_files.drawer/`)
      expect(existsSync(fileURLToPath(url))).toBe(true)
      // another installation's slice in the same folder is not listed as ours
      yield* drawer.provision(sliceOf(storage, "c", { owner: "another_home" }))
      expect([...(yield* drawer.list(scopeOf(storage)))].sort()).toEqual(["acme_a_files", "acme_b_files"])
      yield* drawer.teardown(a)
      yield* drawer.teardown(a)
      expect(yield* drawer.list(scopeOf(storage))).toEqual(["acme_b_files"])
      expect(existsSync(fileURLToPath(url))).toBe(false)
    })
  )

  it.live("has no clone and cannot tell whose a name is: berth takes the usual name", () =>
    Effect.gen(function* () {
      const storage = fresh("drawer")
      expect(yield* drawer.askCapabilities).toEqual({ clone: false })
      expect(drawer.capabilities).toEqual({ clone: false })
      const error = yield* Effect.flip(drawer.clone(sliceOf(storage, "a"), sliceOf(storage, "b")))
      expect(error.kind).toBe("invalid")
      expect(error.message).toBe("binky-adapter-drawer cannot clone (binky's protocol has no clone)")
      expect(yield* drawer.standing(sliceOf(storage, "a"))).toBe("missing")
      expect(yield* drawer.served).toEqual({ executable: join(fixtures, "binky-adapter-drawer"), protocol: "binky" })
    })
  )

  it.live("speaks binky's verbs and fields: slice, server, data_dir, settings", () =>
    Effect.gen(function* () {
      const storage = fresh("drawer")
      const log = join(storage, "requests.jsonl")
      process.env.BINKY_DRAWER_LOG = log
      const slice = sliceOf(storage, "wire", { adminUrl: "files://admin:pw@host/" })
      yield* drawer.provision(slice)
      yield* drawer.resolve(slice)
      yield* drawer.list({ ...scopeOf(storage), adminUrl: "files://admin:pw@host/" })
      yield* drawer.teardown(slice)
      delete process.env.BINKY_DRAWER_LOG
      const requests = readFileSync(log, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { verb: string; request: Record<string, unknown> })
      expect(requests.map((r) => r.verb)).toEqual(["create", "address", "list", "destroy"])
      expect(requests[0]?.request).toEqual({
        verb: "create",
        slice: "acme_wire_files",
        project: "acme",
        world: "wire",
        service: "files",
        owner: OWNER,
        server: "files://admin:pw@host/",
        data_dir: storage,
        settings: { depth: 2 }
      })
      expect(requests[2]?.request).toEqual({
        verb: "list",
        owner: OWNER,
        server: "files://admin:pw@host/",
        data_dir: storage,
        settings: { depth: 2 }
      })
    })
  )

  it.live("refuses a name an adapter written for binky could misuse, before running it", () =>
    Effect.gen(function* () {
      const storage = fresh("drawer")
      const log = join(storage, "requests.jsonl")
      process.env.BINKY_DRAWER_LOG = log
      const error = yield* Effect.flip(drawer.provision(sliceOf(storage, "x", { name: "../escape" })))
      delete process.env.BINKY_DRAWER_LOG
      expect(error.kind).toBe("invalid")
      expect(existsSync(log)).toBe(false)
    })
  )

  it.live("a berth-adapter-<name> on PATH wins over binky-adapter-<name>", () =>
    Effect.gen(function* () {
      const dir = fresh("both")
      symlinkSync(join(fixtures, "berth-adapter-echo"), join(dir, "berth-adapter-both"))
      symlinkSync(join(fixtures, "binky-adapter-drawer"), join(dir, "binky-adapter-both"))
      const both = externalAdapter("both", { path: dir })
      expect(yield* both.served).toEqual({ executable: join(dir, "berth-adapter-both"), protocol: "berth" })
      expect(yield* both.provision(sliceOf(fresh("s"), "a", { adapter: "both" }))).toBe(true)
      rmSync(join(dir, "berth-adapter-both"))
      expect((yield* both.served)?.protocol).toBe("binky")
      expect(yield* externalAdapter("nowhere", { path: dir }).served).toBeUndefined()
    })
  )

  it.live("says a failure as binky does: the exit code and stderr, or the answer's error; then undoes a create", () =>
    Effect.gen(function* () {
      const dir = adapterFolder({
        "binky-adapter-broken": `#!/bin/sh
cat > /dev/null
case "$1" in
  create) echo "no room for $$ at files://admin:s3cret@host/" >&2; exit 3 ;;
  destroy) echo destroyed >> "$(dirname "$0")/destroyed.log"; echo '{}' ;;
  address) echo '{"error":"no such slice"}' ;;
  list) echo 'not json' ;;
esac
`
      })
      const broken = externalAdapter("broken", { path: dir })
      const slice = sliceOf(fresh("s"), "a", { adapter: "broken", adminUrl: "files://admin:s3cret@host/" })
      const created = yield* Effect.flip(broken.provision(slice))
      expect(created.kind).toBe("failed")
      expect(created.message).toMatch(/^binky-adapter-broken create exited with code 3/)
      expect(created.message).toMatch(/its stderr ended with:\n\s+no room for \d+ at files:\/\/admin:\*\*\*@host\//)
      expect(created.message).toMatch(/berth ran binky-adapter-broken destroy to undo whatever was half-made/)
      expect(created.message).not.toContain("s3cret")
      expect(readFileSync(join(dir, "destroyed.log"), "utf8")).toBe("destroyed\n")
      const addressed = yield* Effect.flip(broken.resolve(slice))
      expect(addressed.message).toBe("binky-adapter-broken address: no such slice")
      const listed = yield* Effect.flip(broken.list(scopeOf(fresh("s"))))
      expect(listed.message).toBe('binky-adapter-broken list did not answer with JSON; it printed "not json"')
    })
  )

  it.live("an answer for another slice is a failure: berth names slices itself", () =>
    Effect.gen(function* () {
      const dir = adapterFolder({
        "binky-adapter-renamer": `#!/bin/sh
cat > /dev/null
case "$1" in
  create) echo '{"slice":"my_own_name","address":"x://y","created":true}' ;;
  *) echo '{}' ;;
esac
`
      })
      const error = yield* Effect.flip(
        externalAdapter("renamer", { path: dir }).provision(sliceOf(fresh("s"), "a", { adapter: "renamer" }))
      )
      expect(error.message).toMatch(
        /^binky-adapter-renamer create answered for slice "my_own_name", not "acme_a_files": berth names each slice itself/
      )
    })
  )

  it.live("an adapter that does not say whether it created the slice: one it could address already existed", () =>
    Effect.gen(function* () {
      const dir = adapterFolder({
        "binky-adapter-plain": `#!/bin/sh
request=$(cat)
slice=$(printf '%s' "$request" | sed 's/.*"slice":"\\([a-z0-9_]*\\)".*/\\1/')
store="$(dirname "$0")/$slice"
case "$1" in
  create) touch "$store"; echo "{\\"slice\\":\\"$slice\\"}" ;;
  address) [ -e "$store" ] || { echo "no $slice" >&2; exit 1; }; echo "{\\"slice\\":\\"$slice\\",\\"address\\":\\"plain://$slice\\"}" ;;
  destroy) rm -f "$store"; echo '{}' ;;
  list) echo '{"slices":["acme_a_files", {"slice":"other"}]}' ;;
esac
`
      })
      const plain = externalAdapter("plain", { path: dir })
      const slice = sliceOf(fresh("s"), "a", { adapter: "plain" })
      expect(yield* plain.provision(slice)).toBe(true)
      expect(yield* plain.provision(slice)).toBe(false)
      expect(yield* plain.resolve(slice)).toBe("plain://acme_a_files")
      // entries that name no owner: berth cannot tell whose they are, so none is listed (gc drops what is listed)
      expect(yield* plain.list(scopeOf(fresh("s")))).toEqual([])
    })
  )
})

/** binky-adapter-drawer through the conformance suite: its slices are folders, the probe a file in one. */
const { standing: _standing, ...withoutStanding } = drawer
const subject: Adapter = withoutStanding
conformance({
  label: "binky-adapter-drawer (binky's protocol)",
  adapterName: "drawer",
  adapter: subject,
  adminUrl: undefined,
  maxName: 63,
  probe: {
    put: async (url, key, value) => writeFileSync(join(fileURLToPath(url), key), value),
    get: async (url, key) => {
      const file = join(fileURLToPath(url), key)
      return existsSync(file) ? readFileSync(file, "utf8") : undefined
    }
  }
})
