// Requests/s, latency and CPU time through berth's proxy next to the same requests sent directly and through nginx
// with one worker (and caddy, when installed), all in one run against one node backend. Needs wrk; nginx is the
// comparison the goal names; --https needs h2load (Debian: nghttp2-client) for HTTP/2.
// Usage: node bench/proxy.mjs [--rounds N] [--duration S] [--connections LIST] [--https] [--threads N]
//                             [--body BYTES] [--nginx-workers LIST] [--slow-path] [--daemon-flags] [--node-flags=F]
//                             [--cpu-prof DIR] [--baseline REF] [--only https|h2] [--bare-h2] [--json]
//
// - direct: the client → the backend (a node:http server answering GET with a 1 KiB body), plain HTTP/1.1
// - berth: the client → berth's proxy → the backend; the proxy runs in its own process, bundled from src/ with
//   esbuild as the daemon would run it, counting requests (`seen`) as the daemon's does
// - berth (node:http path), with --slow-path: the same proxy with the fast path off
// - nginx: a temporary prefix and config as this user, `daemon off`, upstream keep-alive, the same X-Forwarded-*;
//   once per entry of --nginx-workers (default "1": one worker, the comparison the goal names)
// - caddy: `reverse_proxy`, when `caddy` is on PATH (plain HTTP only)
// Plain HTTP by default (wrk). --https measures berth's TLS listener, with a certificate from its local CA, beside
// nginx serving the same certificate and key: HTTP/1.1 with wrk and HTTP/2 with h2load (one stream per connection, as
// many connections as wrk's); direct stays plain HTTP/1.1 (h2load --h1 for the HTTP/2 case), so "added" is what the
// proxy and its TLS add.
// Each case (protocol × each of --connections) gives every target a warm-up run, then `--rounds` measured rounds, the
// order rotating each round; each round's figures are printed as it ends. The summary takes the median over rounds of
// each round's berth/nginx ratio and of each round's p99 added to direct's. Where /proc exists, each proxy's CPU time
// per request (its process and children, user + system) is measured too: the machine's load moves it far less than
// requests/s. The machine's load average is recorded before and after each case. Goals: berth ≥ 0.95× nginx with one
// worker in requests/s, and berth's p99 added ≤ nginx's p99 added + 0.5 ms.
// --daemon-flags runs berth's proxy with the daemon's Node flags (DAEMON_NODE_FLAGS in src/daemon/client.ts);
// --node-flags="FLAGS" with those instead, to weigh a change of them (the = form: the value begins with --);
// --cpu-prof DIR writes a V8 CPU profile of berth's proxy there (with --https, --only h2 or --only https keeps one
// case, so the profile holds only it); --baseline REF adds the proxy as it was at a git
// commit (`berth @REF`), measured in the same rounds. --bare-h2 adds, to the h2 case, node:http2 answering the 1 KiB
// itself on its core API with berth's certificate and the same Node flags (`node:http2 alone`): no proxying, no
// backend, so what node's HTTP/2 costs before a proxy on it does anything.
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { availableParallelism, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { daemonNodeFlags } from "./fixtures.mjs"
import { commandLine, median } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    duration: { type: "string", default: "8" },
    rounds: { type: "string", default: "5" },
    connections: { type: "string", default: "50,200" },
    only: { type: "string" },
    https: { type: "boolean" },
    threads: { type: "string", default: "1" },
    body: { type: "string", default: "1024" },
    "nginx-workers": { type: "string", default: "1" },
    "slow-path": { type: "boolean" },
    "daemon-flags": { type: "boolean" },
    "node-flags": { type: "string" },
    "cpu-prof": { type: "string" },
    baseline: { type: "string" },
    "bare-h2": { type: "boolean" },
    json: { type: "boolean" }
  }
})
const duration = Number(options.duration)
const rounds = Number(options.rounds)
const connectionCounts = options.connections.split(",").map((c) => Number(c.trim()))
const threads = Number(options.threads)
const bodyBytes = Number(options.body)
const https = options.https === true
const HOST = "web.w1.demo.localhost"
const root = fileURLToPath(new URL("..", import.meta.url))
const command = commandLine()
if (connectionCounts.some((c) => !Number.isInteger(c) || c < 1) || !(rounds >= 1) || !(duration > 0)) {
  console.error("--connections takes a list of positive integers (50,200); --rounds and --duration positive numbers")
  process.exit(2)
}

