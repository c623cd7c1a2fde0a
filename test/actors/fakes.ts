/**
 * In-memory stand-ins for the engine's services, for driving actors under a TestClock: processes are handles whose
 * exit the test decides, health verdicts are flags the test sets, the machine reads what the test staged, slices are
 * addresses kept in memory, a worktree's env_files too. Each fake is a pair: the service (to provide under the real
 * Tag) and a control the test holds.
 */
import { MARK_VARIABLE, parseMark } from "../../src/domain/marks.js"
import { basename, join } from "node:path"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as TestServices from "effect/TestServices"
import type { PressureTargetsService, PressureWorld } from "../../src/actors/PressureMonitor.js"
import type { Readings } from "../../src/domain/admission.js"
import { type HealthCheck, type ProcessService, processes, type SliceService } from "../../src/domain/config/model.js"
import { InternalError } from "../../src/domain/errors.js"
import type { ListenerVerdict } from "../../src/domain/proc.js"
import type { ExitStatus } from "../../src/domain/restart.js"
import type { AdmissionService } from "../../src/services/Admission.js"
import {
  defaultCheck,
  type HealthService,
  makeLogWatcher,
  type ProbeContext,
  pollUntilHealthy
} from "../../src/services/Health.js"
import { Home, homePaths } from "../../src/services/Home.js"
import { Machine, type MachineService } from "../../src/services/Machine.js"
import {
  type ProcessHandle,
  type ProcessesService,
  SpawnFailed,
  type SpawnSpec,
  type StopOutcome
} from "../../src/services/Processes.js"
import { Registry, type RegistryService } from "../../src/services/Registry.js"
import type { SlicesService } from "../../src/services/slices/Slices.js"
import type { WorktreeFilesService } from "../../src/services/worktree/WorktreeFiles.js"

/** What a test waited for never happened. */
export class NeverHappened extends Data.TaggedError("NeverHappened")<{ readonly what: string }> {
  override get message(): string {
    return `never happened: ${this.what}`
  }
}

/**
 * Waits (on the real clock, so a TestClock nobody advances cannot hang it) for `effect` to succeed, failing the test
 * with `what` after a few seconds. A safety net only: nothing waits on it for time to pass.
 */
export const within = <A, E, R>(what: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | NeverHappened, R> =>
  TestServices.provideLive(
    effect.pipe(Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => new NeverHappened({ what }) }))
  )

/** The first value of `ref` that satisfies `predicate` (the current one included). */
export const awaitRef = <A>(what: string, ref: SubscriptionRef.SubscriptionRef<A>, predicate: (a: A) => boolean) =>
  within(
    what,
    ref.changes.pipe(
      Stream.filter(predicate),
      Stream.runHead,
      Effect.flatMap(Option.match({ onNone: () => Effect.dieMessage(`${what}: stream ended`), onSome: Effect.succeed }))
    )
  )

// ---------------------------------------------------------------------------------------------------------------
// Processes

/** One spawned (or adopted) fake process. */
export interface FakeProcess {
  readonly handle: ProcessHandle
  readonly spec: SpawnSpec
  /** the leader is alive */
  readonly alive: boolean
  /** something of its group lives on after the leader left (a command that forked and exited) */
  readonly lingering: boolean
  /** how `stop` was asked to end it, if it was */
  readonly stoppedWithGraceMs: number | undefined
}

