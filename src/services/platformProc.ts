/**
 * The Linux implementation of the Platform's reads: the one module of berth that reads /proc (a test holds every other
 * file of src/ to that). Plain Node, no Effect, so the fence's watchdog, which must stand alone, can use it too;
 * `Platform.ts` wraps it as the `procPlatform` service. Parsing lives in `domain/proc.ts` and `domain/dashboard.ts`.
 */
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, readSync } from "node:fs"
import { readdir, readFile, readlink } from "node:fs/promises"
import { parseUsage } from "../domain/dashboard.js"
import type { Listener } from "../domain/doctor.js"
import type { PortRange } from "../domain/ports.js"
import {
  isDefunct,
  type ListenerHolder,
  leadingListeners,
  listeningInodes,
  listeningSockets,
  type ProcStat,
  parseMeminfo,
  parseStat,
  socketInode
} from "../domain/proc.js"

/** Linux's USER_HZ and page size on the machines berth runs on (x86-64, arm64 with 4 KiB pages). */
const TICKS_PER_SECOND = 100
const PAGE_SIZE = 4096

const TCP_TABLES = ["/proc/net/tcp", "/proc/net/tcp6"] as const

const readTextSync = (file: string, encoding: "utf8" | "latin1" = "utf8"): string | undefined => {
  try {
    return readFileSync(file, encoding)
  } catch {
    return undefined
  }
}

const readText = (file: string): Promise<string | undefined> => readFile(file, "utf8").catch(() => undefined)

const errorCode = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

/** Every pid in /proc now. */
/** The boot-time clock (CLOCK_BOOTTIME: it counts sleep) as a file: seconds since boot, first on its line. */
export const BOOT_CLOCK_FILE = "/proc/uptime"

export const procPids = (): ReadonlyArray<number> => {
  try {
    return readdirSync("/proc").flatMap((n) => (/^\d+$/.test(n) ? [Number(n)] : []))
  } catch {
    return []
  }
}

/** `/proc/<pid>/stat`, parsed; undefined when the process is gone or the text is not one. */
export const procStat = (pid: number): ProcStat | undefined => parseStat(readTextSync(`/proc/${pid}/stat`) ?? "")

/**
 * The process has ended though its pid is still taken: a zombie (or dead) entry, waiting for its parent to reap it.
 * False when /proc cannot tell (no such entry, or no /proc).
 */
export const procEnded = (pid: number): boolean => {
  const stat = procStat(pid)
  return stat !== undefined && isDefunct(stat)
}

/** The children of `pid` its main thread forked (a service's shell and what it starts); none if unreadable. */
export const procChildren = (pid: number): ReadonlyArray<number> =>
  (readTextSync(`/proc/${pid}/task/${pid}/children`) ?? "")
    .split(" ")
    .flatMap((n) => (/^\d+$/.test(n) ? [Number(n)] : []))

/** The socket inodes `pid` holds open; none when it is gone or its fds are not ours to read. */
export const procSocketsSync = (pid: number): ReadonlyArray<string> => {
  try {
    return readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
      try {
        return socketInode(readlinkSync(`/proc/${pid}/fd/${fd}`)) ?? []
      } catch {
        return []
      }
    })
  } catch {
    return []
  }
}

/**
 * The socket inodes a process holds open; undefined when its fds are not ours to read. A process that is gone, or
 * dying (the kernel drops its fd table before it turns zombie), holds nothing.
 */
const procSockets = async (pid: number): Promise<ReadonlyArray<string> | undefined> => {
  let fds: Array<string>
  try {
    fds = await readdir(`/proc/${pid}/fd`)
  } catch (e) {
    const code = errorCode(e)
    return code === "EACCES" || code === "EPERM" ? undefined : []
  }
  const links = await Promise.all(fds.map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => "")))
  return links.flatMap((link) => socketInode(link) ?? [])
}

/** The TCP ports any of `pids` listens on, each once. */
export const procListeningPorts = (pids: ReadonlyArray<number>): ReadonlyArray<number> => {
  const owned = new Set(pids.flatMap(procSocketsSync))
  if (owned.size === 0) return []
  const sockets = TCP_TABLES.flatMap((t) => listeningSockets(readTextSync(t) ?? ""))
  return [...new Set(sockets.filter((s) => owned.has(s.inode)).map((s) => s.port))]
}

/**
 * Whether one of a /proc/net/tcp table's listeners is `wanted`, reading it 4 KiB at a time and only as far as needed:
 * the listeners come first, and reading on into the connections makes the kernel walk its whole table of them (about
 * 10 ms a table here, however few it holds). Undefined when the table cannot be read.
 */
