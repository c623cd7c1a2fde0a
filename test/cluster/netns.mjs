// Test hosts on one machine, shared by the cluster tests (test/cluster/hosts.ts) and bench/cluster.mjs: each host is a
// network namespace with its own loopback and one veth link into a test bridge, with a BERTH_HOME of its own, and,
// where cgroup v2 allows, a cgroup of its own that every process started on the host lives in (so that the whole
// machine can be frozen at once, as a machine that sleeps is); the cluster's PostgreSQL is a fresh database reached
// over its unix socket, which every namespace shares with the machine. Needs root and iproute2. `cleanup` removes
// everything made here, every process of every host first.
import { execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const PG_SOCKET_DIR = "/var/run/postgresql"

/** Why hosts cannot be made here, or undefined when they can. */
export const hostsUnavailable = () => {
  if (process.getuid?.() !== 0) return "network namespaces need root"
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" })
  } catch {
    return "iproute2's `ip` is not installed (apt-get install iproute2)"
  }
  if (!existsSync(join(PG_SOCKET_DIR, ".s.PGSQL.5432"))) return `no PostgreSQL socket in ${PG_SOCKET_DIR}`
  return undefined
}

const ip = (...args) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] })
const psql = (sql) =>
  execFileSync("psql", ["-h", PG_SOCKET_DIR, "-U", "postgres", "-d", "postgres", "-qAtc", sql], { encoding: "utf8" })

/** SIGKILLs every process whose environment names this BERTH_HOME: its daemon and everything that daemon started. */
export const killHome = (home) => {
  const marker = `BERTH_HOME=${home}\u0000`
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (`${readFileSync(`/proc/${entry}/environ`, "latin1")}\u0000`.includes(marker))
        process.kill(Number(entry), "SIGKILL")
    } catch {
      // gone, or not ours
    }
  }
}

/**
 * Where cgroup v2 is mounted and a cgroup can be made (cgroup.freeze needs Linux 5.2): the unified hierarchy of a
 * hybrid mount first, else /sys/fs/cgroup itself; undefined when there is none.
 */
const cgroupRoot = () => {
  for (const root of ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    if (existsSync(join(root, "cgroup.controllers"))) return root
  }
  return undefined
}

/** Why a host cannot be frozen whole here, or undefined when it can (cgroup v2's freezer). */
export const freezeUnavailable = () =>
  cgroupRoot() === undefined ? "no cgroup v2 here to freeze a host's processes in at once" : undefined

/** Makes the cgroup `name` for a host, or answers undefined when none can be made here (no cgroup v2, no freezer). */
const makeCgroup = (name) => {
  const root = cgroupRoot()
  if (root === undefined) return undefined
  const path = join(root, name)
  try {
    mkdirSync(path)
  } catch {
    return undefined
  }
  if (existsSync(join(path, "cgroup.freeze"))) return path
  rmdirSync(path)
  return undefined
}

/** Ends every process of a host's cgroup and removes it. */
const removeCgroup = (path) => {
  writeFileSync(join(path, "cgroup.freeze"), "0")
  if (existsSync(join(path, "cgroup.kill"))) writeFileSync(join(path, "cgroup.kill"), "1")
  else
    for (const pid of readFileSync(join(path, "cgroup.procs"), "utf8").split("\n").filter(Boolean))
      process.kill(Number(pid), "SIGKILL")
  const until = Date.now() + 5_000
  while (/populated 1/.test(readFileSync(join(path, "cgroup.events"), "utf8")) && Date.now() < until) {
    execFileSync("sleep", ["0.02"])
  }
  rmdirSync(path)
}

/**
 * The command line that runs `argv` on `host`: in its network namespace and, when it has one, in its cgroup (which
 * everything the command starts inherits: the daemon, its watchdog and holder, the worlds' services).
 * @param {{ ns: string, cgroup?: string }} host
 * @param {ReadonlyArray<string>} argv
 * @returns {Array<string>}
 */
export const onHost = (host, argv) => {
  const inNamespace = ["ip", "netns", "exec", host.ns, ...argv]
  if (host.cgroup === undefined) return inNamespace
  return ["/bin/sh", "-c", `echo $$ > ${host.cgroup}/cgroup.procs && exec "$@"`, "sh", ...inNamespace]
}

/**
 * Freezes (`true`) or thaws every process of a host at once, as a machine that sleeps and wakes (cgroup v2's freezer:
 * the processes are stopped where they are, and neither see nor can catch it).
 * @param {{ cgroup?: string }} host
 * @param {boolean} frozen
 */
export const freezeHost = (host, frozen) => {
  if (host.cgroup === undefined) throw new Error("this host has no cgroup to freeze (no cgroup v2 here)")
  writeFileSync(join(host.cgroup, "cgroup.freeze"), frozen ? "1" : "0")
}

/**
 * Thaws a frozen host and watches `pids` (of its processes) end: a process of its own, so that nothing the caller does
 * delays it (real-time scheduled where `chrt` allows, so that neither do the processes that wake), thaws the host's
 * cgroup and looks at each pid every millisecond until every one has ended (gone, or a zombie: it runs no more) or
 * `timeoutMs` passed. Answers when it thawed (epoch ms, read just before) and how long after that each pid ended (ms;
 * null for one that still ran).
 * @param {{ cgroup?: string }} host
 * @param {ReadonlyArray<number>} pids
 * @returns {{ at: number, ended: Array<number | null> }}
 */
