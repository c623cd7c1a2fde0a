/**
 * A whole engine in-process — `Worlds`, its WorldActors and their ServiceActors — composed as `WorldsLive` composes it,
 * with fakes where berth would run or probe processes (Processes, Health), read the machine (Machine) or make slices
 * (Slices), and the real Registry (SQLite), ConfigFiles, Git, Ports, Router (its proxy off) and Admission, over a
 * temporary git repository with a BERTH_HOME of its own.
 *
 * Time is the test's TestClock. Real I/O (git, files, SQLite, bind checks) still takes real time, and nothing tells a
 * TestClock that a fiber is busy with it, so `passTime` moves the clock only once the wait it stands for is pending.
 */
import { execFileSync } from "node:child_process"
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as TestClock from "effect/TestClock"
import type { WorldChange } from "../../src/actors/WorldActor.js"
import { type WorldRef, Worlds } from "../../src/actors/Worlds.js"
import type { WorldStatus } from "../../src/daemon/api.js"
import type { DiskFull, InternalError } from "../../src/domain/errors.js"
import type { PortRange } from "../../src/domain/ports.js"
import type { WorldState } from "../../src/domain/world-state.js"
import { Admission, AdmissionLive, type AdmissionService } from "../../src/services/Admission.js"
import { Fence, FenceLive, type FenceService } from "../../src/services/Fence.js"
import { ConfigFilesLive } from "../../src/services/ConfigFiles.js"
import { GitLive } from "../../src/services/Git.js"
import { Health } from "../../src/services/Health.js"
import { Home, type HomePaths, homePaths } from "../../src/services/Home.js"
import { Machine } from "../../src/services/Machine.js"
import { PlatformLive } from "../../src/services/Platform.js"
import { Ports, PortsLive, type PortsService } from "../../src/services/Ports.js"
import { Processes, type ProcessesService } from "../../src/services/Processes.js"
import { Registry, RegistryLive, type RegistryService } from "../../src/services/Registry.js"
import { Router } from "../../src/services/proxy/Router.js"
import { Slices } from "../../src/services/slices/Slices.js"
import {
  WorktreeFiles,
  WorktreeFilesLive,
  type WorktreeFilesService
} from "../../src/services/worktree/WorktreeFiles.js"
import {
  awaitRef,
  type FakeHealthControl,
  type FakeProcess,
  type FakeMachineControl,
  type FakeProcessesControl,
  type FakeSlicesControl,
  makeFakeHealth,
  makeFakeMachine,
  makeFakeProcesses,
  makeFakeSlices,
  type NeverHappened,
  within
} from "./fakes.js"

/** the test's own repositories: their commands may run (the consent the CLI asks for, given by the environment) */
export const ALLOWED: Readonly<Record<string, string>> = { BERTH_YES: "1" }

/**
 * The engine's knobs, as Effect Config reads them: no proxy listener (the Router's ports), so no test competes for
 * port 80 (or any other) — given to the engine rather than written into this process's environment.
 */
const KNOBS = ConfigProvider.fromMap(
  new Map([
    ["BERTH_PROXY_PORT", "off"],
    ["BERTH_HTTPS_PORT", "off"]
  ])
)

// ---------------------------------------------------------------------------------------------------------------
// The repository and the ports

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "berth",
  GIT_AUTHOR_EMAIL: "berth@localhost",
  GIT_COMMITTER_NAME: "berth",
  GIT_COMMITTER_EMAIL: "berth@localhost"
}

/** one committed repository per berth.toml, made once per test process: a copy costs no git process */
const templates = new Map<string, string>()

const template = (toml: string, files: Readonly<Record<string, string>>): string => {
  const key = JSON.stringify([toml, files])
  const known = templates.get(key)
  if (known !== undefined) return known
  const dir = mkdtempSync(join(tmpdir(), "berth-actors-template-"))
  writeFileSync(join(dir, "berth.toml"), toml)
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  for (const args of [
    ["init", "-q", "-b", "main"],
    ["add", "-A"],
    ["commit", "-q", "-m", "initial"]
  ]) {
    execFileSync("git", args, { cwd: dir, env: gitEnv })
  }
  templates.set(key, dir)
  return dir
}

/** A fresh git repository (one commit) holding `berth.toml`, and a BERTH_HOME beside it; removed with the scope. */
const repository = (toml: string, files: Readonly<Record<string, string>>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const base = mkdtempSync(join(tmpdir(), "berth-actors-"))
      const dir = join(base, "app")
      cpSync(template(toml, files), dir, { recursive: true })
      return { base, dir, home: join(base, "home") }
    }),
    ({ base }) => Effect.sync(() => rmSync(base, { recursive: true, force: true }))
  )

