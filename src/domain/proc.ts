/**
 * Pure parsing of Linux `/proc` text. Reading the files is the job of `services/platformProc.ts`, the Linux
 * implementation of the Platform and the only module that reads /proc; keeping the parsing here lets the tricky cases
 * (a comm holding spaces, parentheses or a newline) be tested without a process to match.
 */

/** The fields of `/proc/<pid>/stat` berth needs to tell a process, its group and its identity over time. */
export interface ProcStat {
  readonly pid: number
  /** the executable's name as the kernel keeps it (at most 15 bytes, any byte but NUL, set freely by the process) */
  readonly comm: string
  /** one letter: R running, S sleeping, D disk sleep, Z zombie, T stopped, t traced, X dead, I idle, … */
  readonly state: string
  readonly ppid: number
  readonly pgrp: number
  readonly session: number
  /**
   * field 22: clock ticks since boot when the process started. Together with the pid it names one process: a pid is
   * reused, a (pid, startTime) pair is not. Kept as a string so it is compared exactly and stored as written.
   */
  readonly startTime: string
}

const integer = (text: string | undefined): number | undefined =>
  text !== undefined && /^-?\d+$/.test(text) ? Number(text) : undefined

/**
 * `/proc/<pid>/stat` → its fields, or `undefined` when the text is not one. The comm sits in parentheses and may itself
 * hold `)`, spaces or newlines, so the fields after it are found from the LAST `)`: nothing after the comm contains one.
 */
export const parseStat = (text: string): ProcStat | undefined => {
  const open = text.indexOf("(")
  const close = text.lastIndexOf(")")
  if (open === -1 || close < open) return undefined
  const pid = integer(text.slice(0, open).trim())
  // after the comm: field 3 (state) is rest[0], so field n is rest[n - 3]
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/)
  const state = rest[0]
  const ppid = integer(rest[1])
  const pgrp = integer(rest[2])
  const session = integer(rest[3])
  const startTime = rest[19]
  if (pid === undefined || state === undefined || !/^[A-Za-z]$/.test(state)) return undefined
  if (ppid === undefined || pgrp === undefined || session === undefined) return undefined
  if (startTime === undefined || !/^\d+$/.test(startTime)) return undefined
  return { pid, comm: text.slice(open + 1, close), state, ppid, pgrp, session, startTime }
}

/** A zombie (`Z`) or dead (`X`) entry runs no code any more: it only waits to be reaped. */
export const isDefunct = (stat: ProcStat): boolean => stat.state === "Z" || stat.state === "X"

/** State `0A` in /proc/net/tcp{,6}: a listening socket. */
const TCP_LISTEN = "0A"

/**
 * Every listening socket in the text of `/proc/net/tcp` or `/proc/net/tcp6`: its inode and its port. Columns: `sl`,
 * `local_address` (ADDRESS:PORT in hex), `rem_address`, `st`, …, `inode` (the tenth). Inode 0 names no open file, so
 * it cannot be matched to a process and is left out.
 */
export const listeningSockets = (text: string): ReadonlyArray<{ readonly inode: string; readonly port: number }> => {
  const out: Array<{ inode: string; port: number }> = []
  for (const line of text.split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/)
    const local = cols[1]
    const inode = cols[9]
    if (local === undefined || cols[3] !== TCP_LISTEN || inode === undefined || !/^\d+$/.test(inode)) continue
    const hex = local.slice(local.lastIndexOf(":") + 1)
    if (/^[0-9A-Fa-f]{1,4}$/.test(hex) && inode !== "0") out.push({ inode, port: Number.parseInt(hex, 16) })
  }
  return out
}

/**
 * The listening sockets in the complete lines of the start of a `/proc/net/tcp{,6}` table, and whether that start
 * holds them all: the kernel lists every listener before any other socket, so the first line of another state ends
 * them. Lets a reader stop early (see `services/Health`).
 */
