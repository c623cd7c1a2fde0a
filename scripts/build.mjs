// Bundles the CLI (and the daemon it starts): dist/berth.cjs, a tiny CommonJS entry (CommonJS starts ~15 ms sooner),
// and dist/berth-program.cjs, the program it compiles only when a command needs it.
//
// Two steps. First src/cli/main.ts and everything it imports become one CommonJS function expression: that text is
// dist/berth-program.cjs. Then the entry, src/cli/entry.ts, reads it back and compiles it only when a command runs,
// with a V8 code cache (see entry.ts). The program sits in a file of its own because V8 still scans whatever the entry
// file holds, even as comments: 2.8 MB of them cost every start ~11 ms here, `--version` and the lean path included.
// `node bench/cli-start.mjs` measures the result; `--analyze` prints what the program is made of.
import * as esbuild from "esbuild"
import { createHash, randomUUID } from "node:crypto"
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"

// BERTH_DIST builds elsewhere (inside the project, so node_modules resolves): a second build for tests that must not
// replace the daemons of a suite running against dist/
const out = process.env.BERTH_DIST ?? "dist"

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))

// left to the package manager or the user, resolved from node_modules at run time. The SQLite binding is native (the
// package's one dependency), as is pg's optional half. The clients of three adapters are not installed with berth
// (src/domain/drivers.ts names them for the user): bundled, the AWS SDK would add about 600 KB (a quarter) to the
// program every command compiles, for a client only projects with an s3 slice load; the MongoDB driver likewise (its
// optional native add-ons esbuild cannot resolve), and kafkajs (270 KB)
const unbundled = ["better-sqlite3", "pg-native", "@aws-sdk/client-s3", "mongodb", "kafkajs"]

const shared = {
  bundle: true,
  platform: "node",
  target: "node20",
  minify: process.env.BERTH_MINIFY !== "0",
  keepNames: false,
  legalComments: "none",
  metafile: true,
  logLevel: "warning"
}
const version = JSON.stringify(pkg.version)
// names this very build: a CLI replaces a daemon of any other build, even of the same version (a local rebuild)
const build = JSON.stringify(randomUUID().slice(0, 8))

const main = await esbuild.build({
  ...shared,
  entryPoints: ["src/cli/main.ts"],
  write: false,
  format: "cjs",
  // entry.ts calls this function with the entry module's own require, paths and import.meta
  banner: { js: "(function (exports, require, module, __filename, __dirname, __berthImportMeta) {" },
  footer: { js: "})" },
  external: unbundled,
  // import() inside vm-compiled code needs Node's experimental vm loader (which warns): require() externals instead
  supported: { "dynamic-import": false },
  define: { BERTH_VERSION: version, BERTH_BUILD: build, "import.meta": "__berthImportMeta" }
})
const source = main.outputFiles[0].text
// ASCII only: Node reads an ASCII file into a one-byte string, but one character past it (a "─" in a regular
// expression, which esbuild does not escape there) makes all 3 MB a two-byte string, read at twice the cost on every
// command and held at twice the size in every process. Write such a character as a \u escape in the source. (An
// unminified build, for reading profiles, keeps some comments, and their characters: it is not checked)
const wide = shared.minify ? /[\u0080-\uffff]/.exec(source) : null
if (wide !== null) {
  const line = source.slice(0, wide.index).split("\n").length
  const around = source.slice(Math.max(0, wide.index - 60), wide.index + 20)
  throw new Error(`the program must be ASCII: ${JSON.stringify(wide[0])} on line ${line} of it, in …${around}…`)
}

const entry = await esbuild.build({
  ...shared,
  entryPoints: ["src/cli/entry.ts"],
  write: false,
  outfile: `${out}/berth.cjs`,
  format: "cjs",
  define: {
    BERTH_VERSION: version,
    BERTH_BUILD: build,
    BERTH_MAIN_HASH: JSON.stringify(createHash("sha256").update(source).digest("hex").slice(0, 16))
  }
})

// the entry must stay small — itself and the lean path's few modules, as V8 reads them (bundled, the sources'
// comments gone): pulling main.ts or Effect in as code would bring back the parse cost this layout avoids
const entryInputs = Object.entries(entry.metafile.inputs)
const entryBytes = entry.outputFiles[0].text.length
if (
  entryInputs.some(([file]) => file.includes("node_modules") || file.endsWith("cli/main.ts")) ||
  // (an unminified build, BERTH_MINIFY=0, is for reading profiles: its size is not the shipped one)
  entryBytes > (shared.minify ? 18_000 : 60_000)
) {
  throw new Error(`dist/berth.cjs's entry grew too large: ${entryInputs.map(([f]) => f).join(", ")}`)
}

