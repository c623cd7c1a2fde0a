/**
 * The state database on a full disk (a small tmpfs, root only): every write that cannot be made is a DiskFull — the
 * statements' and the transactions' alike, a COMMIT that fails included, which @effect/sql turns into a defect — and
 * the database takes writes again once there is room (no transaction left open on its connection). Whether the disk
 * fails a transaction's statement or its COMMIT depends on the room SQLite's log has left, so a COMMIT that fails is
 * also made to fail for certain, by a constraint checked only then.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { Home } from "../../src/services/Home.js"
import { Registry, type RegistryError, RegistryLive, type ServiceRow } from "../../src/services/Registry.js"
import { fillDisk, freeDisk, mountTmpfs, unmount } from "../e2e/filled-disk.js"

const base = mkdtempSync(join(tmpdir(), "berth-registry-full-"))
const home = join(base, "home")
const mounted = mountTmpfs(home, "4m")
afterAll(() => {
  if (mounted === undefined) unmount(home)
  rmSync(base, { recursive: true, force: true })
})

/** a home on the ordinary disk, for the COMMIT made to fail */
const commitHome = join(base, "commit")
mkdirSync(commitHome)

/** what a write ended with: its failure's tag, "defect" for a defect, "ok" */
const outcome = <A, E extends { readonly _tag: string }>(write: Effect.Effect<A, E>) =>
  Effect.map(Effect.exit(write), (exit) =>
    Exit.isSuccess(exit)
      ? "ok"
      : Cause.failureOption(exit.cause).pipe((f) => (f._tag === "Some" ? f.value._tag : "defect"))
  )

describe("the state database on a full disk", () => {
  it.effect("fails every write it cannot make as DiskFull, transactions too, and takes writes again after", (ctx) =>
    Effect.gen(function* () {
      if (mounted !== undefined) return ctx.skip(mounted)
      const registry = yield* Registry
      const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
      const w = yield* registry.createWorld({ projectId: project.id, name: "a", path: "", branch: "a", isMain: false })
      const row = (name: string, observed: string): ServiceRow => ({
        worldId: w.id,
        name,
        observed,
        pid: 10,
        pgid: 10,
        startTime: "1",
        restarts: 0,
        reason: null,
        logTail: JSON.stringify(["x".repeat(2000)]),
        command: "serve"
      })
      yield* registry.saveServices(w.id, [row("api", "healthy"), row("web", "healthy")])

      // SQLite's log emptied, then begun again with one write: a transaction's statements then fit in memory, and its
      // COMMIT, which must grow the log, is what finds no room (a log with room left from before takes a small commit)
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`PRAGMA wal_checkpoint(TRUNCATE)`).pipe(
        Effect.provide(SqliteClient.layer({ filename: join(home, "state.db") }))
      )
      yield* registry.saveService(row("api", "healthy"))
      fillDisk(home)
      const writes: Record<string, Effect.Effect<unknown, RegistryError>> = {
        saveServices: registry.saveServices(w.id, [row("api", "stopping"), row("web", "stopping")]),
        saveService: registry.saveService(row("api", "stopped")),
        setLeases: registry.setLeases(w.id, [{ port: 20_001, worldId: w.id, service: "api", name: "" }]),
        createWorld: registry.createWorld({ projectId: project.id, name: "b", path: "", branch: "b", isMain: false }),
        upsertProject: registry.upsertProject({ name: "q", commonDir: "/tmp/q/.git", mainRoot: "/tmp/q" }),
        updateSetting: registry.updateSetting("k", () => "v".repeat(4096))
      }
      const results: Record<string, string> = {}
      for (const [name, write] of Object.entries(writes)) results[name] = yield* outcome(write)
      freeDisk(home)
      // a small write may still find room in SQLite's log; none is a defect or an internal error
      for (const [name, result] of Object.entries(results))
        expect([name, result]).toEqual([name, expect.stringMatching(/^(DiskFull|ok)$/)])
      expect(Object.values(results)).toContain("DiskFull")

      // room again: the same connection takes writes (no transaction left open by a failed COMMIT)
      yield* registry.saveServices(w.id, [row("api", "stopping"), row("web", "stopping")])
      yield* registry.setLeases(w.id, [{ port: 20_001, worldId: w.id, service: "api", name: "" }])
      expect((yield* registry.services(w.id)).map((s) => s.observed)).toEqual(["stopping", "stopping"])
    }).pipe(Effect.provide(RegistryLive.pipe(Layer.provideMerge(Home.layerAt(home)))))
  )
})

describe("a transaction whose COMMIT fails", () => {
  it.effect("is a failure, not a defect, and leaves no transaction open on the connection", () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
      const w = yield* registry.createWorld({ projectId: project.id, name: "a", path: "", branch: "a", isMain: false })
      // every lease written now breaks a foreign key that SQLite checks at COMMIT only
      const beside = (statement: string) =>
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(statement)).pipe(
          Effect.provide(SqliteClient.layer({ filename: join(commitHome, "state.db") }))
        )
      yield* beside("CREATE TABLE late (world INTEGER REFERENCES worlds(id) DEFERRABLE INITIALLY DEFERRED)")
      yield* beside("CREATE TRIGGER late_check AFTER INSERT ON leases BEGIN INSERT INTO late VALUES (-1); END")
      const lease = { port: 20_002, worldId: w.id, service: "api", name: "" }
      expect(yield* outcome(registry.setLeases(w.id, [lease]))).toBe("InternalError")
      yield* beside("DROP TRIGGER late_check")
      // the next transaction begins: the failed one was rolled back
      yield* registry.setLeases(w.id, [lease])
      expect((yield* registry.leases(w.id)).map((l) => l.port)).toEqual([20_002])
    }).pipe(Effect.provide(RegistryLive.pipe(Layer.provideMerge(Home.layerAt(commitHome)))))
  )
})
