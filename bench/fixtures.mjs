// Shared by the benchmark scripts: a committed git repository to run berth in, a free port, the floor of a warm `up`
// (servers started directly until each answers), and the daemon's Node flags.
import { execFileSync, spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import * as net from "node:net"

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