const BLOCKS = 127
let block: PortRange | undefined
let claimed: string | undefined

// a test file's worker may end without an "exit" event: what this module made goes when the file's tests are done
afterAll(() => {
  for (const dir of [...templates.values(), ...(claimed === undefined ? [] : [claimed])]) {
    rmSync(dir, { recursive: true, force: true })
  }
  templates.clear()
  block = undefined
  claimed = undefined
})

/**
 * A private block of 100 ports for this test process, claimed as test/e2e/harness.ts's `portBlock` claims one (an
 * exclusive mkdir in the same folder; that module cannot be imported here, it insists on a built binary). Nothing
 * listens on these ports (the processes are fake), but leases are proven bindable: a server of a parallel end-to-end
 * test in the range would move a lease, and "ports are kept" would fail for no fault of berth's.
 */
const portBlock = (): PortRange => {
  if (block !== undefined) return block
  const root = join(tmpdir(), "berth-test-port-blocks")
  mkdirSync(root, { recursive: true })
  const start = Math.floor(Math.random() * BLOCKS)
  for (let k = 0; k < BLOCKS; k++) {
    const n = (start + k) % BLOCKS
    const claim = join(root, String(n))
    try {
      mkdirSync(claim)
      writeFileSync(join(claim, "pid"), String(process.pid))
    } catch {
      // a claim whose test process is gone is stale: taken over next time round
      try {
        process.kill(Number(readFileSync(join(claim, "pid"), "utf8")), 0)
      } catch {
        rmSync(claim, { recursive: true, force: true })
      }
      continue
    }
    claimed = claim
    block = { from: 20_000 + n * 100, to: 20_000 + n * 100 + 99 }
    return block
  }
  throw new Error("no free port block left for tests")
}

// ---------------------------------------------------------------------------------------------------------------
// The engine

export interface Fakes {
  readonly processes: FakeProcessesControl
  readonly health: FakeHealthControl
  readonly machine: FakeMachineControl
  readonly slices: FakeSlicesControl
}

/** One daemon's engine: what a test drives, and the services it reads the outcome from. */
export interface Engine {
  readonly worlds: Worlds
  readonly admission: AdmissionService
  /** whether a world's processes may start (a cluster installs its rule; open otherwise) */
  readonly fence: FenceService
  readonly registry: RegistryService
  readonly ports: PortsService
  readonly processes: ProcessesService
  /** closing it ends this engine, as a daemon's exit does */
  readonly scope: Scope.CloseableScope
}

export interface WorldHarness {
  /** the repository's main checkout */
  readonly dir: string
  readonly home: HomePaths
  readonly fakes: Fakes
  /** the engine running now (a new one after `restartDaemon`) */
  readonly engine: Engine
  readonly ref: (world: string) => WorldRef
  /** `up` of every service, not waiting (the command is answered once the world is queued or starting) */
  readonly up: (world: string) => ReturnType<Worlds["up"]>
  /** the world's status, undefined when there is no such world */
  readonly status: (
    world: string
  ) => Effect.Effect<WorldStatus | undefined, Effect.Effect.Error<ReturnType<Worlds["status"]>>>
  readonly idOf: (world: string) => Effect.Effect<number, InternalError | DiskFull>
  /** every move of the world's observed state so far, as `from>to`, across engines */
  readonly moves: (world: string) => Effect.Effect<ReadonlyArray<string>>
  /** the same moves in full */
  readonly changes: (world: string) => Effect.Effect<ReadonlyArray<WorldChange>>
  /** waits until the world's last move went to `state` */
  readonly awaitState: (world: string, state: WorldState) => Effect.Effect<void, NeverHappened>
  /** waits until the world has made `count` moves in all */
  readonly awaitMoves: (world: string, count: number) => Effect.Effect<void, NeverHappened>
  /** the processes spawned for a service of a world (told apart by their BERTH_WORLD and BERTH_SERVICE), in order */
  readonly processesOf: (world: string, service: string) => Effect.Effect<ReadonlyArray<FakeProcess>>
  /** the n-th process spawned for a service of a world (1: its first), once it has been */
  readonly process: (world: string, service: string, n?: number) => Effect.Effect<FakeProcess, NeverHappened>
  /**
   * Moves the TestClock from pending wait to pending wait until the gate has read the machine once more (the sampler
   * reads every SAMPLE_EVERY_MS), and stops there: a world it lets in starts at that instant, with no time spent
   * past it. Answers how far the clock moved.
   */
  readonly nextReading: Effect.Effect<number>
  /**
   * The daemon stops as `daemon stop` does — its Processes let go first, so nothing it ran is stopped — and another
   * starts over the same BERTH_HOME, with a Processes that sees the same (still running) processes.
   */
  readonly restartDaemon: Effect.Effect<Engine, EngineError>
}

