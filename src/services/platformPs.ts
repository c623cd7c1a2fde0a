/**
 * The Platform answered by commands rather than /proc: `ps` for processes, `lsof` for listeners. It is how macOS
 * must answer (no /proc there), and it runs on Linux with the very same flags, so the path is exercised where berth
 * is tested. Each command runs synchronously: `process` must answer in the tick a child is born, before it can be
 * reaped. A start time here is whole seconds since the epoch (what `lstart` gives), never comparable with /proc's.
 */
import { execFileSync } from "node:child_process"
import * as Effect from "effect/Effect"
import {
  availableFromVmStat,
  type PsRow,
  parseLsofListen,
  parseMemsize,
  parsePsRows,
  psDefunct
} from "../domain/psText.js"
import type { MemoryReading, PlatformService, ProcessEntry } from "./Platform.js"

/** the columns read from `ps`: the same keywords on procps (Linux) and BSD ps (macOS) */
const PS_COLUMNS = "pid=,ppid=,pgid=,stat=,lstart="

/** English dates in UTC whatever the user's locale and zone: what `parseLstart` reads */
const commandEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C", TZ: "UTC" })

/**
 * A command's standard output; empty when it fails. Both `ps -p` and `lsof` exit 1 when they find nothing, which
 * is an answer (none), not an error.
 */
const run = (command: string, args: ReadonlyArray<string>): string => {
  try {
    return execFileSync(command, args, {
      env: commandEnv(),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 10_000,
      maxBuffer: 64 * 1024 * 1024
    })
  } catch (e) {
    const stdout = typeof e === "object" && e !== null && "stdout" in e ? e.stdout : undefined
    return typeof stdout === "string" ? stdout : ""
  }
}

const toEntry = (row: PsRow): ProcessEntry => ({
  pid: row.pid,
  ppid: row.ppid,
  pgid: row.pgid,
  startTime: String(row.startSeconds),
  defunct: psDefunct(row.stat)
})

const isPid = (pid: number) => Number.isSafeInteger(pid) && pid > 0

/**
 * The Platform from `ps` and `lsof`, with `memory` read as the platform can (`sysctl` and `vm_stat` on macOS) and the
 * unix socket path limit of the platform.
 */
export const makePsPlatform = (options: {
  readonly name: string
  readonly memory: Effect.Effect<MemoryReading | undefined>
  readonly socketPathLimit: number
}): PlatformService => {
  const table = (): ReadonlyArray<ProcessEntry> => parsePsRows(run("ps", ["-A", "-o", PS_COLUMNS])).map(toEntry)
  const one = (pid: number): ProcessEntry | undefined =>
    isPid(pid)
      ? parsePsRows(run("ps", ["-o", PS_COLUMNS, "-p", String(pid)]))
          .map(toEntry)
          .find((e) => e.pid === pid)
      : undefined
  return {
    name: options.name,
    process: (pid) => Effect.sync(() => one(pid)),
    processes: Effect.sync(table),
    startTime: (pid) => Effect.sync(() => one(pid)?.startTime),
    isAlive: (pid, startTime) =>
      Effect.sync(() => {
        const entry = one(pid)
        return entry !== undefined && entry.startTime === startTime && !entry.defunct
      }),
    groupMembers: (pgid) =>
      Effect.sync(() =>
        table()
          .filter((e) => e.pgid === pgid && !e.defunct)
          .map((e) => e.pid)
      ),
    descendants: (pid, descend) =>
      Effect.sync(() => {
        const all = table()
        const children = new Map<number, Array<ProcessEntry>>()
        for (const e of all) children.set(e.ppid, [...(children.get(e.ppid) ?? []), e])
        const limit = descend?.limit ?? Number.POSITIVE_INFINITY
        const found: Array<number> = []
        const pending = [...(children.get(pid) ?? [])]
        for (let next = pending.pop(); next !== undefined && found.length < limit; next = pending.pop()) {
          if (next.defunct || found.includes(next.pid) || next.pid === pid) continue
          if (descend?.within !== undefined && next.pgid !== descend.within) continue
          found.push(next.pid)
          pending.push(...(children.get(next.pid) ?? []))
        }
        return found
      }),
    listeningPorts: (pids) =>
      Effect.sync(() => {
        const wanted = pids.filter(isPid)
        if (wanted.length === 0) return []
        // -a: the socket must be TCP, listening AND held by one of these pids
        const text = run("lsof", ["-nP", "-iTCP", "-sTCP:LISTEN", "-a", "-p", wanted.join(",")])
        return [...new Set(parseLsofListen(text).flatMap((l) => (wanted.includes(l.pid) ? [l.port] : [])))]
      }),
    memory: options.memory,
    socketPathLimit: options.socketPathLimit
  }
}

/** macOS's memory: the total from `sysctl -n hw.memsize`, what can be had from `vm_stat` (free, inactive, speculative). */
export const darwinMemory: Effect.Effect<MemoryReading | undefined> = Effect.sync(() => {
  const total = parseMemsize(run("sysctl", ["-n", "hw.memsize"]))
  const available = availableFromVmStat(run("vm_stat", []))
  return total === undefined || available === undefined ? undefined : { total, available: Math.min(total, available) }
})
