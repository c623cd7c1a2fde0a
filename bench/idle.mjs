// What an idle swarm costs the daemon. Usage: node bench/idle.mjs [--worlds 100] [--services 3] [--seconds 60]
// [--settle 200] [--runs 1] [--status-runs 10] [--strace] [--cpu-prof DIR] [--node-flags=F] [--cli PATH] [--restart]
// [--json]
// (build first: npm run build; --cli runs another build, such as a worktree's dist/berth)
// --settle S waits S seconds (200) after the last world runs before measuring: the probes are at their steady pace.
// --restart stops the daemon once the worlds are up and starts the next, which adopts their processes (as after an
// upgrade, or `daemon stop`), and measures that one: it watches processes it did not spawn.
// --cpu-prof DIR starts the daemon under V8's profiler and prints where its CPU went in the first idle window.
// --node-flags="FLAGS" starts the daemon with those Node flags instead of its own (the = form: the value begins with
// --), to weigh a change of them.
//
// --worlds worlds (a comma list measures each count in turn: --worlds 50,100), each with --services small node HTTP
// services (a url and an http health check each, so the proxy routes them and berth probes them), all brought up and
// left alone. Then, after a settling pause, over --seconds:
// - the daemon's CPU as a share of one core (from /proc: fixtures.mjs cpuMs), of it on its main thread (the rest:
//   V8's compiler and collector threads), and its RSS at the end
//   (/proc/<pid>/status)
// - its system calls per second: reads and writes from /proc/<pid>/io (syscr + syscw); with --strace, every call
//   `strace -c -f` counts over 10 s (needs strace and root)
// - `berth status --json` beside `node -e 0`: the median and range of --status-runs runs each, taken in turn, and
//   the daemon's CPU per answer (its mean over the runs)
// --runs repeats the idle window and reports the median and range of the CPU readings.
// Goals (issue of the idle swarm): < 1 % of one core and RSS ≤ 200 MiB at 100 × 3; status --json ≤ 1.2× node -e 0.
// The last line is the summary: the figures, the machine (cores, load average before and after) and the date.
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import {
  awaitProfile,
  berthRunner,
  cpuMs,
  mainThreadCpuMs,
  monotonicUs,
  startDaemonHere,
  swarmRepo,
  upWorlds
} from "./fixtures.mjs"
import { commandLine, median } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    worlds: { type: "string", default: "100" },
    services: { type: "string", default: "3" },
    seconds: { type: "string", default: "60" },
    settle: { type: "string", default: "200" },
    runs: { type: "string", default: "1" },
    "status-runs": { type: "string", default: "10" },
    strace: { type: "boolean" },
    "cpu-prof": { type: "string" },
    "node-flags": { type: "string" },
    cli: { type: "string" },
    restart: { type: "boolean" },
    json: { type: "boolean" }
  }
})
const counts = options.worlds.split(",").map(Number)
const serviceCount = Number(options.services)
const seconds = Number(options.seconds)
const runs = Number(options.runs)
const statusRuns = Number(options["status-runs"])
const cli = options.cli ?? fileURLToPath(new URL("../dist/berth", import.meta.url))

const base = mkdtempSync(join(tmpdir(), "berth-bench-idle-"))
const repo = join(base, "bench")
const home = join(base, "home")
const env = { ...process.env, BERTH_HOME: home, BERTH_PROXY_PORT: "0", BERTH_HTTPS_PORT: "off", BERTH_YES: "1" }
swarmRepo(
  repo,
  Array.from({ length: serviceCount }, (_, i) => `s${i}`),
  env
)
const berth = berthRunner(cli, repo, env)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const rssMiB = (pid) => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"))
  return Number(line.split(/\s+/)[1]) / 1024
}
const syscalls = (pid) => {
  const io = Object.fromEntries(
    readFileSync(`/proc/${pid}/io`, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(": "))
  )
  return Number(io.syscr) + Number(io.syscw)
}
/** Wall time of one run of a command, in ms. */
const timed = (command, args) => {
  const t0 = process.hrtime.bigint()
  const r = spawnSync(command, args, { cwd: repo, env, stdio: "ignore" })
  if (r.status !== 0) throw new Error(`${command} ${args.join(" ")} exited ${r.status}`)
  return Number(process.hrtime.bigint() - t0) / 1e6
}
const range = (values) => `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)}`
/** strace's count over 10 s: calls per second in all, and the five most frequent calls with theirs */
const straceCounts = (pid) => {
  if (spawnSync("strace", ["-V"]).status !== 0) return undefined
  const r = spawnSync("timeout", ["-s", "INT", "10", "strace", "-c", "-f", "-p", String(pid)], { encoding: "utf8" })
  // % time, seconds, usecs/call, calls, [errors,] syscall
  const rows = r.stderr
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 5 && /^\d+\.\d+$/.test(f[0]))
  const total = rows.find((f) => f.at(-1) === "total")
  if (total === undefined) return undefined
  const top = rows
    .filter((f) => f.at(-1) !== "total")
    .sort((a, b) => Number(b[3]) - Number(a[3]))
    .slice(0, 5)
    .map((f) => `${f.at(-1)} ${(Number(f[3]) / 10).toFixed(1)}/s`)
  return { perSecond: Number(total[3]) / 10, top }
}

/**
 * With --cpu-prof DIR, the daemon is started here under V8's profiler, and the first idle window's bounds are kept:
 * V8's sample times and this process's `hrtime` read the same monotonic clock, so only the samples taken while the
 * swarm was idle are counted.
 */
