/**
 * Faults that once left a world that runs anywhere stuck or running twice (issue 27), on three test hosts (network
 * namespaces) in one cluster: a daemon frozen just long enough for its watchdog to fence its copy (on a loaded machine
 * the cluster may give its machine up before it thaws: then the world moves); the daemon and its watchdog killed
 * together, leaving the services; and what `status` says after either (the copy that was fenced, the move and where
 * from).
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { eventually, type Sandbox, sandbox, serverScript } from "../e2e/harness.js"
import {
  endedAt,
  formCluster,
  type Host,
  hostsUnavailable,
  placement,
  pushedToOrigin,
  sampleCopies,
  shop,
  startedAt,
  type StatusWorld,
  type TestNetwork,
  testNetwork
} from "./hosts.js"

const unavailable = hostsUnavailable()
const PROXY_PORT = 17366

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
    const { statusOf, placed, steady } = placement(() => net.hosts, berth)

    beforeAll(async () => {
      net = testNetwork(3, { BERTH_PROXY_PORT: String(PROXY_PORT) }, { network: true })
      repo = sandbox({ "server.mjs": serverScript, "berth.toml": shop }, "shop")
      elsewhere = pushedToOrigin(net, repo.dir, ["feat-a"])
      await formCluster(net, berth)
      const up = await berth(host(1), ["up", "feat-a", "--anywhere", "--json"], 90_000)
      expect(up.code, up.stderr).toBe(0)
    }, 150_000)
    afterAll(() => {
      net?.cleanup()
      repo?.cleanup()
    })

    it("runs a world again whose copy was fenced while its daemon was frozen, and says the copy was fenced (or moved)", async () => {
      const { machine, owner, pid } = await steady("feat-a")
      const daemon = daemonPid(owner)
      const sampler = sampleCopies(
        "feat-a",
        net.hosts.map((h) => h.home)
      )
      process.kill(daemon, "SIGSTOP")
      try {
        // the watchdog fences the copy (about 3.3 s after the last heartbeat); the daemon thaws at once, before the
        // cluster gives its machine up (5.5 s after that heartbeat)
        await endedAt(pid, 10_000)
      } finally {
        process.kill(daemon, "SIGCONT")
      }
      // it runs again, here or elsewhere, with a live process: never listed running with a dead one for good
      const again = await placed("feat-a", undefined, 45_000)
      expect(again.pid).not.toBe(pid)
      const now = await steady("feat-a")
      expect(sampler.stop(), "copies of feat-a that ran at once").toBe(1)
      const ws = await statusOf(owner)
      const listed = JSON.stringify(ws.map((w) => ({ name: w.name, machine: w.machine, events: w.events })))
      if (now.machine === machine) {
        // the machine whose copy was fenced runs it again, and says in the world's history that it was fenced
        const here = ws.find((w) => w.name === "feat-a" && w.machine === undefined)
        expect(
          here?.events.some((e) => e.kind === "fenced" && e.message.includes("fenced")),
          `${machine}: ${listed}`
        ).toBe(true)
      } else {
        // a loaded machine thawed too late: the cluster gave it up, and the history where the world runs now says
        // it moved from there, and why (the copy left behind went, with its history)
        const there = ws.find((w) => w.name === "feat-a" && w.machine === now.machine)
        expect(
          there?.events.some(
            (e) =>
              e.kind === "moved" && e.message.includes(`from ${machine}`) && e.message.includes("stopped answering")
          ),
          `${machine}: ${listed}`
        ).toBe(true)
      }
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