export interface FakeProcessesControl {
  /** every process spawned or adopted, in order */
  readonly all: Effect.Effect<ReadonlyArray<FakeProcess>>
  /** the n-th process (1-based), once it has been spawned */
  readonly nth: (n: number) => Effect.Effect<FakeProcess, NeverHappened>
  /** how many processes were spawned (not adopted) so far */
  readonly spawnCount: Effect.Effect<number>
  /** the pids `stop` ended, in the order it ended them */
  readonly stopOrder: Effect.Effect<ReadonlyArray<number>>
  /** The leader exits with `status`; with `lingering`, its group stays alive until `endGroup`. */
  readonly exit: (
    process: FakeProcess,
    status: ExitStatus,
    options?: { readonly lingering?: boolean }
  ) => Effect.Effect<void>
  /** the last members of a lingering group are gone */
  readonly endGroup: (process: FakeProcess) => Effect.Effect<void>
  /** the current record of a process (its `alive` and `stoppedWithGraceMs` as of now) */
  readonly current: (process: FakeProcess) => Effect.Effect<FakeProcess>
  /** the next spawn fails with this reason */
  readonly failNextSpawn: (reason: string) => Effect.Effect<void>
  /** A process that "outlived a previous daemon": running, known, never spawned here. */
  readonly adoptable: (command: string) => Effect.Effect<FakeProcess>
  /**
   * Processes as the next daemon sees them: the same processes (they outlive a daemon), through a service that has not
   * let go of them (`detach` is per daemon).
   */
  readonly nextDaemon: Effect.Effect<ProcessesService>
}

interface Entry {
  record: FakeProcess
  readonly exit: Deferred.Deferred<ExitStatus>
}

