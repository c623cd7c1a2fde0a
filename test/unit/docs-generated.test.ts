/**
 * The generated parts of docs/ (the command reference, every berth.toml key, the adapter catalogue) are what
 * `node scripts/docs.mjs` writes from the source now: a new option, key or adapter without regenerating fails here.
 */
import { spawnSync } from "node:child_process"
import { resolve } from "node:path"
import { describe, expect, it } from "@effect/vitest"

const root = resolve(import.meta.dirname, "../..")

describe("generated docs", () => {
  it("docs/commands.md, docs/config.md and docs/adapters.md match the CLI, the config schema and the catalogue", () => {
    const run = spawnSync(process.execPath, ["scripts/docs.mjs", "--check"], { cwd: root, encoding: "utf8" })
    // the script's own message names each stale page and the command that regenerates it
    expect(run.stderr).toBe("")
    expect(run.status).toBe(0)
  })
})
