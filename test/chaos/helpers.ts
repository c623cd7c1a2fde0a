/**
 * What the chaos tests share: a seeded random source (so a run can be replayed), the berth binary run with an exact
 * environment (the e2e harness always adds the test's own), what /proc says about one BERTH_HOME's processes, and
 * short-lived PostgreSQL queries.
 */
import { spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { resolve } from "node:path"
import pg from "pg"

/** the launcher users run; BERTH_CHAOS_BIN points the chaos tests at another build (a baseline, say) */
export const chaosBin =
  process.env.BERTH_CHAOS_BIN ?? resolve(import.meta.dirname, "../..", process.env.BERTH_TEST_DIST ?? "dist", "berth")

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

// ---------------------------------------------------------------------------------------------------------------
// randomness

export interface Random {
  /** uniform in [0, 1) */
  readonly next: () => number
  /** an integer in [min, max] */
  readonly int: (min: number, max: number) => number
  readonly chance: (p: number) => boolean
  readonly pick: <A>(items: ReadonlyArray<A>) => A
  readonly shuffle: <A>(items: ReadonlyArray<A>) => Array<A>
}

/** mulberry32: small, fast, and the same sequence for the same seed everywhere */
export const seeded = (seed: number): Random => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1))
  return {
    next,
    int,
    chance: (p) => next() < p,
    pick: (items) => items[int(0, items.length - 1)]!,
    shuffle: (items) => {
      const out = [...items]
      for (let i = out.length - 1; i > 0; i--) {
        const j = int(0, i)
        const swapped = out[i]!
        out[i] = out[j]!
        out[j] = swapped
      }
      return out
    }
  }
}

/** The seed of this run: `variable` when set (to replay one), else a random one. */
export const seedFrom = (variable: string): number => {
  const given = process.env[variable]
  if (given !== undefined && given !== "") {
    const n = Number(given)
    if (!Number.isInteger(n)) throw new Error(`${variable}=${given} is not an integer`)
    return n
  }
  return Math.floor(Math.random() * 2 ** 31)
}

// ---------------------------------------------------------------------------------------------------------------
// the binary

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly ms: number
  readonly timedOut: boolean
}

/** Runs `berth args` with exactly `env` (nothing of the test process added); never rejects, reports a timeout. */
export const runExact = (
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: Readonly<Record<string, string>>; readonly timeoutMs: number }
): Promise<Ran> =>
  new Promise((resolvePromise) => {
    const started = Date.now()
    const child = spawn(chaosBin, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    let timedOut = false
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString()
    })
    const timer = setTimeout(() => {
      timedOut = true
      child.kill("SIGKILL")
    }, options.timeoutMs)
    child.on("error", (e) => {
      clearTimeout(timer)
      resolvePromise({ code: null, stdout, stderr: `${stderr}${e.message}`, ms: Date.now() - started, timedOut })
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      resolvePromise({ code, stdout, stderr, ms: Date.now() - started, timedOut })
    })
  })

/** The tag of a `--json` failure on stderr (`{ "error": { "tag", "message" } }`), else the first line of stderr. */
export const failureOf = (stderr: string): { readonly tag: string; readonly message: string } => {
  for (const line of stderr.trim().split("\n").reverse()) {
    try {
      const parsed = JSON.parse(line) as { error?: { tag?: unknown; message?: unknown } }
      if (typeof parsed.error?.tag === "string") {
        return { tag: parsed.error.tag, message: String(parsed.error.message ?? "") }
      }
    } catch {
      // not JSON
    }
  }
  return { tag: "?", message: stderr.trim().split("\n")[0] ?? "" }
}

// ---------------------------------------------------------------------------------------------------------------
// processes

export interface ProcInfo {
  readonly pid: number
  readonly pgid: number
  /** the kernel's start time of the process, in clock ticks: with the pid, what identifies it */
  readonly startTime: string
  readonly cmdline: string
  readonly env: Readonly<Record<string, string>>
}

const procInfo = (pid: number): ProcInfo | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // fields[0] is the state, [2] the process group, [19] the start time
    if (fields[0] === "Z" || fields[0] === "X") return undefined
    const env: Record<string, string> = {}
    for (const entry of readFileSync(`/proc/${pid}/environ`, "latin1").split("\u0000")) {
      const eq = entry.indexOf("=")
      if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1)
    }
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\u0000").join(" ").trim()
    return { pid, pgid: Number(fields[2]), startTime: fields[19] ?? "", cmdline, env }
  } catch {
    return undefined
  }
}

/** Every live process whose environment says BERTH_HOME=`home` (services, one-offs, daemons, CLIs), but this one. */
export const processesOfHome = (home: string): Array<ProcInfo> => {
  const out: Array<ProcInfo> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    const info = procInfo(Number(entry))
    if (info !== undefined && info.env.BERTH_HOME === home) out.push(info)
  }
  return out
}

/** Is this process a berth daemon (`… berth.cjs daemon run`)? */
export const isDaemon = (p: ProcInfo): boolean => / daemon run\b/.test(p.cmdline)

export const isAlive = (pid: number): boolean => procInfo(pid) !== undefined

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL

export const PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"

export const pgQuery = async <R extends Record<string, unknown>>(
  url: string,
  text: string,
  values: ReadonlyArray<unknown> = []
): Promise<Array<R>> => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
  client.on("error", () => undefined)
  await client.connect()
  try {
    return (await client.query<R>(text, [...values])).rows
  } finally {
    await client.end().catch(() => undefined)
  }
}

export interface DatabaseInfo {
  readonly name: string
  readonly mark: string | null
}

/**
 * Every database of one installation on the server: named after its project, marked with its owner
 * (`berth:<owner>:…`), or still under a pending name (`berth_new_<owner>_…`, what a crash mid-provision leaves).
 */
export const databasesOf = async (project: string, owner: string): Promise<Array<DatabaseInfo>> =>
  (
    await pgQuery<{ datname: string; mark: string | null }>(
      PG_ADMIN,
      `SELECT datname, shobj_description(oid, 'pg_database') AS mark FROM pg_database
       WHERE strpos(datname, $1) > 0 OR starts_with(coalesce(shobj_description(oid, 'pg_database'), ''), $2)
          OR starts_with(datname, $3)`,
      [project, `berth:${owner}:`, `berth_new_${owner}_`]
    )
  ).map((r) => ({ name: r.datname, mark: r.mark }))

/** Drops every database of that installation, whoever is connected. */
export const dropDatabasesOf = async (project: string, owner: string): Promise<void> => {
  for (const db of await databasesOf(project, owner)) {
    await pgQuery(PG_ADMIN, `DROP DATABASE IF EXISTS "${db.name.replaceAll('"', '""')}" WITH (FORCE)`).catch(
      () => undefined
    )
  }
}
