/**
 * Slice rows whose forgetting a full disk refused, over the real Slices, the real Registry (SQLite), the postgres
 * adapter on the test server and the embedded `dir` adapter. A spare copy of a golden is made, its `ready` cannot be
 * written, and neither can the forgetting of its row: once space is back the row goes too — not at the next slice
 * sweep, ten minutes later — so `berth gc` finds nothing half-provisioned. And a world's slice whose first provision
 * failed so is provisioned again as soon as space is back: the forgetting put off then leaves its new row alone.
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
import { type NewSlice, Registry, RegistryLive, type RegistryService } from "../../src/services/Registry.js"
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

/** the disk as the registry sees it: while full, the `ready` and the forgetting of the rows it names fail */
const newDisk = () => ({
  full: true,
  refusing: new Set<number>(),
  forgetsRefused: 0,
  /** the registry underneath, which refuses nothing */
  real: undefined as RegistryService | undefined
})
type Disk = ReturnType<typeof newDisk>

const refused = (what: string) => new DiskFull({ path: join(home, what), freeBytes: 0, home })

/** the real Slices on a registry that refuses what `disk` says; `refuse` picks the rows it names as they are made */
const layer = (disk: Disk, refuse: (s: NewSlice) => boolean) => {
  const registry = Layer.effect(
    Registry,
    Effect.map(Registry, (real) => {
      disk.real = real
      return {
        ...real,
        recordSlice: (s: NewSlice) =>
          Effect.tap(real.recordSlice(s), (row) => {
            if (refuse(s)) disk.refusing.add(row.id)
          }),
        markSliceReady: (id: number) =>
          Effect.suspend(() =>
            disk.full && disk.refusing.has(id) ? Effect.fail(refused("state.db")) : real.markSliceReady(id)
          ),
        // asked again on every run of the effect, as a write to the real state database is
        forgetSlice: (id: number, name?: string) =>
          Effect.suspend(() =>
            disk.full && disk.refusing.has(id)
              ? Effect.zipRight(
                  Effect.sync(() => disk.forgetsRefused++),
                  Effect.fail(refused("state.db"))
                )
              : real.forgetSlice(id, name)
          )
      }
    })
  ).pipe(Layer.provide(RegistryLive))
  return SlicesLive.pipe(
    Layer.provideMerge(Layer.merge(registry, SliceLedgerLive)),
    Layer.provideMerge(Home.layerAt(mkdtempSync(join(home, "home-"))))
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

describe("slice rows the full disk kept from being forgotten", () => {
  it.live(
    "a spare copy cut short leaves no half-provisioned row once space is back",
    () => {
      const disk = newDisk()
      return Effect.gen(function* () {
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
        const spares = (rows: ReadonlyArray<{ readonly id: number }>) => rows.filter((r) => disk.refusing.has(r.id))
        const left = yield* until(Effect.map(registry.slices(), spares), (rows) => rows.length === 0, 5_000)
        expect(left).toEqual([])
        const gc = yield* slices.gc(true)
        expect(gc.entries).toEqual([])
      }).pipe(Effect.provide(layer(disk, (s) => s.role === "spare")))
    },
    60_000
  )

  it.live(
    "a world's slice provisioned again once space is back keeps its row",
    () => {
      const disk = newDisk()
      const files = dirSlice("files", "true")
      return Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        const w = yield* world("two")
        // its migrate cannot write on the full disk: the slice is dropped, and its row's forgetting is refused
        const first = yield* Effect.either(
          slices.provision(
            w,
            [files],
            () => undefined,
            () => Effect.fail(refused("logs"))
          )
        )
        expect(first._tag).toBe("Left")
        // and refused again when it is tried once more while the disk is still full
        expect(
          yield* until(
            Effect.sync(() => disk.forgetsRefused),
            (n) => n >= 2,
            5_000
          )
        ).toBeGreaterThanOrEqual(2)
        // space is back, and the world is brought up again at once
        disk.full = false
        yield* slices.provision(
          w,
          [files],
          () => undefined,
          () => Effect.void
        )
        // past the put-off forgetting's next tries: the new row stays, ready
        yield* Effect.sleep("2500 millis")
        const rows = yield* registry.slices(w.id)
        expect(rows.map((r) => [r.service, r.state])).toEqual([["files", "ready"]])
        expect((yield* slices.gc(true)).entries).toEqual([])
      }).pipe(Effect.provide(layer(disk, (s) => s.worldId !== null)))
    },
    60_000
  )

  it.live(
    "a row dropped meanwhile, its id taken by another slice's, leaves that one alone",
    () => {
      const disk = newDisk()
      return Effect.gen(function* () {
        const slices = yield* Slices
        const registry = yield* Registry
        const w = yield* world("three")
        const failed = yield* Effect.either(
          slices.provision(
            w,
            [dirSlice("files", "true")],
            () => undefined,
            () => Effect.fail(refused("logs"))
          )
        )
        expect(failed._tag).toBe("Left")
        yield* until(
          Effect.sync(() => disk.forgetsRefused),
          (n) => n >= 2,
          5_000
        )
        // the row goes another way (gc's sweep), and the next slice recorded gets its id (SQLite reuses the highest)
        const [dropped] = yield* registry.slices(w.id)
        yield* disk.real!.forgetSlice(dropped!.id)
        const other = yield* disk.real!.recordSlice({
          worldId: null,
          project: dropped!.project,
          service: "other",
          adapter: "dir",
          name: `golden_${dropped!.project}_other`,
          adminUrl: null,
          storage: dropped!.storage,
          options: {},
          goldenKey: "k"
        })
        expect(other.id).toBe(dropped!.id)
        disk.full = false
        yield* Effect.sleep("2500 millis")
        expect((yield* registry.slices()).map((r) => r.name)).toContain(other.name)
      }).pipe(Effect.provide(layer(disk, (s) => s.worldId !== null)))
    },
    60_000
  )
})
