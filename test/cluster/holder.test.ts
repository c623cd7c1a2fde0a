/**
 * The holder (src/cluster/holder.ts), with real processes: a stand-in daemon (a Node process running `makeHolder`)
 * holds a service's process group; when the daemon is killed with SIGKILL, and nothing else is left to stop it, the
 * group ends; a group let go of, or a daemon that lives, leaves it running. And a holder that stood still (SIGSTOP, as
 * a frozen machine's processes do) past the daemon's deadline kills the group as it wakes, and records the fence as the
 * watchdog does; a shorter stall, or one the daemon's hold outlived, kills nothing.
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { HOLDER_PROGRAM } from "../../src/cluster/holder.js"
import { formatLease, parseFenced } from "../../src/domain/fence.js"
import { eventually, isAlive } from "../e2e/harness.js"

const root = join(import.meta.dirname, "..", "..")
const tsx = join(root, "node_modules", ".bin", "tsx")
const base = mkdtempSync(join(tmpdir(), "berth-holder-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))

/** the holder's look and the shortest stall it fences after, here: a stall test need not wait a second */
const TICK_MS = 50
const STALL_MS = 400

interface StandIn {
  /** the stand-in daemon */
  readonly pid: number
  /** the service's group */
  readonly pgid: number
  /** where its lease, fenced record and log are */
  readonly dir: string
}

/**
 * A stand-in daemon: starts a service group (`sleep`, and a child of it) detached as berth does, holds it (and lets
 * it go again if told), tells the holder its hold is good for `holdMs` more (renewed every 100 ms with `renew`),
 * prints the group's pid, then waits to be killed.
 */
const daemon = (release: boolean, options: { readonly holdMs?: number; readonly renew?: boolean } = {}) => {
  const dir = mkdtempSync(join(base, "home-"))
  const files = { lease: join(dir, "fence.json"), fenced: join(dir, "fenced.json"), log: join(dir, "daemon.log") }
  const holdMs = options.holdMs ?? 3_600_000
  const script = `
import { spawn } from "node:child_process"
import { makeHolder } from ${JSON.stringify(join(root, "src/cluster/holder.ts"))}
const service = spawn("/bin/sh", ["-c", "sleep 300 & sleep 300"], { detached: true, stdio: "ignore" })
service.unref()
const env = { PATH: process.env.PATH ?? "" }
const holder = makeHolder({ graceMs: 200, tickMs: ${TICK_MS}, stallMs: ${STALL_MS}, files: ${JSON.stringify(files)}, env })
holder.deadline(Date.now() + ${holdMs})
${options.renew === true ? `setInterval(() => holder.deadline(Date.now() + ${holdMs}), 100)` : ""}
holder.hold(service.pid)
${release ? "holder.release(service.pid)" : ""}
console.log(service.pid + " " + process.pid)
setInterval(() => {}, 1000)
`
  const child = spawn(tsx, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] })
  return new Promise<StandIn>((resolve, reject) => {
    // tsx runs the script in a child of its own: the daemon is the process that prints
    child.stdout.once("data", (d: Buffer) => {
      const [pgid, pid] = String(d).trim().split(" ").map(Number)
      resolve({ pid: pid as number, pgid: pgid as number, dir })
    })
    child.once("error", reject)
  })
}

/** The holder of a stand-in daemon: its child that runs an inline program. */
const holderOf = async (daemonPid: number): Promise<number> => {
  const found = await eventually(
    async () =>
      readdirSync("/proc")
        .filter((e) => /^\d+$/.test(e))
        .find((e) => {
          try {
            const stat = readFileSync(`/proc/${e}/stat`, "latin1")
            const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
            return (
              ppid === daemonPid &&
              readFileSync(`/proc/${e}/cmdline`, "latin1").startsWith(`${process.execPath}\u0000-e`)
            )
          } catch {
            return false
          }
        }),
    (pid) => pid !== undefined,
    10_000
  )
  if (found === undefined) throw new Error(`no holder beside ${daemonPid}`)
  // found as soon as it is spawned: a stall before it has started (and read what it holds) is one it cannot see, so
  // wait until its event loop waits (a loaded machine takes a second or more to start node), then a look or two
  const waiting = await eventually(
    async () => {
      try {
        return readFileSync(`/proc/${found}/wchan`, "latin1")
      } catch {
        return ""
      }
    },
    (wchan) => wchan.includes("epoll") || wchan === "0",
    10_000
  )
  await new Promise((r) => setTimeout(r, waiting.includes("epoll") ? 2 * TICK_MS : 1_000))
  return Number(found)
}

