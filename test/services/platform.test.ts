import { afterAll, describe, expect, it } from "@effect/vitest"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Platform, type PlatformService, procPlatform, psPlatformLinux } from "../../src/services/Platform.js"
import { portHolder } from "../../src/services/Ports.js"
import { Processes, ProcessesLive } from "../../src/services/Processes.js"

/**
 * The two Linux implementations of the Platform — /proc and the `ps`/`lsof` commands macOS must use — asked about the
 * same live processes: a group whose leader listens on a port and has a child.
 */

const root = fs.mkdtempSync(path.join(os.tmpdir(), "berth-platform-"))

const leaderScript = `
const net = require("node:net")
const { spawn } = require("node:child_process")
const child = spawn("sleep", ["1000"], { stdio: "ignore" })
const server = net.createServer().listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port, child: child.pid }) + "\\n")
})
`

interface Group {
  readonly leader: number
  readonly child: number
  readonly port: number
}

const groups: Array<number> = []
afterAll(() => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, "SIGKILL")
    } catch {
      // gone already
    }
  }
  fs.rmSync(root, { recursive: true, force: true })
})

/** A group of its own: a node leader listening on a port, with a `sleep` child; `env` added to their environment. */
const startGroup = (env: Record<string, string> = {}): Promise<Group> =>
  new Promise((resolve, reject) => {
    const leader = childProcess.spawn(process.execPath, ["-e", leaderScript], {
      detached: true,
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, ...env }
    })
    if (leader.pid !== undefined) groups.push(leader.pid)
    leader.once("error", reject)
    let out = ""
    leader.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      if (!out.includes("\n") || leader.pid === undefined) return
      const { port, child } = JSON.parse(out) as { port: number; child: number }
      leader.stdout.destroy()
      leader.unref()
      resolve({ leader: leader.pid, child, port })
    })
  })

/** /proc's start time (clock ticks since boot) as seconds since the epoch, the resolution `ps` gives. */
const procSeconds = (ticks: string): number => {
  const btime = Number(/^btime (\d+)$/m.exec(fs.readFileSync("/proc/stat", "utf8"))?.[1])
  const hertz = Number(childProcess.execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim())
  return btime + Math.floor(Number(ticks) / hertz)
}

const ask = <A>(platform: PlatformService, question: (p: PlatformService) => Effect.Effect<A>): Promise<A> =>
  Effect.runPromise(question(platform))

const sorted = (pids: ReadonlyArray<number>) => [...pids].sort((a, b) => a - b)

