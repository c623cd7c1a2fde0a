/**
 * Pure parsing of Linux `/proc` text. Reading the files is the job of `services/Processes`; keeping the parsing here
 * lets the tricky cases (a comm holding spaces, parentheses or a newline) be tested without a process to match.
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