export const thawWatching = (host, pids, timeoutMs = 5_000) => {
  if (host.cgroup === undefined) throw new Error("this host has no cgroup to thaw (no cgroup v2 here)")
  const script = `
const fs = require("node:fs")
const pids = ${JSON.stringify(pids)}
const runs = (pid) => {
  try {
    const stat = fs.readFileSync("/proc/" + pid + "/stat", "latin1")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    return state !== "Z" && state !== "X"
  } catch { return false }
}
const ended = new Map()
const at = Date.now()
const t0 = process.hrtime.bigint()
fs.writeFileSync(${JSON.stringify(join(host.cgroup, "cgroup.freeze"))}, "0")
const look = () => {
  const ms = Number(process.hrtime.bigint() - t0) / 1e6
  for (const pid of pids) if (!ended.has(pid) && !runs(pid)) ended.set(pid, Math.round(ms * 10) / 10)
  if (ended.size === pids.length || ms > ${timeoutMs}) {
    console.log(JSON.stringify({ at, ended: pids.map((p) => ended.get(p) ?? null) }))
    process.exit(0)
  }
  setTimeout(look, 1)
}
look()
`
  const node = [process.execPath, "-e", script]
  let realtime = true
  try {
    execFileSync("chrt", ["-f", "50", "true"], { stdio: "ignore" })
  } catch {
    realtime = false
  }
  const [command, ...args] = realtime ? ["chrt", "-f", "50", ...node] : node
  return JSON.parse(execFileSync(command, args, { encoding: "utf8" }))
}

/**
 * A TCP door to PostgreSQL's unix socket at `host:port` (a process of its own, so that nothing the test process does
 * stalls it): the hosts reach the database over the bridge, as machines reach a shared server, so that a host whose
 * link goes down is cut off from the database too. Returns its stop.
 */
const forwardDatabase = (host, port) => {
  const script = `
const net = require("node:net")
net.createServer((client) => {
  const server = net.connect(${JSON.stringify(join(PG_SOCKET_DIR, ".s.PGSQL.5432"))})
  const end = () => { client.destroy(); server.destroy() }
  for (const s of [client, server]) { s.on("error", end); s.on("close", end) }
  client.pipe(server)
  server.pipe(client)
}).listen(${port}, ${JSON.stringify(host)})`
  const child = spawn(process.execPath, ["-e", script], { stdio: "ignore", detached: true })
  child.unref()
  const until = Date.now() + 10_000
  while (execFileSync("ss", ["-Hltn", `src ${host}:${port}`], { encoding: "utf8" }).trim() === "") {
    if (Date.now() > until) throw new Error(`the database's door on ${host}:${port} did not open`)
    execFileSync("sleep", ["0.05"])
  }
  return () => child.kill("SIGKILL")
}

/**
 * `count` hosts `h1…hN` on a new bridge, at 10.77.<random>.11…; and a new database for their cluster, reached over its
 * unix socket, or with `{ network: true }` over the bridge (at 10.77.<random>.1), so that a link taken down cuts a host
 * off from the database as well as from the other hosts.
 * @param {number} count
 * @param {{ network?: boolean }} [options]
 * @typedef {{ name: string, ns: string, address: string, home: string, link: string, cgroup?: string }} Host
 * @returns {{ hosts: Array<Host>, url: string, base: string, cleanup: () => void }}
 */
export const createHosts = (count, options = {}) => {
  const id = randomBytes(3).toString("hex")
  const subnet = `10.77.${randomBytes(1)[0] ?? 0}`
  const bridge = `bb${id}`
  const database = `berth_cluster_test_${id}`
  const base = mkdtempSync(join(tmpdir(), "berth-cluster-"))
  const made = []
  const cleanup = () => {
    for (const undo of made.reverse()) {
      try {
        undo()
      } catch {
        // already gone
      }
    }
    rmSync(base, { recursive: true, force: true })
  }
  try {
    ip("link", "add", bridge, "type", "bridge")
    made.push(() => ip("link", "del", bridge))
    ip("link", "set", bridge, "up")
    psql(`CREATE DATABASE ${database}`)
    made.push(() => psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
    const hosts = []
    for (let i = 1; i <= count; i++) {
      const name = `h${i}`
      const ns = `bh${id}${i}`
      const link = `bv${id}${i}`
      const address = `${subnet}.${10 + i}`
      const home = join(base, name, "home")
      mkdirSync(home, { recursive: true })
      ip("netns", "add", ns)
      made.push(() => ip("netns", "del", ns))
      const cgroup = makeCgroup(`berth-test-${id}${i}`)
      if (cgroup !== undefined) made.push(() => removeCgroup(cgroup))
      // every process of the host goes before its namespace and its cgroup do
      made.push(() => killHome(home))
      ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
      ip("link", "set", link, "master", bridge, "up")
      ip("-n", ns, "addr", "add", `${address}/24`, "dev", "eth0")
      ip("-n", ns, "link", "set", "eth0", "up")
      ip("-n", ns, "link", "set", "lo", "up")
      hosts.push({ name, ns, address, home, link, ...(cgroup === undefined ? {} : { cgroup }) })
    }
    if (options.network !== true) {
      return { hosts, url: `postgres://postgres@/${database}?host=${PG_SOCKET_DIR}`, base, cleanup }
    }
    const gateway = `${subnet}.1`
    ip("addr", "add", `${gateway}/24`, "dev", bridge)
    const port = 20_000 + (randomBytes(2).readUInt16BE(0) % 20_000)
    made.push(forwardDatabase(gateway, port))
    return { hosts, url: `postgres://postgres@${gateway}:${port}/${database}`, base, cleanup }
  } catch (e) {
    cleanup()
    throw e
  }
}
