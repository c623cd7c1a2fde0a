/**
 * Pure parsing of what `ps` and `lsof` print, the way berth reads processes and listeners where there is no /proc
 * (macOS) — and on Linux too, through the same commands and flags, so that path is exercised where berth is tested.
 * The commands run with `LC_ALL=C` and `TZ=UTC`, so dates are English and in UTC. Also macOS's memory readings
 * (`sysctl -n hw.memsize`, `vm_stat`). Tested against recordings under test/fixtures/{linux,darwin}.
 */

/** One row of `ps -A -o pid=,ppid=,pgid=,stat=,lstart=`. */
export interface PsRow {
  readonly pid: number
  readonly ppid: number
  readonly pgid: number
  /** the state letters (`Ss`, `R+`, `Z`, …): the first one tells a zombie */
  readonly stat: string
  /** when it started, in whole seconds since the epoch (`lstart` has no finer resolution) */
  readonly startSeconds: number
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

/**
 * `lstart` as `ps` prints it in the C locale, `Sat Dec  5 13:15:12 2026`, read as UTC → seconds since the epoch;
 * undefined when it is not one.
 */
export const parseLstart = (text: string): number | undefined => {
  const m = /^[A-Z][a-z]{2}\s+([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})\s+(\d{4})$/.exec(text.trim())
  if (m === null) return undefined
  const month = MONTHS.indexOf(m[1] ?? "")
  if (month === -1) return undefined
  const [day, hours, minutes, seconds, year] = [m[2], m[3], m[4], m[5], m[6]].map(Number) as [
    number,
    number,
    number,
    number,
    number
  ]
  return Date.UTC(year, month, day, hours, minutes, seconds) / 1000
}

const integer = (text: string | undefined): number | undefined =>
  text !== undefined && /^\d+$/.test(text) ? Number(text) : undefined

/**
 * The rows of `ps -o pid=,ppid=,pgid=,stat=,lstart=` (no header: every column is named with `=`). A line that does
 * not read as one (a header, a truncated line) is skipped.
 */
export const parsePsRows = (text: string): ReadonlyArray<PsRow> =>
  text.split("\n").flatMap((line) => {
    const cols = line.trim().split(/\s+/)
    const pid = integer(cols[0])
    const ppid = integer(cols[1])
    const pgid = integer(cols[2])
    const stat = cols[3]
    const startSeconds = parseLstart(cols.slice(4).join(" "))
    if (pid === undefined || ppid === undefined || pgid === undefined) return []
    if (stat === undefined || !/^[A-Za-z]/.test(stat) || startSeconds === undefined) return []
    return [{ pid, ppid, pgid, stat, startSeconds }]
  })

/** A zombie (`Z`) or dead (`X`) process runs no code any more. */
export const psDefunct = (stat: string): boolean => stat.startsWith("Z") || stat.startsWith("X")

/** One listening socket in `lsof -nP -iTCP -sTCP:LISTEN` output. */
export interface LsofListener {
  readonly command: string
  readonly pid: number
  /** the local address as lsof names it: `*`, `127.0.0.1`, `[::1]`, … */
  readonly address: string
  readonly port: number
}

/**
 * The listeners in `lsof -nP -iTCP -sTCP:LISTEN` output (columns COMMAND PID USER FD TYPE DEVICE SIZE/OFF NODE NAME,
 * NAME being `ADDRESS:PORT (LISTEN)`). The header, and a socket with no port yet (`*:*`), are skipped. lsof escapes
 * spaces in COMMAND (`\x20`), so the columns split on whitespace.
 */
export const parseLsofListen = (text: string): ReadonlyArray<LsofListener> =>
  text.split("\n").flatMap((line) => {
    const cols = line.trim().split(/\s+/)
    const pid = integer(cols[1])
    const state = cols.at(-1)
    const name = cols.at(-2)
    if (pid === undefined || state !== "(LISTEN)" || name === undefined || cols[0] === undefined) return []
    const m = /^(.*):(\d{1,5})$/.exec(name)
    if (m === null) return []
    return [{ command: cols[0], pid, address: m[1] ?? "", port: Number(m[2]) }]
  })

// macOS memory: there is no /proc/meminfo there

/**
 * `sysctl -n hw.memsize` → the machine's memory in bytes; the form without `-n` (`hw.memsize: 17179869184`) is read too.
 * Undefined when it is not one.
 */
export const parseMemsize = (text: string): number | undefined => {
  const m = /^(?:hw\.memsize:\s*)?(\d+)\s*$/m.exec(text.trim())
  const bytes = m?.[1] === undefined ? undefined : Number(m[1])
  return bytes !== undefined && Number.isSafeInteger(bytes) && bytes > 0 ? bytes : undefined
}

/** The page counts `vm_stat` prints (`Pages free: 10069.`), by name, and its page size. */
export const parseVmStat = (
  text: string
): { readonly pageSize: number; readonly pages: ReadonlyMap<string, number> } | undefined => {
  const size = /page size of (\d+) bytes/.exec(text)?.[1]
  if (size === undefined) return undefined
  const pages = new Map<string, number>()
  for (const line of text.split("\n")) {
    const m = /^"?([^":]+)"?:\s+(\d+)\.?\s*$/.exec(line.trim())
    if (m?.[1] !== undefined && m[2] !== undefined) pages.set(m[1], Number(m[2]))
  }
  return { pageSize: Number(size), pages }
}

/**
 * Memory that can be had without swapping, from `vm_stat`: free pages, and the inactive and speculative ones the
 * kernel hands out as readily (file cache). Free pages alone (what `os.freemem()` gives there) read far too low: a Mac
 * at rest keeps little free. Undefined when the counts are not there.
 */
export const availableFromVmStat = (text: string): number | undefined => {
  const parsed = parseVmStat(text)
  if (parsed === undefined) return undefined
  const count = (name: string) => parsed.pages.get(name)
  const free = count("Pages free")
  const inactive = count("Pages inactive")
  if (free === undefined || inactive === undefined) return undefined
  return (free + inactive + (count("Pages speculative") ?? 0)) * parsed.pageSize
}
