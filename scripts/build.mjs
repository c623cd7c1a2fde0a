// Bundles the CLI (and the daemon it starts) into one ESM file: dist/berth.mjs.
// Heavy modules are reached through dynamic import() from a tiny entry, which esbuild keeps in the same file but
// evaluates lazily, so `berth --version` never pays for Effect.
import * as esbuild from "esbuild"
import { readFileSync } from "node:fs"

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))

const result = await esbuild.build({
  entryPoints: { berth: "src/cli/entry.ts" },
  outdir: "dist",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  minify: true,
  keepNames: false,
  legalComments: "none",
  metafile: true,
  // native addon: resolved from node_modules at run time
  external: ["better-sqlite3"],
  define: { BERTH_VERSION: JSON.stringify(pkg.version) },
  banner: {
    js: [
      "#!/usr/bin/env node",
      'import { createRequire as __berthCreateRequire } from "node:module";',
      "const require = __berthCreateRequire(import.meta.url);"
    ].join("\n")
  },
  logLevel: "warning"
})

if (process.argv.includes("--analyze")) {
  console.log(await esbuild.analyzeMetafile(result.metafile))
}
