// Requests/s and latency through berth's proxy next to the same requests sent directly, through nginx and through
// caddy (when installed), all in one run against one node backend. Needs wrk; nginx and caddy are optional.
// Usage: node bench/proxy.mjs [--duration S] [--rounds N] [--connections N] [--threads N] [--body BYTES]
//                             [--nginx-workers N|auto] [--json]
//
// - direct: wrk → the backend (a node:http server answering GET with a 1 KiB body)
// - berth: wrk → berth's proxy (plain HTTP, its fast path) → the backend; the proxy runs in its own process, bundled
//   from src/ with esbuild as the daemon would run it
// - berth (node:http path): the same proxy with the fast path off: what every HTTPS request and the rare unusual
//   plain request take
// - nginx: a temporary prefix and config as this user, `daemon off`, upstream keep-alive, the same X-Forwarded-*
// - caddy: `reverse_proxy`, when `caddy` is on PATH
// Every target gets a warm-up run, then `--rounds` measured runs, the order rotating each round; the table shows
// medians. wrk's latency percentiles come from `--latency`.
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
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
    "nginx-workers": { type: "string", default: "auto" },
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

// berth's proxy, bundled from the sources the daemon uses
const { build } = await import("esbuild")
writeFileSync(
  join(work, "proxy-entry.ts"),
  `import * as Effect from "effect/Effect"
import { makeRouteTable } from ${JSON.stringify(join(root, "src/domain/routes.ts"))}
import { makeProxy } from ${JSON.stringify(join(root, "src/services/proxy/Proxy.ts"))}
const [port, backend, mode] = process.argv.slice(2)
const routes = makeRouteTable([{ project: "demo", world: "w1", service: "web", worldState: "running",
  serviceState: "healthy", port: Number(backend), ready: true }])
Effect.runFork(Effect.scoped(Effect.andThen(
  makeProxy({ http: { port: Number(port), hosts: ["127.0.0.1"] }, routes, fastPath: mode === "fast" }),
  Effect.never)))
`
)
await build({
  entryPoints: [join(work, "proxy-entry.ts")],
  outfile: join(work, "proxy.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  nodePaths: [join(root, "node_modules")],
  logLevel: "error"
})

const targets = [{ name: "direct", port: backendPort, version: `node ${process.version}` }]
for (const [name, mode] of [
  ["berth", "fast"],
  ["berth (node:http path)", "slow"]
]) {
  const port = await freePort()
  start(process.execPath, [join(work, "proxy.mjs"), String(port), String(backendPort), mode], name)
  targets.push({ name, port, version: "" })
}

const notes = []
if (has("nginx")) {
  const port = await freePort()
  const prefix = join(work, "nginx")
  mkdirSync(join(prefix, "logs"), { recursive: true })
  const isRoot = process.getuid?.() === 0
  writeFileSync(
    join(prefix, "nginx.conf"),
    `${isRoot ? "user root;\n" : ""}worker_processes ${options["nginx-workers"]};
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
  start("nginx", ["-p", prefix, "-c", join(prefix, "nginx.conf"), "-e", join(prefix, "logs", "error.log")], "nginx")
  targets.push({ name: `nginx (${options["nginx-workers"]} workers)`, port, version: version.trim() })
} else {
  notes.push("nginx: not installed, skipped")
}
if (has("caddy")) {
  const port = await freePort()
  const file = join(work, "Caddyfile")
  writeFileSync(
    file,
    `{\n  admin off\n  auto_https off\n}\nhttp://:${port} {\n  bind 127.0.0.1\n  reverse_proxy 127.0.0.1:${backendPort}\n}\n`
  )
  start("caddy", ["run", "--config", file, "--adapter", "caddyfile"], "caddy")
  targets.push({ name: "caddy", port, version: "" })
} else {
  notes.push("caddy: not installed, skipped")
}

const toMs = (value, unit) => Number(value) * ({ us: 0.001, ms: 1, s: 1000 }[unit] ?? Number.NaN)

const wrk = (port, seconds) => {
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
  return { rps, p50: percentile(50), p99: percentile(99) }
}

try {
  for (const t of targets) await waitForPort(t.port)
  for (const t of targets) wrk(t.port, 2)
  const samples = new Map(targets.map((t) => [t.name, []]))
  for (let r = 0; r < rounds; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length])
    for (const t of order) samples.get(t.name).push(wrk(t.port, duration))
  }
  const summary = targets.map((t) => {
    const s = samples.get(t.name)
    return {
      target: t.name,
      rps: Math.round(median(s.map((x) => x.rps))),
      p50Ms: Number(median(s.map((x) => x.p50)).toFixed(2)),
      p99Ms: Number(median(s.map((x) => x.p99)).toFixed(2))
    }
  })
  const direct = summary[0]
  for (const row of summary) {
    row.ratio = Number((row.rps / direct.rps).toFixed(2))
    row.p99AddedMs = Number((row.p99Ms - direct.p99Ms).toFixed(2))
  }
  const info = {
    node: process.version,
    cpus: cpus().length,
    connections,
    threads,
    durationS: duration,
    rounds,
    bodyBytes,
    nginx: targets.find((t) => t.name.startsWith("nginx"))?.version
  }
  if (options.json) {
    console.log(JSON.stringify({ ...info, results: summary, notes }, null, 2))
  } else {
    console.log(
      `wrk -t${threads} -c${connections}, ${bodyBytes}-byte bodies, ${rounds} × ${duration} s per target (medians); ` +
        `Node ${process.version}, ${info.cpus} CPUs${info.nginx === undefined ? "" : `, ${info.nginx}`}\n`
    )
    console.log("| target | requests/s | × direct | p50 ms | p99 ms | p99 added ms |")
    console.log("| --- | ---: | ---: | ---: | ---: | ---: |")
    for (const r of summary) {
      console.log(
        `| ${r.target} | ${r.rps} | ${r.ratio.toFixed(2)} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${
          r === direct ? "" : r.p99AddedMs.toFixed(2)
        } |`
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
