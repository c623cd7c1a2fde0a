// Test hosts on one machine, shared by the cluster tests (test/cluster/hosts.ts) and bench/cluster.mjs: each host is a
// network namespace with its own loopback and one veth link into a test bridge, with a BERTH_HOME of its own; the
// cluster's PostgreSQL is a fresh database reached over its unix socket, which every namespace shares with the machine.
// Needs root and iproute2. `cleanup` removes everything made here, every process of every host first.
import { execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
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
 * @returns {{ hosts: Array<{ name: string, ns: string, address: string, home: string, link: string }>, url: string, base: string, cleanup: () => void }}
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
      // every process of the host goes before its namespace does
      made.push(() => killHome(home))
      ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
      ip("link", "set", link, "master", bridge, "up")
      ip("-n", ns, "addr", "add", `${address}/24`, "dev", "eth0")
      ip("-n", ns, "link", "set", "eth0", "up")
      ip("-n", ns, "link", "set", "lo", "up")
      hosts.push({ name, ns, address, home, link })
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
