// berth across machines: three test hosts (network namespaces on this machine, each with its own daemon, see
// test/cluster/netns.mjs) form a cluster on a fresh PostgreSQL database and run --worlds worlds each; then how long
// `berth status` takes on one machine to list every world of all three, beside the same command before the cluster
// formed (its own worlds only); the extra latency of a request through another machine's proxy; and failover: --kills
// times for each of the --faults, the machine that runs the most of --anywhere worlds brought up with `up --anywhere`
// suffers the fault, timed until every one of them answers through another machine's proxy again from a process
// started since (on whichever machine), then is started again and left to settle; meanwhile a sampler (a process of
// its own) looks at /proc every 50 ms for copies of one world on two machines at once, and reports the longest
// overlap. Faults: `kill` (kill -9 of the daemon), `freeze` (the daemon stopped 4.5 s: fenced, not given up),
// `killall` (the daemon and everything else of berth on the machine killed at once, as `pkill -9 -f berth` does,
// leaving the services), `suspend` (every process of the machine frozen 20 s at once, cgroup v2's freezer, as a laptop
// whose lid is closed: given up, and its worlds started elsewhere meanwhile; then it wakes). For `suspend` the
// overlap is how long after the wake the last process of an old copy ended, looked at every millisecond by a
// process that thaws the machine itself (the sampler leaves the frozen machine out until a second after the wake).
// Needs root, iproute2 and PostgreSQL's socket in /var/run/postgresql (and cgroup v2 for `suspend`); `npm run build`
// first.
// Usage: node bench/cluster.mjs [--worlds 50] [--runs 20] [--kills 10] [--anywhere 3]
//   [--faults kill,freeze,killall,suspend] [--json]
import { execFileSync, spawn } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import {
  createHosts,
  freezeHost,
  freezeUnavailable,
  hostsUnavailable,
  onHost,
  thawWatching
} from "../test/cluster/netns.mjs"
import { commitRepo } from "./fixtures.mjs"
import { machineNow, median, printTable, summarize, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    worlds: { type: "string", default: "50" },
    runs: { type: "string", default: "20" },
    kills: { type: "string", default: "10" },
    anywhere: { type: "string", default: "3" },
    // default: all four, `suspend` where cgroup v2 allows it
    faults: { type: "string" },
    json: { type: "boolean" }
  }
})
const worldCount = Number(options.worlds)
const runs = Number(options.runs)
const kills = Number(options.kills)
const anywhereCount = Number(options.anywhere)
const faults = (options.faults ?? `kill,freeze,killall${freezeUnavailable() === undefined ? ",suspend" : ""}`)
  .split(",")
  .filter((f) => f !== "")
for (const f of faults) {
  if (!["kill", "freeze", "killall", "suspend"].includes(f)) {
    console.error(`bench/cluster: no fault ${f} (kill, freeze, killall, suspend)`)
    process.exit(2)
  }
}
if (faults.includes("suspend") && freezeUnavailable() !== undefined) {
  console.error(`bench/cluster: no fault suspend here: ${freezeUnavailable()}`)
  process.exit(2)
}
/** How long `suspend` keeps the machine asleep: given up at 5.5 s, its worlds run elsewhere well before it wakes. */
const SUSPEND_MS = 20_000
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
    // in the host's namespace and cgroup: the daemon a command starts is the machine's, as are its worlds' processes
    const [command, ...argv] = onHost(host, [cli, ...args])
    const child = spawn(command, argv, {
      cwd: host.repo,
      env: { ...process.env, BERTH_HOME: host.home, NO_COLOR: "1", BERTH_HTTPS_PORT: "off", BERTH_YES: "1" },
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
  writeFileSync(
    join(repo, "berth.toml"),
    `[project]\nname = "shop"\n\n[services.idle]\ncmd = "sleep 100000"\n\n[services.api]\ncmd = "node api.js"\nurl = "api"\n`
  )
  writeFileSync(
    join(repo, "api.js"),
    `require("node:http").createServer((q, s) => s.end(String(process.pid))).listen(Number(process.env.PORT), "127.0.0.1")`
  )
  commitRepo(repo)
  return { ...h, repo }
})
const [h1] = hosts

