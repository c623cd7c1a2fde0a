// How fast worlds come up and how cheaply the daemon answers, next to `node -e 0`, in one run; and the daemon's
// memory with many worlds up. Usage: node bench/up.mjs [--runs N] [--worlds N] [--clean-env] [--settle S]
// [--cpu-prof DIR] [--node-flags=F] [--listen-after MS] [--json]   (build first)
//
// - cold up: `berth up <new world>` of a 3-service world (a new worktree, new port leases, three processes that
//   start at once — no depends_on — each checked by tcp)
// - warm up: `berth up` of the same world after `berth down` (worktree and leases kept)
// - floor: the same three services started directly (`node server.js`, in parallel) until each accepts a connection:
//   what a warm `up` cannot beat; the goal is a warm `up` within 100 ms of it (each run's pair is reported)
// - status --json / env --json: one daemon round trip each
// - daemon CPU: what the daemon used (every thread of it, from /proc) during each warm up and each down, and of it
//   the main thread's share during each warm up (the rest is V8's compiler and collector threads, libuv's pool)
// - daemon RSS: VmRSS of the daemon with --worlds worlds × 3 services up (services are `sleep`, so the machine's
//   memory goes to the daemon's bookkeeping only): 7 s after the last up, while the garbage of the burst is still
//   held, and settled, --settle seconds (60) after it, once V8 has collected it with the swarm quiet (0: not read)
// --listen-after MS: each service listens MS after it starts (a dev server that compiles first), in the floor too:
// what the wait for a slow service's listener costs the daemon.
// --clean-env: see `env` below. --cpu-prof DIR starts the daemon under V8's profiler and prints where its CPU went
// during the warm ups. --node-flags="FLAGS" starts the daemon with those Node flags instead of its own.
// The last lines are the summaries: each figure's median and range, the machine (cores, load average before and
// after), the day and the command.
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { awaitProfile, commitRepo, cpuMs, floor, mainThreadCpuMs, monotonicUs, startDaemonHere } from "./fixtures.mjs"
import { machineNow, median, printTable, summarize, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    runs: { type: "string", default: "15" },
    worlds: { type: "string", default: "50" },
    settle: { type: "string", default: "60" },
    json: { type: "boolean" },
    "clean-env": { type: "boolean" },
    "cpu-prof": { type: "string" },
    "node-flags": { type: "string" },
    "listen-after": { type: "string", default: "0" }
  }
})
const runs = Number(options.runs)
const worldCount = Number(options.worlds)
const listenAfterMs = Number(options["listen-after"])
if (!(listenAfterMs >= 0)) {
  console.error("--listen-after takes the milliseconds each service waits before it listens")
  process.exit(2)
}
if (!(Number(options.settle) >= 0)) {
  console.error("--settle takes the seconds to wait after the last up before the settled reading (0: none)")
  process.exit(2)
}
// the command users run: dist/berth, the launcher of dist/berth.cjs
const cli = fileURLToPath(new URL("../dist/berth", import.meta.url))

const base = mkdtempSync(join(tmpdir(), "berth-bench-up-"))
const repo = join(base, "bench")
const home = join(base, "home")
// --clean-env runs everything with PATH and HOME only: a variable such as NODE_EXTRA_CA_CERTS (set on the machine
// these numbers come from) makes every node process, `node -e 0` and each service a world starts, ~60 ms slower
const inherited = options["clean-env"] ? { PATH: process.env.PATH, HOME: process.env.HOME } : process.env
// BERTH_YES: the bench's own berth.toml is allowed without asking
const env = { ...inherited, BERTH_HOME: home, XDG_CACHE_HOME: join(base, "cache"), BERTH_YES: "1" }
const listen = `require("node:net").createServer((s) => s.end()).listen(Number(process.env.PORT), "127.0.0.1")`
const server = listenAfterMs > 0 ? `setTimeout(() => ${listen}, ${listenAfterMs})` : listen
execFileSync("mkdir", ["-p", repo])
writeFileSync(join(repo, "server.js"), server)
writeFileSync(
  join(repo, "berth.toml"),
  ["a", "b", "c"].map((s) => `[services.${s}]\ncmd = "node server.js"\nurl = "${s}"\n`).join("\n") +
    `\n[services.idle1]\ncmd = "sleep 100000"\ngroups = ["idle"]\n[services.idle2]\ncmd = "sleep 100000"\ngroups = ["idle"]\n[services.idle3]\ncmd = "sleep 100000"\ngroups = ["idle"]\n`
)
commitRepo(repo, env)

