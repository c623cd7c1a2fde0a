/**
 * The SQLite driver (better-sqlite3) opened directly, where @effect/sql's client is not the tool: `doctor` and an
 * offline `down` read the state database without a daemon, and the registry reads through a connection of its own
 * (`Registry.ts`). Only the few calls berth makes are typed here.
 */
import { createRequire } from "node:module"

export interface SqliteStatement {
  readonly all: (...params: ReadonlyArray<unknown>) => ReadonlyArray<Record<string, unknown>>
  readonly run: (...params: ReadonlyArray<unknown>) => unknown
}

export interface SqliteDatabase {
  readonly prepare: (sql: string) => SqliteStatement
  readonly pragma: (source: string) => unknown
  readonly transaction: (f: () => void) => () => void
  readonly close: () => void
}

/** Opens an existing database file; throws (the driver's error) when it cannot. */
export const openDatabase = (file: string, options: { readonly readonly: boolean }): SqliteDatabase => {
  // the native driver, resolved beside the bundle (it is not bundled: scripts/build.mjs)
  const Driver = createRequire(import.meta.url)("better-sqlite3") as new (
    file: string,
    options: { readonly readonly: boolean; readonly fileMustExist: boolean }
  ) => SqliteDatabase
  return new Driver(file, { readonly: options.readonly, fileMustExist: true })
}
