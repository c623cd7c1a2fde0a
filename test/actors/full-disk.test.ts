/**
 * A command that stops processes, on a full disk (every write of the state database refused, as SQLite's SQLITE_FULL
 * is): it stops nothing it could not record. A stop berth could not write down is taken after a crash for a process
 * that ended by itself (`restart = "no"`: left exited), and what it started instead for a process nobody recorded.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import { CONFIRM_MS } from "../../src/actors/ServiceActor.js"
import { DiskFull } from "../../src/domain/errors.js"
import type { RegistryError, RegistryService } from "../../src/services/Registry.js"
import { ALLOWED, eventually, passTime, type WorldHarness, worldHarness } from "./world.js"

const TOML = `[project]
name = "shop"

[services.api]
cmd = "serve api"
url = "api"
health = { cmd = "check api" }

[services.worker]
cmd = "work"
depends_on = ["api"]
health = { cmd = "check worker" }
`

/**
 * The state database on a disk that is full while `full` holds: every read works; every write fails, or (`rows`)
 * only those of service rows, as when SQLite's log still has room for a small update and none for more.
 */
const onFullDisk =
  (full: Ref.Ref<boolean>, refuses: "every write" | "rows") =>
  (real: RegistryService): RegistryService => {
    const refusedAlways = <A>(write: Effect.Effect<A, RegistryError>): Effect.Effect<A, RegistryError> =>
      Effect.flatMap(Ref.get(full), (isFull) =>
        isFull ? Effect.fail(new DiskFull({ path: "state.db", freeBytes: 0, home: "home" })) : write
      )
    const refused = refuses === "rows" ? <A>(write: Effect.Effect<A, RegistryError>) => write : refusedAlways
    return {
      ...real,
      saveService: (...a) => refusedAlways(real.saveService(...a)),
      saveServices: (...a) => refusedAlways(real.saveServices(...a)),
      setDesired: (...a) => refused(real.setDesired(...a)),
      setObserved: (...a) => refused(real.setObserved(...a)),
      setSelection: (...a) => refused(real.setSelection(...a)),
      setEnv: (...a) => refused(real.setEnv(...a)),
      setWakesOnRequest: (...a) => refused(real.setWakesOnRequest(...a)),
      dropServicesExcept: (...a) => refused(real.dropServicesExcept(...a)),
      setLeases: (...a) => refused(real.setLeases(...a)),
      releaseLeases: (...a) => refused(real.releaseLeases(...a)),
      addEvent: (...a) => refused(real.addEvent(...a)),
      setSetting: (...a) => refused(real.setSetting(...a))
    }
  }

const running = (h: WorldHarness) =>
  Effect.gen(function* () {
    yield* h.fakes.health.setDefault(true)
    yield* h.up("alpha")
    // worker starts once api is ready: both are confirmed together
    yield* passTime("api and worker stay up after their checks passed", CONFIRM_MS, 2)
    yield* h.awaitState("alpha", "running")
    return [yield* h.process("alpha", "api"), yield* h.process("alpha", "worker")]
  })

/** What runs now: each service's state and pid, and whether every process the fakes started is alive. */
const truth = (h: WorldHarness) =>
  Effect.gen(function* () {
    const status = yield* h.status("alpha")
    const all = yield* h.fakes.processes.all
    return {
      world: status?.state,
      services: (status?.services ?? []).filter((s) => s.kind === "process").map((s) => [s.name, s.state, s.pid]),
      alive: all.map((p) => p.alive)
    }
  })

/** a command of a world, and what it failed with (by tag) */
type Command = (h: WorldHarness) => Effect.Effect<unknown, { readonly _tag: string }>

const commands: ReadonlyArray<readonly [string, Command]> = [
  ["reload", (h) => h.engine.worlds.reload(h.ref("alpha"), ALLOWED, true)],
  ["restart -s api", (h) => h.engine.worlds.restartServices(h.ref("alpha"), ["api"])],
  ["stop -s api", (h) => h.engine.worlds.stopServices(h.ref("alpha"), ["api"])],
  [
    "a suspension for idleness",
    (h) => Effect.flatMap(h.idOf("alpha"), (id) => h.engine.worlds.suspend(id, "suspended: no request for 60 s", false))
  ]
]

describe.each(["every write", "rows"] as const)("on a full disk that refuses %s", (refuses) => {
  for (const [command, run] of commands) {
    it.scoped(`${command} stops nothing: it says DiskFull, and the same processes run on`, () =>
      Effect.gen(function* () {
        const full = yield* Ref.make(false)
        const h = yield* worldHarness(TOML, { registry: onFullDisk(full, refuses) })
        const [api, worker] = yield* running(h)
        const before = yield* truth(h)
        expect(before.services).toEqual([
          ["api", "healthy", api?.handle.pid],
          ["worker", "healthy", worker?.handle.pid]
        ])
        yield* Ref.set(full, true)
        const exit = yield* Effect.exit(run(h))
        expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error._tag : exit._tag).toBe("DiskFull")
        expect(yield* truth(h)).toEqual(before)
        // space is back: the same command does what it was asked
        yield* Ref.set(full, false)
        const again = yield* Effect.fork(run(h))
        if (command === "reload" || command === "restart -s api") {
          yield* passTime("api and worker stay up after their checks passed", CONFIRM_MS, 2)
          expect((yield* h.process("alpha", "api", 2)).alive).toBe(true)
        }
        yield* Fiber.join(again)
        expect((yield* h.fakes.processes.current(api!)).alive).toBe(false)
      })
    )
  }
})

describe("on a full disk, what an actor could not write", () => {
  it.scoped(
    "waits for the reconciler: a service's row the disk refused is written by its next look once space is back",
    () =>
      Effect.gen(function* () {
        const full = yield* Ref.make(false)
        // the rows of the worker's end that reached the database's door, written or not
        const tried = yield* Ref.make(0)
        const h = yield* worldHarness(TOML, {
          registry: (real) => {
            const onFull = onFullDisk(full, "rows")(real)
            return {
              ...onFull,
              saveService: (row) =>
                Effect.zipRight(
                  row.name === "worker" && row.observed === "exited" ? Ref.update(tried, (n) => n + 1) : Effect.void,
                  onFull.saveService(row)
                )
            }
          }
        })
        const [, worker] = yield* running(h)
        const id = yield* h.idOf("alpha")
        const workerRow = Effect.map(h.engine.registry.services(id), (rows) => rows.find((r) => r.name === "worker"))
        expect((yield* workerRow)?.observed).toBe("healthy")
        // the worker ends while no row can be written: its actor knows, the database does not
        yield* Ref.set(full, true)
        yield* h.fakes.processes.exit(worker!, { code: 0, signal: null })
        yield* eventually(
          "the worker's end is offered to the database",
          Effect.map(Ref.get(tried), (n) => n > 0)
        )
        expect((yield* workerRow)?.observed).toBe("healthy")
        // a look while the disk is still full writes nothing, and loses nothing
        yield* h.engine.worlds.reconcile()
        expect((yield* workerRow)?.observed).toBe("healthy")
        yield* Ref.set(full, false)
        yield* h.engine.worlds.reconcile()
        expect((yield* workerRow)?.observed).toBe("exited")
      })
  )
})