/**
 * Succeeds once `check` answers true, polled on the real clock: for outcomes that real I/O (SQLite, files) stands
 * between, never for time under test.
 */
export const eventually = <E>(what: string, check: Effect.Effect<boolean, E>) =>
  within(what, check.pipe(Effect.repeat({ schedule: Schedule.spaced("5 millis"), until: (ok) => ok })))

/**
 * Waits until `count` of the TestClock's pending sleeps are due exactly `ms` from now: the waits a step of the engine
 * is about to pass (a confirmation, a backoff) once the real I/O before it is done.
 */
export const awaitPending = (what: string, ms: number, count = 1) =>
  Effect.gen(function* () {
    const clock = yield* TestClock.testClock()
    yield* eventually(
      `${what} (${count} wait(s) of ${ms} ms pending)`,
      Effect.gen(function* () {
        const now = yield* clock.currentTimeMillis
        return Chunk.size(Chunk.filter(yield* clock.sleeps, (at) => at === now + ms)) >= count
      })
    )
  })

/** `awaitPending`, then the TestClock moves by `ms`: the wait is over. */
export const passTime = (what: string, ms: number, count = 1) =>
  Effect.zipRight(awaitPending(what, ms, count), TestClock.adjust(ms))

/** what starting an engine can fail with (a state database it cannot use, say) */
type EngineError = Layer.Layer.Error<ReturnType<typeof engineLayer>>

/** The state database, or the test's fake around it: it stays open for the engine's life, the fake in the same layer. */
const registryLayer = (wrap: ((real: RegistryService) => RegistryService) | undefined) =>
  wrap === undefined
    ? RegistryLive
    : Layer.map(RegistryLive, (built) => Context.add(built, Registry, wrap(Context.get(built, Registry))))

/** What an engine is made of, `WorldsLive` with the fakes in: only Processes differs from one daemon to the next. */
const engineLayer = (
  home: string,
  processes: ProcessesService,
  fakes: {
    readonly health: Context.Tag.Service<Health>
    readonly machine: Context.Tag.Service<Machine>
    readonly slices: Context.Tag.Service<Slices>
    /** what the test puts in place of (or around) the worktree's files */
    readonly worktreeFiles?: (real: WorktreeFilesService) => WorktreeFilesService
    /** what the test puts around the state database (a write that waits, say) */
    readonly registry?: (real: RegistryService) => RegistryService
  }
) =>
  Worlds.Default.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        PortsLive,
        Layer.succeed(Slices, fakes.slices),
        Router.Default,
        AdmissionLive,
        FenceLive,
        fakes.worktreeFiles === undefined
          ? WorktreeFilesLive
          : Layer.effect(
              WorktreeFiles,
              Effect.map(Effect.provide(WorktreeFiles, WorktreeFilesLive), fakes.worktreeFiles)
            )
      )
    ),
    Layer.provideMerge(registryLayer(fakes.registry)),
    Layer.provideMerge(
      Layer.mergeAll(
        ConfigFilesLive,
        GitLive,
        Layer.succeed(Health, fakes.health),
        Layer.succeed(Processes, processes),
        Layer.succeed(Machine, fakes.machine)
      )
    ),
    // as in layers/index.ts, though every service here that would ask it is a fake
    Layer.provideMerge(PlatformLive),
    Layer.provideMerge(NodeContext.layer),
    Layer.provideMerge(Home.layerAt(home)),
    Layer.provide(Layer.setConfigProvider(KNOBS))
  )

/**
 * A repository with `toml` as its berth.toml (and `options.files` committed beside it) and an engine over it, for the
 * rest of the scope.
 */
