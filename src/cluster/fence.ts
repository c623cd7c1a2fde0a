/**
 * The daemon's half of the fence (`domain/fence.ts`): while this machine is a member, its hold on its shards is
 * renewed with every lock refresh that keeps all of them; the lease file says until when that hold is good; the
 * watchdog beside the daemon (`watchdog.ts`) stops the worlds that run anywhere here once it is not; and no process of
 * such a world starts here while the hold is stale (the rule installed in the `Fence` service).
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, renameSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { ANYWHERE_SETTING, anywhereIds, timings } from "../domain/cluster.js"
import { type FenceLease, formatLease, leaseUntil } from "../domain/fence.js"
import { Fence } from "../services/Fence.js"
import { Home } from "../services/Home.js"
import { Registry } from "../services/Registry.js"

/** How often the lease file is brought up to date (it changes with each renewal, every lock refresh). */
const WRITE_EVERY_MS = 250

/** This machine's hold on its shards: when its last full lock refresh started, while a session runs. */
export interface Hold {
  renewedAt: number | undefined
}

export const holdGood = (hold: Hold, now: number = Date.now()): boolean =>
  hold.renewedAt !== undefined && now < leaseUntil(hold.renewedAt, timings.lockExpirationMs)

/**
 * The engine's lock storage, with each refresh that kept every shard it asked for renewing `hold` (from the moment the
 * refresh started: the database stamps the locks later). A refresh that lost a shard renews nothing: the engine stops
 * that shard's entities, and until the next full refresh nothing of a world that runs anywhere starts here.
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
                const held = new Set(kept.map(String))
                if (asked.every((id) => held.has(id))) hold.renewedAt = at
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
 * `done` when the session ends (its worlds that run anywhere have been stopped by then: the engine's entities are
 * closed before this scope's finalizer runs, as they were built after it).
 */
export const keepLease = (hold: Hold) =>
  Effect.gen(function* () {
    const home = yield* Home
    const registry = yield* Registry
    const session = randomBytes(6).toString("hex")
    const lease = (worlds: ReadonlyArray<number>, done: boolean): FenceLease => ({
      daemon: process.pid,
      session,
      until: hold.renewedAt === undefined ? 0 : leaseUntil(hold.renewedAt, timings.lockExpirationMs),
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
      })
    yield* Effect.addFinalizer(() =>
      write(lease([], true)).pipe(
        Effect.catchAllDefect((defect) => Effect.logWarning("berth cluster: ending the fence's lease", defect))
      )
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
 * only while the hold is good; it waits (interruptibly) for the next renewal otherwise. Pinned worlds, and every world
 * of a machine that is in no cluster, start at once.
 */
export const installRule = (hold: Hold, member: () => boolean) =>
  Effect.gen(function* () {
    const fence = yield* Fence
    const registry = yield* Registry
    const anywhere = (worldId: number) =>
      Effect.map(registry.getSetting(ANYWHERE_SETTING), (v) => anywhereIds(v).includes(worldId)).pipe(
        Effect.orElseSucceed(() => true)
      )
    const good = Effect.sync(() => !member() || holdGood(hold))
    yield* fence.install((worldId) =>
      Effect.gen(function* () {
        if (!(yield* anywhere(worldId))) return
        while (!(yield* good)) yield* Effect.sleep(Duration.millis(100))
      })
    )
  })