/**
 * The holder's program run as it is, but under clocks that jump 0.6 s in: the wall clock 20 s ahead, as after a sleep
 * (the monotonic clock stands still in one), and the boot-time clock (/proc/uptime) with it when `sleeps`, as a sleep
 * does and a clock set by hand does not. It holds a `sleep` group, and was told a hold good for 4 s more.
 */
const sleeper = (sleeps: boolean) => {
  const dir = mkdtempSync(join(base, "sleeper-"))
  const patch = join(dir, "clocks.cjs")
  writeFileSync(
    patch,
    `const fs = require("node:fs")
let ahead = 0
setTimeout(() => { ahead = 20000 }, 600).unref()
const now = Date.now
Date.now = () => now() + ahead
const read = fs.readFileSync
fs.readFileSync = (path, ...rest) => {
  const text = read(path, ...rest)
  if (path !== "/proc/uptime" || !${sleeps}) return text
  const [up, idle] = String(text).split(" ")
  return (Number(up) + ahead / 1000).toFixed(2) + " " + idle
}
`
  )
  const service = spawn("sleep", ["300"], { detached: true, stdio: "ignore" })
  service.unref()
  const holder = spawn(
    process.execPath,
    ["--require", patch, "-e", HOLDER_PROGRAM, "200", String(process.pid), String(TICK_MS), String(STALL_MS)],
    {
      stdio: ["pipe", "ignore", "inherit"],
      env: { PATH: process.env.PATH ?? "", HOLDER_SAYS: "test:", HOLDER_BOOT_CLOCK: "/proc/uptime" }
    }
  )
  holder.stdin.write(`=${Date.now() + 4_000} ${Date.now()}\n+${service.pid}\n`)
  return { holder, pgid: service.pid as number }
}

/** Stops `pids` for `ms`, then lets them go on (as a machine that stood still: every process at once). */
const stall = async (pids: ReadonlyArray<number>, ms: number) => {
  for (const p of pids) process.kill(p, "SIGSTOP")
  await new Promise((r) => setTimeout(r, ms))
  for (const p of pids) process.kill(p, "SIGCONT")
}

const groupAlive = (pgid: number) => {
  try {
    process.kill(-pgid, 0)
    return execFileSync("ps", ["-o", "pid=,stat=", "-g", String(pgid)], { encoding: "utf8" })
      .split("\n")
      .some((l) => l.trim() !== "" && !l.trim().split(/\s+/)[1]?.startsWith("Z"))
  } catch {
    return false
  }
}

const killGroup = (pgid: number) => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // gone
  }
}

const end = (d: StandIn) => {
  killGroup(d.pgid)
  try {
    process.kill(d.pid, "SIGKILL")
  } catch {
    // gone
  }
}

