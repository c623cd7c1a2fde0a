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
  /**
   * the socket, as the DEVICE column names it: its inode on Linux (the number /proc names it by), a kernel address
   * (`0x…`) on macOS. It tells two listeners on one port apart and finds who else holds the same socket.
   */
  readonly socket: string
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
    return [{ command: unescapeLsof(cols[0]), pid, socket: cols[5] ?? "", address: m[1] ?? "", port: Number(m[2]) }]
  })

/** lsof prints a byte it will not show as `\xHH` (a space in a command name is `\x20`). */
const unescapeLsof = (text: string): string =>
  text.replace(/\\x([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))

// environments: `ps eww`

/** One row of `ps eww -A -o pid=,pgid=,stat=,command=`: the command line, then the environment. */
export interface PsEnvironRow {
  readonly pid: number
  readonly pgid: number
  readonly stat: string
  /** the arguments followed by the environment's `NAME=value` entries, separated by single spaces */
  readonly text: string
}

/** The rows of `ps eww -A -o pid=,pgid=,stat=,command=`; a line that does not read as one is skipped. */
export const parsePsEnvironRows = (text: string): ReadonlyArray<PsEnvironRow> =>
  text.split("\n").flatMap((line) => {
    const m = /^\s*(\d+)\s+(\d+)\s+([A-Za-z][^\s]*)\s(.*)$/.exec(line)
    if (m === null) return []
    return [{ pid: Number(m[1]), pgid: Number(m[2]), stat: m[3] ?? "", text: m[4] ?? "" }]
  })

/**
 * The value of variable `name` in what `ps eww` prints for a process: its command line, then `NAME=value` entries
 * separated by spaces, with nothing quoted. A value runs to the next ` OTHER=`, so one that itself holds a space
 * followed by something shaped like `WORD=` reads short — the nearest `ps` comes to /proc's NUL-separated environ.
 * The last occurrence wins: the environment follows the arguments, which may mention the name too. Undefined when the
 * text does not carry it.
 */
export const psEnvironValue = (text: string, name: string): string | undefined => {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return undefined
  const last = [...text.matchAll(new RegExp(`(?:^|\\s)${name}=`, "g"))].at(-1)
  if (last === undefined) return undefined
  const rest = text.slice(last.index + last[0].length)
  const next = /\s[A-Za-z_][A-Za-z0-9_]*=/.exec(rest)
  return next === null ? rest.trimEnd() : rest.slice(0, next.index)
}

// cost: `ps -o time=,rss=`

/** One row of `ps -A -o pid=,pgid=,time=,rss=`. */
export interface PsCostRow {
  readonly pid: number
  readonly pgid: number
  /** CPU used so far, user and system */
  readonly cpuMs: number
  /** resident memory (`rss` is in KiB on both procps and macOS) */
  readonly rssBytes: number
}

/**
 * `time` as `ps` prints it → milliseconds: procps `[DD-]HH:MM:SS` (whole seconds), macOS `MM:SS.cc` (minutes may pass
 * 59, hundredths of a second). Undefined when it is not one.
 */
export const parsePsTime = (text: string): number | undefined => {
  const m = /^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$/.exec(text.trim())
  if (m === null) return undefined
  const [days, hours, minutes, seconds] = [m[1], m[2], m[3], m[4]].map((x) => Number(x ?? 0)) as [
    number,
    number,
    number,
    number
  ]
  return Math.round((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
}

/** The rows of `ps -A -o pid=,pgid=,time=,rss=`; a line that does not read as one is skipped. */
export const parsePsCost = (text: string): ReadonlyArray<PsCostRow> =>
  text.split("\n").flatMap((line) => {
    const [pidText, pgidText, time, rss] = line.trim().split(/\s+/)
    const pid = integer(pidText)
    const pgid = integer(pgidText)
    const cpuMs = time === undefined ? undefined : parsePsTime(time)
    const kib = integer(rss)
    if (pid === undefined || pgid === undefined || cpuMs === undefined || kib === undefined) return []
    return [{ pid, pgid, cpuMs, rssBytes: kib * 1024 }]
  })

/**
 * The local port range from `sysctl -n`: Linux's `net.ipv4.ip_local_port_range` (`32768\t60999`), or macOS's
 * `net.inet.ip.portrange.first` and `.last` asked together (one per line); the form without `-n`
 * (`net.inet.ip.portrange.first: 49152`) is read too. Undefined unless two ordered ports.
 */
export const parsePortRange = (text: string): { readonly from: number; readonly to: number } | undefined => {
  const numbers = text
    .trim()
    .split("\n")
    .flatMap((line) =>
      line
        .replace(/^[\w.]+\s*[:=]\s*/, "")
        .trim()
        .split(/\s+/)
    )
    .filter((n) => n !== "")
  const [from, to] = numbers.map(integer)
  return numbers.length === 2 && from !== undefined && to !== undefined && from <= to && to <= 65_535
    ? { from, to }
    : undefined
}

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
