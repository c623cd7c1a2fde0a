/**
 * The world's rows as its actor writes them: its observed state (from `apply`) and each of its services' rows (the one
 * writer, `saveRow`). What could not be written when it happened (a full disk) is kept, and `flush` — asked on every
 * reconciler pass — writes it once it can.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { WorldState } from "../../domain/world-state.js"
import type { RegistryService, ServiceRow } from "../../services/Registry.js"
import type { ServiceSnapshot } from "../ServiceActor.js"

export const makeRows = (deps: {
  readonly worldId: number
  readonly registry: RegistryService
  /** the world's observed state and why, as the actor holds it now */
  readonly observed: Effect.Effect<{ readonly state: WorldState; readonly reason: string | null }>
}) => {
  const { worldId, registry } = deps
  /**
   * What could not be written when it happened (the disk was full): the world's observed state (its latest is always
   * in `observed`) and each service's latest row. `flush`, on every reconciler pass, writes them once it can.
   */
  const unwritten = { world: false, services: new Map<string, ServiceRow>() }
  /**
   * The one writer of the world's service rows (each service's snapshot as it changes, and what the actor settles
   * of a service no generation runs): saves the row now, or keeps it for `flush` when it cannot be written.
   */
  const saveRow = (row: ServiceRow) =>
    Effect.flatMap(Effect.exit(registry.saveService(row)), (written) =>
      Effect.sync(() => {
        // whatever went wrong (a driver that threw, too): the row waits, and the service's record goes on
        if (Exit.isFailure(written)) unwritten.services.set(row.name, row)
        else unwritten.services.delete(row.name)
      })
    )
  /** A service's final snapshot replaces a row still waiting to be written: the row shows how it ended. */
  const keepFinal = (name: string, snap: ServiceSnapshot) =>
    Effect.sync(() => {
      const row = unwritten.services.get(name)
      if (row === undefined) return
      unwritten.services.set(name, {
        ...row,
        observed: snap.state,
        pid: snap.handle?.pid ?? null,
        pgid: snap.handle?.pgid ?? null,
        startTime: snap.handle?.startTime ?? null,
        restarts: snap.restarts,
        reason: snap.reason ?? null
      })
    })
  /**
   * The intent of a stop, written before it begins, in one transaction: the rows of `names` that have a process, each
   * `stopping`. It fails (a full disk) rather than let a stop go unwritten, and the command that asked stops nothing:
   * a daemon that died after a stop it could not write would take the process for one that ended by itself (left
   * `exited`, `restart = "no"`) and what started in its place for a stray. Written, a crash finds a stop in flight,
   * which the next daemon finishes and starts again.
   */
  const markStopping = (names: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const stored = yield* registry.services(worldId)
      const rows = names.flatMap((name) => {
        const row = unwritten.services.get(name) ?? stored.find((r) => r.name === name)
        return row === undefined || row.pid === null ? [] : [{ ...row, observed: "stopping" as const }]
      })
      if (rows.length === 0) return
      yield* registry.saveServices(worldId, rows)
      // written with the latest of each: an older row kept for `flush` must not come after it
      for (const row of rows) unwritten.services.delete(row.name)
    })
  /** The world's observed state written as `apply` records a move; one that cannot be written now waits for `flush`. */
  const writeObserved = (state: WorldState, reason: string | null) =>
    Effect.map(Effect.exit(registry.setObserved(worldId, state, reason)), (written) => {
      unwritten.world = Exit.isFailure(written)
    })
  const flush = Effect.gen(function* () {
    if (unwritten.world) {
      const now = yield* deps.observed
      const written = yield* Effect.exit(registry.setObserved(worldId, now.state, now.reason))
      if (Exit.isSuccess(written)) unwritten.world = false
    }
    for (const row of [...unwritten.services.values()]) {
      const written = yield* Effect.exit(registry.saveService(row))
      if (Exit.isSuccess(written) && unwritten.services.get(row.name) === row) unwritten.services.delete(row.name)
    }
  })
  /** Whether `flush` has anything to write: the reconciler looks every few seconds, at every world. */
  const unwrittenLeft = (): boolean => unwritten.world || unwritten.services.size > 0
  return { saveRow, keepFinal, markStopping, writeObserved, flush, unwrittenLeft }
}

export type Rows = ReturnType<typeof makeRows>
