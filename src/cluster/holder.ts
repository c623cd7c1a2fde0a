/**
 * The holder: the last fence of a world that runs anywhere. The watchdog stops such a world's processes when the
 * daemon's hold on it runs out, but a daemon and its watchdog killed together (the OOM killer, `pkill -9 -f berth`)
 * leave the services running with nothing to stop them, while the cluster gives their machine up and starts them
 * elsewhere: two copies, for good. So one small process per daemon holds the process group of every service of such a
 * world, told over a pipe from the daemon; when the pipe closes (nothing is left of the daemon, which never leaves
 * these processes running when it stops on purpose) it ends every group it holds, well before the cluster gives the
 * machine up (`GIVE_UP_AFTER_MS`).
 *
 * And a machine that stood still — asleep (a laptop's lid closed), or every process of it frozen — wakes with its
 * copies running while the cluster may have started them elsewhere. The watchdog stops them once it has looked the
 * machine's processes up, tens of milliseconds after the wake; the holder knows its groups already. While it holds
 * any, it looks at the clocks every `HOLDER_TICK_MS` (`domain/fence.ts`): a look late on the monotonic clock means the
 * process stood still (SIGSTOP, a freezer); the wall clock gaining on the monotonic one means the machine slept (the
 * monotonic clock stands still then; the boot-time clock, /proc/uptime on Linux, confirms it was no clock being set). After a
 * stall of `STALL_MS` or more during which the daemon's hold ran out (the daemon tells it each new deadline, with
 * when it told it), it SIGKILLs every group at once, on its first turn after the wake, then records the fence as the
 * watchdog does (the fenced file, a line in daemon.log). Idle, it costs nothing: no timer runs while it holds nothing.
 *
 * Plain Node, its program passed inline, so it starts in milliseconds and needs no file; its command line names
 * nothing of berth, so what kills everything named berth leaves it, as it leaves the services it guards.
 */
import { type ChildProcess, spawn } from "node:child_process"
import type { Socket } from "node:net"
import { BOOT_CLOCK_FILE } from "../services/platformProc.js"

/**
 * The holder's program (exported for its tests, which run it under clocks of their own). Its stdin is the daemon's
 * pipe: lines `+<pgid>` (hold that group), `-<pgid>` (let it go) and `=<until> <at>` (the daemon's hold is good until
 * `until`, as told at `at`; epoch ms). argv: the grace (ms) between SIGTERM and SIGKILL when the daemon is gone, the
 * daemon's pid, the look's period and the shortest stall that may fence (ms). Its environment names the files the
 * daemon reads: HOLDER_LEASE (the lease, for its session and worlds), HOLDER_FENCED and HOLDER_LOG, how its log lines
 * begin (HOLDER_SAYS) and the boot-time clock's file where the platform has one (HOLDER_BOOT_CLOCK): not the program,
 * which must name nothing of berth (`pkill -f berth` would end it). A group that ended is forgotten within a second,
 * before the number could name another.
 */
