import { describe, expect, it } from "@effect/vitest"
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import type { Slice } from "../contract.js"
import { scratch, sliceMaker } from "../testing.js"
import { spawnSync } from "node:child_process"
import { beforeMove, sqliteAdapter } from "./index.js"

/** The better-sqlite3 calls the tests make. */
interface Database {
  readonly prepare: (sql: string) => {
    readonly run: (...params: ReadonlyArray<unknown>) => unknown
    readonly get: (...params: ReadonlyArray<unknown>) => unknown
    readonly all: (...params: ReadonlyArray<unknown>) => ReadonlyArray<unknown>
  }
  readonly exec: (sql: string) => unknown
  readonly pragma: (sql: string, options?: { readonly simple?: boolean }) => unknown
  readonly close: () => unknown
}
const Database = createRequire(import.meta.url)("better-sqlite3") as new (file: string) => Database

const { folder } = scratch("sqlite")

/** A fresh storage folder (not created yet: provision must make it). */
const freshStorage = (): string => join(folder("storage", false), "acme")

const slice = sliceMaker({ adapter: "sqlite", service: "db" })
const sliceOf = (storage: string, name: string): Slice => slice(name, { storage })

const withDb = <A>(file: string, f: (db: Database) => A): A => {
  const db = new Database(file)
  try {
    return f(db)
  } finally {
    db.close()
  }
}

/** The pid of a process that has exited (and been reaped): what a daemon killed with -9 leaves behind. */
const deadPid = (): number => {
  const pid = spawnSync("true").pid
  if (pid === undefined) throw new Error("could not spawn true")
  return pid
}

const rows = (file: string): ReadonlyArray<unknown> =>
  withDb(file, (db) => db.prepare("SELECT id, note FROM notes ORDER BY id").all())

