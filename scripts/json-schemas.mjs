// Writes docs/json/<name>.schema.json from the Effect Schemas of src/cli/json.ts (the `--json` contract).
// `node scripts/json-schemas.mjs` after changing a document; test/unit/json-contract.test.ts fails while they differ.
// The module is bundled by esbuild first, so no TypeScript loader is needed.
import { execFileSync } from "node:child_process"
import * as esbuild from "esbuild"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

const root = new URL("..", import.meta.url)
const dir = mkdtempSync(join(tmpdir(), "berth-json-"))
try {
  const bundled = join(dir, "json.mjs")
  await esbuild.build({
    entryPoints: [new URL("src/cli/json.ts", root).pathname],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: bundled,
    external: ["better-sqlite3", "pg-native"],
    logLevel: "warning",
    // CommonJS dependencies call require(): give the ESM bundle one
    banner: { js: 'import { createRequire } from "node:module"; const require = createRequire(import.meta.url);' }
  })
  const { documents, jsonSchemaOf } = await import(pathToFileURL(bundled).href)
  for (const name of Object.keys(documents)) {
    const file = new URL(`docs/json/${name}.schema.json`, root)
    writeFileSync(file, `${JSON.stringify(jsonSchemaOf(name), null, 2)}\n`)
    console.log(`docs/json/${name}.schema.json`)
  }
  // in the project's own format, so that `biome ci` passes on what was just written
  execFileSync(new URL("node_modules/.bin/biome", root).pathname, ["format", "--write", "docs/json"], {
    cwd: new URL(".", root).pathname,
    stdio: "ignore"
  })
} finally {
  rmSync(dir, { recursive: true, force: true })
}