export const HOLDER_PROGRAM = `
const fs = require("node:fs")
const [grace, daemon, tick, stall] = process.argv.slice(1).map(Number)
const held = new Set()
const signal = (g, s) => { try { process.kill(-g, s) } catch {} }
let ending = false
const end = () => {
  if (ending) return
  ending = true
  for (const g of held) signal(g, "SIGTERM")
  setTimeout(() => { for (const g of held) signal(g, "SIGKILL"); process.exit(0) }, grace)
}
// the daemon's hold: good until this moment (unknown: never lapsed), and whether it lapsed since the last look (a
// deadline told after the one before it had passed)
let until = Infinity
let lapsed = false
const monotonic = () => Number(process.hrtime.bigint()) / 1e6
const boottime = () => {
  if (!process.env.HOLDER_BOOT_CLOCK) return undefined
  try { return Number(fs.readFileSync(process.env.HOLDER_BOOT_CLOCK, "latin1").split(" ")[0]) * 1000 } catch { return undefined }
}
let timer
let last = 0
let wallAhead = 0
let bootAhead
let looks = 0
/** how long this process stood still since its last look (ms): late on the monotonic clock, or the machine asleep */
const stood = () => {
  const now = monotonic()
  const late = now - last - tick
  const ahead = Date.now() - now
  let slept = 0
  if (ahead - wallAhead >= stall) {
    // the wall clock gained: the machine slept, or its clock was set. The boot-time clock counts sleep only
    const boot = boottime()
    if (boot === undefined) slept = ahead - wallAhead
    else {
      slept = Math.min(ahead - wallAhead, boot - now - bootAhead)
      bootAhead = boot - now
    }
  }
  last = now
  wallAhead = ahead
  return Math.max(late, slept)
}
const read = (file) => { try { return JSON.parse(fs.readFileSync(file, "utf8")) } catch { return undefined } }
const write = (file, text) => {
  try { fs.writeFileSync(file + ".holder", text, { mode: 0o600 }); fs.renameSync(file + ".holder", file) } catch {}
}
const fence = (still) => {
  const groups = [...held]
  for (const g of groups) signal(g, "SIGKILL")
  held.clear()
  // then as the watchdog does after a fence: the record the daemon counts when it thaws, a line in its log
  // (unless the watchdog, quicker for once, recorded this fence already: domain/fence.ts's recordedSince, written
  // again here since this program imports nothing)
  const at = Date.now()
  const lease = read(process.env.HOLDER_LEASE)
  const own = lease !== undefined && lease.daemon === daemon && typeof lease.session === "string"
  const worlds = own && Array.isArray(lease.worlds) ? lease.worlds : []
  const prior = read(process.env.HOLDER_FENCED)
  const recorded =
    own && prior !== undefined && prior.daemon === daemon && prior.session === lease.session && prior.at >= until
  if (own && !recorded)
    write(process.env.HOLDER_FENCED, JSON.stringify({ daemon, session: lease.session, at, worlds }) + "\\n")
  const line = new Date(at).toISOString() + " " + process.env.HOLDER_SAYS + " this machine stood still for " +
    (still / 1000).toFixed(1) + " s (asleep, or frozen) and the daemon's hold on its worlds that run anywhere ran " +
    "out meanwhile: the holder killed the processes of worlds " + worlds.join(", ") + " (groups " +
    groups.join(", ") + ") as it woke, as another machine may run them now\\n"
  try {
    fs.appendFileSync(process.env.HOLDER_LOG, line, { mode: 0o600 })
  } catch {}
}
const look = () => {
  if (held.size === 0 || ending) {
    clearInterval(timer)
    timer = undefined
    return
  }
  const still = stood()
  if (still >= stall) {
    // what the daemon told while this process stood still is read first (a look overdue runs before the pipe is
    // read): it says whether the hold ran out meanwhile, or was renewed all along (only this process stood still)
    return setImmediate(() => {
      const out = lapsed || Date.now() >= until
      lapsed = false
      if (out && held.size > 0) fence(still)
    })
  }
  lapsed = false
  if (++looks % Math.ceil(1000 / tick) === 0) {
    for (const g of held) {
      try { process.kill(-g, 0) } catch (e) { if (e.code === "ESRCH") held.delete(g) }
    }
  }
}
const watch = () => {
  if (timer !== undefined || ending) return
  lapsed = false
  last = monotonic()
  wallAhead = Date.now() - last
  const boot = boottime()
  bootAhead = boot === undefined ? undefined : boot - last
  timer = setInterval(look, tick)
}
let text = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (d) => {
  text += d
  for (let i = text.indexOf("\\n"); i >= 0; i = text.indexOf("\\n")) {
    const line = text.slice(0, i)
    text = text.slice(i + 1)
    if (line[0] === "=") {
      const [next, at] = line.slice(1).split(" ").map(Number)
      if (!Number.isSafeInteger(next) || !Number.isSafeInteger(at)) continue
      if (at >= until) lapsed = true
      until = next
      continue
    }
    const g = Number(line.slice(1))
    if (!Number.isSafeInteger(g) || g <= 1) continue
    if (line[0] === "+") {
      held.add(g)
      watch()
    } else held.delete(g)
  }
})
process.stdin.on("end", end)
process.stdin.on("error", end)
process.on("SIGTERM", end)
`

