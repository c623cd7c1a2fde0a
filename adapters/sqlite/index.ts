/**
 * The `sqlite` adapter: an embedded store where each world gets its own database file,
 * `<storage>/<name>.sqlite`; a clone is a copy-on-write copy of the file where the filesystem can. Ownership is a
 * `_berth_slice` table inside the file, so a foreign database dropped into
 * the folder is never listed, torn down or overwritten. New files are built under a temporary name and moved into
 * place, so a crash never leaves a half-made slice behind at the real path. A temporary name carries the pid of the
 * process making it: one whose process is gone is a crash's leftover, which `list` reports under its slice's name (so
 * gc drops it) and provision, clone and teardown of that slice remove.
 */
import {
  closeSync,
  constants as fsConstants,
  copyFileSync,
  fchmodSync,
  linkSync,
  lstatSync,
  openSync,
  renameSync,
  statSync,
  unlinkSync
} from "node:fs"
import { createRequire } from "node:module"
import { basename, dirname, join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import * as Effect from "effect/Effect"
import type { Adapter, AdapterError, Slice } from "../contract.js"
import { embeddedStore, exists } from "../embedded.js"
import { errorCode, SCRATCH_TAG, scratchTag } from "../shared.js"

/** The few better-sqlite3 calls this adapter makes (the package ships no types here). */
interface Statement {
  readonly run: (...params: ReadonlyArray<unknown>) => unknown
  readonly get: (...params: ReadonlyArray<unknown>) => unknown
}

interface Database {
  readonly prepare: (sql: string) => Statement
  readonly exec: (sql: string) => unknown
  readonly pragma: (sql: string, options?: { readonly simple?: boolean }) => unknown
  readonly close: () => unknown
}

interface DatabaseOptions {
  readonly readonly?: boolean
  readonly fileMustExist?: boolean
  /** milliseconds to wait on a locked database */
  readonly timeout?: number
}

type DatabaseConstructor = new (filename: string, options?: DatabaseOptions) => Database

/** Loaded lazily: the native module costs startup time, and only worlds with a sqlite service need it. */
let databaseConstructor: DatabaseConstructor | undefined
const openDatabase = (file: string, options: DatabaseOptions): Database => {
  databaseConstructor ??= createRequire(import.meta.url)("better-sqlite3") as DatabaseConstructor
  return new databaseConstructor(file, { timeout: 5_000, ...options })
}

const ADAPTER = "sqlite"
const SUFFIX = ".sqlite"
const COMPANIONS = ["-wal", "-shm", "-journal"] as const

const removeIfPresent = (file: string): void => {
  try {
    unlinkSync(file)
  } catch (cause) {
    if (errorCode(cause) !== "ENOENT") throw cause
  }
}

/** True when `file` is a regular file holding a SQLite database with our marker row; a non-database is not ours. */
const isOwned = (file: string): boolean => {
  if (!lstatSync(file).isFile()) return false
  let db: Database | undefined
  try {
    db = openDatabase(file, { fileMustExist: true })
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_berth_slice'").get()
    return table !== undefined && db.prepare("SELECT 1 FROM _berth_slice LIMIT 1").get() !== undefined
  } catch (cause) {
    // not a database at all is "not ours"; anything else (busy, unreadable) is a real failure
    if (errorCode(cause) === "SQLITE_NOTADB" || errorCode(cause) === "SQLITE_CORRUPT") return false
    throw cause
  } finally {
    db?.close()
  }
}

/**
 * An empty 0600 file next to `file`, under a dot-name no slice can take, naming the process that made it (see
 * `leftovers`); SQLite treats an empty file as an empty database.
 */
const createTemp = (file: string, pid = process.pid): string => {
  const temp = join(dirname(file), `.${basename(file)}.${scratchTag(pid)}.tmp`)
  const fd = openSync(temp, fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_WRONLY, 0o600)
  try {
    fchmodSync(fd, 0o600)
  } finally {
    closeSync(fd)
  }
  return temp
}

/** `createTemp`'s names (and their companions): the slice's name, and the pid of the process that made it */
const TEMP = new RegExp(`^\\.(.+)\\.sqlite\\.${SCRATCH_TAG}\\.tmp(?:-wal|-shm|-journal)?$`)

const removeWithCompanions = (file: string): void => {
  // companions first: should this stop half way, the main file still carries the marker and a retry finishes the job
  for (const suffix of COMPANIONS) removeIfPresent(`${file}${suffix}`)
  removeIfPresent(file)
}

const store = embeddedStore({
  adapter: ADAPTER,
  suffix: SUFFIX,
  scratch: TEMP,
  isOwned,
  remove: removeWithCompanions
})
const { fail, attempt, ensureStorage, removeLeftovers } = store
const fileOf = store.pathOf

/** Stamps `file` as the slice `name`: WAL mode (sensible concurrency for apps) and exactly one marker row. */
const stamp = (file: string, name: string): void => {
  const db = openDatabase(file, { fileMustExist: true })
  try {
    db.pragma("journal_mode = WAL")
    db.exec("CREATE TABLE IF NOT EXISTS _berth_slice (name TEXT, created_at INTEGER)")
    db.exec("DELETE FROM _berth_slice")
    db.prepare("INSERT INTO _berth_slice (name, created_at) VALUES (?, ?)").run(name, Date.now())
  } finally {
    // closing the last connection checkpoints the WAL and deletes it, so the file stands alone
    db.close()
  }
}

/**
 * A consistent copy of `source` into `temp`. The WAL is folded into the main file and writers are held off while the
 * file is copied — as a copy-on-write clone (a reflink) where the filesystem can, so a large golden costs nothing to
 * copy. Should a writer slip in between the fold and the lock, `VACUUM INTO` (one read transaction) copies instead.
 */
const snapshot = (source: string, temp: string): void => {
  // no waiting on a writer: the fallback reads a snapshot without blocking anyone
  const db = openDatabase(source, { fileMustExist: true, timeout: 0 })
  try {
    let copied = false
    try {
      db.pragma("wal_checkpoint(TRUNCATE)")
      db.exec("BEGIN IMMEDIATE")
      try {
        if (walIsEmpty(source)) {
          copyFileSync(source, temp, fsConstants.COPYFILE_FICLONE)
          copied = true
        }
      } finally {
        db.exec("ROLLBACK")
      }
    } catch {
      // SQLITE_BUSY: someone is writing
    }
    if (!copied) db.prepare("VACUUM INTO ?").run(temp)
  } finally {
    db.close()
  }
}

const walIsEmpty = (file: string): boolean => {
  try {
    return statSync(`${file}-wal`).size === 0
  } catch {
    return true
  }
}

const provision = (slice: Slice): Effect.Effect<boolean, AdapterError> =>
  Effect.gen(function* () {
    const file = yield* fileOf(slice)
    yield* ensureStorage(resolve(slice.storage))
    return yield* attempt("provision", file, () => {
      removeLeftovers(file, slice.name)
      if (exists(file)) {
        if (isOwned(file)) return false
        throw fail("taken", `${file} already exists and is not a berth slice; move it away or pick another name`)
      }
      const temp = createTemp(file)
      try {
        stamp(temp, slice.name)
        try {
          // a hard link never replaces: when a concurrent provision won the race, its file stays
          linkSync(temp, file)
        } catch (cause) {
          const code = errorCode(cause)
          if (code === "EEXIST") return false
          if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw cause
          // a filesystem without hard links: rename, after one more look
          if (exists(file)) return false
          renameSync(temp, file)
        }
        return true
      } finally {
        removeWithCompanions(temp)
      }
    })
  })

const resolveUrl = (slice: Slice): Effect.Effect<string, AdapterError> =>
  Effect.map(fileOf(slice), (file) => pathToFileURL(file).href)

const clone = (from: Slice, to: Slice): Effect.Effect<void, AdapterError> =>
  store.clone(from, to, (source, target) =>
    attempt("clone into", target, () => {
      const temp = createTemp(target)
      try {
        snapshot(source, temp)
        stamp(temp, to.name)
        // stale companions of the old target would be replayed onto the new file: drop them before the swap
        for (const suffix of COMPANIONS) removeIfPresent(`${target}${suffix}`)
        renameSync(temp, target)
      } finally {
        removeWithCompanions(temp)
      }
    })
  )

/**
 * What provision does before it moves the new file into place, alone, as process `pid` would leave it if killed
 * there. For tests of crash recovery.
 */
export const beforeMove = {
  provision: (slice: Slice, pid: number): Effect.Effect<void, AdapterError> =>
    Effect.gen(function* () {
      const file = yield* fileOf(slice)
      yield* ensureStorage(resolve(slice.storage))
      yield* attempt("provision", file, () => stamp(createTemp(file, pid), slice.name))
    })
} as const

export const sqliteAdapter: Adapter = {
  capabilities: { clone: true },
  provision,
  resolve: resolveUrl,
  teardown: store.teardown,
  clone,
  list: store.list
}