const has = (name) => {
  try {
    execFileSync("sh", ["-c", 'command -v "$1"', "sh", name], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}
if (!has("wrk")) {
  console.error("wrk is not installed (apt install wrk)")
  process.exit(1)
}
if (https && !has("h2load")) {
  console.error("h2load is not installed (apt install nghttp2-client)")
  process.exit(1)
}
/** Per-round lines: on stdout, or on stderr when stdout is JSON. */
const say = (line) => (options.json ? console.error(line) : console.log(line))

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
/** CPU seconds (user, system) of a process and its children, from /proc; undefined where there is none. */
const cpuSeconds = (pid) => {
  if (pid === undefined) return undefined
  try {
    const tick = 100
    const stat = (p) => readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")
    const own = stat(pid)
    let user = Number(own[11])
    let system = Number(own[12])
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const fields = stat(entry)
        if (Number(fields[1]) === pid) {
          user += Number(fields[11])
          system += Number(fields[12])
        }
      } catch {}
    }
    return { user: user / tick, system: system / tick }
  } catch {
    return undefined
  }
}

/**
 * The bench runs its clients synchronously, so a signal reaches it only between runs: its servers are told to end with
 * it instead (Linux's parent-death signal, through util-linux's setpriv where present), so that a bench stopped or
 * killed leaves none behind.
 */
const withParent = (() => {
  try {
    execFileSync("setpriv", ["--pdeathsig", "TERM", "true"], { stdio: "ignore" })
    return (cmd, args) => ["setpriv", ["--pdeathsig", "TERM", "--", cmd, ...args]]
  } catch {
    return (cmd, args) => [cmd, args]
  }
})()

