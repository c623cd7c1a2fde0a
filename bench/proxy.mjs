// Requests/s and latency through berth's proxy next to the same requests sent directly, through nginx and through
// caddy (when installed), all in one run against one node backend. Needs wrk; nginx and caddy are optional.
// Usage: node bench/proxy.mjs [--duration S] [--rounds N] [--connections N] [--threads N] [--body BYTES]
//                             [--nginx-workers LIST] [--daemon-flags] [--cpu-prof DIR] [--baseline REF] [--json]
//
// - direct: wrk → the backend (a node:http server answering GET with a 1 KiB body)
// - berth: wrk → berth's proxy (plain HTTP, its fast path) → the backend; the proxy runs in its own process, bundled
//   from src/ with esbuild as the daemon would run it, counting requests (`seen`) as the daemon's does
// - berth (node:http path): the same proxy with the fast path off: what every HTTPS request and the rare unusual
//   plain request take
// - nginx: a temporary prefix and config as this user, `daemon off`, upstream keep-alive, the same X-Forwarded-*;
//   once per entry of --nginx-workers (default "1,auto": one worker, the comparison the goal names, and one per CPU)
// - caddy: `reverse_proxy`, when `caddy` is on PATH
// Every target gets a warm-up run, then `--rounds` measured runs, the order rotating each round; the table shows
// medians and the range over the rounds. wrk's latency percentiles come from `--latency`. Where /proc exists, each
// proxy's CPU time per request (its process and children, user + system) is measured too: the machine's load moves
// it far less than requests/s. The summary compares berth with nginx on one worker: the goal is ≥ 0.9× its
// requests/s and at most 2 ms added to direct's p99, in the same run.
// --daemon-flags runs berth's proxy with the daemon's Node flags (a 1 MiB young generation, --optimize-for-size);
// --cpu-prof DIR writes a V8 CPU profile of berth's fast-path proxy there; --baseline REF adds the fast path as it was
// at a git commit (`berth @REF`), measured in the same rounds.
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { median } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    duration: { type: "string", default: "8" },
    rounds: { type: "string", default: "3" },
    connections: { type: "string", default: "50" },
    threads: { type: "string", default: "1" },
    body: { type: "string", default: "1024" },
    "nginx-workers": { type: "string", default: "1,auto" },
    "daemon-flags": { type: "boolean" },
    "cpu-prof": { type: "string" },
    baseline: { type: "string" },
    json: { type: "boolean" }
  }
})
const duration = Number(options.duration)
const rounds = Number(options.rounds)
const connections = Number(options.connections)
const threads = Number(options.threads)
const bodyBytes = Number(options.body)
const HOST = "web.w1.demo.localhost"
const root = fileURLToPath(new URL("..", import.meta.url))

const has = (command) => {
  try {
    execFileSync("sh", ["-c", 'command -v "$1"', "sh", command], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}
if (!has("wrk")) {
  console.error("wrk is not installed (apt install wrk)")
  process.exit(1)
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const waitForPort = async (port) => {
  for (let i = 0; i < 200; i++) {
    const open = await new Promise((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.destroy()
        resolve(true)
      })
      socket.once("error", () => resolve(false))
    })
    if (open) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`nothing listens on ${port}`)
}

const work = mkdtempSync(join(tmpdir(), "berth-bench-proxy-"))
const children = []
/** CPU seconds (user + system) of a process and its children, from /proc; undefined where there is none. */
const cpuSeconds = (pid) => {
  if (pid === undefined) return undefined
  try {
    const tick = 100
    const stat = (p) => readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")
    const own = stat(pid)
    let total = Number(own[11]) + Number(own[12])
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const fields = stat(entry)
        if (Number(fields[1]) === pid) total += Number(fields[11]) + Number(fields[12])
      } catch {}
    }
    return total / tick
  } catch {
    return undefined
  }
}

const start = (command, args, name) => {
  const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  child.stderr.on("data", (c) => (stderr += c))
  child.on("exit", (code) => {
    if (code !== 0 && code !== null && !child.stopping) console.error(`${name} exited ${code}: ${stderr}`)
  })
  children.push(child)
  return child
}

const backendPort = await freePort()
writeFileSync(
  join(work, "backend.mjs"),
  `import * as http from "node:http"
const body = Buffer.alloc(${bodyBytes}, "x")
http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "text/plain", "content-length": body.length })
  res.end(body)
}).listen(${backendPort}, "127.0.0.1")
`
)
start(process.execPath, [join(work, "backend.mjs")], "backend")

