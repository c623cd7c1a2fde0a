/**
 * The holder: the last fence of a world that runs anywhere. The watchdog stops such a world's processes when the
 * daemon's hold on it runs out, but a daemon and its watchdog killed together (the OOM killer, `pkill -9 -f berth`)
 * leave the services running with nothing to stop them, while the cluster gives their machine up and starts them
 * elsewhere: two copies, for good. So one small process per daemon holds the process group of every service of such a
 * world, told over a pipe from the daemon; when the pipe closes (nothing is left of the daemon, which never leaves
 * these processes running when it stops on purpose) it ends every group it holds, well before the cluster gives the
 * machine up (`GIVE_UP_AFTER_MS`).
 *
 * Plain Node, its program passed inline, so it starts in milliseconds and needs no file; its command line names
 * nothing of berth, so what kills everything named berth leaves it, as it leaves the services it guards.
 */
import { type ChildProcess, spawn } from "node:child_process"
import type { Socket } from "node:net"

/**
 * The holder's program. Its stdin is the daemon's pipe: lines `+<pgid>` (hold that group) and `-<pgid>` (let it go).
 * argv: the grace (ms) between SIGTERM and SIGKILL. A group that ended is forgotten within a second, before the number
 * could name another.
 */
const PROGRAM = `
const grace = Number(process.argv[1]) || 500
const held = new Set()
const signal = (g, s) => { try { process.kill(-g, s) } catch {} }
let ending = false
const end = () => {
  if (ending) return
  ending = true
  for (const g of held) signal(g, "SIGTERM")
  setTimeout(() => { for (const g of held) signal(g, "SIGKILL"); process.exit(0) }, grace)
}
let text = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (d) => {
  text += d
  for (let i = text.indexOf("\\n"); i >= 0; i = text.indexOf("\\n")) {
    const line = text.slice(0, i)
    text = text.slice(i + 1)
    const g = Number(line.slice(1))
    if (!Number.isSafeInteger(g) || g <= 1) continue
    if (line[0] === "+") held.add(g)
    else held.delete(g)
  }
})
process.stdin.on("end", end)
process.stdin.on("error", end)
process.on("SIGTERM", end)
setInterval(() => {
  for (const g of held) {
    try { process.kill(-g, 0) } catch (e) { if (e.code === "ESRCH") held.delete(g) }
  }
}, 1000)
`

export interface Holder {
  /** holds `pgid` from now on: it ends with the daemon */
  readonly hold: (pgid: number) => void
  /** lets go of `pgid` (its service stopped) */
  readonly release: (pgid: number) => void
}

/** The daemon's side: the holder is started with the first group to hold, and again should it die. */
export const makeHolder = (options: { readonly graceMs: number; readonly env: Readonly<Record<string, string>> }) => {
  let child: ChildProcess | undefined
  const held = new Set<number>()
  const send = (line: string) => {
    const stdin = child?.stdin
    if (stdin?.writable) stdin.write(line)
  }
  const ensure = () => {
    if (child !== undefined) return
    const started = spawn(process.execPath, ["-e", PROGRAM, String(options.graceMs)], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
      env: { ...options.env }
    })
    child = started
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
    for (const g of held) send(`+${g}\n`)
  }
  const holder: Holder = {
    hold: (pgid) => {
      held.add(pgid)
      if (child === undefined) ensure()
      else send(`+${pgid}\n`)
    },
    release: (pgid) => {
      if (!held.delete(pgid)) return
      send(`-${pgid}\n`)
    }
  }
  return holder
}
