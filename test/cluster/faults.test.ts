/**
 * Faults that once left a world that runs anywhere stuck or running twice (issue 27), on three test hosts (network
 * namespaces) in one cluster: a daemon frozen just long enough for its watchdog to fence its copy but not for the
 * cluster to give its machine up; the daemon and its watchdog killed together, leaving the services; and what `status`
 * says after either (the copy that was fenced, the move and where from).
 */
import { mkdirSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { eventually, isAlive, type Sandbox, sandbox, serverScript } from "../e2e/harness.js"
import {
  endedAt,
  git,
  type Host,
  hostsUnavailable,
  sampleCopies,
  shop,
  startedAt,
  type TestNetwork,
  testNetwork
} from "./hosts.js"

const unavailable = hostsUnavailable()
const PROXY_PORT = 17366

interface StatusWorld {
  readonly name: string
  readonly state: string
  readonly reason: string | null
  readonly machine?: string
  readonly events: ReadonlyArray<{ readonly kind: string; readonly message: string; readonly at: number }>
  readonly services: ReadonlyArray<{ readonly name: string; readonly pid: number | null; readonly state: string }>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const daemonPid = (host: Host) => Number(readFileSync(join(host.home, "daemon.pid"), "utf8").trim().split(/\s+/)[0])

/** The pids of `home`'s fence watchdogs (there is one per membership session; an old one leaves soon). */
const watchdogPids = (home: string): ReadonlyArray<number> => {
  const found: Array<number> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "latin1")
      if (!cmdline.includes("berth-watchdog.cjs")) continue
      if (cmdline.split("\u0000").includes(home)) found.push(Number(entry))
    } catch {
      // gone
    }
  }
  return found
}