export const makeFakeProcesses = Effect.gen(function* () {
  const entries: Array<Entry> = []
  const count = yield* SubscriptionRef.make(0)
  const spawned = yield* SubscriptionRef.make(0)
  let nextFailure: string | undefined
  const stopOrder: Array<number> = []

  const entryOf = (handle: ProcessHandle) =>
    entries.find((e) => e.record.handle.pid === handle.pid && e.record.handle.startTime === handle.startTime)

  const add = (spec: SpawnSpec) =>
    Effect.gen(function* () {
      const pid = 1_000 + entries.length
      const entry: Entry = {
        record: {
          handle: { pid, pgid: pid, startTime: `${pid}00` },
          spec,
          alive: true,
          lingering: false,
          stoppedWithGraceMs: undefined
        },
        exit: yield* Deferred.make<ExitStatus>()
      }
      entries.push(entry)
      yield* SubscriptionRef.set(count, entries.length)
      return entry
    })

  const end = (entry: Entry, status: ExitStatus, lingering: boolean) =>
    Effect.gen(function* () {
      entry.record = { ...entry.record, alive: false, lingering }
      yield* Deferred.succeed(entry.exit, status)
    })

  const spawn = (spec: SpawnSpec) =>
    Effect.gen(function* () {
      if (nextFailure !== undefined) {
        const reason = nextFailure
        nextFailure = undefined
        return yield* new SpawnFailed({ command: spec.command, cwd: spec.cwd, reason })
      }
      const entry = yield* add(spec)
      yield* SubscriptionRef.update(spawned, (n) => n + 1)
      return entry.record.handle
    })

  const stop = (handle: ProcessHandle, graceMs: number, detached: boolean) =>
    Effect.gen(function* () {
      if (detached) return { _tag: "Detached" } satisfies StopOutcome
      const entry = entryOf(handle)
      if (entry === undefined) return { _tag: "Exited" } satisfies StopOutcome
      entry.record = { ...entry.record, stoppedWithGraceMs: graceMs }
      if (entry.record.alive || entry.record.lingering) {
        stopOrder.push(handle.pid)
        yield* end(entry, { code: null, signal: "SIGTERM" }, false)
      }
      return { _tag: "Exited" } satisfies StopOutcome
    })

  const isRunning = (handle: ProcessHandle) =>
    Effect.sync(() => {
      const entry = entryOf(handle)
      return entry !== undefined && (entry.record.alive || entry.record.lingering)
    })

  const awaitExit = (handle: ProcessHandle) => {
    const entry = entryOf(handle)
    return entry === undefined ? Effect.succeed<ExitStatus>({ code: null, signal: null }) : Deferred.await(entry.exit)
  }

  /** one daemon's Processes: what it let go of is its own affair, the processes are shared */
  const daemonView = (): ProcessesService => {
    let detached = false
    const stopHere = (handle: ProcessHandle, graceMs: number) => Effect.suspend(() => stop(handle, graceMs, detached))
    return {
      detach: Effect.sync(() => {
        detached = true
      }),
      detached: Effect.sync(() => detached),
      spawn,
      spawnScoped: (spec, graceMs) => Effect.acquireRelease(spawn(spec), (handle) => stopHere(handle, graceMs)),
      sweepOneShots: () => Effect.succeed(0),
      marked: Effect.sync(() =>
        entries.flatMap((e) => {
          const value = e.record.spec.env[MARK_VARIABLE]
          const mark = value === undefined ? undefined : parseMark(value)
          const live = e.record.alive || e.record.lingering
          return mark === undefined || !live ? [] : [{ pid: e.record.handle.pid, pgid: e.record.handle.pgid, mark }]
        })
      ),
      stopGroups: (pgids) =>
        Effect.forEach(
          entries.filter((e) => pgids.includes(e.record.handle.pgid)),
          (e) => stopHere(e.record.handle, 0),
          { discard: true }
        ),
      isAlive: (handle) => Effect.sync(() => entryOf(handle)?.record.alive === true),
      isRunning,
      groupMembers: (pgid) =>
        Effect.sync(() =>
          entries
            .filter((e) => e.record.handle.pgid === pgid && (e.record.alive || e.record.lingering))
            .map((e) => e.record.handle.pid)
        ),
      family: (handle) =>
        Effect.sync(() =>
          entries
            .filter((e) => e.record.handle.pgid === handle.pgid && (e.record.alive || e.record.lingering))
            .map((e) => e.record.handle.pid)
        ),
      stop: stopHere,
      awaitExit,
      exits: awaitExit,
      exitStatus: (handle) => {
        const entry = entryOf(handle)
        return entry === undefined
          ? Effect.succeedNone
          : Deferred.poll(entry.exit).pipe(
              Effect.flatMap(Option.match({ onNone: () => Effect.succeedNone, onSome: Effect.asSome }))
            )
      }
    }
  }
  const service = daemonView()

  const control: FakeProcessesControl = {
    all: Effect.sync(() => entries.map((e) => e.record)),
    nth: (n) =>
      Effect.zipRight(
        awaitRef(`process #${n} to be spawned`, count, (c) => c >= n),
        Effect.sync(() => entries[n - 1]!.record)
      ),
    spawnCount: SubscriptionRef.get(spawned),
    stopOrder: Effect.sync(() => [...stopOrder]),
    exit: (process, status, options = {}) => {
      const entry = entryOf(process.handle)
      return entry === undefined ? Effect.void : end(entry, status, options.lingering === true)
    },
    endGroup: (process) =>
      Effect.sync(() => {
        const entry = entryOf(process.handle)
        if (entry !== undefined) entry.record = { ...entry.record, lingering: false }
      }),
    current: (process) => Effect.sync(() => entryOf(process.handle)?.record ?? process),
    failNextSpawn: (reason) =>
      Effect.sync(() => {
        nextFailure = reason
      }),
    adoptable: (command) => Effect.map(add({ command, cwd: "/", env: {}, logFile: "/dev/null" }), (e) => e.record),
    nextDaemon: Effect.sync(daemonView)
  }
  return { service, control } as const
})

// ---------------------------------------------------------------------------------------------------------------
// Health

export interface FakeHealthControl {
  /** Every attempt for the service logging to `logFile` passes from now on (or, with false, misses). */
  readonly setHealthy: (logFile: string, healthy: boolean) => Effect.Effect<void>
  /**
   * The same for every service named `service`, whatever its world (its log file is `<service>.log`), unless its log
   * file was set on its own: for tests that do not know a world's id before its services start.
   */
  readonly setServiceHealthy: (service: string, healthy: boolean) => Effect.Effect<void>
  /** what a service nothing was set for answers (misses, until this says otherwise) */
  readonly setDefault: (healthy: boolean) => Effect.Effect<void>
  /** what the listener judge says about the service's port from now on (default: the group's own) */
  readonly setListener: (verdict: ListenerVerdict) => Effect.Effect<void>
  /** attempts made so far for the service logging to `logFile` */
  readonly attempts: (logFile: string) => Effect.Effect<number>
  /** probes run in the probe line so far, every service's */
  readonly lined: Effect.Effect<number>
}