export const worldHarness = (
  toml: string,
  options: {
    readonly files?: Readonly<Record<string, string>>
    /** the worktree's files as the test wants them seen (a fake around the real service) */
    readonly worktreeFiles?: (real: WorktreeFilesService) => WorktreeFilesService
    /** the state database as the test wants it to behave (a fake around the real one) */
    readonly registry?: (real: RegistryService) => RegistryService
  } = {}
) =>
  Effect.gen(function* () {
    const repo = yield* repository(toml, options.files ?? {})
    const processes = yield* makeFakeProcesses
    const health = yield* makeFakeHealth
    const machine = yield* makeFakeMachine()
    const slices = yield* makeFakeSlices
    const log = yield* SubscriptionRef.make<ReadonlyArray<WorldChange>>([])
    const parent = yield* Effect.scope

    const start = (view: ProcessesService) =>
      Effect.gen(function* () {
        const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
        const context = yield* Layer.buildWithScope(
          engineLayer(repo.home, view, {
            health: health.service,
            machine: machine.service,
            slices: slices.service,
            ...(options.worktreeFiles === undefined ? {} : { worktreeFiles: options.worktreeFiles }),
            ...(options.registry === undefined ? {} : { registry: options.registry })
          }),
          scope
        )
        const worlds = Context.get(context, Worlds)
        yield* worlds.changes.pipe(
          Stream.runForEach((change) => SubscriptionRef.update(log, (all) => [...all, change])),
          Effect.forkIn(scope)
        )
        // the recorder subscribes when it first runs: let it, before anything can move
        yield* Effect.yieldNow()
        return {
          worlds,
          admission: Context.get(context, Admission),
          fence: Context.get(context, Fence),
          registry: Context.get(context, Registry),
          ports: Context.get(context, Ports),
          processes: view,
          scope
        } satisfies Engine
      })

    let engine = yield* start(processes.service)
    yield* engine.ports.setRange(portBlock())

    const ref = (world: string): WorldRef => ({ cwd: repo.dir, world })
    const processesOf = (world: string, service: string) =>
      Effect.map(processes.control.all, (all) =>
        all.filter((p) => p.spec.env.BERTH_WORLD === world && p.spec.env.BERTH_SERVICE === service)
      )
    const changesOf = (world: string) =>
      Effect.map(SubscriptionRef.get(log), (all) => all.filter((c) => c.world === world))

    const harness: WorldHarness = {
      dir: repo.dir,
      home: homePaths(repo.home),
      fakes: {
        processes: processes.control,
        health: health.control,
        machine: machine.control,
        slices: slices.control
      },
      get engine() {
        return engine
      },
      ref,
      up: (world) => engine.worlds.up(ref(world), { services: [], groups: [] }, ALLOWED, false),
      status: (world) => Effect.map(engine.worlds.status(repo.dir), (s) => s.worlds.find((w) => w.name === world)),
      idOf: (world) =>
        Effect.flatMap(engine.registry.worlds(), (all) => {
          const found = all.find((w) => w.name === world)
          return found === undefined ? Effect.dieMessage(`no world ${world}`) : Effect.succeed(found.id)
        }),
      changes: changesOf,
      moves: (world) => Effect.map(changesOf(world), (all) => all.map((c) => `${c.from}>${c.to}`)),
      awaitState: (world, state) =>
        awaitRef(
          `world ${world} to be ${state}`,
          log,
          (all) => all.filter((c) => c.world === world).at(-1)?.to === state
        ),
      awaitMoves: (world, count) =>
        awaitRef(
          `world ${world} to make ${count} moves`,
          log,
          (all) => all.filter((c) => c.world === world).length >= count
        ),
      processesOf,
      process: (world, service, n = 1) =>
        Effect.zipRight(
          eventually(
            `process #${n} of ${world}/${service} to be spawned`,
            Effect.map(processesOf(world, service), (all) => all.length >= n)
          ),
          Effect.map(processesOf(world, service), (all) => all[n - 1]!)
        ),
      nextReading: Effect.gen(function* () {
        const clock = yield* TestClock.testClock()
        const from = yield* clock.currentTimeMillis
        const reads = yield* machine.control.reads
        while ((yield* machine.control.reads) === reads) {
          const now = yield* clock.currentTimeMillis
          const next = Chunk.reduce(yield* clock.sleeps, Number.POSITIVE_INFINITY, (min, at) =>
            at > now && at < min ? at : min
          )
          if (!Number.isFinite(next))
            return yield* Effect.dieMessage("nothing waits on the clock: no reading will come")
          yield* TestClock.adjust(next - now)
        }
        return (yield* clock.currentTimeMillis) - from
      }),
      restartDaemon: Effect.gen(function* () {
        yield* engine.processes.detach
        yield* Scope.close(engine.scope, Exit.void)
        engine = yield* start(yield* processes.control.nextDaemon)
        return engine
      })
    }
    return harness
  })
