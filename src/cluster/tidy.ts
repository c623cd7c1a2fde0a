/**
 * This machine's copies of worlds that run anywhere, looked after at each round once the shared table is read afresh:
 * the copies the watchdog fenced while the daemon was frozen or cut off are counted as stopped; a copy that waits in
 * this machine's line goes to a machine with room; a copy nobody wants here any more (the world was removed, or given
 * to another machine meanwhile) is stopped and goes.
 */
import { readFileSync } from "node:fs"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import { Down, Remove } from "../actors/protocol.js"
import type { WorldsService } from "../actors/Worlds.js"
import { ANYWHERE_SETTING, anywhereIds, moveWaiting } from "../domain/cluster.js"
import { fencedMessage, newlyFenced, parseFenced } from "../domain/fence.js"
import { isAtRest } from "../domain/world-state.js"
import type { AdmissionService } from "../services/Admission.js"
import type { RegistryService } from "../services/Registry.js"
import { markAnywhere } from "./anywhere.js"
import type { AnywhereRow, Store } from "./store.js"
import type { ClusterState } from "./view.js"

export interface TidyOptions {
  readonly registry: RegistryService
  readonly worlds: Pick<WorldsService, "tell">
  readonly admission: Pick<AdmissionService, "entry">
  readonly state: ClusterState
  /** the watchdog's record of what it fenced (`domain/fence.ts`) */
  readonly fencedFile: string
  /** this daemon's pid: the record names the daemon whose worlds it fenced */
  readonly daemon: number
}

export const makeTidy = (options: TidyOptions) =>
  Effect.gen(function* () {
    const { registry, worlds, admission, state } = options
    /** when the last fenced record this daemon counted was made */
    const fencedSince = yield* Ref.make(0)

    /**
     * The copies the watchdog fenced while this daemon was frozen or cut off are stopped, whatever their actors saw
     * (a service killed from outside may be listed failed, or wait to restart; a start the fence cut short leaves the
     * world failed, still wanted up): each is taken down here, with an event that says why, so that the world's entity
     * starts it again once this machine holds it again, or the cluster runs it elsewhere. A copy left listed as running
     * would never be started again.
     */
    const countFenced = Effect.gen(function* () {
      const text = yield* Effect.sync(() => {
        try {
          return readFileSync(options.fencedFile, "utf8")
        } catch {
          return ""
        }
      })
      const record = parseFenced(text)
      const ids = newlyFenced(record, options.daemon, yield* Ref.get(fencedSince))
      if (record === undefined || ids.length === 0) return
      yield* Ref.set(fencedSince, record.at)
      for (const id of ids) {
        const w = yield* registry.world(id)
        // a copy already stopped and wanted down is counted; one that failed (its start was fenced) is wanted up
        // still, and would be left failed for good
        if (w === undefined || (w.desired !== "up" && isAtRest(w.observed))) continue
        yield* registry.addEvent({ worldId: id, service: null, kind: "fenced", message: fencedMessage(record.at) })
        yield* worlds.tell(id, new Down()).pipe(Effect.ignore)
        yield* Effect.logWarning(
          `berth cluster: world ${w.name} was fenced here while this daemon was frozen or cut off: it is stopped, and starts again once the cluster gives it back`
        )
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: counting fenced copies", cause)))

    /**
     * This machine's copies of worlds that run anywhere which it no longer runs and nobody wants here: the world was
     * removed, or another machine took it over while this daemon was away (its copy was stopped, never adopted). They
     * go, worktree and all, unless it holds changes of its own (then they stay, stopped). berth's clone of the project
     * stays: the next world of it starts from there.
     */
    const tidy = (anywhere: ReadonlyArray<AnywhereRow>, machine: string, store: Pick<Store, "letGo">) =>
      Effect.gen(function* () {
        const ids = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))
        if (ids.length === 0) return
        const { machines } = yield* state.view.get
        // only what went is unmarked, never the list as read: an entity may mark a world while this runs
        const gone: Array<number> = []
        for (const id of ids) {
          const w = yield* registry.world(id)
          if (w === undefined) {
            gone.push(id)
            continue
          }
          const row = anywhere.find((r) => r.project === w.projectName && r.slug === w.slug)
          const waiting = w.observed === "queued" ? admission.entry(id) : undefined
          if (row?.owner === machine && waiting !== undefined) {
            if (moveWaiting((yield* Clock.currentTimeMillis) - waiting.since, machines, machine)) {
              // another machine would start it now: it leaves this machine's line, and the placer gives it that one
              yield* worlds.tell(id, new Down()).pipe(Effect.ignore)
              yield* store.letGo(row.project, row.slug, machine, `it waited in line on ${machine}`)
              yield* Effect.logInfo(`berth cluster: world ${w.name} waited here; another machine has room for it`)
            }
            continue
          }
          const stale = row === undefined || row.desired === "removed" || (row.owner !== null && row.owner !== machine)
          if (stale && row !== undefined && row.owner !== machine && !isAtRest(w.observed)) {
            // given to another machine while this one was frozen or cut off: this copy must not run beside that one
            yield* worlds.tell(id, new Down()).pipe(Effect.ignore)
          }
          if (!stale || !isAtRest(w.observed)) continue
          const removed = yield* worlds.tell(id, new Remove({ force: false })).pipe(Effect.either)
          if (removed._tag === "Right" || removed.left._tag === "WorldNotFound") gone.push(id)
        }
        if (gone.length > 0) yield* markAnywhere(registry, gone, false)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: tidying worlds that moved", cause)))

    return { countFenced, tidy }
  })