/**
 * Health whose attempts answer what the test set, per service (named by its log file). `waitHealthy` polls with the
 * real schedule and timeout (`pollUntilHealthy`), so a TestClock drives it as it drives the real one.
 */
export const makeFakeHealth = Effect.sync(() => {
  const healthy = new Map<string, boolean>()
  const byService = new Map<string, boolean>()
  let byDefault = false
  const attempts = new Map<string, number>()
  let listener: ListenerVerdict = { _tag: "Ours" }
  let lined = 0

  const attempt = (ctx: ProbeContext) =>
    Effect.sync(() => {
      attempts.set(ctx.logFile, (attempts.get(ctx.logFile) ?? 0) + 1)
      return healthy.get(ctx.logFile) ?? byService.get(basename(ctx.logFile, ".log")) ?? byDefault
    })

  const service: HealthService = {
    probe: (_check: HealthCheck, ctx) => attempt(ctx),
    prober: (_check, ctx) => Effect.succeed(attempt(ctx)),
    inLine: (probe) =>
      Effect.zipRight(
        Effect.sync(() => lined++),
        probe
      ),
    waitHealthy: (check, ctx, confirm) => pollUntilHealthy(check, attempt(ctx), confirm, ctx.port),
    defaultCheck,
    makeLogWatcher,
    listenerJudge: () => Effect.succeed(() => Effect.sync(() => listener)),
    listeningPorts: () => Effect.succeed([])
  }

  const control: FakeHealthControl = {
    setHealthy: (logFile, value) =>
      Effect.sync(() => {
        healthy.set(logFile, value)
      }),
    setServiceHealthy: (name, value) =>
      Effect.sync(() => {
        byService.set(name, value)
      }),
    setDefault: (value) =>
      Effect.sync(() => {
        byDefault = value
      }),
    setListener: (verdict) =>
      Effect.sync(() => {
        listener = verdict
      }),
    attempts: (logFile) => Effect.sync(() => attempts.get(logFile) ?? 0),
    lined: Effect.sync(() => lined)
  }
  return { service, control } as const
})

// ---------------------------------------------------------------------------------------------------------------
// Slices

export interface FakeSlicesControl {
  /** what was asked, in order: `provision <world>/<service>` (made or found), `teardown <world>/<service>` */
  readonly calls: Effect.Effect<ReadonlyArray<string>>
  /** the slices that exist now, as `<world>/<service>` */
  readonly existing: Effect.Effect<ReadonlyArray<string>>
}

/**
 * Slices without a server: a world's slice is made on its first provision and filled by `init` (as a real one made
 * just then is), found again on later ones; its address is `fake://<world slug>/<service>`. A teardown drops what the
 * world has (or the services of `only`).
 */
