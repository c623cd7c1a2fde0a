/**
 * A spare copy of a golden whose ending the full disk cut short, over the real Slices, the real Registry (SQLite) and
 * the postgres adapter on the test server: the copy is made, its `ready` cannot be written, and neither can the
 * forgetting of its row. Once space is back the row goes too — not at the next slice sweep, ten minutes later — so
 * `berth gc` finds nothing half-provisioned.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import pg from "pg"
import type * as Model from "../../src/domain/config/model.js"
import { DiskFull } from "../../src/domain/errors.js"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { SliceLedgerLive } from "../../src/services/slices/SliceLedger.js"
import { Slices, SlicesLive, type SliceWorld } from "../../src/services/slices/Slices.js"
import { dirSlice } from "./slice-helpers.js"

const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const project = `sfd${process.pid}x${Date.now() % 100000}`

const home = mkdtempSync(join(tmpdir(), "berth-spare-full-disk-"))

const adminQuery = async (text: string) => {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    return (await client.query<{ datname: string }>(text)).rows
  } finally {
    await client.end()
  }
}

afterAll(async () => {
  for (const { datname } of await adminQuery("SELECT datname FROM pg_database")) {
    if (datname.includes(project)) await adminQuery(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`)
  }
  rmSync(home, { recursive: true, force: true })
})

/** the disk as the registry sees it: while full, a spare's `ready` and the forgetting of its row fail */
const disk = { full: true, spareRows: new Set<number>(), forgetsRefused: 0 }

const refused = (what: string) => new DiskFull({ path: join(home, what), freeBytes: 0, home })

const layer = () => {
  const registry = Layer.effect(
    Registry,
    Effect.map(Registry, (real) => ({
      ...real,
      recordSlice: (s: Parameters<typeof real.recordSlice>[0]) =>
        Effect.tap(real.recordSlice(s), (row) => {
          if (s.role === "spare") disk.spareRows.add(row.id)
        }),
      markSliceReady: (id: number) =>
        Effect.suspend(() =>
          disk.full && disk.spareRows.has(id) ? Effect.fail(refused("state.db")) : real.markSliceReady(id)
        ),
      // asked again on every run of the effect, as a write to the real state database is
      forgetSlice: (id: number) =>
        Effect.suspend(() =>
          disk.full && disk.spareRows.has(id)
            ? Effect.zipRight(
                Effect.sync(() => disk.forgetsRefused++),
                Effect.fail(refused("state.db"))
              )
            : real.forgetSlice(id)
        )
    }))
  ).pipe(Layer.provide(RegistryLive))
  return SlicesLive.pipe(
    Layer.provideMerge(Layer.merge(registry, SliceLedgerLive)),
    Layer.provideMerge(Home.layerAt(home))
  )
}

const db: Model.SliceService = { ...dirSlice("db", "true"), adapter: "postgres", adminUrl, cloneFrom: "golden" }

const world = (name: string) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const made = yield* registry.upsertProject({ name: project, mainRoot: home, commonDir: join(home, ".git") })
    const row = yield* registry.createWorld({ projectId: made.id, name, path: home, branch: name, isMain: false })
    return { id: row.id, project: made.label, name: row.name, slug: row.slug, path: row.path } satisfies SliceWorld
  })

/** polls `check` every 100 ms until it holds or `ms` pass; the last value either way */
const until = <A, E, R>(check: Effect.Effect<A, E, R>, holds: (a: A) => boolean, ms: number) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    let value = yield* check
    while (!holds(value) && Date.now() < deadline) {
      yield* Effect.sleep("100 millis")
      value = yield* check
    }
    return value
  })

describe("a spare copy the full disk cut short", () => {
  it.live(
    "leaves no half-provisioned row once space is back",
    () =>
      Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        yield* slices.provision(
          yield* world("one"),
          [db],
          () => undefined,
          () => Effect.void
        )
        // the spare's copy runs in the background: its `ready`, then its row's forgetting, are refused
        const refusals = yield* until(
          Effect.sync(() => disk.forgetsRefused),
          (n) => n > 0,
          30_000
        )
        expect(refusals).toBeGreaterThan(0)
        disk.full = false
        const spares = (rows: ReadonlyArray<{ readonly id: number }>) => rows.filter((r) => disk.spareRows.has(r.id))
        const left = yield* until(Effect.map(registry.slices(), spares), (rows) => rows.length === 0, 5_000)
        expect(left).toEqual([])
        const gc = yield* slices.gc(true)
        expect(gc.entries).toEqual([])
      }).pipe(Effect.provide(layer())),
    60_000
  )
})