const start = (cmd, args, name) => {
  const child = spawn(...withParent(cmd, args), { stdio: ["ignore", "ignore", "pipe"] })
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
    `import { writeFileSync } from "node:fs"
import * as Effect from "effect/Effect"
import { makeRouteTable } from ${JSON.stringify(join(sources, "src/domain/routes.ts"))}
import { loadOrCreateCa } from ${JSON.stringify(join(sources, "src/services/proxy/ca.ts"))}
import { makeProxy } from ${JSON.stringify(join(sources, "src/services/proxy/Proxy.ts"))}
import { Traffic } from ${JSON.stringify(join(root, "src/services/proxy/traffic.ts"))}
const [port, backend, mode, httpsPort, caDir] = process.argv.slice(2)
// a profile is written only on a normal exit
process.on("SIGTERM", () => process.exit(0))
const table = makeRouteTable([{ project: "demo", world: "w1", service: "web", worldState: "running",
  serviceState: "healthy", port: Number(backend), ready: true, worldId: 1 }])
// counted as the daemon's Router counts them
const traffic = new Traffic()
traffic.prepare(table.byHost.values())
const routes = { ...table, seen: traffic.seen, wake: () => {} }
Effect.runFork(Effect.scoped(Effect.gen(function* () {
  const ca = httpsPort === undefined ? undefined : yield* loadOrCreateCa(caDir)
  yield* makeProxy({
    http: { port: Number(port), hosts: ["127.0.0.1"] },
    ...(ca === undefined ? {} : { https: { port: Number(httpsPort), hosts: ["127.0.0.1"], ca } }),
    routes,
    fastPath: mode === "fast"
  })
  if (ca !== undefined) {
    // nginx serves the certificate berth serves a client that sends no name (wrk and h2load, to 127.0.0.1)
    const leaf = ca.leaf("localhost")
    writeFileSync(caDir + "/leaf.key", leaf.keyPem)
    writeFileSync(caDir + "/leaf.pem", leaf.certPem + ca.certPem)
  }
  yield* Effect.never
})))
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
const proxies = [["berth", proxyBundle, "fast"]]
if (options["slow-path"]) proxies.push(["berth (node:http path)", proxyBundle, "slow"])
if (options.baseline !== undefined) {
  // the same bench against the proxy as it was at another commit, in the same run: the machine's load moves both
  const sources = join(work, "baseline")
  mkdirSync(sources)
  execFileSync("sh", ["-c", 'git -C "$1" archive "$2" src | tar -x -C "$3"', "sh", root, options.baseline, sources])
  proxies.push([`berth @${options.baseline}`, await bundleProxy(sources, "baseline"), "fast"])
}

/** A target: a name, the plain and TLS ports it serves on, and the process whose CPU time is its cost. */
const targets = [{ name: "direct", port: backendPort, tlsPort: undefined, direct: true }]
// the daemon's own flags (src/daemon/client.ts), or the ones asked for
const daemonFlags =
  options["node-flags"] !== undefined
    ? options["node-flags"].split(/\s+/).filter(Boolean)
    : options["daemon-flags"]
      ? daemonNodeFlags()
      : []
let certDir
for (const [name, bundle, mode] of proxies) {
  const port = await freePort()
  const tlsPort = https ? await freePort() : undefined
  const caDir = join(work, `ca-${targets.length}`)
  mkdirSync(caDir)
  certDir ??= caDir
  const profile =
    options["cpu-prof"] !== undefined && name === "berth" ? ["--cpu-prof", `--cpu-prof-dir=${options["cpu-prof"]}`] : []
  const child = start(
    process.execPath,
    [
      ...daemonFlags,
      ...profile,
      bundle,
      String(port),
      String(backendPort),
      mode,
      ...(tlsPort === undefined ? [] : [String(tlsPort), caDir])
    ],
    name
  )
  targets.push({ name, port, tlsPort, pid: child.pid, berth: name === "berth" })
}
if (https) {
  for (let i = 0; i < 200 && !existsSync(join(certDir, "leaf.pem")); i++) await new Promise((r) => setTimeout(r, 50))
}
if (https && options["bare-h2"]) {
  const tlsPort = await freePort()
  writeFileSync(
    join(work, "bare-h2.mjs"),
    `import { readFileSync } from "node:fs"
import * as http2 from "node:http2"
const body = Buffer.alloc(${bodyBytes}, "x")
const dir = ${JSON.stringify(certDir)}
const server = http2.createSecureServer({ key: readFileSync(dir + "/leaf.key"), cert: readFileSync(dir + "/leaf.pem") })
server.on("stream", (stream) => {
  stream.respond({ ":status": 200, "content-type": "text/plain", "content-length": body.length })
  stream.end(body)
})
process.on("SIGTERM", () => process.exit(0))
server.listen(${tlsPort}, "127.0.0.1")
`
  )
  const child = start(process.execPath, [...daemonFlags, join(work, "bare-h2.mjs")], "node:http2 alone")
  targets.push({ name: "node:http2 alone", port: tlsPort, tlsPort, pid: child.pid, h2Only: true })
}

const notes = []
const nginxWorkers = has("nginx") ? options["nginx-workers"].split(",").map((w) => w.trim()) : []
let nginxVersion
for (const workers of nginxWorkers) {
  const port = await freePort()
  const tlsPort = https ? await freePort() : undefined
  const prefix = join(work, `nginx-${workers}`)
  mkdirSync(join(prefix, "logs"), { recursive: true })
  const isRoot = process.getuid?.() === 0
  const location = `location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-Proto $scheme;
    }`
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
    ${location}
  }
${
  tlsPort === undefined
    ? ""
    : `  server {
    listen 127.0.0.1:${tlsPort} ssl http2;
    ssl_certificate ${join(certDir, "leaf.pem")};
    ssl_certificate_key ${join(certDir, "leaf.key")};
    keepalive_requests 1000000;
    http2_max_requests 1000000;
    ${location}
  }
`
}}
`
  )
  nginxVersion = spawnSync("nginx", ["-v"], { encoding: "utf8" }).stderr.trim()
  const master = start(
    "nginx",
    ["-p", prefix, "-c", join(prefix, "nginx.conf"), "-e", join(prefix, "logs", "error.log")],
    "nginx"
  )
  const label = workers === "1" ? "1 worker" : workers === "auto" ? "auto workers" : `${workers} workers`
  targets.push({ name: `nginx (${label})`, port, tlsPort, pid: master.pid, nginx1: workers === "1" })
}
if (!has("nginx")) notes.push("nginx: not installed, skipped")
if (has("caddy") && !https) {
  const port = await freePort()
  const file = join(work, "Caddyfile")
  writeFileSync(
    file,
    `{\n  admin off\n  auto_https off\n}\nhttp://:${port} {\n  bind 127.0.0.1\n  reverse_proxy 127.0.0.1:${backendPort}\n}\n`
  )
  const child = start("caddy", ["run", "--config", file, "--adapter", "caddyfile"], "caddy")
  targets.push({ name: "caddy", port, pid: child.pid })
} else if (!https) {
  notes.push("caddy: not installed, skipped")
}

const toMs = (value, unit) => Number(value) * ({ us: 0.001, ms: 1, s: 1000 }[unit] ?? Number.NaN)

