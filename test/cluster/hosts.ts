/**
 * Test hosts for a cluster of berth daemons on one machine: each host is a network namespace with its own loopback
 * and one veth link into a test bridge (and, where cgroup v2 allows, a cgroup every process of it lives in), and runs
 * the built `berth` binary with a BERTH_HOME of its own — several machines, as far as berth can tell. The cluster's
 * PostgreSQL is reached over its unix socket, which every namespace shares with the machine. Needs root and iproute2;
 * everything made here (namespaces, links, cgroups, the database, every process of every host) is removed by
 * `cleanup`. And what the tests read of where a world runs (`placement`).
 */
import { execFileSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync } from "node:fs"
import { join } from "node:path"
import { markIn } from "../../src/domain/marks.js"
import { eventually, gitIn, isAlive, type RunResult, runBerth } from "../e2e/harness.js"
import {
  createHosts,
  freezeHost,
  freezeUnavailable,
  type HostSpec,
  hostsUnavailable,
  onHost,
  thawWatching
} from "./netns.mjs"

export { freezeHost, freezeUnavailable, hostsUnavailable, thawWatching }

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
      runBerth(args, cwd, spec.home, { via: onHost(spec, []), env, timeoutMs })
    const exec = (command: string, args: ReadonlyArray<string>) => {
      const [first, ...rest] = onHost(spec, [command, ...args])
      return execFileSync(first as string, rest, { encoding: "utf8" })
    }
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

/** A world as `berth status --json` lists it: what the cluster tests read of it. */
export interface StatusWorld {
  readonly name: string
  readonly project: string
  readonly slug: string
  readonly state: string
  readonly reason: string | null
  /** the machine that runs it, for another machine's world */
  readonly machine?: string
  readonly placement?: string
  readonly path: string
  readonly events: ReadonlyArray<{ readonly kind: string; readonly message: string; readonly at: number }>
  readonly services: ReadonlyArray<{ readonly name: string; readonly pid: number | null; readonly state: string }>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Where the worlds of a test's hosts run, as their `berth status` says: `berth` runs a command on a host (in the
 * folder the test gives it), `hosts` are the test's hosts once made (h1 the observer unless told), `service` the
 * service whose process is a world's copy.
 */
export const placement = (
  hosts: () => ReadonlyArray<Host>,
  berth: (h: Host, args: ReadonlyArray<string>) => Promise<RunResult>,
  service = "api"
) => {
  const first = () => hosts()[0] as Host
  const statusOf = async (h: Host): Promise<ReadonlyArray<StatusWorld>> => {
    const r = await berth(h, ["status", "--json"])
    if (r.code !== 0) throw new Error(`berth status on ${h.name}: ${r.stderr}`)
    return (JSON.parse(r.stdout) as { worlds: ReadonlyArray<StatusWorld> }).worlds
  }
  /** the pid of the world's service on `h`, where berth runs it there (null while it has none) */
  const pidOn = async (h: Host, name: string) =>
    (await statusOf(h))
      .find((w) => w.name === name && w.machine === undefined)
      ?.services.find((s) => s.name === service)?.pid ?? undefined
  /** the machine that runs `name` now (not `not`), as `observer` sees it, with the world */
  const runner = async (name: string, not?: string, timeoutMs = 30_000, observer: Host = first()) => {
    const running = (ws: ReadonlyArray<StatusWorld>) =>
      ws.find((x) => x.name === name && x.state === "running" && (x.machine ?? observer.name) !== not)
    const seen = await eventually(
      () => statusOf(observer),
      (ws) => running(ws) !== undefined,
      timeoutMs
    )
    const w = running(seen)
    if (w === undefined) {
      const listed = seen.filter((x) => x.name === name).map((x) => ({ ...x, services: undefined }))
      throw new Error(
        `world ${name} runs nowhere but on ${not ?? "-"} after ${timeoutMs} ms: ${JSON.stringify(listed)}`
      )
    }
    return { machine: w.machine ?? observer.name, world: w }
  }
  /**
   * The machine that runs `name` (not `not`) and the pid of its service there, once `observer` and the owner's own
   * status agree and the process lives: a machine that joins takes some shards over, so a world can be moving while a
   * test looks at it.
   */
  const placed = async (name: string, not?: string, timeoutMs = 30_000, observer: Host = first()) => {
    const until = Date.now() + timeoutMs
    let last: ReadonlyArray<StatusWorld> = []
    for (;;) {
      last = await statusOf(observer)
      const w = last.find((x) => x.name === name && x.state === "running" && (x.machine ?? observer.name) !== not)
      if (w !== undefined) {
        const owner = hosts().find((h) => h.name === (w.machine ?? observer.name)) as Host
        const pid = await pidOn(owner, name)
        if (pid !== undefined && pid !== null && isAlive(pid)) return { machine: owner.name, owner, pid }
      }
      if (Date.now() > until) {
        const listed = last.filter((x) => x.name === name).map((x) => ({ ...x, events: undefined }))
        throw new Error(`world ${name} runs nowhere but on ${not ?? "-"}: ${JSON.stringify(listed)}`)
      }
      await sleep(250)
    }
  }
  /** the world's placement once it has held still for a few seconds (same machine, same process) */
  const steady = async (name: string, timeoutMs = 60_000) => {
    const until = Date.now() + timeoutMs
    let last = await placed(name)
    for (;;) {
      await sleep(3_000)
      const now = await placed(name)
      if (now.machine === last.machine && now.pid === last.pid) return now
      if (Date.now() > until) throw new Error(`world ${name} keeps moving: ${last.machine} then ${now.machine}`)
      last = now
    }
  }
  return { statusOf, pidOn, runner, placed, steady }
}

/** The pids of every live process of world `name` that `home`'s berth runs (marked by it, working in its checkout). */
export const copyPids = (name: string, home: string): ReadonlyArray<number> => {
  const found: Array<number> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (!readlinkSync(`/proc/${entry}/cwd`).endsWith(`/${name}`)) continue
      if (markIn(readFileSync(`/proc/${entry}/environ`, "latin1"))?.home === home) found.push(Number(entry))
    } catch {
      // gone, or not ours to read
    }
  }
  return found
}

/**
 * The test's repository with `branches` made and pushed, beside `main`, to a bare origin in the network's folder (a
 * world that runs anywhere is cloned from there), and the folder the other hosts run berth in.
 */
export const pushedToOrigin = (net: TestNetwork, repoDir: string, branches: ReadonlyArray<string>): string => {
  const origin = join(net.base, "origin.git")
  git(net.base, "init", "-q", "--bare", origin)
  git(repoDir, "remote", "add", "origin", origin)
  for (const branch of branches) git(repoDir, "branch", branch)
  git(repoDir, "push", "-q", "origin", "main", ...branches)
  const elsewhere = join(net.base, "elsewhere")
  mkdirSync(elsewhere, { recursive: true })
  return elsewhere
}

/** h1 makes the cluster in the network's database; h2 and h3 join it. */
export const formCluster = async (
  net: TestNetwork,
  berth: (h: Host, args: ReadonlyArray<string>) => Promise<RunResult>
): Promise<void> => {
  const [first, ...rest] = net.hosts as ReadonlyArray<Host>
  const init = await berth(first!, ["cluster", "init", net.url, "--name", first!.name, "--address", first!.address])
  if (init.code !== 0) throw new Error(`cluster init on ${first!.name}: ${init.stderr}`)
  for (const h of rest) {
    const r = await berth(h, ["cluster", "join", net.url, "--name", h.name, "--address", h.address])
    if (r.code !== 0) throw new Error(`cluster join on ${h.name}: ${r.stderr}`)
  }
}
