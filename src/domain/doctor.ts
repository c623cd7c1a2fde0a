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

/** A socket listening on this machine, and who holds it when /proc tells. */
export interface Listener {
  readonly port: number
  readonly pid: number | undefined
  /** the holder's process group */
  readonly pgid: number | undefined
  /** the holder's command name (`/proc/<pid>/comm`) */
  readonly command: string | undefined
}

export interface PortFacts {
  readonly range: { readonly from: number; readonly to: number }
  /** the kernel's range for outgoing connections' local ports (`ip_local_port_range`) */
  readonly ephemeral: { readonly from: number; readonly to: number } | undefined
  /** every listening socket, by port */
  readonly listeners: ReadonlyArray<Listener>
  /** the ports berth leases, and to which world's service (`project/world service`) */
  readonly leases: ReadonlyMap<number, string>
  /** the process groups berth records for running services */
  readonly groups: ReadonlySet<number>
  /** the proxy's own ports (listening, berth's) */
  readonly proxyPorts: ReadonlyArray<number>
}

const who = (l: Listener): string =>
  l.pid === undefined ? "another user's process" : `${l.command ?? "a process"} (pid ${l.pid})`

const listed = (items: ReadonlyArray<string>, most = 5): string =>
  items.length <= most ? items.join(", ") : `${items.slice(0, most).join(", ")} and ${items.length - most} more`

/**
 * The lease range against what else uses ports: the kernel handing the same ports to outgoing connections, leased
 * ports another process holds (the next `up` of that world fails), and squatters — ports of the range held by
 * programs that are not worlds (berth leases around them; said so that nobody is surprised).
 */
export const portFindings = (facts: PortFacts): ReadonlyArray<Finding> => {
  const { from, to } = facts.range
  const findings: Array<Finding> = []
  const range = `${from}-${to}`
  const e = facts.ephemeral
  if (e !== undefined && e.from <= to && from <= e.to) {
    findings.push(
      warn(
        "port range",
        `${range} overlaps the kernel's range for outgoing connections (${e.from}-${e.to}): a connection may take a port a world leased`,
        e.from > 5999
          ? "berth port --range 4000-5999"
          : `berth port --range ${Math.max(1024, e.from - 2000)}-${e.from - 1}`
      )
    )
  } else findings.push(ok("port range", `${range}, ${facts.leases.size} leased`))
  const byPort = new Map<number, Array<Listener>>()
  for (const l of facts.listeners) {
    if (l.port < from || l.port > to || facts.proxyPorts.includes(l.port)) continue
    byPort.set(l.port, [...(byPort.get(l.port) ?? []), l])
  }
  const taken: Array<string> = []
  const squatters: Array<string> = []
  for (const [port, holders] of [...byPort].sort(([a], [b]) => a - b)) {
    const lease = facts.leases.get(port)
    // a world's own process, or one whose group berth does not know (another user's) under a lease: not a conflict
    const foreign = holders.filter((l) => l.pgid === undefined || !facts.groups.has(l.pgid))
    if (foreign.length === 0) continue
    if (lease !== undefined) {
      if (foreign.every((l) => l.pid === undefined)) continue
      taken.push(`${port} (leased to ${lease}) is held by ${foreign.map(who).join(", ")}`)
    } else squatters.push(`${port} ${foreign.map(who).join(", ")}`)
  }
  if (taken.length > 0) {
    findings.push(
      fail(
        "leased ports",
        listed(taken),
        "stop that process, or berth remove the world so that its next up leases other ports"
      )
    )
  }
  if (squatters.length > 0) {
    findings.push(
      warn(
        "port squatters",
        `ports of the lease range held by programs that are not worlds (berth leases around them): ${listed(squatters)}`,
        "nothing to do unless you want those ports for worlds; berth port --range moves the range"
      )
    )
  }
  return findings
}

/** A process whose environment says it is a world's service (`BERTH_PROJECT`, `BERTH_WORLD`, `BERTH_SERVICE`). */
export interface WorldProcess {
  readonly pid: number
  readonly pgid: number
  readonly project: string
  readonly world: string
  readonly service: string
}

/**
 * Processes of this installation's worlds that berth no longer tracks: a world it knows (by project label and name)
 * whose recorded process groups do not include theirs — left behind by a crash, or started by hand with a world's
 * environment. Processes of worlds it does not know belong to another BERTH_HOME and are left out.
 */
export const staleProcesses = (
  processes: ReadonlyArray<WorldProcess>,
  worlds: ReadonlySet<string>,
  groups: ReadonlySet<number>
): Finding => {
  const stale = processes.filter((p) => worlds.has(`${p.project}/${p.world}`) && !groups.has(p.pgid))
  if (stale.length === 0) return ok("stale processes", "every process of a world is one berth watches")
  const pgids = [...new Set(stale.map((p) => p.pgid))].sort((a, b) => a - b)
  return warn(
    "stale processes",
    `processes of worlds berth no longer tracks: ${listed(stale.map((p) => `${p.project}/${p.world} ${p.service} (pid ${p.pid})`))}`,
    `kill -TERM ${pgids.map((g) => `-${g}`).join(" ")}`
  )
}

/** Whether a bundle of PEM certificates (a system store's, NODE_EXTRA_CA_CERTS') holds `caPem`. */
export const bundleHolds = (bundle: string, caPem: string): boolean => {
  const body = (pem: string) => pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")
  const wanted = body(caPem)
  return wanted !== "" && body(bundle).includes(wanted)
}