/** One measured run of the case's client against a target: requests/s, p50/p99 ms and CPU µs per request. */
const measure = async (protocol, t, seconds, c) => {
  let before = cpuSeconds(t.pid)
  let after
  let run
  if (protocol === "h2") {
    // the CPU of h2load's measured window only: its warm-up's requests are not counted, so neither is their CPU
    run = await h2load(t, seconds, c, () => {
      before = cpuSeconds(t.pid)
    })
    after = run.cpuAtEnd
  } else {
    run = wrk(protocol, t, seconds, c)
    after = cpuSeconds(t.pid)
  }
  const perRequest = (f) =>
    before === undefined || after === undefined ? Number.NaN : ((after[f] - before[f]) * 1e6) / run.requests
  const user = perRequest("user")
  const system = perRequest("system")
  return { ...run, cpuUs: user + system, userUs: user, systemUs: system }
}

const wrk = (protocol, t, seconds, c) => {
  const url = protocol === "https" && !t.direct ? `https://127.0.0.1:${t.tlsPort}/` : `http://127.0.0.1:${t.port}/`
  const out = execFileSync(
    "wrk",
    // wrk counts an answer slower than --timeout (2 s by default) as an error; 10 s leaves that to a stall
    [`-t${threads}`, `-c${c}`, `-d${seconds}s`, "--timeout", "10s", "--latency", "-H", `Host: ${HOST}`, url],
    { encoding: "utf8", timeout: (seconds + 60) * 1000 }
  )
  const percentile = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(out)
    return m === null ? Number.NaN : toMs(m[1], m[2])
  }
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1]
  const socketErrors = /Socket errors: (.*)/.exec(out)?.[1]
  if (errors !== undefined || socketErrors !== undefined) {
    throw new Error(`wrk on ${url}: ${errors ?? 0} bad responses, socket errors: ${socketErrors ?? "none"}`)
  }
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]),
    requests: Number(/(\d+) requests in/.exec(out)?.[1]),
    p50: percentile(50),
    p99: percentile(99)
  }
}

/** h2load: one stream at a time per connection, as wrk; latency percentiles from its per-request log. */
const h2load = async (t, seconds, c, onMainStart) => {
  const log = join(work, "h2load.log")
  rmSync(log, { force: true })
  const args = t.direct
    ? ["--h1", `http://127.0.0.1:${t.port}/`]
    : ["-H", `:authority: ${HOST}`, `https://127.0.0.1:${t.tlsPort}/`]
  // The warm-up is needed, not only for fair figures: h2load (1.52) with -D stops only the clients that have an h2
  // session when the duration ends; one still in its TLS handshake then (200 handshakes take seconds on a loaded
  // machine) is never stopped and requests for ever. Without a warm-up, `-c200 -D3` hangs in about half the runs,
  // against node:http2 with no proxy as well. The timeout is the guard if it happens anyway. Its lines saying when
  // the measured window starts and ends are when the target's CPU is read.
  let cpuAtEnd
  const out = await new Promise((resolve, reject) => {
    const child = spawn(
      "h2load",
      [`-t${threads}`, `-c${c}`, "-m1", `-D${seconds}`, "--warm-up-time=1", `--log-file=${log}`, ...args],
      { stdio: ["ignore", "pipe", "pipe"] }
    )
    let text = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk) => {
      const before = text
      text += chunk
      if (!before.includes("Main benchmark duration is started") && text.includes("Main benchmark duration is started"))
        onMainStart()
      if (!before.includes("Main benchmark duration is over") && text.includes("Main benchmark duration is over"))
        cpuAtEnd = cpuSeconds(t.pid)
    })
    child.stderr.on("data", (chunk) => {
      text += chunk
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), (seconds + 60) * 1000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      if (code === 0) resolve(text)
      else reject(new Error(`h2load on port ${t.tlsPort ?? t.port} exited ${code}: ${text}`))
    })
  })
  cpuAtEnd ??= cpuSeconds(t.pid)
  const m = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(out)
  if (
    m === null ||
    Number(m[3]) > 0 ||
    Number(m[4]) > 0 ||
    / 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/
      .exec(out)
      ?.slice(2)
      .some((n) => n !== "0")
  ) {
    throw new Error(`h2load on port ${t.tlsPort ?? t.port}: ${out}`)
  }
  if (!t.direct && !/Application protocol: h2/.test(out)) throw new Error(`h2load did not negotiate h2: ${out}`)
  const times = readFileSync(log, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => Number(l.split("\t")[2]) / 1000)
    .sort((a, b) => a - b)
  const at = (p) => times[Math.min(times.length - 1, Math.ceil((p / 100) * times.length) - 1)]
  // the warm-up's requests are not in "done"; the log's are the measured ones
  return { rps: times.length / seconds, requests: times.length, p50: at(50), p99: at(99), cpuAtEnd }
}

