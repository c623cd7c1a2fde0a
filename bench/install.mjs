// How long installing berth takes, and how much it puts on disk, as a user installs it: the package packed from this
// checkout (npm pack: the build and its types), installed globally into a temporary prefix from the tarball, each run
// into a fresh one, then the installed `berth --version` run. npm's cache is used as it is (--prefer-offline):
// after `npm ci` it holds every package berth installs, so the figure is npm's own work and any install script's.
// --ignore-scripts installs without running install scripts, to tell npm's part from the SQLite binding's build (the
// installed berth then has no SQLite binding; --version, which needs none, still runs).
// --prebuilt-mirror serves the SQLite binding's prebuilt binary from loopback, in the file better-sqlite3's install
// script downloads from GitHub on a machine that reaches it (the same name and layout, packed from the binding
// `npm ci` left in node_modules), so that the figure is a user's install where that download works: on a machine that
// cannot reach GitHub the script otherwise compiles SQLite. Each run asks its own address, so no run is served from
// the install script's cache of an earlier one; the installed binding is then opened once to show that it loads.
// Usage: node bench/install.mjs [--runs N] [--ignore-scripts | --prebuilt-mirror] [--json]
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { bindingHostVariable, startPrebuiltMirror } from "../scripts/prebuilt-mirror.mjs"
import { machineNow, median, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    "ignore-scripts": { type: "boolean" },
    "prebuilt-mirror": { type: "boolean" },
    json: { type: "boolean" }
  }
})
const runs = Number(options.runs)
if (!Number.isInteger(runs) || runs < 1 || (options["ignore-scripts"] && options["prebuilt-mirror"])) {
  console.error("usage: node bench/install.mjs [--runs N (1 or more)] [--ignore-scripts | --prebuilt-mirror] [--json]")
  process.exit(2)
}

const repo = fileURLToPath(new URL("..", import.meta.url))
const pkg = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"))
const work = mkdtempSync(join(tmpdir(), "berth-bench-install-"))
// npm as a user's shell runs it: not the npm_* variables of an `npm run` that may have started this script
const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith("npm_")))

/** bytes on disk under `path`, as du counts them (blocks), each hard-linked file once */
const diskBytes = (path, seen = new Set()) => {
  const stat = lstatSync(path)
  if (seen.has(stat.ino)) return 0
  seen.add(stat.ino)
  let bytes = stat.blocks * 512
  if (stat.isDirectory()) for (const name of readdirSync(path)) bytes += diskBytes(join(path, name), seen)
  return bytes
}

/** runs a command without blocking this process, whose loop serves the mirror meanwhile */
const spawnAsync = (command, args, options) =>
  new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (status) => resolve({ status, stdout, stderr }))
  })

const round = (n, digits = 1) => Number(n.toFixed(digits))
const loadBefore = loadavg().map((l) => round(l, 2))
const machineBefore = machineNow()
const results = []
let tarball
let packedBytes = 0
let mirror
try {
  const name = execFileSync("npm", ["pack", "--silent", "--pack-destination", work], {
    cwd: repo,
    env,
    encoding: "utf8"
  })
    .trim()
    .split("\n")
    .at(-1)
  tarball = join(work, name)
  packedBytes = lstatSync(tarball).size
  if (options["prebuilt-mirror"]) mirror = await startPrebuiltMirror(repo)
  for (let run = 0; run < runs; run++) {
    const prefix = join(work, `prefix-${run}`)
    const started = process.hrtime.bigint()
    const install = await spawnAsync(
      "npm",
      [
        "install",
        "--global",
        "--prefix",
        prefix,
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        ...(options["ignore-scripts"] ? ["--ignore-scripts"] : []),
        tarball
      ],
      {
        cwd: work,
        env: mirror ? { ...env, [bindingHostVariable]: mirror.host(`run-${run}`) } : env,
        encoding: "utf8"
      }
    )
    const seconds = Number(process.hrtime.bigint() - started) / 1e9
    if (install.status !== 0) throw new Error(`npm install failed (${install.status}):\n${install.stderr}`)
    // npm names each package whose install script it ran or would ask to allow
    const scripts = [...install.stderr.matchAll(/^npm warn install-scripts\s+(\S+@\S+) \(/gm)].map((m) => m[1])
    const version = spawnSync(join(prefix, "bin", "berth"), ["--version"], { env, encoding: "utf8" })
    if (version.status !== 0 || !version.stdout.includes(pkg.version)) {
      throw new Error(`the installed berth --version failed (${version.status}): ${version.stdout}${version.stderr}`)
    }
    if (mirror) {
      const asked = mirror.asked(`run-${run}`)
      if (asked !== 1) throw new Error(`the install asked the mirror ${asked} times, not once`)
      const installed = join(prefix, "lib", "node_modules", pkg.name, "node_modules", "better-sqlite3")
      const opened = spawnSync(
        process.execPath,
        ["-e", `new (require(${JSON.stringify(installed)}))(":memory:").close()`],
        {
          env,
          encoding: "utf8"
        }
      )
      if (opened.status !== 0) throw new Error(`the installed SQLite binding did not load:\n${opened.stderr}`)
    }
    results.push({ seconds, megabytes: diskBytes(prefix) / 1e6, version: version.stdout.trim(), scripts })
    rmSync(prefix, { recursive: true, force: true })
  }
} finally {
  await mirror?.close()
  rmSync(work, { recursive: true, force: true })
}

const seconds = results.map((r) => r.seconds)
const megabytes = results.map((r) => r.megabytes)
const summary = {
  runs,
  packedMegabytes: round(packedBytes / 1e6, 2),
  seconds: { median: round(median(seconds)), min: round(Math.min(...seconds)), max: round(Math.max(...seconds)) },
  megabytes: {
    median: round(median(megabytes)),
    min: round(Math.min(...megabytes)),
    max: round(Math.max(...megabytes))
  },
  prebuilt: options["prebuilt-mirror"] ? "served from loopback" : "as the machine reaches it",
  installScripts: options["ignore-scripts"] ? "skipped" : [...new Set(results.flatMap((r) => r.scripts))],
  version: results[0]?.version,
  load: { before: loadBefore, after: loadavg().map((l) => round(l, 2)) },
  node: process.version
}
if (options.json) console.log(JSON.stringify(summary, null, 2))
else {
  const range = (s, unit) => `${s.median} ${unit} (${s.min}–${s.max})`
  console.log(
    `npm i -g berth-${pkg.version}.tgz (${summary.packedMegabytes} MB packed), ${runs} run${runs === 1 ? "" : "s"}: ` +
      `${range(summary.seconds, "s")}, ${range(summary.megabytes, "MB")} on disk; ` +
      `${options["prebuilt-mirror"] ? "the SQLite binding's prebuilt binary served from loopback; " : ""}` +
      `install scripts: ${typeof summary.installScripts === "string" ? summary.installScripts : summary.installScripts.join(", ") || "none"}; ` +
      `berth --version: ${summary.version}; ` +
      `load ${loadBefore.join(" ")} → ${summary.load.after.join(" ")}; node ${process.version}`
  )
  console.log(
    summaryLine({
      what: options["prebuilt-mirror"] ? "install from the tarball, the binding prebuilt" : "install from the tarball",
      values: seconds,
      unit: "s",
      digits: 1,
      before: machineBefore,
      goal: "goal < 20 s"
    })
  )
  console.log(
    summaryLine({
      what: "installed size",
      values: megabytes,
      unit: "MB",
      digits: 1,
      before: machineBefore,
      goal: "goal < 40 MB"
    })
  )
}
