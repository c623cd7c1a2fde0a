/**
 * A full disk, told apart from other failures: Node's errno errors (ENOSPC, EDQUOT), SQLite's (SQLITE_FULL) and
 * anything that wraps one (`cause`) or only names it in its text (a log line quoted back).
 */

const FULL_CODES = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"])
const FULL_TEXT =
  /\bENOSPC\b|\bEDQUOT\b|\bSQLITE_FULL\b|no space left on device|database or disk is full|disk quota exceeded/i

/** Does this failure (or one it wraps) say that a disk is full? */
export const isDiskFull = (failure: unknown): boolean => {
  const seen = new Set<unknown>()
  for (let e: unknown = failure; e !== undefined && e !== null && !seen.has(e); ) {
    seen.add(e)
    if (typeof e === "string") return FULL_TEXT.test(e)
    if (typeof e !== "object") return false
    const { code, message, cause } = e as { code?: unknown; message?: unknown; cause?: unknown }
    if (typeof code === "string" && FULL_CODES.has(code)) return true
    if (typeof message === "string" && FULL_TEXT.test(message)) return true
    e = cause
  }
  return false
}

/** The path an errno error names (open, copy), when it names one. */
export const failedPath = (failure: unknown): string | undefined => {
  const path = typeof failure === "object" && failure !== null ? (failure as { path?: unknown }).path : undefined
  return typeof path === "string" && path !== "" ? path : undefined
}

/** Bytes as people read them: `0 B`, `512 KB`, `3.2 MB`, `1.5 GB` (powers of 1024). */
export const formatBytes = (bytes: number): string => {
  if (!Number.isFinite(bytes) || bytes < 1024) return `${Math.max(0, Math.round(Number.isFinite(bytes) ? bytes : 0))} B`
  const units = ["KB", "MB", "GB", "TB"]
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${value >= 10 ? Math.round(value) : Math.round(value * 10) / 10} ${units[unit]}`
}
