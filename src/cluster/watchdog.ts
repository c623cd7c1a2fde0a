/**
 * The fence's watchdog: a small process beside a cluster member's daemon (`dist/berth-watchdog.cjs <home> <pid> <session>`),
 * in a process group of its own so that nothing that stops or freezes the daemon reaches it. It reads the daemon's
 * lease (`domain/fence.ts`) a few times a second; once the lease has run out, it stops every process of the machine's
 * worlds that run anywhere, found by their marks (`domain/marks.ts`), before the cluster may start them elsewhere.
 *
 * Plain Node on purpose: no Effect, no bundle of berth's, so it starts in milliseconds and costs little memory.
 */
import { appendFileSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { formatFenced, parseFenced, parseLease, recordedSince, STALL_MS, watchStep } from "../domain/fence.js"
import { MARK_VARIABLE, parseMark } from "../domain/marks.js"
import { homePaths } from "../services/homePaths.js"
import { pidAlive } from "../services/pids.js"
import { procEnvirons } from "../services/platformProc.js"
import { psEnvirons } from "../services/platformPs.js"
import { fenceGroups } from "./watchdogFence.js"

const TICK_MS = 200
/**
 * After a stall (its look overdue by `STALL_MS`: the machine was frozen or stopped, and wakes), how long it waits
 * before it looks the machine's processes up: the holder kills the copies it holds on its first turn, and the scan
 * would compete with it for the CPU at that very moment
 */
const HOLDER_FIRST_MS = 50
/** while a lease stays stale, the machine is looked through again this often (a process may have been forked since) */
const REFENCE_MS = 1_000

const read = (path: string, encoding: "utf8" | "latin1"): string | undefined => {
  try {
    return readFileSync(path, encoding)
  } catch {
    return undefined
  }
}

/** The process groups of every live process marked as one of `worlds` of `home`, read as the Platform would. */
const groupsOf = (worlds: ReadonlyArray<number>, home: string): ReadonlyArray<number> => {
  const groups = new Set<number>()
  const marked = process.platform === "linux" ? procEnvirons([MARK_VARIABLE]) : psEnvirons([MARK_VARIABLE])
  for (const p of marked) {
    if (p.pid === process.pid || p.pgid <= 1) continue
    const value = p.values.get(MARK_VARIABLE)
    const mark = value === undefined ? undefined : parseMark(value)
    if (mark === undefined || mark.home !== home || !worlds.includes(mark.world)) continue
    groups.add(p.pgid)
  }
  return [...groups]
}

const signalGroup = (pgid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // gone already
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const main = async (home: string, serves: { readonly daemon: number; readonly session: string }) => {
  const paths = homePaths(home)
  const log = (line: string) => {
    try {
      appendFileSync(paths.daemonLog, `${new Date().toISOString()} berth fence: ${line}\n`, { mode: 0o600 })
    } catch {
      // the log is a courtesy; the fence is the work
    }
  }
  let lastFence = 0
  let stalled = false
  for (;;) {
    const lease = parseLease(read(paths.fenceFile, "utf8") ?? "")
    const step = watchStep({ lease, serves, daemonAlive: pidAlive(serves.daemon), now: Date.now() })
    if (step._tag === "Exit") return
    if (step._tag === "Fence" && Date.now() - lastFence >= REFENCE_MS) {
      if (stalled) await sleep(HOLDER_FIRST_MS)
      lastFence = Date.now()
      const groups = await fenceGroups(step, serves, {
        lease: () => parseLease(read(paths.fenceFile, "utf8") ?? ""),
        groups: groupsOf,
        signal: signalGroup,
        sleep,
        daemonAlive: () => pidAlive(serves.daemon),
        now: Date.now
      })
      if (groups.length > 0) {
        // for the daemon, when it thaws: these copies are stopped, whatever its actors last saw. Unless this fence is
        // recorded already: the holder killed them as the machine woke (and said so), or this watchdog did a moment ago
        const recorded = parseFenced(read(paths.fencedFile, "utf8") ?? "")
        if (lease === undefined || !recordedSince(recorded, serves, lease.until)) {
          try {
            const text = formatFenced({
              daemon: serves.daemon,
              session: serves.session,
              at: Date.now(),
              worlds: step.worlds
            })
            writeFileSync(`${paths.fencedFile}.${serves.session}`, text, { mode: 0o600 })
            renameSync(`${paths.fencedFile}.${serves.session}`, paths.fencedFile)
          } catch {
            // the daemon then sees its services exit, as any exit
          }
          log(
            `stopped the processes of worlds ${step.worlds.join(", ")} (groups ${groups.join(", ")}): the daemon (pid ${serves.daemon}) ` +
              `last renewed its hold on them in the cluster too long ago (it is frozen, cut off or gone), and another ` +
              `machine may run them now`
          )
        }
      }
      if (step.thenExit) return
    }
    const slept = performance.now()
    await sleep(TICK_MS)
    stalled = performance.now() - slept - TICK_MS >= STALL_MS
  }
}

const [home, pid, session] = process.argv.slice(2)
if (home === undefined || pid === undefined || !/^\d+$/.test(pid) || session === undefined) {
  process.stderr.write("usage: berth-watchdog.cjs <berth home> <daemon pid> <session>\n")
  process.exit(2)
}
void main(home, { daemon: Number(pid), session })