const signed = (ms, digits = 2) => `${ms >= 0 ? "+" : ""}${ms.toFixed(digits)}`
const range = (values, digits = 0, format = (v) => v.toFixed(digits)) => {
  const s = [...values].sort((a, b) => a - b)
  return s[0] === s[s.length - 1] ? format(s[0]) : `${format(s[0])} to ${format(s[s.length - 1])}`
}
const kilo = (rps) => `${(rps / 1000).toFixed(1)}k`
const load = () => loadavg().map((l) => Number(l.toFixed(2)))
const today = new Date().toISOString().slice(0, 10)
const cores = availableParallelism()

// --only h2 (or https) measures that one of the two TLS cases: a profile of it then holds nothing else
const protocols = (https ? ["https", "h2"] : ["http"]).filter((p) => options.only === undefined || p === options.only)
const protocolName = { http: "HTTP/1.1", https: "HTTPS HTTP/1.1", h2: "HTTPS h2" }
const client = { http: "wrk", https: "wrk", h2: "h2load" }
const cases = []
const runLoadBefore = load()
try {
  for (const t of targets) await waitForPort(t.port)
  for (const t of targets) if (t.tlsPort !== undefined) await waitForPort(t.tlsPort)
  for (const protocol of protocols) {
    for (const c of connectionCounts) {
      // a client that fails or hangs loses its case, not the run
      try {
        const caseTargets = targets.filter((t) =>
          t.h2Only ? protocol === "h2" : protocol === "http" || t.direct || t.tlsPort !== undefined
        )
        const loadBefore = load()
        for (const t of caseTargets) await measure(protocol, t, 2, c)
        const samples = new Map(caseTargets.map((t) => [t.name, []]))
        const berth = caseTargets.find((t) => t.berth)
        const nginx1 = caseTargets.find((t) => t.nginx1)
        const ratios = []
        for (let r = 0; r < rounds; r++) {
          const order = caseTargets.map((_, i) => caseTargets[(i + r) % caseTargets.length])
          for (const t of order) samples.get(t.name).push(await measure(protocol, t, duration, c))
          const direct = samples.get("direct")[r]
          const parts = caseTargets.map((t) => {
            const s = samples.get(t.name)[r]
            const added = t.direct ? "" : ` (${signed(s.p99 - direct.p99)})`
            const cpu = Number.isFinite(s.cpuUs) ? `, ${s.cpuUs.toFixed(1)} µs CPU` : ""
            return `${t.name} ${kilo(s.rps)}/s p99 ${s.p99.toFixed(2)} ms${added}${cpu}`
          })
          let ratio = ""
          if (berth !== undefined && nginx1 !== undefined) {
            ratios.push(samples.get(berth.name)[r].rps / samples.get(nginx1.name)[r].rps)
            ratio = ` · berth/nginx ${ratios[r].toFixed(2)}×`
          }
          say(
            `${protocolName[protocol]} c=${c} round ${r + 1}/${rounds}: ${parts.join(" · ")}${ratio} · load ${load()[0]}`
          )
        }
        const loadAfter = load()
        const direct = samples.get("direct")
        const rows = caseTargets.map((t) => {
          const s = samples.get(t.name)
          const added = s.map((x, i) => x.p99 - direct[i].p99)
          const cpu = s.map((x) => x.cpuUs).filter((x) => Number.isFinite(x))
          return {
            target: t.name,
            rps: Math.round(median(s.map((x) => x.rps))),
            rpsRange: range(s.map((x) => x.rps)),
            perDirect: Number((median(s.map((x) => x.rps)) / median(direct.map((x) => x.rps))).toFixed(2)),
            p50Ms: Number(median(s.map((x) => x.p50)).toFixed(2)),
            p99Ms: Number(median(s.map((x) => x.p99)).toFixed(2)),
            p99Range: range(
              s.map((x) => x.p99),
              1
            ),
            p99AddedMs: t.direct ? undefined : Number(median(added).toFixed(2)),
            p99AddedRange: t.direct ? undefined : range(added, 1, (v) => signed(v, 1)),
            cpuUsPerRequest: cpu.length === 0 ? undefined : Number(median(cpu).toFixed(1)),
            cpuRange: cpu.length === 0 ? undefined : range(cpu, 1),
            userUsPerRequest: cpu.length === 0 ? undefined : Number(median(s.map((x) => x.userUs)).toFixed(1)),
            systemUsPerRequest: cpu.length === 0 ? undefined : Number(median(s.map((x) => x.systemUs)).toFixed(1))
          }
        })
        const b = rows.find((r) => r.target === berth?.name)
        const n = rows.find((r) => r.target === nginx1?.name)
        const comparison =
          b === undefined || n === undefined
            ? undefined
            : {
                berthPerNginx1: Number(median(ratios).toFixed(2)),
                berthPerNginx1Range: range(ratios, 2),
                berthP99AddedMs: b.p99AddedMs,
                berthP99AddedRange: b.p99AddedRange,
                nginx1P99AddedMs: n.p99AddedMs,
                nginx1P99AddedRange: n.p99AddedRange,
                met: median(ratios) >= 0.95 && b.p99AddedMs <= n.p99AddedMs + 0.5
              }
        cases.push({
          protocol: protocolName[protocol],
          client: client[protocol],
          connections: c,
          rows,
          comparison,
          berth: berth?.name,
          nginx: nginx1?.name,
          loadBefore,
          loadAfter
        })
      } catch (error) {
        const first = String(error instanceof Error ? error.message : error).split("\n")[0]
        say(`${protocolName[protocol]} c=${c}: failed, skipped: ${first}`)
        notes.push(`${protocolName[protocol]} c=${c}: failed (${first})`)
      }
    }
  }
} finally {
  for (const child of children) {
    child.stopping = true
    child.kill("SIGTERM")
  }
  await new Promise((r) => setTimeout(r, 300))
  rmSync(work, { recursive: true, force: true })
}