// berth's proxy, bundled from the sources the daemon uses (and, with --baseline, from another commit's)
const { build } = await import("esbuild")
const bundleProxy = async (sources, name) => {
  writeFileSync(
    join(work, `${name}-entry.ts`),
    `import * as Effect from "effect/Effect"
import { makeRouteTable } from ${JSON.stringify(join(sources, "src/domain/routes.ts"))}
import { makeProxy } from ${JSON.stringify(join(sources, "src/services/proxy/Proxy.ts"))}
import { Traffic } from ${JSON.stringify(join(root, "src/services/proxy/traffic.ts"))}
const [port, backend, mode] = process.argv.slice(2)
// a profile is written only on a normal exit
process.on("SIGTERM", () => process.exit(0))
const table = makeRouteTable([{ project: "demo", world: "w1", service: "web", worldState: "running",
  serviceState: "healthy", port: Number(backend), ready: true, worldId: 1 }])
// counted as the daemon's Router counts them
const traffic = new Traffic()
traffic.prepare(table.byHost.values())
const routes = { ...table, seen: traffic.seen, wake: () => {} }
Effect.runFork(Effect.scoped(Effect.andThen(
  makeProxy({ http: { port: Number(port), hosts: ["127.0.0.1"] }, routes, fastPath: mode === "fast" }),
  Effect.never)))
`
  )
  await build({
    entryPoints: [join(work, `${name}-entry.ts`)],
    outfile: join(work, `${name}.mjs`),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    nodePaths: [join(root, "node_modules")],
    logLevel: "error"
  })
  return join(work, `${name}.mjs`)
}
const proxyBundle = await bundleProxy(root, "proxy")
const proxies = [
  ["berth", proxyBundle, "fast"],
  ["berth (node:http path)", proxyBundle, "slow"]
]
if (options.baseline !== undefined) {
  // the same bench against the proxy as it was at another commit, in the same run: the machine's load moves both
  const sources = join(work, "baseline")
  mkdirSync(sources)
  execFileSync("sh", ["-c", 'git -C "$1" archive "$2" src | tar -x -C "$3"', "sh", root, options.baseline, sources])
  proxies.splice(1, 0, [`berth @${options.baseline}`, await bundleProxy(sources, "baseline"), "fast"])
}

const targets = [{ name: "direct", port: backendPort, version: `node ${process.version}` }]
// the daemon's own flags (src/daemon/client.ts)
const daemonFlags = options["daemon-flags"] ? ["--max-semi-space-size=1", "--optimize-for-size"] : []
for (const [name, bundle, mode] of proxies) {
  const port = await freePort()
  const profile =
    options["cpu-prof"] !== undefined && name === "berth" ? ["--cpu-prof", `--cpu-prof-dir=${options["cpu-prof"]}`] : []
  const child = start(
    process.execPath,
    [...daemonFlags, ...profile, bundle, String(port), String(backendPort), mode],
    name
  )
  targets.push({ name, port, version: "", pid: child.pid })
}

const notes = []
const nginxWorkers = has("nginx") ? options["nginx-workers"].split(",").map((w) => w.trim()) : []
for (const workers of nginxWorkers) {
  const port = await freePort()
  const prefix = join(work, `nginx-${workers}`)
  mkdirSync(join(prefix, "logs"), { recursive: true })
  const isRoot = process.getuid?.() === 0
  writeFileSync(
    join(prefix, "nginx.conf"),
    `${isRoot ? "user root;\n" : ""}worker_processes ${workers};
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
}
`
  )
  const version = spawnSync("nginx", ["-v"], { encoding: "utf8" }).stderr
  const master = start(
    "nginx",
    ["-p", prefix, "-c", join(prefix, "nginx.conf"), "-e", join(prefix, "logs", "error.log")],
    "nginx"
  )
  const label =
    workers === "1" ? "1 worker" : workers === "auto" ? `auto: ${cpus().length} workers` : `${workers} workers`
  targets.push({ name: `nginx (${label})`, port, version: version.trim(), pid: master.pid, nginxWorkers: workers })
}
if (!has("nginx")) notes.push("nginx: not installed, skipped")
if (has("caddy")) {
  const port = await freePort()
  const file = join(work, "Caddyfile")
  writeFileSync(
    file,
    `{\n  admin off\n  auto_https off\n}\nhttp://:${port} {\n  bind 127.0.0.1\n  reverse_proxy 127.0.0.1:${backendPort}\n}\n`
  )
  const child = start("caddy", ["run", "--config", file, "--adapter", "caddyfile"], "caddy")
  targets.push({ name: "caddy", port, version: "", pid: child.pid })
} else {
  notes.push("caddy: not installed, skipped")
}

const toMs = (value, unit) => Number(value) * ({ us: 0.001, ms: 1, s: 1000 }[unit] ?? Number.NaN)

const wrk = (port, seconds, pid) => {
  const cpuBefore = cpuSeconds(pid)
  const out = execFileSync(
    "wrk",
    [
      `-t${threads}`,
      `-c${connections}`,
      `-d${seconds}s`,
      "--latency",
      "-H",
      `Host: ${HOST}`,
      `http://127.0.0.1:${port}/`
    ],
    { encoding: "utf8" }
  )
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
  const percentile = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(out)
    return m === null ? Number.NaN : toMs(m[1], m[2])
  }
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1]
  const socketErrors = /Socket errors: (.*)/.exec(out)?.[1]
  if (errors !== undefined || socketErrors !== undefined) {
    throw new Error(`wrk on port ${port}: ${errors ?? 0} bad responses, socket errors: ${socketErrors ?? "none"}`)
  }
  const cpuAfter = cpuSeconds(pid)
  const requests = Number(/(\d+) requests in/.exec(out)?.[1])
  const cpuUs =
    cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : ((cpuAfter - cpuBefore) * 1e6) / requests
  return { rps, p50: percentile(50), p99: percentile(99), cpuUs }
}

