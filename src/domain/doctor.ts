/**
 * `berth doctor`: what is wrong with this machine's berth, each finding with its fix. The findings are data; which
 * ones break berth (exit 1) and how they read are decided here, the facts are gathered by the command.
 */

export type Verdict = "ok" | "warn" | "fail"

export interface Finding {
  /** what was looked at: "git", "config", "daemon", "proxy http", "slice db", … */
  readonly check: string
  readonly verdict: Verdict
  readonly detail: string
  /** what to do about it; undefined when nothing needs doing */
  readonly fix?: string | undefined
}

export const ok = (check: string, detail: string): Finding => ({ check, verdict: "ok", detail })
export const warn = (check: string, detail: string, fix: string): Finding => ({ check, verdict: "warn", detail, fix })
export const fail = (check: string, detail: string, fix: string): Finding => ({ check, verdict: "fail", detail, fix })

/** 1 when anything is broken; warnings alone leave it 0. */
export const exitCodeOf = (findings: ReadonlyArray<Finding>): 0 | 1 =>
  findings.some((f) => f.verdict === "fail") ? 1 : 0

const MARK: Readonly<Record<Verdict, string>> = { ok: "ok  ", warn: "warn", fail: "FAIL" }

export const renderFindings = (findings: ReadonlyArray<Finding>): string => {
  const width = Math.max(...findings.map((f) => f.check.length))
  const lines = findings.flatMap((f) => [
    `${MARK[f.verdict]}  ${f.check.padEnd(width)}  ${f.detail}`,
    ...(f.fix === undefined ? [] : [`      ${" ".repeat(width)}  fix: ${f.fix}`])
  ])
  const failed = findings.filter((f) => f.verdict === "fail").length
  const warned = findings.filter((f) => f.verdict === "warn").length
  const summary =
    failed === 0 && warned === 0
      ? "nothing wrong found"
      : `${failed} broken, ${warned} to look at${failed > 0 ? " (exit 1)" : ""}`
  return [...lines, "", summary].join("\n")
}

/** A slice server's admin URL → where to knock (host and port), for a reachability check; undefined when not a URL. */
export const serverAddress = (adminUrl: string): { readonly host: string; readonly port: number } | undefined => {
  const defaults: Readonly<Record<string, number>> = {
    "postgres:": 5432,
    "postgresql:": 5432,
    "mysql:": 3306,
    "mariadb:": 3306,
    "redis:": 6379,
    "rediss:": 6379,
    "valkey:": 6379,
    "amqp:": 5672,
    "http:": 80,
    "https:": 443
  }
  try {
    const url = new URL(adminUrl)
    const port = url.port === "" ? defaults[url.protocol] : Number(url.port)
    if (port === undefined || url.hostname === "") return undefined
    return { host: url.hostname.replace(/^\[|\]$/g, ""), port }
  } catch {
    return undefined
  }
}