const profileDir = options["cpu-prof"]
const idleWindows = []
/** the status answers' bounds on the same clock */
const statusWindows = []
if (profileDir !== undefined || options["node-flags"] !== undefined)
  await startDaemonHere({ cli, cwd: repo, home, env, dir: profileDir, nodeFlags: options["node-flags"] })

const results = []
const loadBefore = loadavg()
let profiled
try {
  berth("port", "--range", "40000-44999")
  berth("reserve", "--max-parallel", String(Math.max(...counts) + 1), "--ram", "0", "--disk", "0")
  let up = 0
  for (const count of counts) {
    upWorlds(berth, up, count)
    up = count
    if (options.restart) {
      berth("daemon", "stop")
      if (profileDir !== undefined || options["node-flags"] !== undefined)
        await startDaemonHere({ cli, cwd: repo, home, env, dir: profileDir, nodeFlags: options["node-flags"] })
      else berth("daemon", "start")
    }
    const pid = JSON.parse(berth("daemon", "status", "--json")).pid
    // settle: the reconciler's and the monitor's first passes over the new worlds, and the liveness probes backing off
    // to their steady pace (5 s apart for the first passes, then 10, 20, 40, 80, 120 s: about 170 s after it is ready)
    await sleep(Number(options.settle) * 1000)
    const cpu = []
    const mainCpu = []
    let calls = 0
    for (let r = 0; r < runs; r++) {
      const used = cpuMs(pid)
      const usedMain = mainThreadCpuMs(pid)
      const sc = syscalls(pid)
      const from = monotonicUs()
      await sleep(seconds * 1000)
      if (idleWindows.length === 0) idleWindows.push({ pid, from, to: monotonicUs() })
      cpu.push((cpuMs(pid) - used) / seconds / 10)
      mainCpu.push((mainThreadCpuMs(pid) - usedMain) / seconds / 10)
      calls = (syscalls(pid) - sc) / seconds
    }
    const straced = options.strace ? straceCounts(pid) : undefined
    const status = []
    const node = []
    // the daemon's own CPU per answer: unlike the wall times, it hardly moves with the machine's load
    let answerMs = 0
    for (let i = 0; i < statusRuns; i++) {
      node.push(timed(process.execPath, ["-e", "0"]))
      const before = cpuMs(pid)
      const from = monotonicUs()
      status.push(timed(cli, ["status", "--json"]))
      statusWindows.push({ from, to: monotonicUs() })
      answerMs += cpuMs(pid) - before
    }
    results.push({
      worlds: count,
      services: serviceCount,
      seconds,
      runs,
      cpuPercentOfOneCore: Number(median(cpu).toFixed(2)),
      cpuRange: range(cpu),
      mainThreadCpuPercent: Number(median(mainCpu).toFixed(2)),
      rssMiB: Number(rssMiB(pid).toFixed(1)),
      readWriteSyscallsPerSecond: Number(calls.toFixed(1)),
      ...(straced === undefined ? {} : { allSyscallsPerSecond: straced.perSecond, topSyscalls: straced.top }),
      statusJsonMs: Number(median(status).toFixed(1)),
      statusJsonRange: range(status),
      nodeMs: Number(median(node).toFixed(1)),
      statusRatio: Number((median(status) / median(node)).toFixed(2)),
      statusDaemonCpuMs: Number((answerMs / statusRuns).toFixed(1)),
      statusRuns
    })
  }
} finally {
  spawnSync(cli, ["down", "--all"], { cwd: repo, env })
  spawnSync(cli, ["daemon", "stop"], { cwd: repo, env })
  if (profileDir !== undefined && idleWindows.length > 0) {
    // the profile is written as the daemon exits
    profiled = await awaitProfile(profileDir, idleWindows[0].pid, [idleWindows[0]])
    // the windows of the idle look and of the status answers, beside the profile, for reading it further
    writeFileSync(
      join(profileDir, `windows.${idleWindows[0].pid}.json`),
      JSON.stringify({ idle: idleWindows, status: statusWindows })
    )
  }
  rmSync(base, { recursive: true, force: true })
}
if (profiled !== undefined) {
  console.log(`the daemon's CPU while idle (first window, ${profiled.samples} samples; ${profiled.file}):`)
  for (const line of profiled.top) console.log(`  ${line}`)
}
const loadAfter = loadavg()
const machine = {
  cores: availableParallelism(),
  loadBefore: loadBefore.map((l) => Number(l.toFixed(2))),
  loadAfter: loadAfter.map((l) => Number(l.toFixed(2))),
  date: new Date().toISOString().slice(0, 10),
  node: process.version
}
if (options.json) console.log(JSON.stringify({ machine, results }, null, 2))
else {
  for (const r of results) {
    console.log(
      `idle: ${r.worlds} worlds × ${r.services} node HTTP services: daemon CPU ${r.cpuPercentOfOneCore} % of one core ` +
        `(median of ${r.runs} × ${r.seconds} s, range ${r.cpuRange}; ${r.mainThreadCpuPercent} % on its main thread), ` +
        `RSS ${r.rssMiB} MiB, ` +
        `${r.readWriteSyscallsPerSecond} read/write syscalls/s` +
        (r.allSyscallsPerSecond === undefined
          ? ""
          : ` (${r.allSyscallsPerSecond} syscalls/s in all: ${r.topSyscalls.join(", ")})`) +
        `; status --json ${r.statusJsonMs} ms = ${r.statusRatio}× node -e 0 (median of ${r.statusRuns}, range ` +
        `${r.statusJsonRange}; the daemon's CPU ${r.statusDaemonCpuMs} ms an answer) · ${machine.cores} cores, load ${machine.loadBefore[0]} → ${machine.loadAfter[0]}, ` +
        `${machine.date} · ${commandLine()}`
    )
  }
}
