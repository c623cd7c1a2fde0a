/**
 * The Platform's reads answered by commands rather than /proc: `ps` for processes, their environments and their cost,
 * `lsof` for listeners, `sysctl` and `vm_stat` for memory and the port range. It is how macOS must answer (no /proc
 * there), and it runs on Linux with the very same flags, so the path is exercised where berth is tested. Plain Node,
 * no Effect (the fence's watchdog uses it); `Platform.ts` wraps it as a service. Each command runs synchronously:
 * `process` must answer in the tick a child is born, before it can be reaped. A start time here is whole seconds
 * since the epoch (what `lstart` gives), never comparable with /proc's.
 */
import { execFileSync } from "node:child_process"
import type { Listener } from "../domain/doctor.js"
import type { PortRange } from "../domain/ports.js"
import type { ListenerHolder } from "../domain/proc.js"
import {
  availableFromVmStat,
  type LsofListener,
  type PsRow,
  parseLsofListen,
  parseMemsize,
  parsePortRange,
  parsePsCost,
  parsePsEnvironRows,
  parsePsRows,
  psDefunct,
  psEnvironValue
} from "../domain/psText.js"
import type { ProcessCost, ProcessEnviron } from "./platformProc.js"

/** the columns read from `ps`: the same keywords on procps (Linux) and BSD ps (macOS) */
const PS_COLUMNS = "pid=,ppid=,pgid=,stat=,lstart="

/** English dates in UTC whatever the user's locale and zone: what `parseLstart` reads */
const commandEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C", TZ: "UTC" })

/**
 * A command's standard output; empty when it fails, undefined when it cannot run at all (not installed). Both `ps -p`
 * and `lsof` exit 1 when they find nothing, which is an answer (none), not an error.
 */
const runOrMissing = (command: string, args: ReadonlyArray<string>): string | undefined => {
  try {
    return execFileSync(command, args, {
      env: commandEnv(),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 10_000,
      maxBuffer: 64 * 1024 * 1024
    })
  } catch (e) {
    if (typeof e === "object" && e !== null && "code" in e && e.code === "ENOENT") return undefined
    const stdout = typeof e === "object" && e !== null && "stdout" in e ? e.stdout : undefined
    return typeof stdout === "string" ? stdout : ""
  }
}

const run = (command: string, args: ReadonlyArray<string>): string => runOrMissing(command, args) ?? ""

/** One process as `ps` tells it: the fields of the Platform's `ProcessEntry`. */
export interface PsEntry {
  readonly pid: number
  readonly ppid: number
  readonly pgid: number
  readonly startTime: string
  readonly defunct: boolean
}

const toEntry = (row: PsRow): PsEntry => ({
  pid: row.pid,
  ppid: row.ppid,
  pgid: row.pgid,
  startTime: String(row.startSeconds),
  defunct: psDefunct(row.stat)
})

const isPid = (pid: number) => Number.isSafeInteger(pid) && pid > 0

/** Every process on the machine. */
export const psTable = (): ReadonlyArray<PsEntry> => parsePsRows(run("ps", ["-A", "-o", PS_COLUMNS])).map(toEntry)

/** One process; undefined when the pid names none. */
export const psProcess = (pid: number): PsEntry | undefined =>
  isPid(pid)
    ? parsePsRows(run("ps", ["-o", PS_COLUMNS, "-p", String(pid)]))
        .map(toEntry)
        .find((e) => e.pid === pid)
    : undefined

/** The live descendants of `pid` from one table of every process (see `PlatformService.descendants`). */
export const psDescendants = (
  pid: number,
  options?: { readonly within?: number | undefined; readonly limit?: number | undefined }
): ReadonlyArray<number> => {
  const children = new Map<number, Array<PsEntry>>()
  for (const e of psTable()) children.set(e.ppid, [...(children.get(e.ppid) ?? []), e])
  const limit = options?.limit ?? Number.POSITIVE_INFINITY
  const found: Array<number> = []
  const pending = [...(children.get(pid) ?? [])]
  for (let next = pending.pop(); next !== undefined && found.length < limit; next = pending.pop()) {
    if (next.defunct || found.includes(next.pid) || next.pid === pid) continue
    if (options?.within !== undefined && next.pgid !== options.within) continue
    found.push(next.pid)
    pending.push(...(children.get(next.pid) ?? []))
  }
  return found
}

/**
 * lsof's listening TCP sockets: `+c 0` prints command names whole (not cut at 9 characters); `-a` ANDs the
 * selections, so `-p` narrows to those pids and `-iTCP:<port>` to that port. Undefined when lsof is not installed.
 */
const lsofListeners = (options: {
  readonly pids?: ReadonlyArray<number>
  readonly port?: number
}): ReadonlyArray<LsofListener> | undefined => {
  const selection = options.port === undefined ? "-iTCP" : `-iTCP:${options.port}`
  const pids = options.pids === undefined ? [] : ["-a", "-p", options.pids.join(",")]
  const text = runOrMissing("lsof", ["-nP", "+c", "0", selection, "-sTCP:LISTEN", ...pids])
  if (text === undefined) return undefined
  return parseLsofListen(text).filter((l) => options.port === undefined || l.port === options.port)
}