// a team's clones of one repository: every machine's checkout has the same origin, where h1 pushes the branches that
// run anywhere
const origin = join(net.base, "origin.git")
const git = (cwd, ...args) =>
  execFileSync("git", args, {
    cwd,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "b",
      GIT_AUTHOR_EMAIL: "b@b",
      GIT_COMMITTER_NAME: "b",
      GIT_COMMITTER_EMAIL: "b@b"
    }
  })
git(net.base, "init", "-q", "--bare", origin)
for (const h of hosts) git(h.repo, "remote", "add", "origin", origin)
const anywhereNames = Array.from({ length: anywhereCount }, (_, i) => `any-${i}`)
for (const name of anywhereNames) git(h1.repo, "branch", name)
git(h1.repo, "push", "-q", "origin", "main", ...anywhereNames)

const statusRuns = async (label) => {
  for (let i = 0; i < 3; i++) await timed(h1, ["status", "--json"])
  const ms = []
  for (let i = 0; i < runs; i++) ms.push(await timed(h1, ["status", "--json"]))
  return { ...summarize(label, ms), samples: ms }
}

console.error(`bringing up ${worldCount} worlds on each of 3 hosts…`)
await Promise.all(
  hosts.map(async (h) => {
    // all of them at once: the gate's default (20) would keep the rest in line
    await berth(h, ["reserve", "--max-parallel", String(worldCount + 10), "--ram", "1"])
    for (let i = 0; i < worldCount; i++) await berth(h, ["up", `w${i}`, "-s", "idle", "--json"])
    // one world per machine with a route, for the proxy's hop
    await berth(h, ["up", `web-${h.name}`, "-s", "api", "--json"])
  })
)
const alone = await statusRuns(`status --json, ${worldCount + 1} worlds of its own, no cluster`)

console.error("forming the cluster…")
await berth(h1, ["cluster", "init", net.url, "--name", "h1", "--address", h1.address])
for (const h of hosts.slice(1)) await berth(h, ["cluster", "join", net.url, "--name", h.name, "--address", h.address])
for (;;) {
  const listed = JSON.parse(await berth(h1, ["status", "--json"])).worlds.length
  if (listed === 3 * (worldCount + 1)) break
  await new Promise((r) => setTimeout(r, 500))
}
const across = await statusRuns(`status --json, ${3 * (worldCount + 1)} worlds of 3 machines`)
const machineBefore = machineNow()
const clusterStatus = []
for (let i = 0; i < runs; i++) clusterStatus.push(await timed(h1, ["cluster", "status", "--json"]))

// the proxy's hop: from h1, its own world's route and h2's, one keep-alive connection each, in alternating blocks
const proxyPort = JSON.parse(await berth(h1, ["port", "--json"])).proxy.http.port
const hop = execFileSync(
  "ip",
  [
    "netns",
    "exec",
    h1.ns,
    process.execPath,
    "-e",
    `const http = require("node:http")
const agents = [new http.Agent({ keepAlive: true, maxSockets: 1 }), new http.Agent({ keepAlive: true, maxSockets: 1 })]
const get = (i, host) => new Promise((resolve, reject) => {
  const t = process.hrtime.bigint()
  http.get({ host: "127.0.0.1", port: ${proxyPort}, path: "/", agent: agents[i], headers: { host } }, (r) => {
    r.resume()
    r.on("end", () => resolve(Number(process.hrtime.bigint() - t) / 1e6))
  }).on("error", reject)
})
;(async () => {
  const hosts = ["api.web-h1.shop.localhost", "api.web-h2.shop.localhost"]
  const ms = [[], []]
  for (let i = 0; i < 200; i++) for (const k of [0, 1]) await get(k, hosts[k])
  for (let block = 0; block < 20; block++) for (const k of [0, 1]) for (let i = 0; i < 100; i++) ms[k].push(await get(k, hosts[k]))
  console.log(JSON.stringify(ms))
})()`
  ],
  { encoding: "utf8" }
)
const [localMs, remoteMs] = JSON.parse(hop)

