/**
 * `down` when no daemon can start (a full disk, a state database it cannot open): the worlds' processes are found by
 * their marks and stopped, as a starting daemon stops strays (`Processes.marked`, `stopGroups`: one implementation),
 * and the worlds are recorded down in the state database when it can be written, so the next daemon leaves them down.
 */
import * as Effect from "effect/Effect"
import type { WorldStatus } from "../../daemon/api.js"
import { isDiskFull } from "../../domain/disk.js"
import type { DaemonUnavailable, DiskFull } from "../../domain/errors.js"
import { groupsOfWorlds, type RecordedWorld, worldsNamed } from "../../domain/marks.js"
import { diskFullAt } from "../../services/disk.js"
import type { HomePaths } from "../../services/Home.js"
import { Processes } from "../../services/Processes.js"
import { openDatabase, type SqliteDatabase } from "../../services/sqlite.js"

/** how long a service's group gets to end on SIGTERM before it is killed, as a `down` gives it */
const STOP_GRACE_MS = 10_000

interface Recorded extends RecordedWorld {
  readonly label: string
  readonly branch: string | null
  readonly main: boolean
}

/** Every world the state database records, read-only; undefined when it cannot be read. */
const recordedWorlds = (file: string): ReadonlyArray<Recorded> | undefined => {
  let db: SqliteDatabase | undefined
  try {
    db = openDatabase(file, { readonly: true })
    return db
      .prepare(
        `SELECT w.id, w.project_id, w.name, w.slug, w.path, w.branch, w.is_main, p.label
         FROM worlds w JOIN projects p ON p.id = w.project_id`
      )
      .all()
      .map((r) => ({
        id: Number(r.id),
        project: Number(r.project_id),
        name: String(r.name),
        slug: String(r.slug),
        path: String(r.path),
        branch: r.branch === null ? null : String(r.branch),
        main: Number(r.is_main) === 1,
        label: String(r.label)
      }))
  } catch {
    return undefined
  } finally {
    db?.close()
  }
}

/** Records the worlds down and their services stopped; the failure when the database cannot be written. */
const recordDown = (file: string, ids: ReadonlyArray<number>): unknown => {
  let db: SqliteDatabase | undefined
  try {
    db = openDatabase(file, { readonly: false })
    const world = db.prepare("UPDATE worlds SET desired = 'down', observed = 'stopped', reason = NULL WHERE id = ?")
    const services = db.prepare(
      "UPDATE services SET observed = 'stopped', pid = NULL, pgid = NULL, start_time = NULL WHERE world_id = ?"
    )
    db.transaction(() => {
      for (const id of ids) {
        world.run(id)
        services.run(id)
      }
    })()
    return undefined
  } catch (e) {
    return e ?? "unknown"
  } finally {
    db?.close()
  }
}

export interface StoppedWithoutDaemon {
  readonly worlds: ReadonlyArray<WorldStatus>
  /** why the worlds could not be recorded down: the next daemon starts them again */
  readonly unrecorded: DiskFull | string | undefined
}

/**
 * Stops the processes of the worlds a `down` names without a daemon. Fails with `why` (the daemon's failure to start)
 * when the worlds cannot be told from the state database.
 */
export const downWithoutDaemon = (
  home: HomePaths,
  ask: { readonly cwd: string; readonly name: string | undefined; readonly all: boolean },
  why: DaemonUnavailable | DiskFull
) =>
  Effect.gen(function* () {
    const processes = yield* Processes
    const recorded = recordedWorlds(home.database)
    if (recorded === undefined) return yield* Effect.fail(why)
    const targets = worldsNamed(recorded, ask) as ReadonlyArray<Recorded>
    if (targets.length === 0) return yield* Effect.fail(why)
    const groups = groupsOfWorlds(yield* processes.marked, home.root, new Set(targets.map((t) => t.id)))
    yield* processes.stopGroups(groups, STOP_GRACE_MS)
    const failure = recordDown(
      home.database,
      targets.map((t) => t.id)
    )
    const unrecorded =
      failure === undefined
        ? undefined
        : isDiskFull(failure)
          ? diskFullAt(home.database, home.root)
          : failure instanceof Error
            ? failure.message
            : String(failure)
    const worlds = targets.map(
      (t): WorldStatus => ({
        project: t.label,
        name: t.name,
        slug: t.slug,
        path: t.path,
        branch: t.branch,
        main: t.main,
        desired: unrecorded === undefined ? "down" : "up",
        state: "stopped",
        reason: `stopped without the daemon, which could not start: ${why.message.split("\n")[0] ?? ""}`,
        services: [],
        events: []
      })
    )
    return { worlds, unrecorded } satisfies StoppedWithoutDaemon
  })