const signed = (ms) => `${ms >= 0 ? "+" : ""}${ms.toFixed(2)}`

const range = (values, digits = 0) => {
  const s = [...values].sort((a, b) => a - b)
  return `${s[0].toFixed(digits)}–${s[s.length - 1].toFixed(digits)}`
}

try {
  for (const t of targets) await waitForPort(t.port)
  for (const t of targets) wrk(t.port, 2)
  const samples = new Map(targets.map((t) => [t.name, []]))
  for (let r = 0; r < rounds; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length])
    for (const t of order) samples.get(t.name).push(wrk(t.port, duration, t.pid))
  }
  const summary = targets.map((t) => {
    const s = samples.get(t.name)
    const cpu = s.map((x) => x.cpuUs).filter((x) => Number.isFinite(x))
    return {
      target: t.name,
      rps: Math.round(median(s.map((x) => x.rps))),
      rpsRange: range(s.map((x) => x.rps)),
      p50Ms: Number(median(s.map((x) => x.p50)).toFixed(2)),
      p99Ms: Number(median(s.map((x) => x.p99)).toFixed(2)),
      p99Range: range(
        s.map((x) => x.p99),
        1
      ),
      cpuUsPerRequest: t.pid === undefined || cpu.length === 0 ? undefined : Number(median(cpu).toFixed(1))
    }
  })
  const direct = summary[0]
  for (const row of summary) {
    row.ratio = Number((row.rps / direct.rps).toFixed(2))
    row.p99AddedMs = Number((row.p99Ms - direct.p99Ms).toFixed(2))
  }
  // the goal: berth against nginx on one worker, both beside direct, from this one run
  const berth = summary.find((r) => r.target === "berth")
  const nginx1 = summary[targets.findIndex((t) => t.nginxWorkers === "1")]
  const comparison =
    berth === undefined || nginx1 === undefined
      ? undefined
      : {
          berthPerNginx1: Number((berth.rps / nginx1.rps).toFixed(2)),
          berthP99AddedMs: berth.p99AddedMs,
          nginx1P99AddedMs: nginx1.p99AddedMs,
          // per round, so that a range shows how far the machine's load moved it
          berthPerNginx1Range: range(
            samples.get("berth").map((b, i) => b.rps / samples.get(nginx1.target)[i].rps),
            2
          ),
          berthP99AddedRange: range(
            samples.get("berth").map((b, i) => b.p99 - samples.get("direct")[i].p99),
            1
          ),
          met: berth.rps >= 0.9 * nginx1.rps && berth.p99AddedMs <= 2
        }
  const info = {
    node: process.version,
    cpus: cpus().length,
    connections,
    threads,
    durationS: duration,
    rounds,
    bodyBytes,
    daemonFlags: options["daemon-flags"] === true,
    nginx: targets.find((t) => t.name.startsWith("nginx"))?.version
  }
  if (options.json) {
    console.log(JSON.stringify({ ...info, results: summary, comparison, notes }, null, 2))
  } else {
    console.log(
      `wrk -t${threads} -c${connections}, ${bodyBytes}-byte bodies, ${rounds} × ${duration} s per target (medians); ` +
        `Node ${process.version}, ${info.cpus} CPUs${info.nginx === undefined ? "" : `, ${info.nginx}`}\n`
    )
    console.log(
      "| target | requests/s | (range) | × direct | p50 ms | p99 ms | (range) | p99 added ms | CPU µs/request |"
    )
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (const r of summary) {
      console.log(
        `| ${r.target} | ${r.rps} | ${r.rpsRange} | ${r.ratio.toFixed(2)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(
          2
        )} | ${r.p99Range} | ${r === direct ? "" : r.p99AddedMs.toFixed(2)} | ${r.cpuUsPerRequest ?? ""} |`
      )
    }
    if (comparison !== undefined) {
      console.log(
        `\nberth / nginx (1 worker): ${comparison.berthPerNginx1.toFixed(2)}× (per round ${comparison.berthPerNginx1Range}; goal ≥ 0.90); ` +
          `p99 added to direct's: berth ${signed(comparison.berthP99AddedMs)} ms (per round ${comparison.berthP99AddedRange}), ` +
          `nginx ${signed(comparison.nginx1P99AddedMs)} ms (goal for berth ≤ +2 ms): ${comparison.met ? "met" : "not met"}`
      )
    }
    for (const n of notes) console.log(`\n${n}`)
  }
} finally {
  for (const child of children) {
    child.stopping = true
    child.kill("SIGTERM")
  }
  await new Promise((r) => setTimeout(r, 200))
  rmSync(work, { recursive: true, force: true })
}
