// berth across machines: three test hosts (network namespaces on this machine, each with its own daemon, see
// test/cluster/netns.mjs) form a cluster on a fresh PostgreSQL database and run --worlds worlds each; then how long
// `berth status` takes on one machine to list every world of all three, beside the same command before the cluster
// formed (its own worlds only). Needs root, iproute2 and PostgreSQL's socket in /var/run/postgresql; `npm run build`
// first. Usage: node bench/cluster.mjs [--worlds 50] [--runs 20] [--json]
import { execFileSync, spawn } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { createHosts, hostsUnavailable } from "../test/cluster/netns.mjs"
import { printTable, summarize } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    worlds: { type: "string", default: "50" },
    runs: { type: "string", default: "20" },
    json: { type: "boolean" }
  }
})
const worldCount = Number(options.worlds)
const runs = Number(options.runs)
const cli = fileURLToPath(new URL("../dist/berth", import.meta.url))

const why = hostsUnavailable()
if (why !== undefined) {
  console.error(`bench/cluster: cannot make test hosts here: ${why}`)
  process.exit(1)
}

const net = createHosts(3)
process.once("exit", () => net.cleanup())
for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, () => process.exit(130))

/** `berth args` on a host, in its repository; resolves with the output, rejects on a non-zero exit. */
const berth = (host, args) =>
  new Promise((resolve, reject) => {
    const child = spawn("ip", ["netns", "exec", host.ns, cli, ...args], {
      cwd: host.repo,
      env: { ...process.env, BERTH_HOME: host.home, NO_COLOR: "1", BERTH_HTTPS_PORT: "off" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`berth ${args.join(" ")} on ${host.name}: ${err}`))
    )
  })

const timed = async (host, args) => {
  const start = process.hrtime.bigint()
  await berth(host, args)
  return Number(process.hrtime.bigint() - start) / 1e6
}

// one repository per host, of one project; each world one idle process
const hosts = net.hosts.map((h) => {
  const repo = join(net.base, h.name, "shop")
  mkdirSync(repo, { recursive: true })
  writeFileSync(join(repo, "berth.toml"), `[project]\nname = "shop"\n\n[services.idle]\ncmd = "sleep 100000"\n`)
  const git = (...args) =>
    execFileSync("git", args, {
      cwd: repo,
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: "b",
        GIT_AUTHOR_EMAIL: "b@b",
        GIT_COMMITTER_NAME: "b",
        GIT_COMMITTER_EMAIL: "b@b"
      }
    })
  git("init", "-q", "-b", "main")
  git("add", "-A")
  git("commit", "-qm", "bench")
  return { ...h, repo }
})
const [h1] = hosts

const statusRuns = async (label) => {
  for (let i = 0; i < 3; i++) await timed(h1, ["status", "--json"])
  const ms = []
  for (let i = 0; i < runs; i++) ms.push(await timed(h1, ["status", "--json"]))
  return summarize(label, ms)
}

console.error(`bringing up ${worldCount} worlds on each of 3 hosts…`)
await Promise.all(
  hosts.map(async (h) => {
    for (let i = 0; i < worldCount; i++) await berth(h, ["up", `w${i}`, "--json"])
  })
)
const alone = await statusRuns(`status --json, ${worldCount} worlds of its own, no cluster`)

console.error("forming the cluster…")
await berth(h1, ["cluster", "init", net.url, "--name", "h1", "--address", h1.address])
for (const h of hosts.slice(1)) await berth(h, ["cluster", "join", net.url, "--name", h.name, "--address", h.address])
for (;;) {
  const listed = JSON.parse(await berth(h1, ["status", "--json"])).worlds.length
  if (listed === 3 * worldCount) break
  await new Promise((r) => setTimeout(r, 500))
}
const across = await statusRuns(`status --json, ${3 * worldCount} worlds of 3 machines`)
const clusterStatus = []
for (let i = 0; i < runs; i++) clusterStatus.push(await timed(h1, ["cluster", "status", "--json"]))

const rows = [across, alone, summarize("cluster status --json, 3 machines", clusterStatus)]
if (options.json) console.log(JSON.stringify({ worlds: worldCount, runs, rows }, null, 2))
else {
  printTable(rows)
  console.log("\ngoal: status across 3 machines and 150 worlds ≤ 200 ms")
}
await Promise.all(hosts.map((h) => berth(h, ["down", "--all"]).catch(() => undefined)))
process.exit(0)
