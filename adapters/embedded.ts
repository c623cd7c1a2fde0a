/**
 * The skeleton the embedded adapters (`sqlite`, `dir`) share: a slice is one entry `<name><suffix>` of a storage
 * folder under BERTH_HOME, marked inside as berth's; scratch entries (dot-names carrying the pid of the process
 * using them, see `scratchTag`) are built and moved into place, and those whose process is gone are a crash's
 * leftovers. What differs — how an entry is recognised as owned, removed, made and copied — each adapter supplies;
 * the checks around it (never touch what is not ours, clear this slice's leftovers first, list what a crash left) are
 * written once here.
 */
import { lstatSync, mkdirSync, rmSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import * as Effect from "effect/Effect"
import { AdapterError, type AdapterErrorKind, type ListScope, type Slice } from "./contract.js"
import { checkStorageName, describeCause, errorCode, leftovers, storageEntries } from "./shared.js"

export interface EmbeddedStore {
  readonly adapter: string
  /** what a slice's entry is called after its name: `.sqlite`, or nothing for a folder */
  readonly suffix: string
  /** scratch entries: the first group is the slice's name, the second the pid (see `SCRATCH_TAG`) */
  readonly scratch: RegExp
  /** true when the entry at `path` exists and carries berth's mark */
  readonly isOwned: (path: string) => boolean
  /** removes an owned entry at `path`, so that an interruption never leaves an unmarked half there */
  readonly remove: (path: string) => void
}

/** Anything at `path`, without following a symlink (a link to somewhere else is never ours to delete). */
export const exists = (path: string): boolean => {
  try {
    lstatSync(path)
    return true
  } catch (cause) {
    if (errorCode(cause) === "ENOENT") return false
    throw cause
  }
}

export const embeddedStore = (store: EmbeddedStore) => {
  const fail = (kind: AdapterErrorKind, message: string) => new AdapterError({ adapter: store.adapter, kind, message })

  /** An `AdapterError` raised inside a step passes through; anything else is "failed", naming the path and the step. */
  const mapError =
    (action: string, path: string) =>
    (cause: unknown): AdapterError =>
      cause instanceof AdapterError ? cause : fail("failed", `could not ${action} ${path}: ${describeCause(cause)}`)

  const attempt = <A>(action: string, path: string, thunk: () => A): Effect.Effect<A, AdapterError> =>
    Effect.try({ try: thunk, catch: mapError(action, path) })

  const attemptPromise = <A>(action: string, path: string, thunk: () => Promise<A>): Effect.Effect<A, AdapterError> =>
    Effect.tryPromise({ try: thunk, catch: mapError(action, path) })

  /** The slice's entry, once its name is known not to escape (or be) the storage folder. */
  const pathOf = (slice: Pick<Slice, "storage" | "name">): Effect.Effect<string, AdapterError> =>
    Effect.map(checkStorageName(store.adapter, slice.name), (name) =>
      join(resolve(slice.storage), `${name}${store.suffix}`)
    )

  const ensureStorage = (storage: string): Effect.Effect<void, AdapterError> =>
    attempt("create the storage folder", storage, () => {
      mkdirSync(storage, { recursive: true, mode: 0o700 })
    })

  /** Removes what a crash left of slice `name` beside `path`. */
  const removeLeftovers = (path: string, name: string): void => {
    const storage = dirname(path)
    for (const leftover of leftovers(storage, store.scratch)) {
      if (leftover.name === name) rmSync(join(storage, leftover.entry), { recursive: true, force: true })
    }
  }

  const teardown = (slice: Slice): Effect.Effect<void, AdapterError> =>
    Effect.flatMap(pathOf(slice), (path) =>
      attempt("tear down", path, () => {
        removeLeftovers(path, slice.name)
        if (!exists(path)) return
        if (!store.isOwned(path)) throw fail("not-owned", `${path} is not a berth slice; leaving it alone`)
        store.remove(path)
      })
    )

  /**
   * Makes `to` a copy of `from`: `copy(source, target)` runs once the source is known to be ours, the target to be
   * missing or ours, the storage folder to exist and the target's leftovers to be gone.
   */
  const clone = (
    from: Slice,
    to: Slice,
    copy: (source: string, target: string) => Effect.Effect<void, AdapterError>
  ): Effect.Effect<void, AdapterError> =>
    Effect.gen(function* () {
      const source = yield* pathOf(from)
      const target = yield* pathOf(to)
      if (source === target) return yield* Effect.fail(fail("invalid", `cannot clone ${source} onto itself`))
      yield* attempt("clone from", source, () => {
        if (!exists(source)) throw fail("failed", `cannot clone: ${source} does not exist (provision it first)`)
        if (!store.isOwned(source)) throw fail("not-owned", `cannot clone: ${source} is not a berth slice`)
      })
      yield* ensureStorage(resolve(to.storage))
      yield* attempt("clone into", target, () => {
        removeLeftovers(target, to.name)
        if (exists(target) && !store.isOwned(target)) {
          throw fail("not-owned", `cannot clone: ${target} exists and is not a berth slice; leaving it alone`)
        }
      })
      yield* copy(source, target)
    })

  const list = (scope: ListScope): Effect.Effect<ReadonlyArray<string>, AdapterError> =>
    attempt("list", resolve(scope.storage), () => {
      const storage = resolve(scope.storage)
      const owned = storageEntries(storage)
        .filter((entry) => entry.endsWith(store.suffix) && !entry.startsWith("."))
        .filter((entry) => store.isOwned(join(storage, entry)))
        .map((entry) => entry.slice(0, entry.length - store.suffix.length))
      // a slice that only a crash's leftover stands for is listed too, so that gc's teardown removes it (unless
      // something not ours holds the slice's path: teardown would refuse it)
      const left = leftovers(storage, store.scratch)
        .map((leftover) => leftover.name)
        .filter((name) => !exists(join(storage, `${name}${store.suffix}`)))
      return [...new Set([...owned, ...left])].sort()
    })

  return { fail, attempt, attemptPromise, pathOf, ensureStorage, removeLeftovers, teardown, clone, list } as const
}
