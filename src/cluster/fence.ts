/**
 * The daemon's half of the fence (`domain/fence.ts`): while this machine is a member, its hold on what it runs is
 * renewed with every lock refresh that keeps all its shards and with every heartbeat; the lease file says until when
 * that hold is good; the watchdog beside the daemon (`watchdog.ts`) stops the worlds that run anywhere here once it is
 * not, and the holder (`holder.ts`), told each deadline, kills them at once should the machine wake past it; and no
 * process of such a world starts here while the hold is stale (the rule installed in the `Fence` service).
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { ANYWHERE_SETTING, anywhereIds, timings } from "../domain/cluster.js"
import {
  FENCE_GRACE_MS,
  type FenceLease,
  formatLease,
  HOLDER_TICK_MS,
  holdUntil,
  leaseLets,
  parseLease,
  refreshRenews,
  STALL_MS
} from "../domain/fence.js"
import { isAtRest } from "../domain/world-state.js"
import { Fence } from "../services/Fence.js"
import { Home } from "../services/Home.js"
import { Registry } from "../services/Registry.js"
import { type Holder, makeHolder } from "./holder.js"

/** How often the lease file is brought up to date (it changes with each renewal, every lock refresh). */
const WRITE_EVERY_MS = 250

/**
 * This machine's hold on what it runs, while a session runs: when its last full lock refresh started, and when its last
 * heartbeat did (the cluster's placer gives a world that runs anywhere to another machine once the heartbeat is old).
 */
export interface Hold {
  refreshedAt: number | undefined
  beatAt: number | undefined
}

export const holdGood = (hold: Hold, now: number = Date.now()): boolean =>
  now < holdUntil(hold, timings.lockExpirationMs)

/**
 * The engine's lock storage, with each refresh that kept every shard it asked for renewing `hold` (from the moment the
 * refresh started: the database stamps the locks later). A refresh that lost a shard renews nothing: the engine stops
 * that shard's entities, and until the next full refresh nothing of a world that runs anywhere starts here. Nor does
 * one that asked for none (`refreshRenews`).
 */
export const renewing = (hold: Hold) =>
  Layer.effect(
    RunnerStorage.RunnerStorage,
    Effect.map(RunnerStorage.RunnerStorage, (inner) =>
      RunnerStorage.RunnerStorage.of({
        ...inner,
        refresh: (address, shardIds) =>
          Effect.suspend(() => {
            const at = Date.now()
            const asked = Array.from(shardIds, String)
            return Effect.tap(inner.refresh(address, shardIds), (kept) =>
              Effect.sync(() => {
                if (refreshRenews(asked, kept.map(String))) hold.refreshedAt = at
              })
            )
          })
      })
    )
  )

/** Where the watchdog's program is: beside the bundle that runs (dist/), absent when berth runs from its sources. */
const watchdogProgram = (): string | undefined => {
  const path = fileURLToPath(new URL("berth-watchdog.cjs", import.meta.url))
  return existsSync(path) ? path : undefined
}

/**
 * For one membership session: starts the watchdog, keeps the lease file true every moment of the session, and says
 * `done` when the session ends with none of its worlds that run anywhere still running (the engine's entities are
 * closed before this scope's finalizer runs, as they were built after it, and stop their worlds; `daemon stop` drains
 * them first). A session that ends with one still running leaves the lease as it is: the watchdog stops it when the
 * hold runs out, unless the next session renews it first.
 */