export const makeFakeSlices = Effect.sync(() => {
  const calls: Array<string> = []
  /** by world id: the world's name and its slices' addresses by service */
  const worlds = new Map<number, { readonly name: string; readonly urls: Map<string, string> }>()

  const service: SlicesService = {
    owner: "bfake",
    provision: (world, services, _env, init) =>
      Effect.gen(function* () {
        const mine = worlds.get(world.id) ?? { name: world.name, urls: new Map<string, string>() }
        worlds.set(world.id, mine)
        const made: Array<SliceService> = []
        for (const s of services) {
          calls.push(`provision ${world.name}/${s.name}`)
          if (mine.urls.has(s.name)) continue
          mine.urls.set(s.name, `fake://${world.slug}/${s.name}`)
          made.push(s)
        }
        // as the real one: every address is known before the new slices are filled
        for (const s of made) yield* init(s, new Map(mine.urls))
        return new Map(mine.urls)
      }),
    addresses: (worldId) => Effect.sync(() => new Map(worlds.get(worldId)?.urls ?? [])),
    teardown: (world, options = {}) =>
      Effect.sync(() => {
        const mine = worlds.get(world.id)
        for (const name of [...(mine?.urls.keys() ?? [])]) {
          if (options.only !== undefined && !options.only.has(name)) continue
          calls.push(`teardown ${world.name}/${name}`)
          mine?.urls.delete(name)
        }
        return []
      }),
    canCopy: () => Effect.void,
    copyWorld: () => Effect.void,
    rebuildGolden: (_world, s) => Effect.succeed(`golden-${s.name}`),
    gc: () => Effect.succeed({ entries: [], unreachable: [], forgotten: [] })
  }

  const control: FakeSlicesControl = {
    calls: Effect.sync(() => [...calls]),
    existing: Effect.sync(() => [...worlds.values()].flatMap((w) => [...w.urls.keys()].map((s) => `${w.name}/${s}`)))
  }
  return { service, control } as const
})

// ---------------------------------------------------------------------------------------------------------------
// Worktree files

export interface FakeWorktreeFilesControl {
  /**
   * what was asked, in order: `ensure <world>`, `bring <world>`, `writeEnv <world>/<service>`, `restoreEnv <paths>`
   * (the files a generation put back, `-` for none), `retractEnv <world>`, `userChanges <world>`, `remove <world>`
   */
  readonly calls: Effect.Effect<ReadonlyArray<string>>
  /** the env_files that hold berth's block now, by path (worktree and file joined): the variables the block holds */
  readonly envFiles: Effect.Effect<ReadonlyMap<string, Readonly<Record<string, string>>>>
  /** what `userChanges` answers from now on (`git status` lines; none until this says otherwise) */
  readonly setUserChanges: (changes: ReadonlyArray<string>) => Effect.Effect<void>
}

/**
 * A worktree's files in memory: the env_files berth writes, puts back and takes back are kept in a map, and the user's
 * changes are what the test says. The folder itself (made, removed), what `copy` and `link` bring and a package.json's
 * scripts are `real`'s when one is given (`around`: the harness's worlds are real git worktrees), else nothing: no
 * branch made, nothing brought, a folder always removed, no scripts (`service`, for a world whose folder is there).
 */
export const makeFakeWorktreeFiles = Effect.sync(() => {
  const calls: Array<string> = []
  const files = new Map<string, Readonly<Record<string, string>>>()
  let changes: ReadonlyArray<string> = []
  const envPaths = (path: string, service: ProcessService) =>
    service.envFiles.map((file) => (file.startsWith("/") ? file : join(path, service.dir ?? "", file)))

  const around = (real: WorktreeFilesService | undefined): WorktreeFilesService => ({
    ensure: (w) =>
      Effect.suspend(() => {
        calls.push(`ensure ${w.name}`)
        return real === undefined ? Effect.succeed({ madeBranch: undefined }) : real.ensure(w)
      }),
    bring: (w, project) =>
      Effect.suspend(() => {
        calls.push(`bring ${w.name}`)
        return real === undefined ? Effect.succeed({ copied: [], linked: [] }) : real.bring(w, project)
      }),
    writeEnv: (w, service, vars, before) =>
      Effect.sync(() => {
        calls.push(`writeEnv ${w.name}/${service.name}`)
        for (const path of envPaths(w.path, service)) {
          // what the file held before this generation first wrote it, as the real one keeps it: its text, or none
          if (!before.has(path)) before.set(path, files.has(path) ? JSON.stringify(files.get(path)) : undefined)
          files.set(path, { ...vars })
        }
      }),
    restoreEnv: (before) =>
      Effect.sync(() => {
        calls.push(`restoreEnv ${before.size === 0 ? "-" : [...before.keys()].join(", ")}`)
        for (const [path, text] of before) {
          if (text === undefined) files.delete(path)
          else files.set(path, JSON.parse(text) as Record<string, string>)
        }
      }),
    retractEnv: (w, config) =>
      Effect.sync(() => {
        calls.push(`retractEnv ${w.name}`)
        for (const service of processes(config)) for (const path of envPaths(w.path, service)) files.delete(path)
      }),
    userChanges: (w) =>
      Effect.sync(() => {
        calls.push(`userChanges ${w.name}`)
        return changes
      }),
    remove: (w, force) =>
      Effect.suspend(() => {
        calls.push(`remove ${w.name}`)
        return real === undefined ? Effect.succeed(true) : real.remove(w, force)
      }),
    packageScripts: (folder) => (real === undefined ? Effect.succeed({}) : real.packageScripts(folder))
  })

  const control: FakeWorktreeFilesControl = {
    calls: Effect.sync(() => [...calls]),
    envFiles: Effect.sync(() => new Map(files)),
    setUserChanges: (given) =>
      Effect.sync(() => {
        changes = given
      })
  }
  const service = around(undefined)
  return { service, around, control } as const
})

