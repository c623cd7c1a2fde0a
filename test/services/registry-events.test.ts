/**
 * Every world's latest events in one read (what a status of all worlds carries), in the real Registry (SQLite): the
 * same events, in the same order, as asking each world on its own; a read whose work does not grow with the worlds'
 * whole history; and a history kept to its latest EVENTS_KEPT events a world.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Home } from "../../src/services/Home.js"
import { EVENTS_KEPT, RECENT_EVENTS_SQL, Registry, RegistryLive } from "../../src/services/Registry.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const layer = () => {
  const home = mkdtempSync(join(tmpdir(), "berth-registry-events-"))
  folders.push(home)
  return RegistryLive.pipe(Layer.provideMerge(Home.layerAt(home)))
}

/** `use` on the registry's database, opened beside it: what its statements do there, and what it holds. */
const onDatabase = <A, E>(use: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.flatMap(Home, (home) =>
    Effect.flatMap(SqlClient.SqlClient, use).pipe(Effect.provide(SqliteClient.layer({ filename: home.database })))
  )

describe("Registry.recentEvents", () => {
  it.effect("answers each world's latest events, newest first, as each world's own read does", () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
      const worlds = yield* Effect.forEach(["a", "b", "c"], (name) =>
        registry.createWorld({ projectId: project.id, name, path: "", branch: name, isMain: false })
      )
      const [a, b] = [worlds[0]!, worlds[1]!]
      // interleaved, more than the limit for one world, none for the third, and one of no world at all
      for (let i = 0; i < 7; i++) {
        yield* registry.addEvent({ worldId: a.id, service: null, kind: "note", message: `a${i}` })
        if (i % 3 === 0) yield* registry.addEvent({ worldId: b.id, service: "web", kind: "note", message: `b${i}` })
      }
      yield* registry.addEvent({ worldId: null, service: null, kind: "note", message: "machine" })

      const recent = yield* registry.recentEvents(4)
      for (const w of worlds) {
        const mine = recent.filter((e) => e.worldId === w.id).map(({ worldId: _, ...e }) => e)
        expect(mine).toEqual(yield* registry.events(w.id, 4))
      }
      expect(recent.filter((e) => e.worldId === a.id).map((e) => e.message)).toEqual(["a6", "a5", "a4", "a3"])
      expect(recent.filter((e) => e.worldId === b.id).map((e) => e.message)).toEqual(["b6", "b3", "b0"])
      expect(recent.some((e) => e.message === "machine")).toBe(false)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("reads a world's latest events through an index, not by going through every event there is", () =>
    Effect.gen(function* () {
      yield* Registry
      const plan = (query: string) =>
        onDatabase((sql) =>
          Effect.map(sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${query}`), (rows) => rows.map((r) => r.detail))
        )
      // the statements of `recentEvents` and `events`, as the registry runs them
      const recent = yield* plan(RECENT_EVENTS_SQL.replace("?", "10"))
      expect(recent.join("; "), "recentEvents").toMatch(/USING (COVERING )?INDEX events_world/)
      expect(recent.join("; "), "recentEvents sorts no whole table").not.toMatch(/SCAN events\b(?! USING)/)
      const one = yield* plan("SELECT id FROM events WHERE world_id = 1 AND id > 0 ORDER BY id DESC LIMIT 50")
      expect(one.join("; "), "events").toMatch(/USING (COVERING )?INDEX events_world/)
    }).pipe(Effect.provide(layer()))
  )

  it.effect(`keeps each world's latest ${EVENTS_KEPT} events, and as many of the machine's own`, () =>
    Effect.gen(function* () {
      const registry = yield* Registry
      const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
      const a = yield* registry.createWorld({ projectId: project.id, name: "a", path: "", branch: "a", isMain: false })
      const b = yield* registry.createWorld({ projectId: project.id, name: "b", path: "", branch: "b", isMain: false })
      for (let i = 0; i < EVENTS_KEPT + 30; i++) {
        yield* registry.addEvent({ worldId: a.id, service: null, kind: "note", message: `a${i}` })
        yield* registry.addEvent({ worldId: null, service: null, kind: "note", message: `m${i}` })
      }
      yield* registry.addEvent({ worldId: b.id, service: null, kind: "note", message: "b0" })
      const kept = yield* registry.events(a.id, EVENTS_KEPT * 2)
      expect(kept).toHaveLength(EVENTS_KEPT)
      expect(kept[0]?.message).toBe(`a${EVENTS_KEPT + 29}`)
      expect(kept.at(-1)?.message).toBe("a30")
      expect((yield* registry.events(b.id, 10)).map((e) => e.message)).toEqual(["b0"])
      const [machine] = yield* onDatabase(
        (sql) => sql<{ n: number }>`SELECT count(*) AS n FROM events WHERE world_id IS NULL`
      )
      expect(machine?.n).toBe(EVENTS_KEPT)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("cuts a longer history down once, as a database of an earlier berth is opened", () =>
    Effect.gen(function* () {
      const home = mkdtempSync(join(tmpdir(), "berth-registry-events-"))
      folders.push(home)
      const opened = RegistryLive.pipe(Layer.provideMerge(Home.layerAt(home)))
      const world = yield* Effect.gen(function* () {
        const registry = yield* Registry
        const project = yield* registry.upsertProject({ name: "p", commonDir: "/tmp/p/.git", mainRoot: "/tmp/p" })
        return yield* registry.createWorld({ projectId: project.id, name: "a", path: "", branch: "a", isMain: false })
      }).pipe(Effect.provide(opened))
      // the database as an earlier berth left it: no index, no trigger, a long history
      yield* onDatabase((sql) =>
        Effect.gen(function* () {
          yield* sql`DROP TRIGGER events_kept`
          yield* sql`DROP INDEX events_world`
          yield* sql`DELETE FROM effect_sql_migrations WHERE migration_id = 8`
          for (let i = 0; i < EVENTS_KEPT + 20; i++) {
            yield* sql`INSERT INTO events (world_id, service, kind, message, at) VALUES (${world.id}, NULL, 'note',
              ${`a${i}`}, 0)`
          }
        })
      ).pipe(Effect.provide(Home.layerAt(home)))
      const kept = yield* Effect.flatMap(Registry, (registry) => registry.events(world.id, EVENTS_KEPT * 2)).pipe(
        Effect.provide(opened)
      )
      expect(kept).toHaveLength(EVENTS_KEPT)
      expect(kept.at(-1)?.message).toBe("a20")
    })
  )
})