const machine = {
  node: process.version,
  cores,
  loadBefore: runLoadBefore,
  loadAfter: load(),
  date: today,
  nginx: nginxVersion,
  threads,
  durationS: duration,
  rounds,
  bodyBytes,
  nodeFlags: daemonFlags,
  command
}
if (options.json) {
  console.log(JSON.stringify({ machine, cases, notes }, null, 2))
} else {
  for (const k of cases) {
    console.log(
      `\n${k.protocol}, ${k.client} -c${k.connections} -t${threads}, ${bodyBytes}-byte bodies, ${rounds} × ${duration} s ` +
        `per target (medians over rounds); Node ${process.version}, ${cores} cores${nginxVersion === undefined ? "" : `, ${nginxVersion}`}\n`
    )
    console.log(
      "| target | requests/s | (range) | × direct | p50 ms | p99 ms | (range) | p99 added ms | (range) | CPU µs/request (user + sys) |"
    )
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (const r of k.rows) {
      const cpu =
        r.cpuUsPerRequest === undefined ? "" : `${r.cpuUsPerRequest} (${r.userUsPerRequest} + ${r.systemUsPerRequest})`
      console.log(
        `| ${r.target} | ${r.rps} | ${r.rpsRange} | ${r.perDirect.toFixed(2)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(
          2
        )} | ${r.p99Range} | ${r.p99AddedMs === undefined ? "" : signed(r.p99AddedMs)} | ${r.p99AddedRange ?? ""} | ${cpu} |`
      )
    }
  }
  for (const n of notes) console.log(`\n${n}`)
  console.log("")
  // one line per case, in the form docs/benchmarks.md uses
  for (const k of cases) {
    const m = k.comparison
    if (m === undefined) continue
    const b = k.rows.find((r) => r.target === k.berth)
    const n = k.rows.find((r) => r.target === k.nginx)
    console.log(
      `proxy ${k.protocol} c=${k.connections}: berth ${m.berthPerNginx1.toFixed(2)}× nginx (1 worker) in requests/s ` +
        `(median of ${rounds} rounds, range ${m.berthPerNginx1Range}); p99 added to direct's: berth ${signed(m.berthP99AddedMs)} ms ` +
        `(${m.berthP99AddedRange}), nginx ${signed(m.nginx1P99AddedMs)} ms (${m.nginx1P99AddedRange}); CPU µs/request: berth ` +
        `${b.cpuUsPerRequest} (${b.cpuRange}), nginx ${n.cpuUsPerRequest} (${n.cpuRange}); goal ≥ 0.95× and ≤ nginx + 0.5 ms: ` +
        `${m.met ? "met" : "not met"} · ${cores} cores, load ${k.loadBefore[0]} → ${k.loadAfter[0]}, ${today} · ${command}`
    )
  }
}