export interface Holder {
  /** starts the holder now, if it is not running (it starts with the first group to hold otherwise) */
  readonly start: () => void
  /** holds `pgid` from now on: it ends with the daemon */
  readonly hold: (pgid: number) => void
  /** lets go of `pgid` (its service stopped) */
  readonly release: (pgid: number) => void
  /** the daemon's hold is good until `until` (epoch ms) from now on: past it, a stall fences what is held */
  readonly deadline: (until: number) => void
}

export interface HolderOptions {
  readonly graceMs: number
  /** how often it looks at the clocks while it holds a group (ms) */
  readonly tickMs: number
  /** the shortest stall after which it fences what it holds, if the daemon's hold ran out meanwhile (ms) */
  readonly stallMs: number
  /** the lease (for the session and worlds its fenced record names), the fenced record, the daemon's log */
  readonly files: { readonly lease: string; readonly fenced: string; readonly log: string }
  readonly env: Readonly<Record<string, string>>
}

/** The daemon's side: the holder is started with the first group to hold, and again should it die. */
export const makeHolder = (options: HolderOptions) => {
  let child: ChildProcess | undefined
  const held = new Set<number>()
  let until: number | undefined
  /** the deadline the running holder was told last */
  let told: number | undefined
  const send = (line: string) => {
    const stdin = child?.stdin
    if (stdin?.writable) stdin.write(line)
  }
  const tell = () => {
    if (until === undefined || until === told) return
    told = until
    send(`=${until} ${Date.now()}\n`)
  }
  const ensure = () => {
    if (child !== undefined) return
    const started = spawn(
      process.execPath,
      [
        "-e",
        HOLDER_PROGRAM,
        String(options.graceMs),
        String(process.pid),
        String(options.tickMs),
        String(options.stallMs)
      ],
      {
        detached: true,
        stdio: ["pipe", "ignore", "ignore"],
        env: {
          ...options.env,
          HOLDER_LEASE: options.files.lease,
          HOLDER_FENCED: options.files.fenced,
          HOLDER_LOG: options.files.log,
          // the boot-time clock, read where the platform has one as a file (Linux): without it, a wall clock that
          // gains on the monotonic one is taken for sleep unconfirmed
          HOLDER_BOOT_CLOCK: process.platform === "linux" ? BOOT_CLOCK_FILE : "",
          // its lines in the daemon's log begin as the watchdog's do
          HOLDER_SAYS: "berth fence:"
        }
      }
    )
    child = started
    told = undefined
    started.on("error", () => {
      if (child === started) child = undefined
    })
    started.on("exit", () => {
      if (child !== started) return
      child = undefined
      // killed on its own: a new one holds the groups still held
      if (held.size > 0) ensure()
    })
    started.stdin?.on("error", () => {})
    // neither keeps the daemon alive: the pipe closes when the daemon ends, which is the point
    started.unref()
    ;(started.stdin as Socket | null)?.unref()
    tell()
    for (const g of held) send(`+${g}\n`)
  }
  const holder: Holder = {
    start: ensure,
    hold: (pgid) => {
      held.add(pgid)
      if (child === undefined) return ensure()
      // the latest deadline first: one that holds nothing is not told each
      tell()
      send(`+${pgid}\n`)
    },
    release: (pgid) => {
      if (!held.delete(pgid)) return
      send(`-${pgid}\n`)
    },
    deadline: (next) => {
      until = next
      // a holder that holds nothing needs no news (each wakes it): it is told the latest when it holds again
      if (held.size > 0) tell()
    }
  }
  return holder
}
