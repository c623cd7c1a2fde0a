// What an idle swarm's background work does to requests through the proxy. Usage: node bench/idle-latency.mjs
// [--worlds 100] [--settle 150] [--seconds 60] [--proxy-port 47355] [--cli PATH] (build first: npm run build)
// --worlds worlds of three small node HTTP services (a url and an http health check each) are brought up and left
// alone for --settle seconds; then one client sends a request through the proxy to one service every 10 ms for
// --seconds, each waiting for the last, and prints the latency's p50, p99, p99.9 and maximum. A stall of the
// daemon (its own work, or the services it wakes taking the cores) shows in the tail. --cli runs another build.
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { berthRunner, swarmRepo, upWorlds } from "./fixtures.mjs"
import { commandLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    worlds: { type: "string", default: "100" },
    settle: { type: "string", default: "150" },
    seconds: { type: "string", default: "60" },
    "proxy-port": { type: "string", default: "47355" },
    cli: { type: "string" }
  }
})
const cli = options.cli ?? fileURLToPath(new URL("../dist/berth", import.meta.url))
const worlds = Number(options.worlds)
const port = Number(options["proxy-port"])

const base = mkdtempSync(join(tmpdir(), "berth-bench-latency-"))
const repo = join(base, "bench")
const home = join(base, "home")
const env = {
  ...process.env,
  BERTH_HOME: home,
  BERTH_PROXY_PORT: String(port),
  BERTH_HTTPS_PORT: "off",
  BERTH_YES: "1"
}
swarmRepo(repo, ["s0", "s1", "s2"], env)
const berth = berthRunner(cli, repo, env)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const loadBefore = loadavg()[0]
try {
  berth("port", "--range", "40000-44999")
  berth("reserve", "--max-parallel", String(worlds + 1), "--ram", "0", "--disk", "0")
  upWorlds(berth, 0, worlds)
  await sleep(Number(options.settle) * 1000)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const host = `s0.w${Math.min(1, worlds - 1)}.bench.localhost`
  const get = () =>
    new Promise((resolve, reject) => {
      const t0 = process.hrtime.bigint()
      http
        .get({ host: "127.0.0.1", port, path: "/", agent, headers: { host } }, (res) => {
          res.resume()
          res.on("end", () => resolve(Number(process.hrtime.bigint() - t0) / 1e6))
        })
        .on("error", reject)
    })
  for (let i = 0; i < 50; i++) await get()
  const latencies = []
  const end = Date.now() + Number(options.seconds) * 1000
  while (Date.now() < end) {
    latencies.push(await get())
    await sleep(10)
  }
  latencies.sort((a, b) => a - b)
  const at = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))].toFixed(2)
  console.log(
    `proxy latency beside ${worlds} idle worlds × 3: ${latencies.length} requests, p50 ${at(0.5)} ms, p99 ${at(0.99)}, ` +
      `p99.9 ${at(0.999)}, max ${latencies.at(-1).toFixed(2)} · ${availableParallelism()} cores, load ` +
      `${loadBefore.toFixed(2)} → ${loadavg()[0].toFixed(2)}, ${new Date().toISOString().slice(0, 10)} · ${commandLine()}`
  )
} finally {
  spawnSync(cli, ["down", "--all"], { cwd: repo, env })
  spawnSync(cli, ["daemon", "stop"], { cwd: repo, env })
  rmSync(base, { recursive: true, force: true })
}
