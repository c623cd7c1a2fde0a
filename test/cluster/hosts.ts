/**
 * Test hosts for a cluster of berth daemons on one machine: each host is a network namespace with its own loopback
 * and one veth link into a test bridge, and runs the built `berth` binary with a BERTH_HOME of its own — several
 * machines, as far as berth can tell. The cluster's PostgreSQL is reached over its unix socket, which every namespace
 * shares with the machine. Needs root and iproute2; everything made here (namespaces, links, the database, every
 * process of every host) is removed by `cleanup`.
 */
import { execFileSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync } from "node:fs"
import { join } from "node:path"
import { markIn } from "../../src/domain/marks.js"
import { gitIn, isAlive, type RunResult, runBerth } from "../e2e/harness.js"
import { createHosts, type HostSpec, hostsUnavailable } from "./netns.mjs"

export { hostsUnavailable }

/** The project every test host's checkout holds: one service with a route and a health check. */
export const shop = `
[project]
name = "shop"

[services.api]
cmd = "node server.mjs"
url = "api"
health = { http = "/healthz" }
`

export interface Host extends HostSpec {
  /** runs `berth args` on this host, in `cwd` */
  readonly run: (cwd: string, args: ReadonlyArray<string>, timeoutMs?: number) => Promise<RunResult>
  /** runs any command on this host */
  readonly exec: (command: string, args: ReadonlyArray<string>) => string
}

export interface TestNetwork {
  readonly hosts: ReadonlyArray<Host>
  /** the cluster's database, as every host reaches it */
  readonly url: string
  readonly base: string
  readonly cleanup: () => void
}

/** `options.network`: the hosts reach the database over the bridge (a link taken down cuts a host off from it too). */
export const testNetwork = (
  count: number,
  env: Readonly<Record<string, string>> = {},
  options: { readonly network?: boolean } = {}
): TestNetwork => {
  const made = createHosts(count, options)
  const hosts = made.hosts.map((spec): Host => {
    const run = (cwd: string, args: ReadonlyArray<string>, timeoutMs = 30_000) =>
      runBerth(args, cwd, spec.home, { via: ["ip", "netns", "exec", spec.ns], env, timeoutMs })
    const exec = (command: string, args: ReadonlyArray<string>) =>
      execFileSync("ip", ["netns", "exec", spec.ns, command, ...args], { encoding: "utf8" })
    return { ...spec, run, exec }
  })
  // BERTH_TEST_LOGS=<folder> keeps each host's daemon.log there (as <folder>/<host>.log) when the hosts go
  const keep = process.env.BERTH_TEST_LOGS
  const cleanup = () => {
    if (keep !== undefined && keep !== "") {
      mkdirSync(keep, { recursive: true })
      for (const h of hosts) {
        const log = join(h.home, "daemon.log")
        if (existsSync(log)) copyFileSync(log, join(keep, `${h.name}.log`))
      }
    }
    made.cleanup()
  }
  return { hosts, url: made.url, base: made.base, cleanup }
}

/** Seconds since boot now, as /proc counts them (the clock process start times are given in). */
export const uptime = () => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0])

/** When `pid` started, in seconds since boot (clock ticks of 10 ms). */
export const startedAt = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]) / 100
}

/** Waits for `pid` to end, looking every 20 ms; answers when (seconds since boot), at most 20 ms late. */
export const endedAt = async (pid: number, timeoutMs: number) => {
  const until = Date.now() + timeoutMs
  while (isAlive(pid)) {
    if (Date.now() > until) throw new Error(`pid ${pid} still runs after ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
  return uptime()
}

/**
 * How many machines run a copy of world `name` at once, sampled every 50 ms until `stop` (which answers the most seen):
 * every live process with a berth mark of one of `homes` (the test's own machines: another test file may run a world
 * of the same name meanwhile) whose working directory is the world's checkout, counted by home.
 */
export const sampleCopies = (name: string, homes: ReadonlyArray<string>) => {
  let most = 0
  const look = () => {
    const seen = new Set<string>()
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue
      try {
        if (!readlinkSync(`/proc/${entry}/cwd`).endsWith(`/${name}`)) continue
        const mark = markIn(readFileSync(`/proc/${entry}/environ`, "latin1"))
        if (mark !== undefined && homes.includes(mark.home)) seen.add(mark.home)
      } catch {
        // gone, or not ours to read
      }
    }
    most = Math.max(most, seen.size)
  }
  const timer = setInterval(look, 50)
  look()
  return {
    stop: () => {
      clearInterval(timer)
      look()
      return most
    }
  }
}

/** git in `cwd`, as a fixed author: the end-to-end harness's own */
export const git = gitIn