export const leadingListeners = (
  text: string
): {
  readonly sockets: ReadonlyArray<{ readonly inode: string; readonly port: number }>
  readonly complete: boolean
} => {
  const lines = text.split("\n")
  // the last piece is a line still being read (or the empty rest after the final newline)
  const whole = lines.slice(1, -1).filter((line) => line.trim() !== "")
  const end = whole.findIndex((line) => line.trim().split(/\s+/)[3] !== TCP_LISTEN)
  const listeners = end === -1 ? whole : whole.slice(0, end)
  return { sockets: listeningSockets(`header\n${listeners.join("\n")}`), complete: end !== -1 }
}

/** The inodes of the sockets listening on `port` (see `listeningSockets`). */
export const listeningInodes = (text: string, port: number): ReadonlyArray<string> =>
  listeningSockets(text)
    .filter((s) => s.port === port)
    .map((s) => s.inode)

/**
 * What a service that never answered on its port says instead: the ports its group listens on, when none is the
 * one berth leased it (a dev server that ignores PORT, say). Undefined when that tells nothing.
 */
export const elsewhereReason = (expected: number, listening: ReadonlyArray<number>): string | undefined => {
  const ports = [...new Set(listening)].sort((a, b) => a - b)
  if (ports.length === 0 || ports.includes(expected)) return undefined
  return `it is listening on ${ports.join(", ")}, expected ${expected}: does its command ignore PORT? pass \${self.port} to it`
}

/** `socket:[123]`, the target of a socket's `/proc/<pid>/fd/<n>` link → `"123"`. */
export const socketInode = (link: string): string | undefined => /^socket:\[(\d+)\]$/.exec(link)?.[1]

/** Start times (clock ticks since boot, as `ProcStat.startTime`): is `a` strictly earlier than `b`? */
export const startedBefore = (a: string, b: string): boolean =>
  /^\d+$/.test(a) && /^\d+$/.test(b) && BigInt(a) < BigInt(b)

/** A process outside the service's group seen holding a listening socket of its port. */
export interface ListenerHolder {
  readonly pid: number
  readonly startTime: string
  /** its command line, shortened, to name it in a message */
  readonly command: string
}

/** What is known about a service's port when its check passed. */
export interface ListenerFacts {
  /** inodes listening on the port; undefined when /proc/net could not be read */
  readonly listening: ReadonlyArray<string> | undefined
  /** socket inodes open in the group's processes (those whose fds could be read) */
  readonly groupSockets: ReadonlyArray<string>
  /** a member's fds could not be read (a setuid program): it may hold the listener */
  readonly groupUnreadable: boolean
  /** a process outside the group holding one of `listening`, when one could be found */
  readonly holder: ListenerHolder | undefined
  /** the service's leader's start time */
  readonly serviceStartTime: string
}

export type ListenerVerdict =
  | { readonly _tag: "Ours" }
  /** someone who was there before the service holds its port: what answered is not the service */
  | { readonly _tag: "Foreign"; readonly holder: ListenerHolder }
  /** nothing proves it either way (no /proc, NAT, a holder we cannot read): the group being alive must do */
  | { readonly _tag: "Unknown" }

/**
 * Whose listener answered the check. Foreign needs proof: a readable process outside the group that started before
 * the service. A younger one may be a helper the service daemonized (out of its group), and an unreadable one is
 * usually root's (docker-proxy forwarding a published port), so neither is held against the service.
 */
export const judgeListener = (facts: ListenerFacts): ListenerVerdict => {
  const { listening, groupSockets, holder } = facts
  if (listening === undefined || listening.length === 0) return { _tag: "Unknown" }
  if (listening.some((inode) => groupSockets.includes(inode))) return { _tag: "Ours" }
  if (facts.groupUnreadable) return { _tag: "Unknown" }
  return holder !== undefined && startedBefore(holder.startTime, facts.serviceStartTime)
    ? { _tag: "Foreign", holder }
    : { _tag: "Unknown" }
}

/** MemTotal and MemAvailable from the text of `/proc/meminfo` (kB) in bytes, or undefined when it lacks either. */
export const parseMeminfo = (text: string): { readonly total: number; readonly available: number } | undefined => {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, "m").exec(text)
    return m?.[1] === undefined ? undefined : Number(m[1]) * 1024
  }
  const total = field("MemTotal")
  const available = field("MemAvailable")
  return total === undefined || available === undefined ? undefined : { total, available }
}