const hasListener = (table: string, wanted: (s: { readonly inode: string; readonly port: number }) => boolean) => {
  let fd: number
  try {
    fd = openSync(table, "r")
  } catch {
    return undefined
  }
  try {
    const chunk = Buffer.allocUnsafe(4096)
    let text = ""
    for (;;) {
      const n = readSync(fd, chunk, 0, chunk.length, null)
      text += chunk.toString("latin1", 0, n)
      const { sockets, complete } = leadingListeners(n === 0 ? `${text}\n` : text)
      if (sockets.some(wanted)) return true
      if (complete || n === 0) return false
    }
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
}

/** Whether one of `pids` listens on `port`: the few processes of one service, read synchronously and briefly. */
export const procListensOn = (pids: ReadonlyArray<number>, port: number): boolean => {
  const sockets = new Set(pids.flatMap(procSocketsSync))
  const mine = (s: { readonly inode: string; readonly port: number }) => s.port === port && sockets.has(s.inode)
  return sockets.size > 0 && TCP_TABLES.some((t) => hasListener(t, mine) === true)
}

/** The sockets listening on `port` (inodes), and those of them `group` holds; see `PortListeners`. */
export const procPortListeners = async (port: number, group: ReadonlyArray<number>) => {
  const tables = await Promise.all(TCP_TABLES.map(readText))
  const listening = tables.every((t) => t === undefined)
    ? undefined
    : tables.flatMap((t) => (t === undefined ? [] : listeningInodes(t, port)))
  const perMember = await Promise.all(group.map(procSockets))
  return {
    listening,
    groupSockets: perMember.flatMap((s) => s ?? []),
    groupUnreadable: perMember.some((s) => s === undefined)
  }
}

const shortened = (command: string) => (command.length > 80 ? `${command.slice(0, 77)}...` : command)

/** The first readable process outside `group` that holds one of `inodes`, with its start time and command line. */
export const procSocketHolder = async (
  inodes: ReadonlyArray<string>,
  group: ReadonlyArray<number>
): Promise<ListenerHolder | undefined> => {
  for (const pid of procPids()) {
    if (group.includes(pid)) continue
    const sockets = await procSockets(pid)
    if (sockets === undefined || !sockets.some((inode) => inodes.includes(inode))) continue
    const stat = parseStat((await readText(`/proc/${pid}/stat`)) ?? "")
    if (stat === undefined) continue
    const cmdline = ((await readText(`/proc/${pid}/cmdline`)) ?? "").replaceAll("\u0000", " ").trim()
    return { pid, startTime: stat.startTime, command: shortened(cmdline) || stat.comm }
  }
  return undefined
}

/** Every listening TCP socket and, where this user may see it, the process holding it (`berth doctor`). */
export const procListeners = (): ReadonlyArray<Listener> => {
  const sockets = TCP_TABLES.flatMap((t) => listeningSockets(readTextSync(t) ?? ""))
  if (sockets.length === 0) return []
  const wanted = new Set(sockets.map((s) => s.inode))
  const holders = new Map<string, { pid: number; pgid: number | undefined; command: string | undefined }>()
  for (const pid of procPids()) {
    for (const inode of procSocketsSync(pid)) {
      if (!wanted.has(inode) || holders.has(inode)) continue
      const stat = procStat(pid)
      holders.set(inode, { pid, pgid: stat?.pgrp, command: stat?.comm })
    }
  }
  // a socket on both families, or held by several processes, is one listener per holder
  const seen = new Set<string>()
  return sockets.flatMap((s) => {
    const h = holders.get(s.inode)
    const key = `${s.port}:${h?.pid ?? "?"}`
    if (seen.has(key)) return []
    seen.add(key)
    return [{ port: s.port, pid: h?.pid, pgid: h?.pgid, command: h?.command }]
  })
}

/** One live process carrying some of the variables asked for, and their values. */
export interface ProcessEnviron {
  readonly pid: number
  readonly pgid: number
  readonly values: ReadonlyMap<string, string>
}

/** The variables of a `/proc/<pid>/environ` text (NUL-separated) that are among `names`. */
const valuesIn = (environ: string, names: ReadonlyArray<string>): ReadonlyMap<string, string> => {
  const values = new Map<string, string>()
  for (const entry of environ.split("\u0000")) {
    const eq = entry.indexOf("=")
    const name = eq <= 0 ? "" : entry.slice(0, eq)
    if (names.includes(name)) values.set(name, entry.slice(eq + 1))
  }
  return values
}

/**
 * The environment of `pid` restricted to `names`, when it carries any of them and runs code (not a zombie); read
 * synchronously, as few processes pass the cheap test for the variable names.
 */
export const procEnviron = (pid: number, names: ReadonlyArray<string>): ProcessEnviron | undefined => {
  const environ = readTextSync(`/proc/${pid}/environ`, "latin1")
  if (environ === undefined || !names.some((n) => environ.includes(`${n}=`))) return undefined
  const values = valuesIn(environ, names)
  const stat = values.size === 0 ? undefined : procStat(pid)
  return stat === undefined || isDefunct(stat) ? undefined : { pid, pgid: stat.pgrp, values }
}

/** `procEnviron` of every process, read at once (the fence's watchdog; the Platform service reads in batches). */
export const procEnvirons = (names: ReadonlyArray<string>): ReadonlyArray<ProcessEnviron> =>
  procPids().flatMap((pid) => procEnviron(pid, names) ?? [])

/** What one process costs now: CPU used so far and resident memory. */
export interface ProcessCost {
  readonly pid: number
  readonly pgid: number
  readonly cpuMs: number
  readonly rssBytes: number
}

/** One process's cost from `/proc/<pid>/stat`. */
export const procCost = (pid: number): ProcessCost | undefined => {
  const usage = parseUsage(readTextSync(`/proc/${pid}/stat`) ?? "")
  return usage === undefined
    ? undefined
    : {
        pid: usage.pid,
        pgid: usage.pgrp,
        cpuMs: (usage.ticks * 1000) / TICKS_PER_SECOND,
        rssBytes: usage.rssPages * PAGE_SIZE
      }
}

/** MemTotal and MemAvailable, in bytes. */
export const procMemory = () => {
  const text = readTextSync("/proc/meminfo")
  return text === undefined ? undefined : parseMeminfo(text)
}

/** The kernel's range for outgoing connections' local ports. */
export const procEphemeralPorts = (): PortRange | undefined => {
  const [from, to] = (readTextSync("/proc/sys/net/ipv4/ip_local_port_range") ?? "").trim().split(/\s+/).map(Number)
  return from !== undefined && to !== undefined && Number.isInteger(from) && Number.isInteger(to)
    ? { from, to }
    : undefined
}
