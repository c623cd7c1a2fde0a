/**
 * What `berth doctor` reads off the machine, without the daemon and without changing anything: the state database
 * (opened read-only), the listening sockets and who holds them, the processes that carry a world's environment, the
 * kernel's port range for outgoing connections, and the trust stores berth's CA should be in. Each reader returns
 * plain facts; `domain/doctor.ts` judges them.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import * as Effect from "effect/Effect"
import type { Listener, WorldProcess } from "../../domain/doctor.js"
import { defaultPortRange, type PortRange } from "../../domain/ports.js"
import { platformHere } from "../../services/Platform.js"
import { openDatabase, type SqliteDatabase } from "../../services/sqlite.js"

/** What the state database says, read-only. */
export interface StateFacts {
  /** `PRAGMA quick_check`'s answer: "ok" when intact */
  readonly integrity: string
  readonly migrations: number
  readonly range: PortRange
  readonly leases: ReadonlyMap<number, string>
  /** process groups of services recorded as running */
  readonly groups: ReadonlySet<number>
  /** `project label/world name` of every world */
  readonly worlds: ReadonlySet<string>
}

/** Reads the state database; a message saying why it cannot be read instead. */
export const readState = (file: string): StateFacts | string => {
  let db: SqliteDatabase | undefined
  try {
    db = openDatabase(file, { readonly: true })
    const rows = (sql: string) => db!.prepare(sql).all()
    const integrity = String(rows("PRAGMA quick_check")[0]?.quick_check ?? "no answer")
    if (integrity !== "ok") {
      return {
        integrity,
        migrations: 0,
        range: defaultPortRange,
        leases: new Map(),
        groups: new Set(),
        worlds: new Set()
      }
    }
    const migrations = Number(rows("SELECT MAX(migration_id) AS n FROM effect_sql_migrations")[0]?.n ?? 0)
    const stored = rows("SELECT value FROM settings WHERE key = 'ports.range'")[0]?.value
    const range = typeof stored === "string" ? (JSON.parse(stored) as PortRange) : defaultPortRange
    const leases = new Map(
      rows(`SELECT l.port AS port, COALESCE(p.label, p.name) AS project, w.name AS world, l.service AS service
        FROM leases l JOIN worlds w ON w.id = l.world_id JOIN projects p ON p.id = w.project_id`).map((r) => [
        Number(r.port),
        `${String(r.project)}/${String(r.world)} ${String(r.service)}`
      ])
    )
    const groups = new Set(rows("SELECT pgid FROM services WHERE pgid IS NOT NULL").map((r) => Number(r.pgid)))
    const worlds = new Set(
      rows(`SELECT COALESCE(p.label, p.name) AS project, w.name AS world FROM worlds w
        JOIN projects p ON p.id = w.project_id`).map((r) => `${String(r.project)}/${String(r.world)}`)
    )
    return { integrity, migrations, range, leases, groups, worlds }
  } catch (e) {
    return e instanceof Error ? e.message : String(e)
  } finally {
    db?.close()
  }
}

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** Every listening TCP socket and, where this user may see it, the process holding it (from the Platform). */
export const listeners = (): ReadonlyArray<Listener> => Effect.runSync(platformHere.listeners)

const WORLD_VARIABLES = ["BERTH_PROJECT", "BERTH_WORLD", "BERTH_SERVICE"]

/** The processes whose environment says which world and service they belong to. */
export const worldProcesses = (): ReadonlyArray<WorldProcess> =>
  Effect.runSync(platformHere.environs(WORLD_VARIABLES)).flatMap(({ pid, pgid, values }) => {
    if (pid === process.pid) return []
    const project = values.get("BERTH_PROJECT")
    const world = values.get("BERTH_WORLD")
    const service = values.get("BERTH_SERVICE")
    if (project === undefined || world === undefined || service === undefined) return []
    return [{ pid, pgid, project, world, service }]
  })

/** The kernel's range for outgoing connections' local ports, where the Platform can read it. */
export const ephemeralRange = (): PortRange | undefined => Effect.runSync(platformHere.ephemeralPorts)

/** The system's bundle of trusted CAs, where the distribution keeps one. */
export const systemBundle = (): { readonly path: string; readonly text: string } | undefined => {
  for (const path of [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem"
  ]) {
    const text = read(path)
    if (text !== undefined) return { path, text }
  }
  return undefined
}

/** Whether an NSS database holds a certificate of this nickname (`certutil -L`); undefined without certutil. */
export const nssHolds = (database: string, nickname: string): boolean | undefined => {
  try {
    execFileSync("certutil", ["-L", "-d", `sql:${database}`, "-n", nickname], { stdio: "ignore", timeout: 5_000 })
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT" ? undefined : false
  }
}

export const fileText = (path: string): string | undefined => (existsSync(path) ? read(path) : undefined)
