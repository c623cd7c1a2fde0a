import { describe, expect, it } from "@effect/vitest"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import type { Slice } from "../contract.js"
import { scratch, sliceMaker } from "../testing.js"
import { beforeMove, dirAdapter } from "./index.js"

const { folder } = scratch("dir")

/** A fresh storage folder (not created yet: provision must make it). */
const freshStorage = (): string => join(folder("storage", false), "acme")

const slice = sliceMaker({ adapter: "dir", service: "files" })
const sliceOf = (storage: string, name: string): Slice => slice(name, { storage })

const scopeOf = (storage: string) => ({ storage, adminUrl: undefined, options: {}, owner: "t" })

/** The pid of a process that has exited (and been reaped): what a daemon killed with -9 leaves behind. */
const deadPid = (): number => {
  const pid = spawnSync("true").pid
  if (pid === undefined) throw new Error("could not spawn true")
  return pid
}

describe("dirAdapter", () => {
  it("declares clone", () => {
    expect(dirAdapter.capabilities).toEqual({ clone: true })
  })

  it.effect("a provision or teardown killed half way: its scratch folder is listed and cleared", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "acme_crash_files")
      const dead = deadPid()
      yield* beforeMove.provision(slice, dead)
      // one that a live process (this one) is still building, and a folder that is not berth's, stay
      yield* beforeMove.provision(slice, process.pid)
      mkdirSync(join(storage, ".acme_crash_files.mine"))
      const untouched = readdirSync(storage).filter((entry) => !entry.includes(`-${dead}-`))
      expect(untouched).toHaveLength(2)
      // gc sees the leftover as this slice's
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual(["acme_crash_files"])
      // provision makes the slice and clears what the crash left
      expect(yield* dirAdapter.provision(slice)).toBe(true)
      expect(readdirSync(storage).sort()).toEqual(["acme_crash_files", ...untouched].sort())
      // a teardown killed after moving the folder away: the half-deleted rest is cleared by the next teardown
      writeFileSync(join(storage, "acme_crash_files", "data"), "x")
      yield* beforeMove.teardown(slice, dead)
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual(["acme_crash_files"])
      yield* dirAdapter.teardown(slice)
      expect(readdirSync(storage).sort()).toEqual([...untouched].sort())
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual([])
    })
  )

  it.effect("provisions a 0700 folder with a marker", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "acme_main_files")
      expect(yield* dirAdapter.provision(slice)).toBe(true)
      const folder = join(storage, "acme_main_files")
      expect(statSync(storage).mode & 0o777).toBe(0o700)
      expect(statSync(folder).mode & 0o777).toBe(0o700)
      expect(readFileSync(join(folder, ".berth-slice"), "utf8").trim()).toBe("acme_main_files")
      // nothing but the slice itself is left in storage
      expect(readdirSync(storage)).toEqual(["acme_main_files"])
    })
  )

  it.effect("resolves to the absolute path of the folder", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      expect(yield* dirAdapter.resolve(sliceOf(storage, "acme_login_fix_files"))).toBe(
        join(storage, "acme_login_fix_files")
      )
    })
  )

  it.effect("clones files from a golden slice, replacing the target, independent afterwards", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const golden = sliceOf(storage, "acme_golden_files")
      const copy = sliceOf(storage, "acme_feature_files")
      yield* dirAdapter.provision(golden)
      const goldenDir = join(storage, "acme_golden_files")
      const copyDir = join(storage, "acme_feature_files")
      mkdirSync(join(goldenDir, "nested", "deeper"), { recursive: true })
      writeFileSync(join(goldenDir, "top.txt"), "top")
      writeFileSync(join(goldenDir, "nested", "deeper", "leaf.txt"), "leaf")
      writeFileSync(join(goldenDir, "run.sh"), "#!/bin/sh\n")
      chmodSync(join(goldenDir, "run.sh"), 0o750)
      symlinkSync("top.txt", join(goldenDir, "link"))

      yield* dirAdapter.provision(copy)
      writeFileSync(join(copyDir, "stale.txt"), "from before the clone")
      yield* dirAdapter.clone(golden, copy)

      expect(readFileSync(join(copyDir, "top.txt"), "utf8")).toBe("top")
      expect(readFileSync(join(copyDir, "nested", "deeper", "leaf.txt"), "utf8")).toBe("leaf")
      expect(statSync(join(copyDir, "run.sh")).mode & 0o777).toBe(0o750)
      expect(readlinkSync(join(copyDir, "link"))).toBe("top.txt")
      expect(existsSync(join(copyDir, "stale.txt"))).toBe(false)
      expect(readFileSync(join(copyDir, ".berth-slice"), "utf8").trim()).toBe("acme_feature_files")
      expect(readFileSync(join(goldenDir, ".berth-slice"), "utf8").trim()).toBe("acme_golden_files")
      expect(statSync(copyDir).mode & 0o777).toBe(0o700)

      writeFileSync(join(copyDir, "top.txt"), "changed in copy")
      writeFileSync(join(goldenDir, "golden-only.txt"), "x")
      expect(readFileSync(join(goldenDir, "top.txt"), "utf8")).toBe("top")
      expect(existsSync(join(copyDir, "golden-only.txt"))).toBe(false)
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual(["acme_feature_files", "acme_golden_files"])
      expect(readdirSync(storage).sort()).toEqual(["acme_feature_files", "acme_golden_files"])
    })
  )

  it.effect("clones into a slice that was never provisioned", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const golden = sliceOf(storage, "acme_golden_files")
      yield* dirAdapter.provision(golden)
      writeFileSync(join(storage, "acme_golden_files", "a.txt"), "a")
      yield* dirAdapter.clone(golden, sliceOf(storage, "acme_new_files"))
      expect(readFileSync(join(storage, "acme_new_files", "a.txt"), "utf8")).toBe("a")
      expect(yield* dirAdapter.provision(sliceOf(storage, "acme_new_files"))).toBe(false)
    })
  )

  it.effect("refuses to clone from a missing slice", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const error = yield* Effect.flip(dirAdapter.clone(sliceOf(storage, "acme_nothing"), sliceOf(storage, "acme_x")))
      expect(error.kind).toBe("failed")
      expect(error.adapter).toBe("dir")
      expect(error.message).toContain("acme_nothing")
      expect(error.message).toContain("does not exist")
    })
  )

  it.effect("tears down recursively", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "acme_gone_files")
      yield* dirAdapter.provision(slice)
      const folder = join(storage, "acme_gone_files")
      mkdirSync(join(folder, "a", "b"), { recursive: true })
      writeFileSync(join(folder, "a", "b", "c.txt"), "c")
      yield* dirAdapter.teardown(slice)
      expect(existsSync(folder)).toBe(false)
      expect(readdirSync(storage)).toEqual([])
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual([])
    })
  )

  it.effect("lists only owned slices and leaves foreign folders alone", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual([])
      yield* dirAdapter.provision(sliceOf(storage, "acme_b_files"))
      yield* dirAdapter.provision(sliceOf(storage, "acme_a_files"))
      mkdirSync(join(storage, "foreign"))
      writeFileSync(join(storage, "foreign", "keep.txt"), "theirs")
      writeFileSync(join(storage, "plainfile"), "theirs")
      // a link to an owned slice elsewhere is still not ours to delete
      const elsewhere = folder("elsewhere", false)
      mkdirSync(elsewhere)
      writeFileSync(join(elsewhere, ".berth-slice"), "elsewhere\n")
      symlinkSync(elsewhere, join(storage, "linked"))
      expect(yield* dirAdapter.list(scopeOf(storage))).toEqual(["acme_a_files", "acme_b_files"])

      for (const name of ["foreign", "plainfile", "linked"]) {
        const error = yield* Effect.flip(dirAdapter.teardown(sliceOf(storage, name)))
        expect(error.kind).toBe("not-owned")
        expect(error.message).toContain(name)
      }
      expect(readFileSync(join(storage, "foreign", "keep.txt"), "utf8")).toBe("theirs")
      expect(existsSync(join(storage, "plainfile"))).toBe(true)
      expect(existsSync(join(elsewhere, ".berth-slice"))).toBe(true)

      // provisioning over a foreign folder does not adopt it, and cloning over it does not overwrite it
      expect((yield* Effect.flip(dirAdapter.provision(sliceOf(storage, "foreign")))).kind).toBe("taken")
      const cloneError = yield* Effect.flip(
        dirAdapter.clone(sliceOf(storage, "acme_a_files"), sliceOf(storage, "foreign"))
      )
      expect(cloneError.kind).toBe("not-owned")
      expect(readdirSync(join(storage, "foreign"))).toEqual(["keep.txt"])
    })
  )

  it.effect("refuses the dot names that could escape the storage folder, making no folder", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      for (const name of ["..", "a..b", "."]) {
        const slice = sliceOf(storage, name)
        for (const verb of [
          dirAdapter.provision(slice),
          dirAdapter.resolve(slice),
          dirAdapter.teardown(slice),
          dirAdapter.clone(slice, sliceOf(storage, "acme_ok")),
          dirAdapter.clone(sliceOf(storage, "acme_ok"), slice)
        ]) {
          const error = yield* Effect.flip(verb)
          expect(error.kind).toBe("invalid")
        }
      }
      expect(existsSync(storage)).toBe(false)
    })
  )
})
