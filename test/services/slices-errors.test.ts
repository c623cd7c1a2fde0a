/**
 * What a world's slices fail with, each with a tag of its own, over the real Slices, the real Registry (SQLite) and the
 * embedded `dir` adapter (and the external binky fixture, whose protocol cannot clone): a variable an admin_url needs
 * and lacks, a copy the adapter cannot make, golden inputs that cannot be read.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Model from "../../src/domain/config/model.js"
import { Home } from "../../src/services/Home.js"
import { Registry, RegistryLive } from "../../src/services/Registry.js"
import { SliceLedgerLive } from "../../src/services/slices/SliceLedger.js"
import { Slices, SlicesLive, type SliceWorld } from "../../src/services/slices/Slices.js"
import { MAX_FILES } from "../../src/services/worktree/files.js"
import { dirSlice } from "./slice-helpers.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})

const folder = (what: string) => {
  const made = mkdtempSync(join(tmpdir(), `berth-slices-errors-${what}-`))
  folders.push(made)
  return made
}

const layer = () =>
  SlicesLive.pipe(
    Layer.provideMerge(Layer.merge(RegistryLive, SliceLedgerLive)),
    Layer.provideMerge(Home.layerAt(folder("home")))
  )

/** A new world `name` of project shop, its worktree at `path`. */
const world = (name: string, path: string) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const project = yield* registry.upsertProject({ name: "shop", mainRoot: path, commonDir: join(path, ".git") })
    const row = yield* registry.createWorld({ projectId: project.id, name, path, branch: name, isMain: false })
    return { id: row.id, project: project.label, name: row.name, slug: row.slug, path: row.path } satisfies SliceWorld
  })

const provision = (w: SliceWorld, services: ReadonlyArray<Model.SliceService>, env: Record<string, string> = {}) =>
  Effect.flatMap(Slices, (slices) =>
    slices.provision(
      w,
      services,
      (name) => env[name],
      () => Effect.void
    )
  )

describe("a world's slices", () => {
  it.layer(layer())((it) => {
    it.effect("fail with UnsetVariable, before anything is recorded, when an admin_url's variable is not set", () =>
      Effect.gen(function* () {
        const w = yield* world("unset", folder("unset"))
        const db: Model.SliceService = { ...dirSlice("db", "true"), adminUrl: "dir://${env.SLICE_HOME}" }
        const failed = yield* Effect.flip(provision(w, [db]))
        expect(failed._tag).toBe("UnsetVariable")
        expect(failed.message).toBe("world unset: slice db: ${env.SLICE_HOME} is not set (admin_url)")
        expect(yield* Effect.flatMap(Registry, (r) => r.slices(w.id))).toEqual([])
      })
    )

    it.effect("fail with SliceCopyUnsupported when clone_from names a database the adapter cannot copy", () =>
      Effect.gen(function* () {
        const w = yield* world("copied", folder("copied"))
        const db: Model.SliceService = { ...dirSlice("db", "true"), cloneSource: "shop_dev" }
        const failed = yield* Effect.flip(provision(w, [db]))
        expect(failed._tag).toBe("SliceCopyUnsupported")
        expect(failed.message).toBe(
          'world copied: slice db: the dir adapter cannot copy a database already on its server (clone_from = "shop_dev")\n  hint: clone_from = "<database>" works with postgres and mysql; use clone_from = "golden" or remove it'
        )
      })
    )

    it.effect(
      "fail with SliceCopyUnsupported when a world's slice is to be copied by an adapter that cannot clone",
      () =>
        Effect.gen(function* () {
          const slices = yield* Slices
          const registry = yield* Registry
          const w = yield* world("one", folder("one"))
          // a ready slice of binky's drawer, whose protocol has no clone
          const row = yield* registry.recordSlice({
            worldId: w.id,
            project: w.project,
            service: "drawer",
            adapter: "drawer",
            name: "shop_one_drawer",
            adminUrl: null,
            storage: folder("drawer"),
            options: {},
            goldenKey: null
          })
          yield* registry.markSliceReady(row.id)
          const fixtures = resolve(import.meta.dirname, "../../adapters/external/fixtures")
          const refused = yield* Effect.flip(slices.canCopy(w, "two", fixtures))
          expect(refused._tag).toBe("SliceCopyUnsupported")
          expect(refused.message).toBe(
            "world one: slice drawer (drawer) cannot be copied: the drawer adapter cannot clone a slice\n  hint: berth up two without --from gives the new world its own slices, migrated and seeded"
          )
        })
    )

    it.effect("fail with GoldenInputsFailed when golden_inputs match more files than a golden is built from", () =>
      Effect.gen(function* () {
        const worktree = folder("inputs")
        mkdirSync(join(worktree, "data"))
        for (let i = 0; i <= MAX_FILES; i++) writeFileSync(join(worktree, "data", `${i}.sql`), "")
        const w = yield* world("inputs", worktree)
        const db: Model.SliceService = { ...dirSlice("db", "true"), cloneFrom: "golden", goldenInputs: ["data/**"] }
        const failed = yield* Effect.flip(provision(w, [db]))
        expect(failed._tag).toBe("GoldenInputsFailed")
        expect(failed.message).toBe(
          `world inputs: slice db: golden_inputs match more than ${MAX_FILES} files under ${join(worktree, "data")}; narrow them\n  hint: services.db.golden_inputs in berth.toml names the few files its golden is built from (migrations, seeds)`
        )
      })
    )
  })
})