/** A GET through `host`'s proxy: its status (0 when nothing answered) and body (the api's pid). */
const probe = (host, hostname) => {
  const [status, body] = execFileSync(
    "ip",
    [
      "netns",
      "exec",
      host.ns,
      process.execPath,
      "-e",
      `require("node:http").get({ host: "127.0.0.1", port: ${proxyPort}, path: "/", headers: { host: "${hostname}" }, timeout: 2000 }, (r) => { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(r.statusCode + " " + b)) }).on("error", () => console.log("0 -")).on("timeout", function () { this.destroy() })`
    ],
    { encoding: "utf8" }
  )
    .trim()
    .split(" ")
  return { status: Number(status) || 0, body: body ?? "" }
}

/**
 * A process of its own (the bench's loop blocks on its probes) that looks at /proc every 50 ms for the processes of
 * each world that runs anywhere (marked by berth, working in a checkout of that name) and counts the machines (homes)
 * that run one; `stop` answers the longest stretch any world ran on two machines at once (ms) and the samples taken.
 */
const startSampler = () => {
  const script = `
const fs = require("node:fs")
const names = ${JSON.stringify(anywhereNames)}
const since = new Map()
/** homes left out (a machine asleep: its frozen copies run nothing) */
const ignored = new Set()
let longest = 0
let samples = 0
const look = () => {
  samples++
  const homes = new Map(names.map((n) => [n, new Set()]))
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\\d+$/.test(entry)) continue
    try {
      const cwd = fs.readlinkSync("/proc/" + entry + "/cwd")
      const name = names.find((n) => cwd.endsWith("/" + n))
      if (name === undefined) continue
      const mark = fs.readFileSync("/proc/" + entry + "/environ", "latin1").split("\\u0000").find((e) => e.startsWith("BERTH_MARK="))
      const home = mark === undefined ? undefined : mark.split(" ").slice(3).join(" ")
      if (home !== undefined && !ignored.has(home)) homes.get(name).add(home)
    } catch {}
  }
  const now = Date.now()
  for (const n of names) {
    if (homes.get(n).size > 1) {
      if (!since.has(n)) since.set(n, now)
      longest = Math.max(longest, now - since.get(n) + 50)
    } else since.delete(n)
  }
}
const timer = setInterval(look, 50)
let text = ""
process.stdin.on("data", (d) => {
  text += d
  const lines = text.split("\\n")
  text = lines.pop()
  for (const line of lines) {
    const [word, ...rest] = line.split(" ")
    if (word === "ignore") ignored.add(rest.join(" "))
    else if (word === "count") ignored.delete(rest.join(" "))
    else { clearInterval(timer); look(); console.log(JSON.stringify({ longest, samples })); process.exit(0) }
  }
})
`
  const child = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] })
  let out = ""
  child.stdout.on("data", (d) => (out += d))
  return {
    /** leaves `home`'s processes out (`true`) or counts them again */
    ignore: (home, ignored) => child.stdin.write(`${ignored ? "ignore" : "count"} ${home}\n`),
    stop: () =>
      new Promise((resolve) => {
        child.on("close", () => resolve(JSON.parse(out)))
        child.stdin.write("stop\n")
      })
  }
}

