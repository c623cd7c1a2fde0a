// The gate under a burst, and the daemon at rest. Usage: node bench/admission.mjs [--worlds 30] [--parallel 8]
// [--idle-seconds 60] [--json]   (build first)
//
// - burst: --worlds `berth up`s sent at once with `max_parallel = --parallel`; each world is taken down as soon as it
//   runs, which frees its slot for the next in line. Reported: the time until every world has run, and each world's
//   wait (from its request until it ran): mean, max and max/mean (fairness: FIFO keeps the max near the line's length)
// - idle: with --worlds worlds up (max_parallel raised to fit them), the daemon's CPU over --idle-seconds, as a share
//   of one core (from /proc: fixtures.mjs cpuMs)
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { berthRunner, commitRepo, cpuMs } from "./fixtures.mjs"
import { machineNow, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    worlds: { type: "string", default: "30" },
    parallel: { type: "string", default: "8" },
    "idle-seconds": { type: "string", default: "60" },
    json: { type: "boolean" }
  }
})
const worldCount = Number(options.worlds)
const parallel = Number(options.parallel)
const idleSeconds = Number(options["idle-seconds"])
const cli = fileURLToPath(new URL("../dist/berth", import.meta.url))

const base = mkdtempSync(join(tmpdir(), "berth-bench-admission-"))
const repo = join(base, "bench")
const home = join(base, "home")
// BERTH_YES: the bench's own berth.toml is allowed without asking
const env = { ...process.env, BERTH_HOME: home, BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off", BERTH_YES: "1" }
execFileSync("mkdir", ["-p", repo])
writeFileSync(join(repo, "berth.toml"), `[services.idle]\ncmd = "sleep 100000"\n`)
commitRepo(repo, env)

const berth = berthRunner(cli, repo, env)
const berthAsync = (...args) =>
  new Promise((resolve, reject) => {
    const child = spawn(cli, args, { cwd: repo, env, stdio: ["ignore", "pipe", "pipe"] })
    let err = ""
    child.stderr.on("data", (d) => {
      err += d
    })
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`berth ${args.join(" ")}: ${err}`))))
  })

const machineBefore = machineNow()
try {
  berth("port", "--range", "44000-45999")
  berth("reserve", "--max-parallel", String(parallel), "--ram", "0", "--disk", "0")
  // the worktrees are made ahead: the burst measures the gate, not git
  for (let i = 0; i < worldCount; i++) {
    berth("up", `w${i}`)
    berth("down", `w${i}`)
  }
  const start = Date.now()
  const waits = await Promise.all(
    Array.from({ length: worldCount }, async (_, i) => {
      const asked = Date.now()
      await berthAsync("up", `w${i}`)
      const ran = Date.now()
      await berthAsync("down", `w${i}`)
      return ran - asked
    })
  )
  const allRanMs = Date.now() - start
  const mean = waits.reduce((a, b) => a + b, 0) / waits.length
  const max = Math.max(...waits)

  berth("reserve", "--max-parallel", String(worldCount + 1))
  for (let i = 0; i < worldCount; i++) berth("up", `w${i}`)
  const pid = JSON.parse(berth("daemon", "status", "--json")).pid
  // settle first: the reconciler's and the monitor's first passes over the new worlds
  await new Promise((r) => setTimeout(r, 5_000))
  const before = cpuMs(pid)
  await new Promise((r) => setTimeout(r, idleSeconds * 1000))
  const idleCpu = (cpuMs(pid) - before) / 1000 / idleSeconds
  berth("down", "--all")

  const result = {
    node: process.version,
    worlds: worldCount,
    maxParallel: parallel,
    allRanMs,
    waitMeanMs: Math.round(mean),
    waitMaxMs: max,
    fairness: Number((max / mean).toFixed(2)),
    idleSeconds,
    idleCpuPercentOfOneCore: Number((idleCpu * 100).toFixed(2)),
    summaries: [
      summaryLine({
        what: `wait of ${worldCount} worlds at once through max_parallel ${parallel}`,
        values: waits.map((w) => w / 1000),
        unit: "s",
        digits: 2,
        before: machineBefore,
        goal: `max/mean ${(max / mean).toFixed(2)}, all ran after ${(allRanMs / 1000).toFixed(1)} s`
      }),
      summaryLine({
        what: `daemon CPU at rest with ${worldCount} worlds up, % of one core over ${idleSeconds} s`,
        values: [idleCpu * 100],
        unit: "%",
        digits: 2,
        before: machineBefore,
        goal: "goal < 1 %"
      })
    ]
  }
  if (options.json) console.log(JSON.stringify(result, null, 2))
  else {
    console.log(`${worldCount} worlds at once, max_parallel ${parallel}; Node ${process.version}`)
    console.log(`  all have run after      ${(allRanMs / 1000).toFixed(1)} s`)
    console.log(
      `  wait mean / max         ${(mean / 1000).toFixed(2)} s / ${(max / 1000).toFixed(2)} s (max/mean ${result.fairness})`
    )
    console.log(
      `  daemon CPU, idle, ${worldCount} worlds up: ${result.idleCpuPercentOfOneCore}% of one core over ${idleSeconds} s`
    )
    console.log("")
    for (const line of result.summaries) console.log(line)
  }
} finally {
  spawnSync(cli, ["down", "--all"], { cwd: repo, env })
  spawnSync(cli, ["daemon", "stop"], { cwd: repo, env })
  rmSync(base, { recursive: true, force: true })
}