/** The TCP ports any of `pids` listens on, each once. */
export const psListeningPorts = (pids: ReadonlyArray<number>): ReadonlyArray<number> => {
  const wanted = pids.filter(isPid)
  if (wanted.length === 0) return []
  const found = lsofListeners({ pids: wanted }) ?? []
  return [...new Set(found.flatMap((l) => (wanted.includes(l.pid) ? [l.port] : [])))]
}

/** Whether one of `pids` listens on `port`. */
export const psListensOn = (pids: ReadonlyArray<number>, port: number): boolean => {
  const wanted = pids.filter(isPid)
  return wanted.length > 0 && (lsofListeners({ pids: wanted, port }) ?? []).some((l) => wanted.includes(l.pid))
}

/**
 * The sockets listening on `port` that this user can see, and those `group` holds. lsof shows only the processes
 * whose files it may read (without root, this user's): a listener of another user's is not seen at all, where /proc
 * would list the socket without its holder — either way nothing is held against the service.
 */
export const psPortListeners = (port: number, group: ReadonlyArray<number>) => {
  const found = lsofListeners({ port })
  return {
    listening: found === undefined ? undefined : [...new Set(found.map((l) => l.socket))],
    groupSockets: (found ?? []).flatMap((l) => (group.includes(l.pid) ? [l.socket] : [])),
    groupUnreadable: false
  }
}

/** The first process outside `group` that holds one of `sockets` (as lsof names them), its start time and command. */
export const psSocketHolder = (
  sockets: ReadonlyArray<string>,
  group: ReadonlyArray<number>
): ListenerHolder | undefined => {
  for (const l of lsofListeners({}) ?? []) {
    if (group.includes(l.pid) || !sockets.includes(l.socket)) continue
    const entry = psProcess(l.pid)
    if (entry === undefined) continue
    const command = run("ps", ["-ww", "-o", "command=", "-p", String(l.pid)]).trim()
    return {
      pid: l.pid,
      startTime: entry.startTime,
      command: command.length > 80 ? `${command.slice(0, 77)}...` : command || l.command
    }
  }
  return undefined
}

/** Every listening TCP socket this user can see and the process holding it (`berth doctor`). */
export const psListeners = (): ReadonlyArray<Listener> => {
  const found = lsofListeners({}) ?? []
  if (found.length === 0) return []
  const groups = new Map(psTable().map((e) => [e.pid, e.pgid]))
  const seen = new Set<string>()
  return found.flatMap((l) => {
    const key = `${l.port}:${l.pid}`
    if (seen.has(key)) return []
    seen.add(key)
    return [{ port: l.port, pid: l.pid, pgid: groups.get(l.pid), command: l.command }]
  })
}

/**
 * The live processes carrying some of `names` in their environment, with those values, from `ps eww` (the
 * environment after the command line; BSD-style letters, which procps and macOS both read). Only this user's
 * processes show theirs, as with /proc.
 */
export const psEnvirons = (names: ReadonlyArray<string>): ReadonlyArray<ProcessEnviron> =>
  parsePsEnvironRows(run("ps", ["eww", "-A", "-o", "pid=,pgid=,stat=,command="])).flatMap((row) => {
    if (psDefunct(row.stat) || !names.some((n) => row.text.includes(`${n}=`))) return []
    const values = new Map(
      names.flatMap((n) => {
        const value = psEnvironValue(row.text, n)
        return value === undefined ? [] : [[n, value] as const]
      })
    )
    return values.size === 0 ? [] : [{ pid: row.pid, pgid: row.pgid, values }]
  })

/** Every process's cost: CPU time (`time`) and resident memory (`rss`). */
export const psCosts = (): ReadonlyArray<ProcessCost> => parsePsCost(run("ps", ["-A", "-o", "pid=,pgid=,time=,rss="]))

/** macOS's memory: the total from `sysctl -n hw.memsize`, what can be had from `vm_stat` (free, inactive, speculative). */
export const darwinMemory = (): { readonly total: number; readonly available: number } | undefined => {
  const total = parseMemsize(run("sysctl", ["-n", "hw.memsize"]))
  const available = availableFromVmStat(run("vm_stat", []))
  return total === undefined || available === undefined ? undefined : { total, available: Math.min(total, available) }
}

/** Linux's local port range, asked of `sysctl` (which reads it where /proc keeps it). */
export const linuxEphemeralPorts = (): PortRange | undefined =>
  parsePortRange(run("sysctl", ["-n", "net.ipv4.ip_local_port_range"]))

/** macOS's local port range for outgoing connections. */
export const darwinEphemeralPorts = (): PortRange | undefined =>
  parsePortRange(run("sysctl", ["-n", "net.inet.ip.portrange.first", "net.inet.ip.portrange.last"]))