export const keepLease = (hold: Hold, holder: Pick<Holder, "deadline">) =>
  Effect.gen(function* () {
    const home = yield* Home
    const registry = yield* Registry
    const session = randomBytes(6).toString("hex")
    const lease = (worlds: ReadonlyArray<number>, done: boolean): FenceLease => ({
      daemon: process.pid,
      session,
      until: holdUntil(hold, timings.lockExpirationMs),
      worlds,
      home: home.root,
      done
    })
    let written = ""
    const write = (next: FenceLease) =>
      Effect.sync(() => {
        const text = formatLease(next)
        if (text === written) return
        // whole or not at all: the watchdog never reads half a lease
        const temporary = `${home.fenceFile}.${session}`
        writeFileSync(temporary, text, { mode: 0o600 })
        renameSync(temporary, home.fenceFile)
        written = text
        // and the holder, which fences what it holds at once should the machine stand still past it
        holder.deadline(next.until)
      })
    const running = Effect.gen(function* () {
      const ids = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))
      const still: Array<number> = []
      for (const id of ids) {
        const w = yield* registry.world(id)
        if (w !== undefined && !isAtRest(w.observed)) still.push(id)
      }
      return still
    })
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        const still = yield* running
        if (still.length === 0) return yield* write(lease([], true))
        yield* Effect.logWarning(
          `berth cluster: the session ended with worlds ${still.join(", ")} still running here: the fence stops them unless the next session renews the hold in time`
        )
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: ending the fence's lease", cause)))
    )
    yield* write(lease([], false))
    const program = watchdogProgram()
    if (program === undefined) {
      yield* Effect.logWarning(
        "berth cluster: no watchdog beside this build (berth-watchdog.cjs): a frozen daemon's worlds that run anywhere are not fenced"
      )
    } else {
      yield* Effect.sync(() =>
        spawn(process.execPath, [program, home.root, String(process.pid), session], {
          detached: true,
          stdio: "ignore",
          // BERTH_HOME names whose it is (to `ps e`, and to whatever stops everything of a home)
          env: { PATH: process.env.PATH ?? "", BERTH_HOME: home.root }
        }).unref()
      )
    }
    const refresh = Effect.gen(function* () {
      const worlds = anywhereIds(yield* registry.getSetting(ANYWHERE_SETTING))
      yield* write(lease(worlds, false))
    })
    yield* refresh.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("berth cluster: writing the fence's lease", cause)),
      Effect.repeat(Schedule.spaced(Duration.millis(WRITE_EVERY_MS))),
      Effect.forkScoped
    )
  })

/**
 * The rule for the `Fence` service while this daemon may be a member: a world that runs anywhere starts its processes
 * only while the hold is good and the cluster gives the world to this machine (`owns`, as last read with the hold's
 * renewal: a daemon that thaws learns whether it still does before anything of it starts again); it waits
 * (interruptibly) otherwise. Pinned worlds, and every world of a machine that is in no cluster, start at once.
 */
export const installRule = (
  hold: Hold,
  cluster: {
    readonly member: Effect.Effect<boolean>
    readonly owns: (project: string, slug: string) => Effect.Effect<boolean>
  }
) =>
  Effect.gen(function* () {
    const fence = yield* Fence
    const registry = yield* Registry
    const anywhere = (worldId: number) =>
      Effect.map(registry.getSetting(ANYWHERE_SETTING), (v) => anywhereIds(v).includes(worldId)).pipe(
        Effect.orElseSucceed(() => true)
      )
    const home = yield* Home
    /** the lease as the watchdog reads it: a hold renewed a moment ago may not be in the file yet */
    const leaseOnDisk = () => {
      try {
        return parseLease(readFileSync(home.fenceFile, "utf8"))
      } catch {
        return undefined
      }
    }
    const mayRun = (worldId: number) =>
      Effect.gen(function* () {
        if (!(yield* cluster.member)) return true
        if (!holdGood(hold)) return false
        // what starts now must be let by the lease the watchdog reads, or a look of its from before the renewal could
        // take the new copy for a fenced one (the watchdog reads the lease again after its look: `leaseLets`)
        if (!leaseLets(leaseOnDisk(), process.pid, Date.now())) return false
        const w = yield* registry.world(worldId).pipe(Effect.orElseSucceed(() => undefined))
        return w !== undefined && (yield* cluster.owns(w.projectName, w.slug))
      })
    // each service of a world that runs anywhere ends with this daemon, even with nothing of berth left to stop it,
    // and at once when the machine wakes from a stall the cluster may have given it up during
    const holder = makeHolder({
      graceMs: FENCE_GRACE_MS,
      tickMs: HOLDER_TICK_MS,
      stallMs: STALL_MS,
      files: { lease: home.fenceFile, fenced: home.fencedFile, log: home.daemonLog },
      // BERTH_HOME names whose it is, as the watchdog's does
      env: { PATH: process.env.PATH ?? "", BERTH_HOME: home.root }
    })
    yield* fence.install((worldId) =>
      Effect.gen(function* () {
        if (!(yield* anywhere(worldId))) return
        while (!(yield* mayRun(worldId))) yield* Effect.sleep(Duration.millis(100))
        // the holder is older than what it will hold: a machine that wakes wakes its processes oldest first
        if (yield* cluster.member) holder.start()
      })
    )
    const tie = (pgid: number) =>
      Effect.acquireRelease(
        Effect.sync(() => holder.hold(pgid)),
        () => Effect.sync(() => holder.release(pgid))
      )
    yield* fence.installTie((worldId, pgid) =>
      Effect.gen(function* () {
        if (!(yield* cluster.member)) return
        // a world that runs anywhere is marked before it is told to start (the entity's `before`), so its first
        // process finds the mark: nothing to look at again
        if (yield* anywhere(worldId)) yield* tie(pgid)
      })
    )
    return holder
  })
