/**
 * Test hosts for a cluster of berth daemons on one machine: each host is a network namespace with its own loopback
 * and one veth link into a test bridge, and runs the built `berth` binary with a BERTH_HOME of its own — several
 * machines, as far as berth can tell. The cluster's PostgreSQL is reached over its unix socket, which every namespace
 * shares with the machine. Needs root and iproute2; everything made here (namespaces, links, the database, every
 * process of every host) is removed by `cleanup`.
 */
import { execFileSync, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { berthBin, killAll, type RunResult } from "../e2e/harness.js"

const PG_SOCKET_DIR = "/var/run/postgresql"

/** Why these tests cannot run here, or undefined when they can. */
export const hostsUnavailable = (): string | undefined => {
  if (process.getuid?.() !== 0) return "network namespaces need root"
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" })
  } catch {
    return "iproute2's `ip` is not installed (apt-get install iproute2)"
  }
  if (!existsSync(join(PG_SOCKET_DIR, ".s.PGSQL.5432"))) return `no PostgreSQL socket in ${PG_SOCKET_DIR}`
  return undefined
}

const ip = (...args: ReadonlyArray<string>) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] })
const psql = (sql: string) =>
  execFileSync("psql", ["-h", PG_SOCKET_DIR, "-U", "postgres", "-d", "postgres", "-qAtc", sql], { encoding: "utf8" })

export interface Host {
  readonly name: string
  /** the network namespace */
  readonly ns: string
  /** its address on the test bridge */
  readonly address: string
  readonly home: string
  /** the host's side of its link: `down` cuts the host off the network */
  readonly link: string
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

export const testNetwork = (count: number, env: Readonly<Record<string, string>> = {}): TestNetwork => {
  const id = randomBytes(3).toString("hex")
  const subnet = `10.77.${randomBytes(1)[0] ?? 0}`
  const bridge = `bb${id}`
  const database = `berth_cluster_test_${id}`
  const base = mkdtempSync(join(tmpdir(), "berth-cluster-"))
  const made: Array<() => void> = []
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
    const hosts: Array<Host> = []
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
      made.push(() => killAll(home))
      ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
      ip("link", "set", link, "master", bridge, "up")
      ip("-n", ns, "addr", "add", `${address}/24`, "dev", "eth0")
      ip("-n", ns, "link", "set", "eth0", "up")
      ip("-n", ns, "link", "set", "lo", "up")
      const run = (cwd: string, args: ReadonlyArray<string>, timeoutMs = 30_000) =>
        new Promise<RunResult>((resolve, reject) => {
          const child = spawn("ip", ["netns", "exec", ns, berthBin, ...args], {
            cwd,
            env: { ...process.env, BERTH_HOME: home, NO_COLOR: "1", BERTH_HTTPS_PORT: "off", ...env },
            stdio: ["ignore", "pipe", "pipe"]
          })
          let stdout = ""
          let stderr = ""
          child.stdout.on("data", (d: Buffer) => {
            stdout += d.toString()
          })
          child.stderr.on("data", (d: Buffer) => {
            stderr += d.toString()
          })
          const timer = setTimeout(() => {
            child.kill("SIGKILL")
            reject(new Error(`berth ${args.join(" ")} on ${name} timed out\nstdout: ${stdout}\nstderr: ${stderr}`))
          }, timeoutMs)
          child.on("error", reject)
          child.on("close", (code) => {
            clearTimeout(timer)
            resolve({ code, stdout, stderr })
          })
        })
      const exec = (command: string, args: ReadonlyArray<string>) =>
        execFileSync("ip", ["netns", "exec", ns, command, ...args], { encoding: "utf8" })
      hosts.push({ name, ns, address, home, link, run, exec })
    }
    return { hosts, url: `postgres://postgres@/${database}?host=${PG_SOCKET_DIR}`, base, cleanup }
  } catch (e) {
    cleanup()
    throw e
  }
}
