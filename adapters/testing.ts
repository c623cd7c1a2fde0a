/**
 * What the adapter tests share: names no other test file or run meets on a shared server, an installation of this
 * run, and slices built from one adapter's defaults.
 */
import { randomBytes } from "node:crypto"
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import type { ListScope, Slice } from "./contract.js"

/**
 * A name maker for one test file: every name starts with `prefix` (random per run, so files running in parallel and
 * earlier runs never meet, and afterAll finds exactly this run's leftovers) and is unique within the file.
 */
export const runNames = (stem = "berth_t") => {
  const prefix = `${stem}${randomBytes(4).toString("hex")}_`
  let count = 0
  return { prefix, fresh: (label: string): string => `${prefix}${count++}_${label}` }
}

/** A berth installation of this run only: another run's (or owner's) slices are never its own. */
export const runOwner = (): string => `t${randomBytes(4).toString("hex")}`

/** What every slice of one subject has; the rest defaults to a server slice of project `acme`. */
export type SliceDefaults = Pick<Slice, "adapter" | "service"> & Partial<Omit<Slice, "name">>

/**
 * A slice builder for one adapter and service: `make(name)` is the slice named `name` (its world too, unless the
 * defaults or `extra` say another), `extra` replaces any field for one slice.
 */
export const sliceMaker =
  (defaults: SliceDefaults) =>
  (name: string, extra: Partial<Slice> = {}): Slice => ({
    project: "acme",
    world: name,
    owner: "t",
    storage: "/nonexistent",
    adminUrl: undefined,
    options: {},
    ...defaults,
    name,
    ...extra
  })

/** Where `list` looks for `slice`, and whose slices it returns. */
export const scopeOf = (slice: Pick<Slice, "storage" | "adminUrl" | "options" | "owner">): ListScope => ({
  storage: slice.storage,
  adminUrl: slice.adminUrl,
  options: slice.options,
  owner: slice.owner
})

/**
 * A private temporary folder for one test file, removed after its tests, and a maker of fresh folders in it:
 * `folder(label)` is new each call, created (0700) unless `create` is false (for provision to make it).
 */
export const scratch = (label: string) => {
  const base = realpathSync(mkdtempSync(join(tmpdir(), `berth-${label}-`)))
  afterAll(() => rmSync(base, { recursive: true, force: true }))
  let count = 0
  const folder = (name: string, create = true): string => {
    const dir = join(base, `${name}-${count++}`)
    if (create) mkdirSync(dir, { mode: 0o700 })
    return dir
  }
  return { base, folder }
}

/**
 * A test's title that says why it is skipped, when it is: vitest prints a skipped test's title only, so the reason
 * (no such server on this machine, say) has to be in it.
 */
export const titled = (title: string, skip: string | undefined): string =>
  skip === undefined ? title : `${title} — skipped: ${skip}`