describe("the Platform on /proc and on ps/lsof", () => {
  it("agree on a live group: start times, liveness, members, descendants and listeners", async () => {
    const g = await startGroup()
    const both = [procPlatform, psPlatformLinux]
    const [proc, ps] = await Promise.all(
      both.map((p) =>
        ask(p, (platform) =>
          Effect.all({
            leader: platform.process(g.leader),
            child: platform.process(g.child),
            members: platform.groupMembers(g.leader),
            descendants: platform.descendants(g.leader),
            inGroup: platform.descendants(g.leader, { within: g.leader }),
            ports: platform.listeningPorts([g.leader, g.child]),
            childPorts: platform.listeningPorts([g.child]),
            table: platform.processes,
            memory: platform.memory
          })
        )
      )
    )
    if (proc === undefined || ps === undefined) throw new Error("both implementations answer")
    expect(proc.leader).toMatchObject({ pid: g.leader, pgid: g.leader, defunct: false })
    expect(ps.leader).toMatchObject({ pid: g.leader, pgid: g.leader, ppid: proc.leader?.ppid, defunct: false })
    expect(ps.child).toMatchObject({ pid: g.child, pgid: g.leader, ppid: g.leader, defunct: false })
    expect(proc.child).toMatchObject({ pid: g.child, pgid: g.leader, ppid: g.leader, defunct: false })
    // the same second (ps truncates; /proc is read to the tick, hence the second either side)
    for (const pid of ["leader", "child"] as const) {
      const seconds = procSeconds(proc[pid]?.startTime ?? "")
      expect(Math.abs(Number(ps[pid]?.startTime) - seconds)).toBeLessThanOrEqual(1)
    }
    expect(sorted(ps.members)).toEqual(sorted(proc.members))
    expect(sorted(proc.members)).toEqual(sorted([g.leader, g.child]))
    expect(sorted(ps.descendants)).toEqual(sorted(proc.descendants))
    expect(proc.descendants).toEqual([g.child])
    expect(ps.inGroup).toEqual(proc.inGroup)
    expect(ps.ports).toEqual(proc.ports)
    expect(proc.ports).toEqual([g.port])
    expect(ps.childPorts).toEqual([])
    expect(proc.childPorts).toEqual([])
    const ours = (table: ReadonlyArray<{ readonly pid: number }>) =>
      sorted(table.flatMap((e) => ([g.leader, g.child].includes(e.pid) ? [e.pid] : [])))
    expect(ours(ps.table)).toEqual(ours(proc.table))
    expect(ps.memory?.total).toBeGreaterThan(0)
    expect(proc.memory?.total).toBeGreaterThan(0)

    // each recognizes its own start time, and no other
    for (const platform of both) {
      const start = await ask(platform, (p) => p.startTime(g.leader))
      expect(await ask(platform, (p) => p.isAlive(g.leader, start ?? ""))).toBe(true)
      expect(await ask(platform, (p) => p.isAlive(g.leader, `${start}1`))).toBe(false)
    }

    process.kill(-g.leader, "SIGKILL")
    // the leader stays a zombie until its parent (this test) reaps it: neither calls it alive meanwhile
    for (const platform of both) {
      const deadline = Date.now() + 5_000
      let members = await ask(platform, (p) => p.groupMembers(g.leader))
      while (members.length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20))
        members = await ask(platform, (p) => p.groupMembers(g.leader))
      }
      expect(members).toEqual([])
    }
  })

  it("agree on listeners, their holders, environments, costs and the port range", async () => {
    const mark = `k3x9 7 web ${root}/a home with spaces`
    const g = await startGroup({ BERTH_MARK: mark, BERTH_ONESHOT: "7f3a" })
    const closed = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as net.AddressInfo
        server.close(() => resolve(port))
      })
    })
    const ours = [g.leader, g.child]
    const answers = await Promise.all(
      [procPlatform, psPlatformLinux].map((p) =>
        ask(p, (platform) =>
          Effect.gen(function* () {
            const listening = yield* platform.portListeners(g.port, [g.leader])
            return {
              leaderListens: yield* platform.listensOn([g.leader], g.port),
              childListens: yield* platform.listensOn([g.child], g.port),
              listening,
              holder: yield* platform.socketHolder(listening.listening ?? [], []),
              heldByGroup: yield* platform.socketHolder(listening.listening ?? [], [g.leader]),
              holderText: yield* portHolder(platform, g.port),
              closedHolder: yield* portHolder(platform, closed),
              listeners: (yield* platform.listeners).filter((l) => l.port === g.port),
              environs: (yield* platform.environs(["BERTH_MARK", "BERTH_ONESHOT", "BERTH_NOT_SET"]))
                .filter((e) => ours.includes(e.pid))
                .map((e) => ({ pid: e.pid, pgid: e.pgid, values: Object.fromEntries(e.values) }))
                .sort((a, b) => a.pid - b.pid),
              costs: (yield* platform.costs).filter((c) => ours.includes(c.pid)).sort((a, b) => a.pid - b.pid),
              ephemeral: yield* platform.ephemeralPorts,
              start: yield* platform.startTime(g.leader)
            }
          })
        )
      )
    )
    const [proc, ps] = answers
    if (proc === undefined || ps === undefined) throw new Error("both implementations answer")
    for (const a of answers) {
      expect(a.leaderListens).toBe(true)
      expect(a.childListens).toBe(false)
      // lsof names a socket on Linux by its inode, as /proc does
      expect(a.listening.listening?.length).toBe(1)
      // /proc lists every socket the group holds, lsof only its listeners: the listener is among them on both
      expect(a.listening.groupSockets).toEqual(expect.arrayContaining([...(a.listening.listening ?? ["none"])]))
      expect(a.listening.groupUnreadable).toBe(false)
      expect(a.holder).toMatchObject({ pid: g.leader, startTime: a.start })
      expect(a.holder?.command).toContain("node")
      expect(a.heldByGroup).toBeUndefined()
      expect(a.holderText?.startsWith(`pid ${g.leader} (`)).toBe(true)
      expect(a.closedHolder).toBeUndefined()
      expect(a.listeners).toEqual([{ port: g.port, pid: g.leader, pgid: g.leader, command: "node" }])
      expect(a.environs).toEqual(
        ours.map((pid) => ({ pid, pgid: g.leader, values: { BERTH_MARK: mark, BERTH_ONESHOT: "7f3a" } }))
      )
      expect(a.costs.map((c) => [c.pid, c.pgid])).toEqual(ours.map((pid) => [pid, g.leader]))
      expect(a.costs[0]?.rssBytes).toBeGreaterThan(0)
    }
    expect(ps.listening.listening).toEqual(proc.listening.listening)
    expect(ps.ephemeral).toEqual(proc.ephemeral)
    expect(proc.ephemeral?.from).toBeGreaterThan(0)
    // CPU to the second on ps, to the tick on /proc; memory read a moment apart
    for (const [i, c] of proc.costs.entries()) {
      expect(Math.abs((ps.costs[i]?.cpuMs ?? -1) - c.cpuMs)).toBeLessThanOrEqual(1_000)
      expect(ps.costs[i]?.rssBytes).toBeGreaterThan(c.rssBytes / 2)
      expect(ps.costs[i]?.rssBytes).toBeLessThan(c.rssBytes * 2)
    }
  })

  it.live("Processes runs on the ps platform: spawn, family, stop", () =>
    Effect.gen(function* () {
      const processes = yield* Processes
      const handle = yield* processes.spawn({
        command: "sleep 1000 & sleep 1000",
        cwd: root,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        logFile: path.join(root, "logs", "ps.log")
      })
      groups.push(handle.pgid)
      expect(yield* processes.isAlive(handle)).toBe(true)
      // the two sleeps are the shell's children, in its group
      const deadline = Date.now() + 5_000
      let family = yield* processes.family(handle)
      while (family.length < 3 && Date.now() < deadline) {
        yield* Effect.sleep("20 millis")
        family = yield* processes.family(handle)
      }
      expect(family.length).toBe(3)
      expect(yield* processes.stop(handle, 1_000)).toEqual({ _tag: "Exited" })
      expect(yield* processes.isRunning(handle)).toBe(false)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(Layer.succeed(Platform, psPlatformLinux)))))
  )
})
