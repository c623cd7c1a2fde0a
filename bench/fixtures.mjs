// Shared by the benchmark scripts: a committed git repository to run berth in, a free port, the floor of a warm `up`
// (servers started directly until each answers), and the daemon's Node flags.
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { join } from "node:path"

/** `git init` in `dir` and commit what is there, as berth's benchmarks need a repository to make worktrees of. */
export const commitRepo = (dir, env = process.env) => {
  const git = (...args) =>
    execFileSync("git", args, {
      cwd: dir,
      env: {
        ...env,
        GIT_AUTHOR_NAME: "b",
        GIT_AUTHOR_EMAIL: "b@b",
        GIT_COMMITTER_NAME: "b",
        GIT_COMMITTER_EMAIL: "b@b"
      }
    })
  git("init", "-q", "-b", "main")
  git("add", "-A")
  git("commit", "-qm", "bench")
}

/** Runs `cli` in `cwd` with `env` and answers its stdout; throws with its stderr when it fails. */
export const berthRunner =
  (cli, cwd, env) =>
  (...args) => {
    const r = spawnSync(cli, args, { cwd, env, encoding: "utf8" })
    if (r.status !== 0) throw new Error(`berth ${args.join(" ")} failed: ${r.stderr}`)
    return r.stdout
  }

/**
 * The idle benches' project, committed in `repo`: `services` small node HTTP services, each with a url and an http
 * health check, so the proxy routes them and berth probes them.
 */
export const swarmRepo = (repo, services, env) => {
  mkdirSync(repo, { recursive: true })
  writeFileSync(
    join(repo, "server.mjs"),
    `import { createServer } from "node:http"
createServer((req, res) => res.end("ok")).listen(Number(process.env.PORT), "127.0.0.1")
`
  )
  writeFileSync(
    join(repo, "berth.toml"),
    services.map((s) => `[services.${s}]\ncmd = "node server.mjs"\nurl = "${s}"\nhealth = { http = "/" }\n`).join("\n")
  )
  commitRepo(repo, env)
}

/** Brings worlds w`from` … w`to - 1` up: every one asked at once, then each waited for in turn. */
export const upWorlds = (berth, from, to) => {
  for (let i = from; i < to; i++) berth("up", `w${i}`, "--no-wait")
  for (let i = from; i < to; i++) berth("up", `w${i}`)
}

/** A port nothing listens on now, chosen by the system (fixed ones collide with another run on a shared machine). */
export const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })

/** Resolves once something accepts a connection on 127.0.0.1:`port` (tried every 5 ms). */
export const answers = (port) =>
  new Promise((resolve) => {
    const attempt = () => {
      const socket = net.connect(port, "127.0.0.1")
      socket.once("connect", () => {
        socket.destroy()
        resolve()
      })
      socket.once("error", () => {
        socket.destroy()
        setTimeout(attempt, 5)
      })
    }
    attempt()
  })

/**
 * What a warm `up` of three `node server.js` services cannot beat: the same servers started directly, in parallel,
 * until each answers; milliseconds. The servers are killed afterwards.
 */
export const floor = async (repo, env) => {
  const ports = [await freePort(), await freePort(), await freePort()]
  const start = process.hrtime.bigint()
  const children = ports.map((port) =>
    spawn(process.execPath, ["server.js"], { cwd: repo, env: { ...env, PORT: String(port) }, stdio: "ignore" })
  )
  await Promise.all(ports.map(answers))
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once("exit", resolve)
          child.kill("SIGKILL")
        })
    )
  )
  return ms
}

/**
 * The Node flags the daemon runs with, read from where it takes them (DAEMON_NODE_FLAGS in src/daemon/client.ts), so
 * that a bench running berth's proxy or daemon by hand runs it as the daemon does.
 */
export const daemonNodeFlags = () => {
  const source = readFileSync(new URL("../src/daemon/client.ts", import.meta.url), "utf8")
  const list = /DAEMON_NODE_FLAGS: ReadonlyArray<string> = \[([^\]]*)\]/.exec(source)
  if (list === null) throw new Error("bench: DAEMON_NODE_FLAGS not found in src/daemon/client.ts")
  return [...list[1].matchAll(/"([^"]+)"/g)].map((m) => m[1])
}

/**
 * Starts the daemon of `home` here and waits until it answers: with the daemon's own Node flags, or `nodeFlags` (a
 * string, as `--node-flags=` gives it) to weigh others; under V8's profiler when `dir` is given (`--cpu-prof`: its
 * profile is written there when it stops).
 */
export const startDaemonHere = async ({ cli, cwd, home, env, dir, nodeFlags }) => {
  mkdirSync(home, { recursive: true, mode: 0o700 })
  const flags = nodeFlags === undefined ? daemonNodeFlags() : nodeFlags.split(/\s+/).filter(Boolean)
  if (dir !== undefined) {
    mkdirSync(dir, { recursive: true })
    flags.push("--cpu-prof", `--cpu-prof-dir=${dir}`)
  }
  const daemon = spawn(process.execPath, [...flags, join(cli, "..", "berth.cjs"), "daemon", "run"], {
    cwd: home,
    env,
    detached: true,
    stdio: "ignore"
  })
  daemon.unref()
  for (let i = 0; i < 100 && spawnSync(cli, ["daemon", "status"], { cwd, env }).status !== 0; i++)
    await new Promise((r) => setTimeout(r, 100))
}

/** Microseconds on the monotonic clock V8's profile samples are timed by. */
export const monotonicUs = () => Number(process.hrtime.bigint() / 1000n)

/**
 * The functions that took the most of a profiled daemon's CPU within the given windows (`{ from, to }` in
 * `monotonicUs`), from the profile `startProfiledDaemon` had it write once stopped; undefined until it is there.
 */
export const profileSummary = (dir, pid, windows, top = 30) => {
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile") && f.split(".").includes(String(pid)))
  if (file === undefined) return undefined
  const profile = JSON.parse(readFileSync(join(dir, file), "utf8"))
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map()
  let t = profile.startTime
  let counted = 0
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i]
    if (!windows.some((w) => t >= w.from && t <= w.to)) return
    const { functionName, url, lineNumber } = byId.get(id).callFrame
    const where = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`
    self.set(where, (self.get(where) ?? 0) + 1)
    counted++
  })
  return {
    file: join(dir, file),
    samples: counted,
    top: [...self]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([where, n]) => `${((n / counted) * 100).toFixed(1)} % ${where}`)
  }
}

/** Waits (up to 10 s) for a stopped daemon's profile, and summarizes it. */
export const awaitProfile = async (dir, pid, windows) => {
  for (let i = 0; i < 50; i++) {
    const summary = profileSummary(dir, pid, windows)
    if (summary !== undefined) return summary
    await new Promise((r) => setTimeout(r, 200))
  }
  return undefined
}

/**
 * CPU time (user + system, ms) a process has used so far, every thread of it: from each thread's
 * `/proc/<pid>/task/<tid>/schedstat` (nanoseconds), or `/proc/<pid>/stat` in clock ticks where there is none.
 */
export const cpuMs = (pid) => {
  try {
    let ns = 0
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0])
    }
    return ns / 1e6
  } catch {
    ticksPerSecond ??= Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
  }
}
let ticksPerSecond

/**
 * CPU time (ms) of a process's main thread alone (the one running its JavaScript), from its schedstat: the rest of
 * `cpuMs` is V8's worker threads (optimizing compiles, the garbage collector's helpers) and libuv's thread pool.
 * NaN where there is no schedstat.
 */
export const mainThreadCpuMs = (pid) => {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6
  } catch {
    return Number.NaN
  }
}