const time = (args, command = process.execPath) => {
  const start = process.hrtime.bigint()
  const r = spawnSync(command, args, { cwd: repo, env, stdio: ["ignore", "pipe", "pipe"] })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (r.status !== 0) throw new Error(`${args.join(" ")} failed: ${r.stderr}`)
  return ms
}
const berth = (...args) => time(args, cli)

/** Answers once something accepts a connection on the port (polled every 5 ms, as tightly as a health check can). */

const samples = {
  node: [],
  floor: [],
  cold: [],
  warm: [],
  over: [],
  status: [],
  env: [],
  upCpu: [],
  upMainCpu: [],
  downCpu: []
}
const machineBefore = machineNow()
const profileDir = options["cpu-prof"]
/** the warm ups' bounds on the clock the profile's samples are timed by */
const warmWindows = []
let daemonPid
try {
  if (profileDir !== undefined || options["node-flags"] !== undefined)
    await startDaemonHere({ cli, cwd: repo, home, env, dir: profileDir, nodeFlags: options["node-flags"] })
  berth("port", "--range", "42000-43999")
  berth("up", "warmup", "--service", "a", "--service", "b", "--service", "c")
  daemonPid = JSON.parse(spawnSync(cli, ["daemon", "status", "--json"], { cwd: repo, env }).stdout).pid
  for (let i = 0; i < runs; i++) {
    samples.node.push(time(["-e", "0"]))
    samples.cold.push(berth("up", `cold-${i}`, "-s", "a", "-s", "b", "-s", "c"))
    berth("down", `cold-${i}`)
    // the floor right before the warm up it is compared with, on ports the OS picks (outside berth's range)
    const bare = await floor(repo, env)
    samples.floor.push(bare)
    const cpuBefore = cpuMs(daemonPid)
    const mainBefore = mainThreadCpuMs(daemonPid)
    const from = monotonicUs()
    const warm = berth("up", `cold-${i}`, "-s", "a", "-s", "b", "-s", "c")
    samples.upCpu.push(cpuMs(daemonPid) - cpuBefore)
    samples.upMainCpu.push(mainThreadCpuMs(daemonPid) - mainBefore)
    warmWindows.push({ from, to: monotonicUs() })
    samples.warm.push(warm)
    samples.over.push(warm - bare)
    samples.status.push(berth("status", "--json"))
    samples.env.push(berth("env", `cold-${i}`, "--json"))
    const cpuBeforeDown = cpuMs(daemonPid)
    berth("down", `cold-${i}`)
    samples.downCpu.push(cpuMs(daemonPid) - cpuBeforeDown)
  }
  berth("down", "--all")

  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${daemonPid}/status`, "utf8"))[1]) * 1024
  const before = rss()
  // all of them at once: above the gate's default max_parallel (20), the next would wait in line for good
  berth("reserve", "--max-parallel", String(worldCount + 1))
  for (let i = 0; i < worldCount; i++) berth("up", `many-${i}`, "--group", "idle")
  // let the reconciler make a few passes over all of them
  const lastUp = Date.now()
  await new Promise((r) => setTimeout(r, 7_000))
  const after = rss()
  const settleMs = Number(options.settle) * 1000
  let settled
  if (settleMs > 0) {
    await new Promise((r) => setTimeout(r, Math.max(0, lastUp + settleMs - Date.now())))
    settled = rss()
  }
  berth("down", "--all")

  const baseline = median(samples.node)
  const results = [
    summarize("node -e 0", samples.node, baseline),
    summarize("berth up (cold: new worktree, 3 services)", samples.cold, baseline),
    summarize("floor: the 3 services started directly until each answers", samples.floor, baseline),
    summarize("berth up (warm: after down)", samples.warm, baseline),
    summarize("berth status --json", samples.status, baseline),
    summarize("berth env <world> --json", samples.env, baseline)
  ]
  const memory = {
    worlds: worldCount,
    services: worldCount * 3,
    rssBeforeMiB: before / 2 ** 20,
    rssMiB: after / 2 ** 20,
    settleS: settleMs / 1000,
    rssSettledMiB: settled === undefined ? undefined : settled / 2 ** 20
  }
  const daemonCpu = {
    perWarmUpMs: Number(median(samples.upCpu).toFixed(1)),
    perWarmUpRangeMs: [Math.min(...samples.upCpu), Math.max(...samples.upCpu)].map((v) => Number(v.toFixed(1))),
    perWarmUpMainThreadMs: Number(median(samples.upMainCpu).toFixed(1)),
    perDownMs: Number(median(samples.downCpu).toFixed(1)),
    perDownRangeMs: [Math.min(...samples.downCpu), Math.max(...samples.downCpu)].map((v) => Number(v.toFixed(1)))
  }
  const summaries = [
    summaryLine({
      what: "warm up − floor",
      values: samples.over,
      unit: "ms",
      before: machineBefore,
      goal: `goal ≤ 100 ms; node -e 0 ${median(samples.node).toFixed(0)} ms, floor ${median(samples.floor).toFixed(0)} ms`
    }),
    summaryLine({
      what: "daemon CPU per warm up",
      values: samples.upCpu,
      unit: "ms",
      before: machineBefore,
      goal: "goal ≤ 60 ms"
    }),
    summaryLine({
      what: "of it on the daemon's main thread (the rest: V8's compiler and collector threads)",
      values: samples.upMainCpu,
      unit: "ms",
      before: machineBefore
    }),
    summaryLine({ what: "daemon CPU per down", values: samples.downCpu, unit: "ms", before: machineBefore }),
    summaryLine({
      what: `daemon RSS with ${worldCount} worlds × 3 services up, 7 s after the last up`,
      values: [memory.rssMiB],
      unit: "MiB",
      digits: 1,
      before: machineBefore,
      goal: `${memory.rssBeforeMiB.toFixed(1)} MiB idle before`
    }),
    ...(memory.rssSettledMiB === undefined
      ? []
      : [
          summaryLine({
            what: `daemon RSS with ${worldCount} worlds × 3 services up, settled (${memory.settleS} s after the last up)`,
            values: [memory.rssSettledMiB],
            unit: "MiB",
            digits: 1,
            before: machineBefore,
            goal: "goal ≤ 150 MiB at 50 worlds"
          })
        ])
  ]
  if (options.json) {
    console.log(
      JSON.stringify(
        {
          machine: { before: machineBefore, after: machineNow() },
          runs,
          results,
          warmOverFloorMs: samples.over,
          memory,
          daemonCpu,
          summaries
        },
        null,
        2
      )
    )
  } else {
    console.log(`${runs} runs each, interleaved; Node ${process.version}\n`)
    printTable(results)
    console.log(
      `\ndaemon RSS: ${memory.rssBeforeMiB.toFixed(1)} MiB idle, ${memory.rssMiB.toFixed(1)} MiB with ${worldCount} worlds × 3 services up` +
        (memory.rssSettledMiB === undefined
          ? ""
          : ` (7 s after the last up), ${memory.rssSettledMiB.toFixed(1)} MiB settled (${memory.settleS} s after it)`)
    )
    console.log("")
    for (const line of summaries) console.log(line)
  }
} finally {
  spawnSync(cli, ["down", "--all"], { cwd: repo, env })
  spawnSync(cli, ["daemon", "stop"], { cwd: repo, env })
  // the profile is written as the daemon exits
  const profiled =
    profileDir === undefined || daemonPid === undefined
      ? undefined
      : await awaitProfile(profileDir, daemonPid, warmWindows)
  if (profiled !== undefined) {
    // kept beside the profile, for reading it further (a bottom-up view in a profiler, or a script)
    writeFileSync(join(profileDir, `warm-ups.${daemonPid}.json`), JSON.stringify(warmWindows))
    console.log(`\nthe daemon's CPU during the warm ups (${profiled.samples} samples; ${profiled.file}):`)
    for (const line of profiled.top) console.log(`  ${line}`)
  }
  rmSync(base, { recursive: true, force: true })
}