describe.skipIf(unavailable !== undefined)(
  `faults of a machine that runs worlds anywhere${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`,
  () => {
    let net: TestNetwork
    let repo: Sandbox
    let elsewhere: string
    const host = (i: number) => net.hosts[i - 1] as Host
    const berth = (h: Host, args: ReadonlyArray<string>, timeoutMs?: number) =>
      h.run(h.name === "h1" ? repo.dir : elsewhere, args, timeoutMs)
    const statusOf = async (h: Host): Promise<ReadonlyArray<StatusWorld>> => {
      const r = await berth(h, ["status", "--json"])
      expect(r.code, r.stderr).toBe(0)
      return (JSON.parse(r.stdout) as { worlds: ReadonlyArray<StatusWorld> }).worlds
    }
    const pidOn = async (h: Host, name: string) =>
      (await statusOf(h))
        .find((w) => w.name === name && w.machine === undefined)
        ?.services.find((s) => s.name === "api")?.pid ?? undefined
    /** the machine that runs `name` (not `not`) with a live api there, as `observer` and the owner both say */
    const placed = async (name: string, not?: string, timeoutMs = 30_000, observer: Host = host(1)) => {
      const until = Date.now() + timeoutMs
      let last: ReadonlyArray<StatusWorld> = []
      for (;;) {
        last = await statusOf(observer)
        const w = last.find((x) => x.name === name && x.state === "running" && (x.machine ?? observer.name) !== not)
        if (w !== undefined) {
          const owner = net.hosts.find((h) => h.name === (w.machine ?? observer.name)) as Host
          const pid = await pidOn(owner, name)
          if (pid !== undefined && pid !== null && isAlive(pid)) return { machine: owner.name, owner, pid }
        }
        if (Date.now() > until) {
          const listed = last.filter((x) => x.name === name)
          throw new Error(`world ${name} runs nowhere but on ${not ?? "-"}: ${JSON.stringify(listed)}`)
        }
        await sleep(250)
      }
    }
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

    beforeAll(async () => {
      net = testNetwork(3, { BERTH_PROXY_PORT: String(PROXY_PORT) }, { network: true })
      repo = sandbox({ "server.mjs": serverScript, "berth.toml": shop }, "shop")
      const origin = join(net.base, "origin.git")
      git(net.base, "init", "-q", "--bare", origin)
      git(repo.dir, "remote", "add", "origin", origin)
      git(repo.dir, "branch", "feat-a")
      git(repo.dir, "push", "-q", "origin", "main", "feat-a")
      elsewhere = join(net.base, "elsewhere")
      mkdirSync(elsewhere, { recursive: true })
      const init = await berth(host(1), ["cluster", "init", net.url, "--name", "h1", "--address", host(1).address])
      expect(init.code, init.stderr).toBe(0)
      for (const i of [2, 3]) {
        const r = await berth(host(i), ["cluster", "join", net.url, "--name", `h${i}`, "--address", host(i).address])
        expect(r.code, r.stderr).toBe(0)
      }
      const up = await berth(host(1), ["up", "feat-a", "--anywhere", "--json"], 90_000)
      expect(up.code, up.stderr).toBe(0)
    }, 150_000)
    afterAll(() => {
      net?.cleanup()
      repo?.cleanup()
    })

    it("runs a world again whose copy was fenced while its daemon was frozen 4.5 s, and says the copy was fenced", async () => {
      const { machine, owner, pid } = await steady("feat-a")
      const daemon = daemonPid(owner)
      const sampler = sampleCopies(
        "feat-a",
        net.hosts.map((h) => h.home)
      )
      const frozenAt = Date.now()
      process.kill(daemon, "SIGSTOP")
      try {
        // the watchdog fences the copy (about 3.3 s after the last heartbeat) ...
        await endedAt(pid, 10_000)
        // ... and the daemon thaws before the cluster gives its machine up (5.5 s after it)
        await sleep(Math.max(0, 4_500 - (Date.now() - frozenAt)))
      } finally {
        process.kill(daemon, "SIGCONT")
      }
      // it runs again, here or elsewhere, with a live process: never listed running with a dead one for good
      const again = await placed("feat-a", undefined, 45_000)
      expect(again.pid).not.toBe(pid)
      await steady("feat-a")
      expect(sampler.stop(), "copies of feat-a that ran at once").toBe(1)
      // the machine whose copy was fenced says so in the world's history
      const ws = await statusOf(owner)
      const here = ws.find((w) => w.name === "feat-a" && w.machine === undefined)
      const history = here?.events ?? []
      expect(
        history.some((e) => e.kind === "fenced" && e.message.includes("fenced")),
        `${machine}: ${JSON.stringify(history)}`
      ).toBe(true)
    }, 150_000)

    it("stops a copy whose daemon and watchdog were killed together, before the world runs elsewhere, and says where it moved from", async () => {
      const { machine, owner, pid } = await steady("feat-a")
      const observer = net.hosts.find((h) => h.name !== machine) as Host
      const watchdogs = watchdogPids(owner.home)
      expect(watchdogs.length, "the watchdog beside the daemon").toBeGreaterThan(0)
      const sampler = sampleCopies(
        "feat-a",
        net.hosts.map((h) => h.home)
      )
      // as `pkill -9 -f berth` does: everything of berth at once, the services left
      for (const p of [daemonPid(owner), ...watchdogs]) process.kill(p, "SIGKILL")
      const stoppedAt = await endedAt(pid, 10_000)
      const moved = await placed("feat-a", machine, 45_000, observer)
      expect(startedAt(moved.pid)).toBeGreaterThan(stoppedAt)
      expect(sampler.stop(), "copies of feat-a that ran at once").toBe(1)
      // where it runs now, its history says it moved, and from where
      const seen = await eventually(
        () => statusOf(observer),
        (ws) => ws.some((w) => w.name === "feat-a" && w.events.some((e) => e.kind === "moved"))
      )
      // the observer may list feat-a twice (its own copy and another machine's): the one whose history has the move
      const w = seen.find((x) => x.name === "feat-a" && x.events.some((e) => e.kind === "moved")) as StatusWorld
      const event = w.events.find((e) => e.kind === "moved")
      expect(event?.message, JSON.stringify(w.events)).toContain(`from ${machine}`)
      // the machine comes back (any command starts its daemon): one copy, wherever the cluster has it now
      const back = await berth(owner, ["cluster", "status", "--json"])
      expect(back.code, back.stderr).toBe(0)
      await steady("feat-a")
    }, 150_000)
  }
)