describe("the holder", () => {
  it("ends a held group once its daemon is killed", async () => {
    const { pid, pgid } = await daemon(false)
    try {
      // the holder runs on its own, out of the daemon's group and the service's
      await new Promise((r) => setTimeout(r, 500))
      expect(groupAlive(pgid)).toBe(true)
      process.kill(pid, "SIGKILL")
      expect(
        await eventually(
          async () => groupAlive(pgid),
          (alive) => !alive,
          10_000
        )
      ).toBe(false)
    } finally {
      killGroup(pgid)
    }
  }, 30_000)

  it("leaves a group it was told to let go of, and one whose daemon lives", async () => {
    const released = await daemon(true)
    const kept = await daemon(false)
    try {
      await new Promise((r) => setTimeout(r, 500))
      process.kill(released.pid, "SIGKILL")
      await new Promise((r) => setTimeout(r, 1_500))
      expect(groupAlive(released.pgid)).toBe(true)
      expect(groupAlive(kept.pgid)).toBe(true)
      expect(isAlive(kept.pid)).toBe(true)
    } finally {
      for (const d of [released, kept]) end(d)
    }
  }, 30_000)

  it("kills a held group as it wakes from a stall past the daemon's deadline, and records the fence", async () => {
    const d = await daemon(false, { holdMs: 300 })
    try {
      const holder = await holderOf(d.pid)
      writeFileSync(
        join(d.dir, "fence.json"),
        formatLease({ daemon: d.pid, session: "s1", until: Date.now() + 300, worlds: [7], home: d.dir, done: false })
      )
      expect(groupAlive(d.pgid)).toBe(true)
      // the whole machine stands still, and wakes with the service first
      const service = Number(execFileSync("pgrep", ["-g", String(d.pgid)], { encoding: "utf8" }).split("\n")[0])
      await stall([service, d.pid, holder], 1_000)
      const woke = Date.now()
      expect(
        await eventually(
          async () => groupAlive(d.pgid),
          (alive) => !alive,
          5_000
        )
      ).toBe(false)
      // at its first look, not the watchdog's half a second of grace
      expect(Date.now() - woke).toBeLessThan(200)
      const record = parseFenced(readFileSync(join(d.dir, "fenced.json"), "utf8"))
      expect(record).toMatchObject({ daemon: d.pid, session: "s1", worlds: [7] })
      expect(readFileSync(join(d.dir, "daemon.log"), "utf8")).toContain(`(groups ${d.pgid})`)
      expect(isAlive(holder), "the holder stays, for the groups to come").toBe(true)
      // what ends everything named berth (`pkill -9 -f berth`) leaves it
      expect(readFileSync(`/proc/${holder}/cmdline`, "latin1")).not.toMatch(/berth/i)
    } finally {
      end(d)
    }
  }, 30_000)

  it("sees the machine asleep from the wall clock gaining on the monotonic one, the boot-time clock agreeing", async () => {
    const asleep = sleeper(true)
    const clockSet = sleeper(false)
    try {
      // 0.6 s in, the wall clock jumps 20 s: asleep, the boot-time clock jumps with it; set, it does not
      await new Promise((r) => setTimeout(r, 1_000))
      expect(
        await eventually(
          async () => groupAlive(asleep.pgid),
          (alive) => !alive,
          2_000
        ),
        "the group of a machine that slept"
      ).toBe(false)
      expect(groupAlive(clockSet.pgid), "the group of a machine whose clock was set").toBe(true)
    } finally {
      for (const s of [asleep, clockSet]) {
        s.holder.kill("SIGKILL")
        killGroup(s.pgid)
      }
    }
  }, 30_000)

  it("kills nothing after a stall shorter than its threshold, or one the daemon's hold outlived", async () => {
    // past its deadline, but stopped only a moment
    const short = await daemon(false, { holdMs: 100 })
    // stopped a second alone, while the daemon renewed its hold
    const renewed = await daemon(false, { holdMs: 300, renew: true })
    try {
      const [shortHolder, renewedHolder] = [await holderOf(short.pid), await holderOf(renewed.pid)]
      await new Promise((r) => setTimeout(r, 200))
      await Promise.all([stall([short.pid, shortHolder], STALL_MS / 2), stall([renewedHolder], 1_000)])
      await new Promise((r) => setTimeout(r, 500))
      expect(groupAlive(short.pgid)).toBe(true)
      expect(groupAlive(renewed.pgid)).toBe(true)
    } finally {
      for (const d of [short, renewed]) end(d)
    }
  }, 30_000)
})