describe("sqliteAdapter", () => {
  it("declares clone", () => {
    expect(sqliteAdapter.capabilities).toEqual({ clone: true })
  })

  it.effect("provisions a WAL database, 0600 in a 0700 folder", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "acme_main_db")
      expect(yield* sqliteAdapter.provision(slice)).toBe(true)
      const file = join(storage, "acme_main_db.sqlite")
      expect(statSync(storage).mode & 0o777).toBe(0o700)
      expect(statSync(file).mode & 0o777).toBe(0o600)
      withDb(file, (db) => {
        expect(db.pragma("journal_mode", { simple: true })).toBe("wal")
        expect(db.prepare("SELECT name FROM _berth_slice").all()).toEqual([{ name: "acme_main_db" }])
      })
      // no temporary files are left behind
      expect(yield* sqliteAdapter.list({ storage, adminUrl: undefined, options: {}, owner: "t" })).toEqual([
        "acme_main_db"
      ])
    })
  )

  it.effect("a provision killed before its move: its scratch file is listed and cleared", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "acme_crash_db")
      const scope = { storage, adminUrl: undefined, options: {}, owner: "t" }
      const dead = deadPid()
      yield* beforeMove.provision(slice, dead)
      // one that a live process (this one) is still building, and a file that is not berth's, stay
      yield* beforeMove.provision(slice, process.pid)
      writeFileSync(join(storage, ".acme_crash_db.sqlite.notes"), "mine")
      const untouched = readdirSync(storage).filter((entry) => !entry.includes(`.${dead}-`))
      expect(untouched).toHaveLength(2)
      // gc sees the leftover as this slice's
      expect(yield* sqliteAdapter.list(scope)).toEqual(["acme_crash_db"])
      // provision makes the slice and clears what the crash left
      expect(yield* sqliteAdapter.provision(slice)).toBe(true)
      expect(readdirSync(storage).sort()).toEqual(["acme_crash_db.sqlite", ...untouched].sort())
      // teardown clears a leftover with the slice
      yield* beforeMove.provision(slice, dead)
      yield* sqliteAdapter.teardown(slice)
      expect(readdirSync(storage).sort()).toEqual([...untouched].sort())
      // and a leftover alone, as gc asks for it
      yield* beforeMove.provision(slice, dead)
      expect(yield* sqliteAdapter.list(scope)).toEqual(["acme_crash_db"])
      yield* sqliteAdapter.teardown(slice)
      expect(yield* sqliteAdapter.list(scope)).toEqual([])
      expect(readdirSync(storage).sort()).toEqual([...untouched].sort())
      // a leftover beside a file that is not ours is not offered to gc, whose teardown would be refused
      writeFileSync(join(storage, "acme_crash_db.sqlite"), "not a database")
      yield* beforeMove.provision(slice, dead)
      expect(yield* sqliteAdapter.list(scope)).toEqual([])
    })
  )

  it.effect("resolves to a file:// URL of the absolute path", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      expect(yield* sqliteAdapter.resolve(sliceOf(storage, "acme_login_fix_db"))).toBe(
        `file://${storage}/acme_login_fix_db.sqlite`
      )
    })
  )

  it.effect("clones schema and rows from a golden slice, independent afterwards", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const golden = sliceOf(storage, "acme_golden_db")
      const copy = sliceOf(storage, "acme_feature_db")
      yield* sqliteAdapter.provision(golden)
      const goldenFile = join(storage, "acme_golden_db.sqlite")
      const copyFile = join(storage, "acme_feature_db.sqlite")
      withDb(goldenFile, (db) => {
        db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, note TEXT)")
        db.exec("CREATE INDEX notes_note ON notes (note)")
        db.prepare("INSERT INTO notes (note) VALUES (?), (?)").run("one", "two")
      })
      yield* sqliteAdapter.provision(copy)
      withDb(copyFile, (db) => db.exec("CREATE TABLE stale (x)"))
      yield* sqliteAdapter.clone(golden, copy)

      expect(rows(copyFile)).toEqual([
        { id: 1, note: "one" },
        { id: 2, note: "two" }
      ])
      withDb(copyFile, (db) => {
        expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'notes_note'").get()).toEqual({
          name: "notes_note"
        })
        // `to`'s previous contents are gone, and it is owned by `to`
        expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'stale'").get()).toBeUndefined()
        expect(db.prepare("SELECT name FROM _berth_slice").all()).toEqual([{ name: "acme_feature_db" }])
        expect(db.pragma("journal_mode", { simple: true })).toBe("wal")
      })
      expect(statSync(copyFile).mode & 0o777).toBe(0o600)

      withDb(copyFile, (db) => db.prepare("INSERT INTO notes (note) VALUES (?)").run("copy only"))
      withDb(goldenFile, (db) => db.prepare("INSERT INTO notes (note) VALUES (?)").run("golden only"))
      expect(rows(goldenFile)).toEqual([
        { id: 1, note: "one" },
        { id: 2, note: "two" },
        { id: 3, note: "golden only" }
      ])
      expect(rows(copyFile)).toEqual([
        { id: 1, note: "one" },
        { id: 2, note: "two" },
        { id: 3, note: "copy only" }
      ])
    })
  )

  it.effect("clones a consistent snapshot while another connection holds a write transaction", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const golden = sliceOf(storage, "acme_golden_db")
      const copy = sliceOf(storage, "acme_busy_db")
      yield* sqliteAdapter.provision(golden)
      const goldenFile = join(storage, "acme_golden_db.sqlite")
      const writer = new Database(goldenFile)
      try {
        expect(writer.pragma("journal_mode", { simple: true })).toBe("wal")
        writer.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, note TEXT)")
        const insert = writer.prepare("INSERT INTO notes (note) VALUES (?)")
        for (let i = 0; i < 500; i++) insert.run(`committed ${i}`)
        writer.exec("BEGIN IMMEDIATE")
        for (let i = 0; i < 500; i++) insert.run(`pending ${i}`)
        writer.exec("DELETE FROM notes WHERE id <= 100")

        yield* sqliteAdapter.clone(golden, copy)

        writer.exec("COMMIT")
      } finally {
        writer.close()
      }
      const copyFile = join(storage, "acme_busy_db.sqlite")
      withDb(copyFile, (db) => {
        expect(db.pragma("integrity_check", { simple: true })).toBe("ok")
        expect(db.prepare("SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM notes").get()).toEqual({
          n: 500,
          lo: 1,
          hi: 500
        })
      })
      expect(withDb(goldenFile, (db) => db.prepare("SELECT count(*) AS n FROM notes").get())).toEqual({ n: 900 })
    })
  )

  it.effect("refuses to clone from a missing slice", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const error = yield* Effect.flip(
        sqliteAdapter.clone(sliceOf(storage, "acme_nothing_db"), sliceOf(storage, "acme_x_db"))
      )
      expect(error.kind).toBe("failed")
      expect(error.adapter).toBe("sqlite")
      expect(error.message).toContain("acme_nothing_db.sqlite")
      expect(error.message).toContain("does not exist")
    })
  )

  it.effect("tears down the file and its companions", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const slice = sliceOf(storage, "acme_gone_db")
      yield* sqliteAdapter.provision(slice)
      const file = join(storage, "acme_gone_db.sqlite")
      // an open connection in WAL mode leaves -wal and -shm next to the file
      const db = new Database(file)
      db.exec("CREATE TABLE t (x)")
      expect(existsSync(`${file}-wal`)).toBe(true)
      db.close()
      writeFileSync(`${file}-wal`, "")
      writeFileSync(`${file}-shm`, "")
      yield* sqliteAdapter.teardown(slice)
      expect(existsSync(file)).toBe(false)
      expect(existsSync(`${file}-wal`)).toBe(false)
      expect(existsSync(`${file}-shm`)).toBe(false)
      expect(yield* sqliteAdapter.list({ storage, adminUrl: undefined, options: {}, owner: "t" })).toEqual([])
    })
  )

  it.effect("lists only owned slices and leaves foreign files alone", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      const scope = { storage, adminUrl: undefined, options: {}, owner: "t" }
      expect(yield* sqliteAdapter.list(scope)).toEqual([])
      yield* sqliteAdapter.provision(sliceOf(storage, "acme_b_db"))
      yield* sqliteAdapter.provision(sliceOf(storage, "acme_a_db"))
      // a foreign database, a file that is no database at all, and something that is not a .sqlite
      withDb(join(storage, "foreign.sqlite"), (db) => db.exec("CREATE TABLE theirs (x)"))
      writeFileSync(join(storage, "garbage.sqlite"), "not a database, just text that is long enough to have a header")
      writeFileSync(join(storage, "notes.txt"), "hello")
      mkdirSync(join(storage, "folder.sqlite"))
      expect(yield* sqliteAdapter.list(scope)).toEqual(["acme_a_db", "acme_b_db"])

      for (const name of ["foreign", "garbage", "folder"]) {
        const error = yield* Effect.flip(sqliteAdapter.teardown(sliceOf(storage, name)))
        expect(error.kind).toBe("not-owned")
        expect(error.message).toContain(`${name}.sqlite`)
      }
      expect(existsSync(join(storage, "foreign.sqlite"))).toBe(true)
      expect(existsSync(join(storage, "garbage.sqlite"))).toBe(true)

      // provisioning over a foreign file does not adopt it, and cloning over it does not overwrite it
      expect((yield* Effect.flip(sqliteAdapter.provision(sliceOf(storage, "foreign")))).kind).toBe("taken")
      const cloneError = yield* Effect.flip(
        sqliteAdapter.clone(sliceOf(storage, "acme_a_db"), sliceOf(storage, "foreign"))
      )
      expect(cloneError.kind).toBe("not-owned")
      withDb(join(storage, "foreign.sqlite"), (db) => {
        expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'theirs'").get()).toEqual({ name: "theirs" })
      })
    })
  )

  it.effect("refuses the dot names that could escape the storage folder, making no folder", () =>
    Effect.gen(function* () {
      const storage = freshStorage()
      for (const name of ["..", "a..b", "."]) {
        const slice = sliceOf(storage, name)
        for (const verb of [
          sqliteAdapter.provision(slice),
          sqliteAdapter.resolve(slice),
          sqliteAdapter.teardown(slice),
          sqliteAdapter.clone(slice, sliceOf(storage, "acme_ok_db")),
          sqliteAdapter.clone(sliceOf(storage, "acme_ok_db"), slice)
        ]) {
          const error = yield* Effect.flip(verb)
          expect(error.kind).toBe("invalid")
        }
      }
      expect(existsSync(storage)).toBe(false)
    })
  )
})