/** The pids of every process of the worlds `names` that `home`'s berth runs (marked by it, in their checkouts). */
const copyPids = (names, home) => {
  const found = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`)
      if (!names.some((n) => cwd.endsWith(`/${n}`))) continue
      const mark = readFileSync(`/proc/${entry}/environ`, "latin1")
        .split("\u0000")
        .find((e) => e.startsWith("BERTH_MARK="))
      if (mark !== undefined && mark.split(" ").slice(3).join(" ") === home) found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}

/** The pids of the home's processes that are berth's own (the daemon, its watchdog): as `pkill -9 -f berth` finds them. */
const berthProcesses = (home) => {
  const found = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, "latin1").includes("berth")) continue
      if (!readFileSync(`/proc/${entry}/environ`, "latin1").split("\u0000").includes(`BERTH_HOME=${home}`)) continue
      found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")
/** Where each world that runs anywhere runs now, as `observer` sees it; undefined for one that runs nowhere. */
const placements = async (observer) => {
  const worlds = JSON.parse(await berth(observer, ["status", "--json"])).worlds
  return anywhereNames.map((n) => {
    const w = worlds.find((x) => x.name === n && x.state === "running")
    return w === undefined ? undefined : (w.machine ?? observer.name)
  })
}
const settled = async (observer) => {
  for (;;) {
    const where = await placements(observer).catch(() => [])
    if (where.length === anywhereCount && where.every((m) => m !== undefined)) return where
    await sleep(250)
  }
}

/**
 * One fault on `victim`'s machine, whose daemon is `pid` and whose copies of the worlds that move are `moving`; answers
 * what brings the machine back once its worlds run elsewhere (for `suspend`: how long after the wake its old copies
 * ran, ms).
 */
const inflict = async (fault, victim, pid, moving, sampler) => {
  if (fault === "suspend") {
    const old = copyPids(moving, victim.home)
    sampler.ignore(victim.home, true)
    freezeHost(victim, true)
    const frozenAt = Date.now()
    return async () => {
      await sleep(Math.max(0, SUSPEND_MS - (Date.now() - frozenAt)))
      const { ended } = thawWatching(victim, old)
      // the watcher covers the wake; the sampler, what follows
      setTimeout(() => sampler.ignore(victim.home, false), 1_000)
      return Math.max(0, ...ended.map((ms) => ms ?? 5_000))
    }
  }
  if (fault === "kill") {
    process.kill(pid, "SIGKILL")
    return () => berth(victim, ["cluster", "status", "--json"])
  }
  if (fault === "killall") {
    for (const p of berthProcesses(victim.home)) process.kill(p, "SIGKILL")
    return () => berth(victim, ["cluster", "status", "--json"])
  }
  process.kill(pid, "SIGSTOP")
  // thawed 4.5 s later, whatever the loop is doing then: fenced by its watchdog, not yet given up by the cluster
  const thawed = sleep(4_500).then(() => process.kill(pid, "SIGCONT"))
  return () => thawed
}

const failover = new Map(faults.map((f) => [f, []]))
const overlaps = new Map(faults.map((f) => [f, 0]))
const sampled = new Map(faults.map((f) => [f, 0]))
/** per trial of a fault that ends in a wake: how long after it the old copies ran, ms */
const wakes = new Map(faults.map((f) => [f, []]))
if (kills > 0 && anywhereCount > 0) {
  console.error(
    `failover: ${anywhereCount} worlds up --anywhere, ${kills} trials of each fault (${faults.join(", ")})…`
  )
  for (const name of anywhereNames) await berth(h1, ["up", name, "--anywhere", "-s", "api", "--json"])
  for (const fault of faults) {
    for (let k = 0; k < kills; k++) {
      const where = await settled(hosts[(k + 1) % 3])
      const counts = hosts.map((h) => where.filter((m) => m === h.name).length)
      const victim = hosts[counts.indexOf(Math.max(...counts))]
      const observer = hosts.find((h) => h !== victim)
      const moving = anywhereNames.filter((_, i) => where[i] === victim.name)
      const before = new Map(moving.map((name) => [name, probe(observer, `api.${name}.shop.localhost`).body]))
      const pid = Number(
        execFileSync("cat", [join(victim.home, "daemon.pid")], { encoding: "utf8" })
          .trim()
          .split(/\s+/)[0]
      )
      const sampler = startSampler()
      const started = process.hrtime.bigint()
      const back = await inflict(fault, victim, pid, moving, sampler)
      // every world it ran answers again through another machine's proxy, from a process started since the fault
      for (const name of moving) {
        for (;;) {
          const r = probe(observer, `api.${name}.shop.localhost`)
          if (r.status === 200 && r.body !== before.get(name)) break
          await sleep(50)
        }
      }
      failover.get(fault).push(Number(process.hrtime.bigint() - started) / 1e6)
      // the machine comes back (any command starts its daemon; a machine asleep wakes) and the cluster settles
      // before the next trial
      const woke = await back()
      await settled(observer)
      await sleep(3000)
      const seen = await sampler.stop()
      const longest = Math.max(seen.longest, typeof woke === "number" ? woke : 0)
      if (typeof woke === "number") wakes.get(fault).push(woke)
      overlaps.set(fault, Math.max(overlaps.get(fault), longest))
      sampled.set(fault, sampled.get(fault) + seen.samples)
      console.error(
        `  ${fault} ${k + 1}: ${victim.name} ran ${moving.length}; serving again after ${(failover.get(fault).at(-1) / 1000).toFixed(2)} s; longest overlap ${longest} ms` +
          (typeof woke === "number" ? ` (its old copies ended ${woke} ms after it woke)` : "")
      )
    }
  }
}

const rows = [
  across,
  alone,
  summarize("cluster status --json, 3 machines", clusterStatus),
  summarize("a request through this machine's proxy to its own world", localMs),
  summarize("the same to a world of another machine (one hop more)", remoteMs),
  ...faults
    .filter((f) => failover.get(f).length > 0)
    .map((f) =>
      summarize(
        `failover after ${f}: until its --anywhere worlds answer again (${failover.get(f).length} trials; longest overlap ${overlaps.get(f)} ms in ${sampled.get(f)} samples${wakes.get(f).length > 0 ? `; old copies ended after the wake: median ${median(wakes.get(f)).toFixed(1)} ms` : ""})`,
        failover.get(f)
      )
    )
]
if (options.json)
  console.log(JSON.stringify({ worlds: worldCount, runs, rows: rows.map(({ samples: _, ...r }) => r) }, null, 2))
else {
  printTable(rows)
  console.log(
    `\nthe hop costs ${(median(remoteMs) - median(localMs)).toFixed(2)} ms at the median (goal ≤ 1 ms); goal for status across 3 machines and 150 worlds: ≤ 200 ms`
  )
  for (const f of faults) {
    if (failover.get(f).length === 0) continue
    console.log(
      `failover per ${f}, s: ${failover
        .get(f)
        .map((ms) => (ms / 1000).toFixed(2))
        .join(", ")} (goal ≤ 10 s); longest overlap: ${overlaps.get(f)} ms (goal: none)` +
        (wakes.get(f).length > 0
          ? `; after each wake the old copies ended in: ${wakes.get(f).join(", ")} ms (median ${median(wakes.get(f)).toFixed(1)}, load average ${loadAverage()})`
          : "")
    )
  }
  console.log("")
  const line = (what, values, unit, goal, digits = 1) =>
    console.log(summaryLine({ what, values, unit, digits, before: machineBefore, goal }))
  // the goal is status's, listing every world of the cluster; `cluster status` is the full CLI's start and more
  line(across.command, across.samples, "ms", "goal ≤ 200 ms")
  line(alone.command, alone.samples, "ms")
  line("cluster status --json, 3 machines", clusterStatus, "ms")
  line("a request to this machine's own world", localMs, "ms", undefined, 2)
  line("a request to another machine's world", remoteMs, "ms", "goal: ≤ 1 ms more than its own", 2)
  for (const f of faults) {
    if (failover.get(f).length === 0) continue
    line(
      `failover after ${f}`,
      failover.get(f).map((ms) => ms / 1000),
      "s",
      `goal ≤ 10 s; longest overlap ${overlaps.get(f)} ms (goal: none)`,
      2
    )
    if (wakes.get(f).length > 0) line(`old copies ended after the wake (${f})`, wakes.get(f), "ms")
  }
}
for (const name of anywhereNames) await berth(h1, ["remove", name, "--force"]).catch(() => undefined)
await Promise.all(hosts.map((h) => berth(h, ["down", "--all"]).catch(() => undefined)))
process.exit(0)
