/**
 * Whole worlds driven in-process (`test/actors/world.ts`): the real Worlds, WorldActors and ServiceActors, Registry,
 * Ports, Git and Admission, with fake processes, health verdicts, machine and slices under a TestClock. What is
 * asserted is what `Worlds.changes` streams, what `Worlds.status` answers and what the fake processes saw.
 */
import { existsSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { Down, Up } from "../../src/actors/protocol.js"
import { CONFIRM_MS } from "../../src/actors/ServiceActor.js"
import { ANYWHERE_SETTING } from "../../src/domain/cluster.js"
import { SAMPLE_EVERY_MS } from "../../src/services/Admission.js"
import { ALLOWED, awaitPending, eventually, passTime, type WorldHarness, worldHarness } from "./world.js"

/**
 * A slice and three processes: api and mail start together, worker once api is ready. Each has a check, so the fake
 * Health decides when it is ready; worker restarts on failure after a 1 s backoff.
 */
const SHOP = `[project]
name = "shop"

[services.db]
adapter = "dir"

[services.api]
cmd = "serve api --db \${db.url}"
url = "api"
health = { cmd = "check api" }

[services.mail]
cmd = "send mail"
health = { cmd = "check mail" }

[services.worker]
cmd = "work"
depends_on = ["api"]
health = { cmd = "check worker" }
restart = "on-failure"
restart_backoff = "1s"
`

const WORKER_BACKOFF_MS = 1_000

/**
 * Every service passes its first check: api and mail, then worker, which waits for api to be ready (at its pass). Each
 * must then stay up CONFIRM_MS, all three at once: the world runs before that is over, and is settled after it.
 */
const startServices = passTime("api, mail and worker stay up after their checks passed", CONFIRM_MS, 3)

/** `up` of the world, and the time its services need to be ready: it runs. */
const bringUp = (h: WorldHarness, world: string) =>
  Effect.gen(function* () {
    yield* h.up(world)
    yield* startServices
    yield* h.awaitState(world, "running")
  })

const servicesOf = (h: WorldHarness, world: string) =>
  Effect.map(h.status(world), (s) => (s?.services ?? []).filter((x) => x.kind === "process"))

describe("a world driven in-process", () => {
  it.scoped("up starts every service once and runs; down stops them all; its ports are kept across down and up", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      const { worlds, registry } = h.engine
      yield* h.fakes.health.setDefault(true)

      // answered before its services are ready; the fakes' checks pass at once, so it may run already
      const upped = yield* h.up("alpha")
      expect(["starting", "running"]).toContain(upped.state)
      yield* startServices
      yield* h.awaitState("alpha", "running")
      expect(yield* h.moves("alpha")).toEqual(["stopped>starting", "starting>running"])

      const spawned = yield* h.fakes.processes.all
      expect(spawned.map((p) => p.spec.env.BERTH_SERVICE).sort()).toEqual(["api", "mail", "worker"])
      expect(spawned.every((p) => p.alive)).toBe(true)
      // the slice was made before any process, and its address reached the command that names it
      expect(yield* h.fakes.slices.calls).toEqual(["provision alpha/db"])
      const api = yield* h.process("alpha", "api")
      expect(api.spec.command).toContain("fake://alpha/db")

      const running = yield* servicesOf(h, "alpha")
      expect(running.map((s) => [s.name, s.state])).toEqual([
        ["api", "healthy"],
        ["mail", "healthy"],
        ["worker", "healthy"]
      ])
      const apiPort = running.find((s) => s.name === "api")?.port
      expect(api.spec.env.PORT).toBe(String(apiPort))
      const id = yield* h.idOf("alpha")
      const leases = yield* registry.leases(id)
      expect(leases.map((l) => [l.service, l.port])).toEqual([["api", apiPort]])

      yield* worlds.down(h.ref("alpha"), false)
      expect(yield* h.moves("alpha")).toEqual([
        "stopped>starting",
        "starting>running",
        "running>stopping",
        "stopping>stopped"
      ])
      const stopped = yield* h.fakes.processes.all
      expect(stopped.every((p) => !p.alive && p.stoppedWithGraceMs !== undefined)).toBe(true)
      // in reverse dependency order: worker before api, which it depends on
      const order = yield* h.fakes.processes.stopOrder
      const worker = yield* h.process("alpha", "worker")
      expect(order.indexOf(worker.handle.pid)).toBeLessThan(order.indexOf(api.handle.pid))
      expect(yield* registry.leases(id)).toEqual(leases)

      // up again: new processes, the same ports, the slice found again rather than made
      yield* h.up("alpha")
      yield* startServices
      yield* h.awaitState("alpha", "running")
      expect((yield* h.moves("alpha")).slice(4)).toEqual(["stopped>starting", "starting>running"])
      expect(yield* h.fakes.processes.spawnCount).toBe(6)
      expect(yield* registry.leases(id)).toEqual(leases)
      expect((yield* h.process("alpha", "api", 2)).spec.env.PORT).toBe(String(apiPort))
      expect(yield* h.fakes.slices.calls).toEqual(["provision alpha/db", "provision alpha/db"])
    })
  )

  it.scoped(
    "with max_parallel = 1 a second world waits in line, starts when the first goes down, and leaves the line on down",
    () =>
      Effect.gen(function* () {
        const h = yield* worldHarness(SHOP)
        const { worlds, admission } = h.engine
        yield* h.fakes.health.setDefault(true)
        yield* admission.setSettings({ maxParallel: 1 })
        yield* bringUp(h, "alpha")

        const beta = yield* h.up("beta")
        expect(beta.state).toBe("queued")
        expect(beta.reason).toBe("waiting for a slot (1 of 1 worlds run)")
        expect(beta.queue).toEqual({ position: 1, waitingFor: "a slot (1 of 1 worlds run)" })
        expect(yield* h.processesOf("beta", "api")).toEqual([])

        // the first world's permit goes back with its down: the head of the line gets it
        yield* worlds.down(h.ref("alpha"), false)
        yield* h.awaitMoves("beta", 2)
        yield* startServices
        yield* h.awaitState("beta", "running")
        expect(yield* h.moves("beta")).toEqual(["stopped>queued", "queued>starting", "starting>running"])
        expect((yield* h.status("beta"))?.queue).toBeUndefined()

        // a down of a world still in line takes it out: it never starts, nothing of it is made
        const gamma = yield* h.up("gamma")
        expect(gamma.queue?.position).toBe(1)
        yield* worlds.down(h.ref("gamma"), false)
        expect(yield* h.moves("gamma")).toEqual(["stopped>queued", "queued>stopping", "stopping>stopped"])
        expect(yield* admission.queue).toEqual([])
        expect((yield* h.status("gamma"))?.queue).toBeUndefined()
        for (const service of ["api", "mail", "worker"]) expect(yield* h.processesOf("gamma", service)).toEqual([])
        expect((yield* h.fakes.slices.calls).filter((c) => c.includes("gamma"))).toEqual([])
        // the world that runs was never disturbed
        expect(yield* h.moves("beta")).toEqual(["stopped>queued", "queued>starting", "starting>running"])
        expect(admission.holds(yield* h.idOf("beta"))).toBe(true)
      })
  )

  it.scoped(
    "a suspended world stops its processes, keeps its ports and slices, and comes back when there is room",
    () =>
      Effect.gen(function* () {
        const h = yield* worldHarness(SHOP)
        const { worlds, registry } = h.engine
        yield* h.fakes.health.setDefault(true)
        yield* bringUp(h, "alpha")
        const id = yield* h.idOf("alpha")
        const leases = yield* registry.leases(id)
        const first = yield* h.fakes.processes.all

        // memory is plentiful: the world is back in line at once, admitted, and starts again
        yield* worlds.suspend(id, "memory is short", true)
        expect((yield* h.moves("alpha")).slice(0, 5)).toEqual([
          "stopped>starting",
          "starting>running",
          "running>suspending",
          "suspending>suspended",
          "suspended>starting"
        ])
        for (const p of first) expect((yield* h.fakes.processes.current(p)).alive).toBe(false)
        yield* startServices
        yield* h.awaitState("alpha", "running")
        expect((yield* h.moves("alpha")).at(-1)).toBe("starting>running")
        expect(yield* registry.leases(id)).toEqual(leases)
        const api = yield* h.process("alpha", "api", 2)
        expect(api.spec.env.PORT).toBe(String(leases[0]?.port))
        // the slice was found again, never dropped
        expect(yield* h.fakes.slices.calls).toEqual(["provision alpha/db", "provision alpha/db"])
        expect(yield* h.fakes.slices.existing).toEqual(["alpha/db"])
      })
  )

  it.scoped("a world suspended while memory is short stays suspended, in line, until a reading shows memory back", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      const { worlds, registry, admission } = h.engine
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const id = yield* h.idOf("alpha")
      const leases = yield* registry.leases(id)

      // the gate learns of the shortage at its next reading, at most SAMPLE_EVERY_MS away
      yield* h.fakes.machine.setMemoryPercent(5)
      expect(yield* h.nextReading).toBeLessThanOrEqual(SAMPLE_EVERY_MS)
      yield* worlds.suspend(id, "memory is short", true)
      const suspended = ["stopped>starting", "starting>running", "running>suspending", "suspending>suspended"]
      expect(yield* h.moves("alpha")).toEqual(suspended)
      const status = yield* h.status("alpha")
      expect(status?.state).toBe("suspended")
      expect(status?.queue?.position).toBe(1)
      expect(status?.queue?.waitingFor).toMatch(/^memory \(5% free/)
      expect(admission.holds(id)).toBe(false)

      // another reading, still short: it stays where it is
      expect(yield* h.nextReading).toBe(SAMPLE_EVERY_MS)
      expect(yield* h.moves("alpha")).toEqual(suspended)
      expect(yield* h.fakes.processes.spawnCount).toBe(3)

      // memory is back: the next reading lets it in, and it starts on the ports it kept
      yield* h.fakes.machine.setMemoryPercent(80)
      expect(yield* h.nextReading).toBe(SAMPLE_EVERY_MS)
      yield* h.awaitMoves("alpha", suspended.length + 1)
      yield* startServices
      yield* h.awaitState("alpha", "running")
      expect(yield* h.moves("alpha")).toEqual([...suspended, "suspended>starting", "starting>running"])
      expect(yield* registry.leases(id)).toEqual(leases)
      expect((yield* h.process("alpha", "api", 2)).spec.env.PORT).toBe(String(leases[0]?.port))
      expect((yield* h.fakes.slices.calls).filter((c) => c.startsWith("teardown"))).toEqual([])
      expect(yield* admission.counters).toMatchObject({ suspended: 1, resumed: 1 })
    })
  )

  it.scoped("a service that dies before it is ready fails the start, stops the others and lets the next world in", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      const { admission } = h.engine
      yield* h.fakes.health.setDefault(true)
      // alpha's api never answers its check before it dies
      yield* h.fakes.health.setServiceHealthy("api", false)
      yield* admission.setSettings({ maxParallel: 1 })
      yield* h.up("alpha")
      const api = yield* h.process("alpha", "api")
      const mail = yield* h.process("alpha", "mail")
      yield* h.fakes.health.setHealthy(api.spec.logFile, false)
      // beta's api will pass; beta waits for alpha's permit meanwhile
      yield* h.fakes.health.setServiceHealthy("api", true)
      expect((yield* h.up("beta")).state).toBe("queued")

      yield* h.fakes.processes.exit(api, { code: 1, signal: null })
      yield* h.awaitState("alpha", "failed")
      expect(yield* h.moves("alpha")).toEqual(["stopped>starting", "starting>failed"])
      const failed = yield* h.status("alpha")
      expect(failed?.reason).toBe("api: exited (exit code 1)")
      // the rest of the world is stopped; worker, which waited for api, never started
      expect((yield* h.fakes.processes.current(mail)).alive).toBe(false)
      expect((yield* h.fakes.processes.current(mail)).stoppedWithGraceMs).toBeDefined()
      expect(yield* h.processesOf("alpha", "worker")).toEqual([])
      expect(admission.holds(yield* h.idOf("alpha"))).toBe(false)

      // the permit alpha gave back is beta's
      yield* h.awaitMoves("beta", 2)
      yield* startServices
      yield* h.awaitState("beta", "running")
      expect(yield* h.moves("beta")).toEqual(["stopped>queued", "queued>starting", "starting>running"])
    })
  )

  it.scoped("remove while the world is still starting interrupts the start and leaves nothing behind", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      const { worlds, registry, admission } = h.engine
      yield* h.fakes.health.setDefault(true)
      // api's check never passes: the start waits for it, and worker for api
      yield* h.fakes.health.setServiceHealthy("api", false)
      yield* h.up("alpha")
      yield* h.process("alpha", "api")
      yield* h.process("alpha", "mail")
      const path = (yield* h.status("alpha"))?.path ?? ""
      expect(existsSync(path)).toBe(true)

      yield* worlds.remove(h.ref("alpha"), false)
      expect(yield* h.moves("alpha")).toEqual(["stopped>starting", "starting>removing", "removing>removed"])
      const all = yield* h.fakes.processes.all
      expect(all.length).toBe(2)
      expect(all.every((p) => !p.alive)).toBe(true)
      expect(yield* h.status("alpha")).toBeUndefined()
      expect(yield* h.fakes.slices.calls).toEqual(["provision alpha/db", "teardown alpha/db"])
      expect(yield* h.fakes.slices.existing).toEqual([])
      expect(yield* registry.leases()).toEqual([])
      expect(yield* admission.running).toBe(0)
      expect(existsSync(path)).toBe(false)
    })
  )

  it.scoped("an up whose world is taken down the moment its start is launched hears so, and never hangs", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      const { worlds } = h.engine
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      yield* worlds.down(h.ref("alpha"), false)
      const id = yield* h.idOf("alpha")
      const none = { services: [], groups: [] }
      // the up and the down both wait in the world's mailbox: the down is taken the moment the up has launched its
      // start, before the start's fiber has run at all
      const up = yield* Effect.fork(worlds.tell(id, new Up({ selection: none, env: {} })))
      const down = yield* Effect.fork(worlds.tell(id, new Down()))
      yield* Fiber.join(up)
      yield* Fiber.join(down)
      const heard = yield* Effect.fork(worlds.waitReady(h.ref("alpha")).pipe(Effect.either))
      yield* eventually("the waiting up has its answer", Effect.map(Fiber.poll(heard), Option.isSome))
      expect((yield* h.status("alpha"))?.state).toBe("stopped")
      expect(yield* h.engine.admission.running).toBe(0)
    })
  )

  it.scoped(
    "a ready service that crashes is restarted by its policy after its backoff, and the world stays running",
    () =>
      Effect.gen(function* () {
        const h = yield* worldHarness(SHOP)
        yield* h.fakes.health.setDefault(true)
        yield* bringUp(h, "alpha")
        const worker = yield* h.process("alpha", "worker")

        yield* h.fakes.processes.exit(worker, { code: 1, signal: null })
        yield* awaitPending("worker's restart backoff", WORKER_BACKOFF_MS)
        yield* TestClock.adjust(WORKER_BACKOFF_MS - 1)
        expect(yield* h.processesOf("alpha", "worker")).toHaveLength(1)
        yield* TestClock.adjust(1)
        const again = yield* h.process("alpha", "worker", 2)
        expect(again.alive).toBe(true)
        // a restart is not an `up`: its check passing is enough, no confirmation wait
        yield* eventually(
          "worker healthy again after one restart",
          Effect.map(servicesOf(h, "alpha"), (s) =>
            s.some(
              (x) => x.name === "worker" && x.state === "healthy" && x.restarts === 1 && x.pid === again.handle.pid
            )
          )
        )
        expect(yield* h.moves("alpha")).toEqual(["stopped>starting", "starting>running"])
        expect((yield* h.status("alpha"))?.state).toBe("running")
        // the others were left alone
        expect(yield* h.fakes.processes.spawnCount).toBe(4)
        expect((yield* h.fakes.processes.current(yield* h.process("alpha", "api"))).alive).toBe(true)
      })
  )

  it.scoped("a service's restart waits while its world's fence is closed, and goes ahead once it opens", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const id = yield* h.idOf("alpha")
      // as a cluster member's rule does for a world that runs anywhere while its hold on it is stale
      const open = yield* Deferred.make<void>()
      yield* h.engine.fence.install((worldId) => (worldId === id ? Deferred.await(open) : Effect.void))
      const worker = yield* h.process("alpha", "worker")
      yield* h.fakes.processes.exit(worker, { code: 1, signal: null })
      yield* awaitPending("worker's restart backoff", WORKER_BACKOFF_MS)
      yield* TestClock.adjust(WORKER_BACKOFF_MS * 10)
      expect(yield* h.processesOf("alpha", "worker")).toHaveLength(1)
      yield* Deferred.succeed(open, undefined)
      const again = yield* h.process("alpha", "worker", 2)
      expect(again.alive).toBe(true)
    })
  )

  it.scoped("an up's `before` runs once the world exists and before any of its processes may start", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      // as the cluster's entity marks a world that runs anywhere, and its fence's rule asks at each start
      const marked = new Set<number>()
      const markedAtStart: Array<boolean> = []
      yield* h.engine.fence.install((worldId) => Effect.sync(() => void markedAtStart.push(marked.has(worldId))))
      yield* h.engine.worlds.up(h.ref("alpha"), { services: [], groups: [] }, ALLOWED, false, {
        before: (worldId) => Effect.sync(() => void marked.add(worldId))
      })
      yield* startServices
      yield* h.awaitState("alpha", "running")
      expect([...marked]).toEqual([yield* h.idOf("alpha")])
      expect(markedAtStart).toEqual([true, true, true])
    })
  )

  it.scoped(
    "after a daemon restart, a running world is adopted: its live processes are watched, not spawned again",
    () =>
      Effect.gen(function* () {
        const h = yield* worldHarness(SHOP)
        yield* h.fakes.health.setDefault(true)
        yield* bringUp(h, "alpha")
        const before = yield* h.fakes.processes.all
        const pids = before.map((p) => p.handle.pid).sort()
        // the processes are recorded (pid, pgid, start time) as they became ready
        yield* eventually(
          "every service recorded with its pid",
          Effect.map(
            servicesOf(h, "alpha"),
            (s) =>
              s
                .map((x) => x.pid)
                .sort()
                .join() === pids.join()
          )
        )

        const second = yield* h.restartDaemon
        // the old daemon let go: nothing it ran was stopped
        for (const p of before) expect((yield* h.fakes.processes.current(p)).alive).toBe(true)
        // the new daemon's first reconcile pass
        yield* second.worlds.reconcile()
        yield* h.awaitMoves("alpha", 4)
        yield* h.awaitState("alpha", "running")
        // a running world being adopted goes through `starting` (its services are checked again) and runs
        expect((yield* h.moves("alpha")).slice(2)).toEqual(["running>starting", "starting>running"])
        expect(yield* h.fakes.processes.spawnCount).toBe(3)
        for (const p of before) expect((yield* h.fakes.processes.current(p)).alive).toBe(true)
        const adopted = yield* servicesOf(h, "alpha")
        expect(adopted.map((s) => [s.name, s.state])).toEqual([
          ["api", "healthy"],
          ["mail", "healthy"],
          ["worker", "healthy"]
        ])
        expect(adopted.map((s) => s.pid).sort()).toEqual(pids)
        expect(second.admission.holds(yield* h.idOf("alpha"))).toBe(true)
      })
  )

  it.scoped(
    "a new daemon lets a world that runs anywhere go: wanted down, stopped, none of its processes adopted",
    () =>
      Effect.gen(function* () {
        const h = yield* worldHarness(SHOP)
        yield* h.fakes.health.setDefault(true)
        yield* bringUp(h, "alpha")
        const id = yield* h.idOf("alpha")
        yield* h.engine.registry.setSetting(ANYWHERE_SETTING, [id])
        const before = yield* h.processesOf("alpha", "api")
        const second = yield* h.restartDaemon
        // the new daemon's first reconcile pass makes its actor, whose first act lets the world go: the actor writes it
        yield* second.worlds.reconcile()
        yield* h.awaitState("alpha", "stopped")
        const row = yield* second.registry.world(id)
        expect(row?.desired).toBe("down")
        for (const p of before) expect((yield* h.fakes.processes.current(p)).alive).toBe(false)
        expect(yield* h.fakes.processes.spawnCount).toBe(3)
        expect(second.admission.holds(id)).toBe(false)
      })
  )

  it.scoped("50 concurrent ups, downs and reconcile passes on a world no actor looks after yet make one actor", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      // a new daemon: the world is recorded, and no actor of this engine looks after it yet
      const engine = yield* h.restartDaemon
      const calls: Array<Effect.Effect<unknown, unknown>> = Array.from({ length: 50 }, (_, i) =>
        i % 3 === 0
          ? engine.worlds.up(h.ref("alpha"), { services: [], groups: [] }, ALLOWED, false)
          : i % 3 === 1
            ? engine.worlds.down(h.ref("alpha"), false)
            : engine.worlds.reconcile()
      )
      yield* Effect.all(
        calls.map((c) => Effect.either(c)),
        { concurrency: "unbounded" }
      )
      expect(yield* engine.worlds.actorsStarted).toBe(1)
    })
  )

  it.scoped("remove refuses a worktree holding the user's work, and the world keeps running as it was", () =>
    Effect.gen(function* () {
      // the worktree's files through a fake: it holds an edit of the user's, whatever git would say
      const h = yield* worldHarness(SHOP, {
        worktreeFiles: (real) => ({ ...real, userChanges: () => Effect.succeed([" M src/app.ts"]) })
      })
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const path = (yield* h.status("alpha"))?.path ?? ""

      const refused = yield* Effect.flip(h.engine.worlds.remove(h.ref("alpha"), false))
      expect(refused._tag).toBe("WorktreeDirty")
      expect(refused.message).toContain("src/app.ts")
      expect((yield* h.status("alpha"))?.state).toBe("running")
      expect((yield* h.fakes.processes.all).filter((p) => p.alive).length).toBe(3)
      expect(existsSync(path)).toBe(true)
    })
  )

  it.scoped("stop -s stops a service and what depends on it; the rest runs and the world stays running", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const api = yield* h.process("alpha", "api")
      const worker = yield* h.process("alpha", "worker")
      const mail = yield* h.process("alpha", "mail")

      const after = yield* h.engine.worlds.stopServices(h.ref("alpha"), ["api"])
      expect(after.state).toBe("running")
      expect((yield* h.fakes.processes.current(api)).alive).toBe(false)
      expect((yield* h.fakes.processes.current(worker)).alive).toBe(false)
      expect((yield* h.fakes.processes.current(mail)).alive).toBe(true)
      // dependents first
      const stopped = yield* h.fakes.processes.stopOrder
      expect(stopped.indexOf(worker.handle.pid)).toBeLessThan(stopped.indexOf(api.handle.pid))
      const states = Object.fromEntries((yield* servicesOf(h, "alpha")).map((x) => [x.name, x.state]))
      expect(states).toMatchObject({ api: "stopped", worker: "stopped" })
      expect(states.mail).not.toBe("stopped")
      expect(yield* h.moves("alpha")).toEqual(["stopped>starting", "starting>running"])
      // an unknown name is an error naming the services
      const wrong = yield* Effect.flip(h.engine.worlds.stopServices(h.ref("alpha"), ["nope"]))
      expect(wrong._tag).toBe("UnknownService")
      expect(wrong.message).toMatch(/no service "nope".*services: api, mail, worker/)
      // a world that does not run has no services to stop, and says so with its own tag
      yield* h.engine.worlds.down(h.ref("alpha"), false)
      const notRunning = yield* Effect.flip(h.engine.worlds.stopServices(h.ref("alpha"), ["api"]))
      expect(notRunning._tag).toBe("WorldNotRunning")
    })
  )

  it.scoped("an up -s of another service while the world is still on its way up starts that service too", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      // memory is short: the world's start waits in line
      yield* h.fakes.machine.setMemoryPercent(1)
      yield* h.nextReading
      const only = (service: string) => ({ services: [service], groups: [] })
      yield* h.engine.worlds.up(h.ref("alpha"), only("api"), ALLOWED, false)
      yield* h.awaitState("alpha", "queued")
      // asked while that start waits: mail joins the world's selection, and starts once the world runs
      yield* h.engine.worlds.up(h.ref("alpha"), only("mail"), ALLOWED, false)
      yield* h.fakes.machine.setMemoryPercent(80)
      yield* h.nextReading
      yield* h.process("alpha", "api")
      yield* passTime("api stays up after its check passed", CONFIRM_MS)
      yield* h.awaitState("alpha", "running")
      yield* h.process("alpha", "mail")
      yield* eventually(
        "api and mail run",
        Effect.map(servicesOf(h, "alpha"), (all) =>
          ["api", "mail"].every((name) => all.find((x) => x.name === name)?.state === "healthy")
        )
      )
      expect((yield* h.processesOf("alpha", "worker")).length, "worker was not asked for").toBe(0)
    })
  )

  it.scoped("an up answers once its services' rows say they are ready: a daemon killed right after keeps them", () =>
    Effect.gen(function* () {
      // every write of a ready service's row waits until the test opens the gate
      const gate = yield* Deferred.make<void>()
      const waiting = yield* Ref.make(0)
      const h = yield* worldHarness(SHOP, {
        registry: (real) => ({
          ...real,
          saveService: (row) =>
            row.observed === "healthy"
              ? Effect.zipRight(
                  Effect.zipRight(
                    Ref.update(waiting, (n) => n + 1),
                    Deferred.await(gate)
                  ),
                  real.saveService(row)
                )
              : real.saveService(row)
        })
      })
      yield* h.fakes.health.setDefault(true)
      const { worlds, registry } = h.engine
      // the rows as they are the moment the up answers (what a daemon killed then would find)
      const up = yield* Effect.fork(
        Effect.zipRight(
          worlds.up(h.ref("alpha"), { services: [], groups: [] }, ALLOWED, true),
          Effect.flatMap(h.idOf("alpha"), (id) => registry.services(id))
        )
      )
      yield* eventually(
        "api's and mail's rows wait to say they are ready",
        Effect.map(Ref.get(waiting), (n) => n >= 2)
      )
      for (let i = 0; i < 1_000; i++) yield* Effect.yieldNow()
      const early = yield* Fiber.poll(up)
      if (Option.isSome(early)) {
        const rows = yield* early.value
        expect(rows.map((r) => `${r.name}:${r.observed}`).sort()).toEqual([
          "api:healthy",
          "mail:healthy",
          "worker:healthy"
        ])
      }
      yield* Deferred.succeed(gate, undefined)
      const rows = yield* Fiber.join(up)
      expect(rows.map((r) => `${r.name}:${r.observed}`).sort()).toEqual([
        "api:healthy",
        "mail:healthy",
        "worker:healthy"
      ])
    })
  )

  it.scoped("restart -s starts a service and its dependents again beside the rest", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const mail = yield* h.process("alpha", "mail")
      const restarting = yield* Effect.fork(h.engine.worlds.restartServices(h.ref("alpha"), ["api"]))
      // worker, which depends on api, starts again as soon as api is ready: both are confirmed together
      yield* passTime("api and worker stay up after their checks passed", CONFIRM_MS, 2)
      const after = yield* restarting
      expect(after.state).toBe("running")
      expect((yield* h.process("alpha", "api", 2)).alive).toBe(true)
      expect((yield* h.process("alpha", "worker", 2)).alive).toBe(true)
      expect((yield* h.fakes.processes.current(mail)).alive).toBe(true)
      expect(yield* h.processesOf("alpha", "mail")).toHaveLength(1)
    })
  )

  it.scoped("reset drops the slice and fills it again, with the processes stopped and started around it", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const api = yield* h.process("alpha", "api")
      const resetting = yield* Effect.fork(
        h.engine.worlds.reset(h.ref("alpha"), [], { ...ALLOWED, PATH: process.env.PATH ?? "/usr/bin:/bin" })
      )
      yield* startServices
      const after = yield* resetting
      expect(after.state).toBe("running")
      expect((yield* h.fakes.processes.current(api)).alive).toBe(false)
      expect((yield* h.process("alpha", "api", 2)).alive).toBe(true)
      expect(yield* h.fakes.slices.calls).toEqual(["provision alpha/db", "teardown alpha/db", "provision alpha/db"])
      expect(yield* h.moves("alpha")).toEqual([
        "stopped>starting",
        "starting>running",
        "running>starting",
        "starting>running"
      ])
      const wrong = yield* Effect.flip(h.engine.worlds.reset(h.ref("alpha"), ["cache"], {}))
      expect(wrong._tag).toBe("UnknownSlice")
      expect(wrong.message).toMatch(/no slice "cache".*slices: db/)
    })
  )

  it.scoped("waiting for a world that stopped instead of running fails with WorldNotReady, naming its state", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      yield* h.engine.worlds.down(h.ref("alpha"), false)
      const waited = yield* Effect.flip(h.engine.worlds.waitReady(h.ref("alpha")))
      expect(waited._tag).toBe("WorldNotReady")
      expect(waited.message).toBe("world alpha is stopped\n  hint: berth up alpha starts it")
    })
  )

  it.scoped("up --from into a world that exists already fails with WorldExists, and nothing is copied", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const refused = yield* Effect.flip(
        h.engine.worlds.up(h.ref("alpha"), { services: [], groups: [] }, ALLOWED, false, { from: "alpha" })
      )
      expect(refused._tag).toBe("WorldExists")
      expect(refused.message).toBe(
        "world alpha exists already: --from makes a new world\n  hint: give a new world's name (berth up <name> --from alpha), or berth remove alpha first"
      )
      expect(yield* h.fakes.slices.calls).toEqual(["provision alpha/db"])
      expect((yield* h.status("alpha"))?.state).toBe("running")
    })
  )

  it.scoped("logs of a log the world does not have fail with UnknownLog, naming its logs and the closest", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(SHOP)
      yield* h.fakes.health.setDefault(true)
      yield* bringUp(h, "alpha")
      const unknown = yield* Effect.flip(
        Stream.runCollect(h.engine.worlds.logs(h.ref("alpha"), { service: "apu", follow: false, lines: 10 }))
      )
      expect(unknown._tag).toBe("UnknownLog")
      // the fake slices record no slice: the services' logs, and the world's history
      expect(unknown.message).toBe(
        `world alpha has no log "apu"; its logs: api, mail, worker, and berth (the world's history: berth's events and agents' tool calls)\n  hint: did you mean "api"?`
      )
    })
  )

  it.scoped("status and env show each process's command as it was started, a secret from the environment masked", () =>
    Effect.gen(function* () {
      const h = yield* worldHarness(`[project]
name = "tok"

[services.api]
cmd = "serve --token \${env.API_TOKEN} --port \${self.port}"
url = "api"
`)
      yield* h.fakes.health.setDefault(true)
      yield* h.engine.worlds.up(
        h.ref("alpha"),
        { services: [], groups: [] },
        { ...ALLOWED, API_TOKEN: "tok-world-secret" },
        false
      )
      yield* passTime("api stays up after its check passed", CONFIRM_MS)
      yield* h.awaitState("alpha", "running")
      const api = (yield* servicesOf(h, "alpha")).find((s) => s.name === "api")!
      // the process itself got the value; what berth shows has it masked
      expect((yield* h.process("alpha", "api")).spec.command).toContain("tok-world-secret")
      expect(api.command).toBe(`serve --token *** --port ${api.port}`)
      const env = yield* h.engine.worlds.env(h.ref("alpha"))
      expect(env.commands).toEqual({ api: api.command })
    })
  )
})