// ---------------------------------------------------------------------------------------------------------------
// Machine, and what Admission needs beside it

export const GiB = 1024 ** 3

export interface FakeMachineControl {
  /** available memory, as a percentage of 16 GiB, from the next reading on */
  readonly setMemoryPercent: (percent: number) => Effect.Effect<void>
  /** free space of every watched filesystem from the next reading on */
  readonly setDiskFree: (bytes: number) => Effect.Effect<void>
  /** how many times the machine was read */
  readonly reads: Effect.Effect<number>
}

/** A 16 GiB machine with `memoryPercent` available and plenty of disk, until the test says otherwise. */
export const makeFakeMachine = (memoryPercent = 80) =>
  Effect.sync(() => {
    let percent = memoryPercent
    let diskFree = 500 * GiB
    let reads = 0
    const service: MachineService = {
      read: (paths): Effect.Effect<Readings> =>
        Effect.sync(() => {
          reads++
          return {
            memTotalBytes: 16 * GiB,
            memAvailableBytes: (16 * GiB * percent) / 100,
            disks: paths.slice(0, 1).map((path) => ({ path, freeBytes: diskFree }))
          }
        })
    }
    const control: FakeMachineControl = {
      setMemoryPercent: (p) =>
        Effect.sync(() => {
          percent = p
        }),
      setDiskFree: (bytes) =>
        Effect.sync(() => {
          diskFree = bytes
        }),
      reads: Effect.sync(() => reads)
    }
    return { service, control } as const
  })

/**
 * A Registry that keeps settings in memory and dies on anything else: what the code under test touches beyond the
 * settings shows up as a loud failure instead of a silent default.
 */
export const settingsRegistry = (initial: Readonly<Record<string, unknown>> = {}): RegistryService => {
  const settings = new Map<string, unknown>(Object.entries(initial))
  const implemented: Partial<RegistryService> = {
    getSetting: (key) => Effect.sync(() => settings.get(key)),
    setSetting: (key, value) =>
      Effect.sync(() => {
        settings.set(key, value)
      }),
    updateSetting: (key, f) =>
      Effect.sync(() => {
        settings.set(key, f(settings.get(key)))
      })
  }
  return new Proxy(implemented, {
    get: (target, key) =>
      Reflect.get(target, key) ?? (() => Effect.dieMessage(`Registry.${String(key)} is not faked in this test`))
  }) as RegistryService
}

/** Home and Registry for an Admission under test: nothing is written anywhere. */
export const admissionDependencies = (machine: MachineService, settings: Readonly<Record<string, unknown>> = {}) =>
  Layer.mergeAll(
    Layer.succeed(Machine, machine),
    Layer.succeed(Registry, settingsRegistry(settings)),
    Layer.succeed(Home, homePaths("/berth-test-home"))
  )

// ---------------------------------------------------------------------------------------------------------------
// The worlds the pressure monitor acts on

