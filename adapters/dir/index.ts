/**
 * The `dir` adapter: an embedded store where each world gets its own folder, `<storage>/<name>/`. Ownership is a
 * `.berth-slice` marker file inside it, so a foreign folder is never listed, torn down or overwritten. Folders are
 * built under a temporary dot-name and renamed into place (and renamed away before deletion), so a crash never leaves
 * a half-made or half-deleted slice at the real path. A temporary name carries the pid of the process using it: one
 * whose process is gone is a crash's leftover, which `list` reports under its slice's name (so gc drops it) and
 * provision, clone and teardown of that slice remove.
 */
import { chmodSync, constants as fsConstants, lstatSync, mkdirSync, renameSync, rmSync } from "node:fs"
import { cp, writeFile } from "node:fs/promises"
import { basename, dirname, join, resolve } from "node:path"
import * as Effect from "effect/Effect"
import type { Adapter, AdapterError, Slice } from "../contract.js"
import { embeddedStore } from "../embedded.js"
import { errorCode, SCRATCH_TAG, scratchTag } from "../shared.js"

const ADAPTER = "dir"
const MARKER = ".berth-slice"

type Kind = "missing" | "directory" | "other"

/** What sits at `path`, without following a symlink (a link to somewhere else is never ours to delete). */
const kindOf = (path: string): Kind => {
  try {
    return lstatSync(path).isDirectory() ? "directory" : "other"
  } catch (cause) {
    if (errorCode(cause) === "ENOENT") return "missing"
    throw cause
  }
}

const isOwned = (folder: string): boolean => {
  if (kindOf(folder) !== "directory") return false
  try {
    return lstatSync(join(folder, MARKER)).isFile()
  } catch (cause) {
    if (errorCode(cause) === "ENOENT" || errorCode(cause) === "ENOTDIR") return false
    throw cause
  }
}

/**
 * A sibling of `folder` under a dot-name, which no valid slice name can take, naming the process that uses it (see
 * `leftovers`).
 */
const scratchOf = (folder: string, purpose: "new" | "clone" | "trash", pid = process.pid): string =>
  join(dirname(folder), `.${basename(folder)}.${purpose}-${scratchTag(pid)}`)

/** `scratchOf`'s names: the slice's name, and the pid of the process that made it */
const SCRATCH = new RegExp(`^\\.(.+)\\.(?:new|clone|trash)-${SCRATCH_TAG}$`)

const writeMarker = (folder: string, name: string): Promise<void> =>
  writeFile(join(folder, MARKER), `${name}\n`, { mode: 0o600 })

/** Moves `folder` out of the way first, so an interrupted delete never leaves a marker-less half at the real path. */
const removeFolder = (folder: string): void => {
  const trash = scratchOf(folder, "trash")
  renameSync(folder, trash)
  rmSync(trash, { recursive: true, force: true })
}

const store = embeddedStore({ adapter: ADAPTER, suffix: "", scratch: SCRATCH, isOwned, remove: removeFolder })
const { fail, attempt, attemptPromise, ensureStorage, removeLeftovers } = store
const folderOf = store.pathOf

const provision = (slice: Slice): Effect.Effect<boolean, AdapterError> =>
  Effect.gen(function* () {
    const folder = yield* folderOf(slice)
    yield* ensureStorage(resolve(slice.storage))
    const present = yield* attempt("provision", folder, () => {
      removeLeftovers(folder, slice.name)
      return kindOf(folder) !== "missing"
    })
    if (present) return yield* alreadyThere(folder)
    const scratch = scratchOf(folder, "new")
    const created = yield* attemptPromise("provision", folder, async () => {
      mkdirSync(scratch, { mode: 0o700 })
      chmodSync(scratch, 0o700)
      await writeMarker(scratch, slice.name)
      try {
        // rename never replaces a non-empty folder: when a concurrent provision won the race, its folder stays
        renameSync(scratch, folder)
        return true
      } catch (cause) {
        const code = errorCode(cause)
        if (code === "ENOTEMPTY" || code === "EEXIST" || code === "ENOTDIR") return false
        throw cause
      }
    }).pipe(Effect.ensuring(Effect.sync(() => rmSync(scratch, { recursive: true, force: true }))))
    return created ? true : yield* alreadyThere(folder)
  })

/** `provision` found something at the slice's path: fine when it is our slice, refused otherwise. */
const alreadyThere = (folder: string): Effect.Effect<boolean, AdapterError> =>
  Effect.flatMap(
    attempt("provision", folder, () => isOwned(folder)),
    (owned) =>
      owned
        ? Effect.succeed(false)
        : Effect.fail(
            fail("taken", `${folder} already exists and is not a berth slice; move it away or pick another name`)
          )
  )

const resolvePath = (slice: Slice): Effect.Effect<string, AdapterError> => folderOf(slice)

const clone = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  store.clone(from, to, (source, target) => {
    const scratch = scratchOf(target, "clone")
    return attemptPromise("clone into", target, async () => {
      // cp keeps modes; FICLONE asks for copy-on-write where the filesystem can, and plain copies elsewhere
      await cp(source, scratch, {
        recursive: true,
        verbatimSymlinks: true,
        errorOnExist: true,
        force: false,
        mode: fsConstants.COPYFILE_FICLONE
      })
      chmodSync(scratch, 0o700)
      await writeMarker(scratch, to.name)
      // `to` is replaced wholesale (provision-then-clone is the expected order, so it holds nothing of the user's)
      if (kindOf(target) !== "missing") removeFolder(target)
      renameSync(scratch, target)
    }).pipe(Effect.ensuring(Effect.sync(() => rmSync(scratch, { recursive: true, force: true }))))
  })

/**
 * What provision does before it renames the new folder into place, and what teardown does before it deletes, alone,
 * as process `pid` would leave them if killed there. For tests of crash recovery.
 */
export const beforeMove = {
  provision: (slice: Slice, pid: number): Effect.Effect<void, AdapterError> =>
    Effect.gen(function* () {
      const folder = yield* folderOf(slice)
      yield* ensureStorage(resolve(slice.storage))
      const scratch = scratchOf(folder, "new", pid)
      yield* attemptPromise("provision", folder, async () => {
        mkdirSync(scratch, { mode: 0o700 })
        await writeMarker(scratch, slice.name)
      })
    }),
  teardown: (slice: Slice, pid: number): Effect.Effect<void, AdapterError> =>
    Effect.flatMap(folderOf(slice), (folder) =>
      attempt("tear down", folder, () => renameSync(folder, scratchOf(folder, "trash", pid)))
    )
} as const

export const dirAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolvePath,
  teardown: store.teardown,
  clone,
  list: store.list
}