mkdirSync(out, { recursive: true })
writeFileSync(`${out}/berth-program.cjs`, source, { mode: 0o644 })
writeFileSync(`${out}/berth.cjs`, `#!/usr/bin/env node\n${entry.outputFiles[0].text}`, { mode: 0o755 })
// an older build's ESM entry would otherwise linger beside it
rmSync(`${out}/berth.mjs`, { force: true })

// the command users run. The CLI talks only to its daemon over a unix socket, so it starts Node without the
// NODE_EXTRA_CA_CERTS bundle, whose loading costs tens of milliseconds per start; the value is handed on, unchanged,
// to the daemon and to every process of a world (src/cli/entry.ts puts it back).
writeFileSync(
  `${out}/berth`,
  `#!/bin/sh
# berth's launcher: starts the CLI (dist/berth.cjs) without loading NODE_EXTRA_CA_CERTS, which the CLI does not
# need; the value is handed on to the daemon and the worlds' processes unchanged.
# (folders by parameter expansion, not dirname: a process less on every command)
self=$0
while [ -L "$self" ]; do
  link=$(readlink "$self")
  case $link in
    /*) self=$link ;;
    *) case $self in */*) self=\${self%/*}/$link ;; *) self=$link ;; esac ;;
  esac
done
case $self in
  */*) here=\${self%/*} ;;
  *) here=. ;;
esac
if [ -n "\${NODE_EXTRA_CA_CERTS+set}" ]; then
  BERTH_NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS
  export BERTH_NODE_EXTRA_CA_CERTS
  unset NODE_EXTRA_CA_CERTS
fi
exec node "\${here:-/}/berth.cjs" "$@"
`,
  { mode: 0o755 }
)

// the embedding API: the library as ESM beside the CLI, bundled as the CLI is (the package installs no other
// dependency), but for Effect itself — a peer, the embedder's own, so that its values and berth's are one kind.
// Split, so that each adapter (and so each client above) is loaded when a slice needs it, not when berth is
// imported; bundled CommonJS (pg, mysql2, ioredis) calls require, which an ES module has to be given
rmSync(`${out}/chunks`, { recursive: true, force: true })
await esbuild.build({
  ...shared,
  minify: false,
  entryPoints: { index: "src/index.ts" },
  outdir: out,
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunks/[name]-[hash]",
  splitting: true,
  format: "esm",
  external: [...unbundled, "effect"],
  banner: {
    js: 'import { createRequire as __berthRequire } from "node:module"\nconst require = __berthRequire(import.meta.url)'
  },
  define: { BERTH_VERSION: version, BERTH_BUILD: build },
  write: true,
  metafile: false
})

// the adapter SDK (`berth/adapter-sdk`) for third parties' `berth-adapter-<name>` executables: standalone, since an
// adapter should start fast and must not need berth's dependencies; its types come with build:types
const sdk = await esbuild.build({
  ...shared,
  minify: false,
  entryPoints: { "adapter-sdk": "src/adapter-sdk/index.ts" },
  outdir: out,
  outExtension: { ".js": ".mjs" },
  format: "esm",
  write: true
})
const sdkInputs = Object.keys(sdk.metafile.inputs)
if (sdkInputs.length !== 1)
  throw new Error(`dist/adapter-sdk.mjs must stand alone, but it bundles ${sdkInputs.join(", ")}`)

// its Python twin, one standard-library file: shipped beside the CLI (the package ships only dist/), where a Python
// adapter finds it with PYTHONPATH or copies it from
copyFileSync("src/adapter-sdk/berth_adapter.py", `${out}/berth_adapter.py`)

// the fence's watchdog (src/cluster/watchdog.ts), started beside a cluster member's daemon: plain Node and berth's
// pure modules only, so it starts at once and stays small
const watchdog = await esbuild.build({
  ...shared,
  entryPoints: ["src/cluster/watchdog.ts"],
  outfile: `${out}/berth-watchdog.cjs`,
  format: "cjs",
  write: true
})
const watchdogInputs = Object.keys(watchdog.metafile.inputs)
if (watchdogInputs.some((file) => file.includes("node_modules")))
  throw new Error(`dist/berth-watchdog.cjs must stand alone, but it bundles ${watchdogInputs.join(", ")}`)

if (process.argv.includes("--analyze")) {
  console.log(await esbuild.analyzeMetafile(main.metafile))
}