export interface FakeWorldsControl {
  /** A running world that holds a permit (claimed, as after a restart); `holds: false` leaves it without one. */
  readonly add: (world: {
    readonly id: number
    readonly startedAt: number
    readonly idleSuspendMs?: number
    readonly holds?: boolean
  }) => Effect.Effect<void>
  /** a request reached the world's routes at `at` */
  readonly request: (id: number, at: number) => Effect.Effect<void>
  /** what happened, in order: `suspend 3`, `idle 3`, `resume 3` */
  readonly events: SubscriptionRef.SubscriptionRef<ReadonlyArray<string>>
  /** the reasons given to `suspend`, by world */
  readonly reasons: Effect.Effect<ReadonlyMap<number, string>>
  /** how many times the worlds were read (`running`) */
  readonly looks: Effect.Effect<number>
  /** the next `running` fails, as a registry that cannot be read would */
  readonly failNextRead: Effect.Effect<void>
}

/**
 * Worlds as the monitor sees them, and a `suspend` that does what a WorldActor does with the gate: it gives its permit
 * back and, suspended for memory, marks the gate recovering and rejoins the line at once, running again (a fresh
 * `startedAt`) when admitted; suspended for idleness it only lets go.
 */
export const makeFakeWorlds = (admission: AdmissionService) =>
  Effect.gen(function* () {
    const worlds = new Map<
      number,
      { startedAt: number; running: boolean; lastRequestAt: number | undefined; idleSuspendMs: number | undefined }
    >()
    const events = yield* SubscriptionRef.make<ReadonlyArray<string>>([])
    const reasons = new Map<number, string>()
    let failNext = false
    /** moves with every change of a world, as the registry's counter does; `looks` counts the reads of `running` */
    let changes = 0
    let looks = 0
    const log = (event: string) => SubscriptionRef.update(events, (all) => [...all, event])

    const service: PressureTargetsService = {
      changes: Effect.sync(() => changes),
      running: Effect.suspend(() => {
        looks++
        if (failNext) {
          failNext = false
          return Effect.fail(new InternalError({ reason: "state database: disk I/O error" }))
        }
        return Effect.succeed(
          [...worlds]
            .filter(([, w]) => w.running)
            .map(
              ([id, w]): PressureWorld => ({
                id,
                name: `world-${id}`,
                startedAt: w.startedAt,
                idleSuspendMs: Effect.sync(() => w.idleSuspendMs),
                lastRequestAt: Effect.sync(() => w.lastRequestAt)
              })
            )
        )
      }),
      suspend: (id, reason, requeue) =>
        Effect.gen(function* () {
          const w = worlds.get(id)
          if (w === undefined) return
          w.running = false
          changes++
          reasons.set(id, reason)
          yield* admission.release(id)
          yield* log(`${requeue ? "suspend" : "idle"} ${id}`)
          if (!requeue) return
          yield* admission.suspended
          const permit = yield* admission.enter(id, yield* Clock.currentTimeMillis)
          yield* Deferred.await(permit)
          w.running = true
          changes++
          w.startedAt = yield* Clock.currentTimeMillis
          yield* admission.resumed
          yield* log(`resume ${id}`)
        })
    }

    const control: FakeWorldsControl = {
      add: (world) =>
        Effect.gen(function* () {
          worlds.set(world.id, {
            startedAt: world.startedAt,
            running: true,
            lastRequestAt: undefined,
            idleSuspendMs: world.idleSuspendMs
          })
          changes++
          if (world.holds !== false) yield* admission.claim(world.id)
        }),
      request: (id, at) =>
        Effect.sync(() => {
          const w = worlds.get(id)
          if (w !== undefined) w.lastRequestAt = at
        }),
      events,
      reasons: Effect.sync(() => new Map(reasons)),
      looks: Effect.sync(() => looks),
      failNextRead: Effect.sync(() => {
        failNext = true
      })
    }
    return { service, control } as const
  })
