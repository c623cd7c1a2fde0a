// Where a warm `berth up` spends its time: the 3-service world of bench/up.mjs, brought up after `berth down` with
// BERTH_TRACE set, so the CLI, the daemon and each service append timestamped marks to one file (see
// src/services/trace.ts); the services mark when node began, when their script ran and when they listened.
// Prints each mark's offset from the CLI's spawn (median and range over the runs), then the warm up against its floor.
// Usage: node bench/trace-up.mjs [--runs N] [--clean-env]   (build first)
import { execFileSync, spawnSync } from "node:child_process"
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { commitRepo, floor } from "./fixtures.mjs"
import { machineNow, median, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: { runs: { type: "string", default: "8" }, "clean-env": { type: "boolean" } }
})
const cli = fileURLToPath(new URL("../dist/berth", import.meta.url))
const base = mkdtempSync(join(tmpdir(), "berth-bench-trace-"))
const repo = join(base, "bench")
const traceFile = join(base, "trace.log")
const inherited = options["clean-env"] ? { PATH: process.env.PATH, HOME: process.env.HOME } : process.env
const env = {
  ...inherited,
  BERTH_HOME: join(base, "home"),
  XDG_CACHE_HOME: join(base, "cache"),
  BERTH_TRACE: traceFile,
  // the bench's own berth.toml: allowed without asking
  BERTH_YES: "1"
}
const now = () => performance.timeOrigin + performance.now()
const mark = (label) => appendFileSync(traceFile, `${now().toFixed(3)} ${process.pid} ${label}\n`)

// bench/up.mjs's server, marking its own start (node's time origin), its script running and its listening
const server = `const file = process.env.BERTH_TRACE, fs = require("node:fs")
const mark = (at, label) => file && fs.appendFileSync(file, at.toFixed(3) + " " + process.pid + " svc " + process.env.PORT + ": " + label + "\\n")
mark(performance.timeOrigin, "node began")
mark(performance.timeOrigin + performance.now(), "script runs")
require("node:net").createServer((s) => s.end()).listen(Number(process.env.PORT), "127.0.0.1", () => mark(performance.timeOrigin + performance.now(), "listening"))
`
execFileSync("mkdir", ["-p", repo])
writeFileSync(join(repo, "server.js"), server)
writeFileSync(
  join(repo, "berth.toml"),
  ["a", "b", "c"].map((s) => `[services.${s}]\ncmd = "node server.js"\nurl = "${s}"\n`).join("\n")
)
commitRepo(repo, env)

const berth = (...args) => {
  const r = spawnSync(cli, args, { cwd: repo, env, stdio: ["ignore", "pipe", "pipe"] })
  if (r.status !== 0) throw new Error(`${args.join(" ")} failed: ${r.stderr}`)
}

const machineBefore = machineNow()
const runs = []
try {
  berth("port", "--range", "42000-43999")
  berth("up", "w", "-s", "a", "-s", "b", "-s", "c")
  berth("down", "w")
  for (let i = 0; i < Number(options.runs); i++) {
    const bare = await floor(repo, inherited)
    writeFileSync(traceFile, "")
    mark("bench: spawns the CLI")
    const start = now()
    berth("up", "w", "-s", "a", "-s", "b", "-s", "c")
    const warm = now() - start
    mark("bench: the CLI exited")
    const lines = readFileSync(traceFile, "utf8").trim().split("\n")
    const marks = lines.map((line) => {
      const [at, , ...label] = line.split(" ")
      return { at: Number(at) - start, label: label.join(" ") }
    })
    runs.push({ warm, floor: bare, marks })
    berth("down", "w")
  }
} finally {
  spawnSync(cli, ["down", "--all"], { cwd: repo, env })
  spawnSync(cli, ["daemon", "stop"], { cwd: repo, env })
  rmSync(base, { recursive: true, force: true })
}

// a label a run marks more than once (a service's line) is taken in its order: the nth of each run together
const byLabel = new Map()
for (const run of runs) {
  const seen = new Map()
  for (const m of run.marks) {
    const n = (seen.get(m.label) ?? 0) + 1
    seen.set(m.label, n)
    const key = n === 1 ? m.label : `${m.label} (#${n})`
    byLabel.set(key, [...(byLabel.get(key) ?? []), m.at])
  }
}
console.log(`${runs.length} warm ups; ms after the CLI was spawned: median (range)\n`)
for (const [label, at] of [...byLabel].sort((a, b) => median(a[1]) - median(b[1]))) {
  console.log(
    `${median(at).toFixed(1).padStart(8)}  (${Math.min(...at).toFixed(0)}–${Math.max(...at).toFixed(0)})  ${label}`
  )
}
const over = runs.map((r) => r.warm - r.floor)
console.log(
  `\nwarm up ${median(runs.map((r) => r.warm)).toFixed(0)} ms, floor ${median(runs.map((r) => r.floor)).toFixed(0)} ms`
)
console.log(
  summaryLine({
    what: "warm up − floor (traced)",
    values: over,
    unit: "ms",
    before: machineBefore,
    goal: "goal ≤ 100 ms"
  })
)
