// What starting a world's services costs when the daemon forks them itself, against asking a small helper process to
// fork them: the candidate issue 26 names for the daemon's CPU per warm up ("measure before choosing").
// Usage: node bench/spawn.mjs [--runs N] [--services N] [--rss-mb MB] [--json]
//
// This process grows to --rss-mb (default 135, the daemon's resident size with a few worlds up) with a heap of small
// objects, as the daemon's is, then in each run starts --services `sh -c "node server.js"` services the way berth's
// Processes does (detached, output appended to a log file), in turn:
// - direct: forked here, one after the other (node's spawn forks this process and waits until the child has exec'd)
// - helper: the same requests written to a small node process over a pipe, which forks them and answers each pid
// and reads: how long this process was busy starting them (blocked in spawn, or writing requests and reading
// answers), the CPU it used for that, the helper's CPU, and the time until every service accepts a connection.
import { spawn } from "node:child_process"
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { parseArgs } from "node:util"
import { answers, freePort } from "./fixtures.mjs"
import { machineNow, median, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    runs: { type: "string", default: "15" },
    services: { type: "string", default: "3" },
    "rss-mb": { type: "string", default: "135" },
    json: { type: "boolean" },
    role: { type: "string" }
  }
})

/** This process's CPU so far (user + system), ms. */
const cpuNow = () => {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1000
}

/** One service as berth starts it: its own session and group, stdout and stderr appended to its log. */
const startService = (dir, port) => {
  const log = openSync(join(dir, `service-${port}.log`), "a", 0o600)
  try {
    const child = spawn("/bin/sh", ["-c", "node server.js"], {
      cwd: dir,
      env: { ...process.env, PORT: String(port) },
      detached: true,
      stdio: ["ignore", log, log]
    })
    child.unref()
    return child.pid
  } finally {
    closeSync(log)
  }
}

if (options.role === "helper") {
  // the helper: one request per line (`<dir> <port>`), one pid per line back, and its CPU when asked
  const lines = createInterface({ input: process.stdin })
  lines.on("line", (line) => {
    if (line === "cpu") {
      process.stdout.write(`${cpuNow()}\n`)
      return
    }
    const [dir, port] = line.split(" ")
    process.stdout.write(`${startService(dir, Number(port))}\n`)
  })
} else {
  const runs = Number(options.runs)
  const count = Number(options.services)
  const rssMb = Number(options["rss-mb"])
  if (!(runs >= 1 && count >= 1 && rssMb > 0)) {
    console.error("--runs and --services take a count of at least 1, --rss-mb a size in MiB")
    process.exit(2)
  }
  const machineBefore = machineNow()
  const dir = mkdtempSync(join(tmpdir(), "berth-bench-spawn-"))
  writeFileSync(
    join(dir, "server.js"),
    'require("node:http").createServer((q, s) => s.end("ok")).listen(Number(process.env.PORT), "127.0.0.1")\n'
  )

  // the daemon's size, held in many small objects (a fork copies the page tables of all of it)
  const ballast = []
  while (process.memoryUsage().rss < rssMb * 1024 * 1024) {
    for (let i = 0; i < 10_000; i++) ballast.push({ id: ballast.length, name: `object ${ballast.length}`, tags: [i] })
  }

  const helper = spawn(process.execPath, [new URL(import.meta.url).pathname, "--role", "helper"], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  const replies = createInterface({ input: helper.stdout })
  const waiting = []
  replies.on("line", (line) => waiting.shift()?.(line))
  const ask = (line) =>
    new Promise((resolve) => {
      waiting.push(resolve)
      helper.stdin.write(`${line}\n`)
    })
  const helperCpu = async () => Number(await ask("cpu"))

  const stopAll = (pids) => {
    for (const pid of pids) {
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        // already gone
      }
    }
  }

  const samples = { direct: [], helper: [] }
  const one = async (mode) => {
    const ports = []
    for (let i = 0; i < count; i++) ports.push(await freePort())
    const helperBefore = mode === "helper" ? await helperCpu() : 0
    const cpuBefore = cpuNow()
    const start = process.hrtime.bigint()
    let pids
    if (mode === "direct") pids = ports.map((port) => startService(dir, port))
    else pids = (await Promise.all(ports.map((port) => ask(`${dir} ${port}`)))).map(Number)
    const busyMs = Number(process.hrtime.bigint() - start) / 1e6
    const cpuMs = cpuNow() - cpuBefore
    await Promise.all(ports.map(answers))
    const readyMs = Number(process.hrtime.bigint() - start) / 1e6
    const helperMs = mode === "helper" ? (await helperCpu()) - helperBefore : 0
    stopAll(pids)
    samples[mode].push({ busyMs, cpuMs, helperMs, readyMs })
    await new Promise((resolve) => setTimeout(resolve, 300))
  }

  for (let run = 0; run < runs + 1; run++) {
    // the first run of each warms both paths up and is not counted
    const order = run % 2 === 0 ? ["direct", "helper"] : ["helper", "direct"]
    for (const mode of order) await one(mode)
    if (run === 0) {
      samples.direct.length = 0
      samples.helper.length = 0
    }
  }
  helper.stdin.end()
  rmSync(dir, { recursive: true, force: true })

  const rss = (process.memoryUsage().rss / 1024 / 1024).toFixed(0)
  const field = (mode, key) => samples[mode].map((s) => s[key])
  if (options.json) {
    console.log(JSON.stringify({ rssMb: Number(rss), samples, before: machineBefore, after: machineNow() }, null, 2))
  } else {
    console.log(
      `${runs} runs of ${count} services each, direct and through the helper in turn; this process ${rss} MiB\n`
    )
    console.log("| | direct | helper |")
    console.log("| --- | ---: | ---: |")
    const row = (label, key) =>
      console.log(
        `| ${label} | ${median(field("direct", key)).toFixed(1)} | ${median(field("helper", key)).toFixed(1)} |`
      )
    row("ms this process is busy starting them (median)", "busyMs")
    row("its CPU ms for that", "cpuMs")
    row("the helper's CPU ms", "helperMs")
    row("ms until every service answers", "readyMs")
    console.log()
    for (const mode of ["direct", "helper"]) {
      console.log(
        summaryLine({
          what: `${mode}: CPU to start ${count} services`,
          values: field(mode, "cpuMs").map((v, i) => v + field(mode, "helperMs")[i]),
          unit: "ms",
          digits: 1,
          before: machineBefore
        })
      )
      console.log(
        summaryLine({
          what: `${mode}: until every service answers`,
          values: field(mode, "readyMs"),
          unit: "ms",
          before: machineBefore
        })
      )
    }
  }
}
