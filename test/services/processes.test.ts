import { afterAll, afterEach, describe, expect, it } from "@effect/vitest"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import { isDefunct, type ProcStat, parseStat } from "../../src/domain/proc.js"
import { Platform, procPlatform, psPlatformLinux } from "../../src/services/Platform.js"
import { type ProcessHandle, Processes, ProcessesLive, type SpawnSpec } from "../../src/services/Processes.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "berth-processes-"))
const repo = path.resolve(import.meta.dirname, "../..")
const baseEnv = { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin" }

/** Everything a test started, by (pid, start time): killed in afterEach so no test leaves a process behind. */
const started: Array<{ pid: number; startTime: string; group: boolean }> = []

const statOf = (pid: number) => {
  try {
    return parseStat(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return undefined
  }
}

/** The very process recorded still runs (a reused pid or a zombie does not count). */
const lives = (pid: number, startTime: string) => {
  const stat = statOf(pid)
  return stat !== undefined && stat.startTime === startTime && !isDefunct(stat)
}

const track = (handle: ProcessHandle) => {
  started.push({ pid: handle.pgid, startTime: handle.startTime, group: true })
}

const trackPids = (pids: ReadonlyArray<number>) => {
  for (const pid of pids) {
    const stat = statOf(pid)
    if (stat !== undefined) started.push({ pid, startTime: stat.startTime, group: false })
  }
}

const killQuietly = (target: number) => {
  try {
    process.kill(target, "SIGKILL")
  } catch {
    // already gone
  }
}

afterEach(() => {
  for (const s of started.splice(0)) {
    const leader = statOf(s.pid)
    // the group number is ours while its leader is ours or gone (then only our leftovers can hold it)
    if (s.group && (leader === undefined || leader.startTime === s.startTime)) killQuietly(-s.pid)
    if (lives(s.pid, s.startTime)) killQuietly(s.pid)
  }
})

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

let counter = 0
const spec = (command: string, extra: Partial<SpawnSpec> = {}): SpawnSpec => ({
  command,
  cwd: root,
  env: baseEnv,
  logFile: path.join(root, "logs", `${++counter}.log`),
  ...extra
})

/** Spawns through the service and registers the handle for cleanup. */
const spawn = (s: SpawnSpec) =>
  Effect.flatMap(Processes, (p) => p.spawn(s)).pipe(Effect.tap((h) => Effect.sync(() => track(h))))

/** Polls (real time) until `check` holds, failing the test after `ms`. */
const waitFor = <E, R>(what: string, check: Effect.Effect<boolean, E, R>, ms = 5_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 20)))
    }
  })

const commsOf = (pids: ReadonlyArray<number>) => pids.map((pid) => statOf(pid)?.comm)

/**
 * Every case runs on both Linux implementations of the Platform: /proc, and the `ps` commands macOS answers with. They
 * must behave alike here, so the path macOS takes is exercised where berth is tested.
 */
const platforms = [
  { name: "/proc", platform: procPlatform, exported: "procPlatform" },
  { name: "ps", platform: psPlatformLinux, exported: "psPlatformLinux" }
] as const

describe.each(platforms)("Processes on $name", ({ platform, exported }) => {
  // each implementation's cases write their own files
  const own = (file: string) => `${exported}-${file}`
  const PlatformHere = Layer.succeed(Platform, platform)

  it.live("writes stdout and stderr into the log file, appending, with mode 0600", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const s = spec("echo out; echo err >&2", { logFile: path.join(root, "deep", "er", own("svc.log")) })
      const first = yield* spawn(s)
      expect(first.pgid).toBe(first.pid)
      expect(yield* p.awaitExit(first)).toEqual({ code: 0, signal: null })
      const second = yield* spawn(s)
      expect(yield* p.exits(second)).toEqual({ code: 0, signal: null })
      expect(fs.readFileSync(s.logFile, "utf8")).toBe("out\nerr\nout\nerr\n")
      expect(fs.statSync(s.logFile).mode & 0o777).toBe(0o600)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("applies cwd and env, passes env values as data and inherits nothing from the daemon", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const cwd = fs.mkdtempSync(path.join(root, "cwd with space-"))
      const tricky = `a'b "c" $HOME; echo pwned $(echo sub) \`echo tick\` | & < > \\ *`
      process.env.BERTH_TEST_DAEMON_ONLY = "leak"
      const s = spec(`pwd; printf '%s\\n' "$TRICKY"; echo "[$BERTH_TEST_DAEMON_ONLY]"; exit 3`, {
        cwd,
        env: { ...baseEnv, TRICKY: tricky }
      })
      const h = yield* spawn(s)
      expect(yield* p.awaitExit(h)).toEqual({ code: 3, signal: null })
      expect(fs.readFileSync(s.logFile, "utf8")).toBe(`${fs.realpathSync(cwd)}\n${tricky}\n[]\n`)
      expect(Option.getOrThrow(yield* p.exitStatus(h))).toEqual({ code: 3, signal: null })
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("fails with SpawnFailed when the cwd is missing or the log file cannot be written", () =>
    Effect.gen(function* () {
      const missing = yield* Effect.exit(spawn(spec("true", { cwd: path.join(root, "nope") })))
      expect(missing).toMatchObject(Exit.fail({ _tag: "SpawnFailed", cwd: path.join(root, "nope") }))
      if (Exit.isFailure(missing)) expect(String(missing.cause)).toContain("no such file or folder")

      const notAFolder = path.join(root, "a-file")
      fs.writeFileSync(notAFolder, "")
      const badCwd = yield* Effect.flip(spawn(spec("true", { cwd: notAFolder })))
      expect(badCwd.message).toContain("not a folder")

      const badLog = yield* Effect.flip(spawn(spec("true", { logFile: path.join(notAFolder, "x.log") })))
      expect(badLog._tag).toBe("SpawnFailed")
      expect(badLog.message).toMatch(/^cannot start `true` in .*: log file .*x\.log: /)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("reads every process once to stop a group that ends on SIGTERM, and not at all to find it ended", () => {
    // what each `down` pays per service: the table of every process read, counted
    let scans = 0
    const counting = Layer.succeed(Platform, {
      ...platform,
      processes: Effect.tap(platform.processes, () => Effect.sync(() => scans++))
    })
    return Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* spawn(spec("exec sleep 1000"))
      expect(yield* p.isRunning(h)).toBe(true)
      scans = 0
      expect(yield* p.stop(h, 2_000)).toEqual({ _tag: "Exited" })
      expect(scans).toBe(1)
      expect(yield* p.isRunning(h)).toBe(false)
      expect(yield* p.awaitExit(h)).toEqual({ code: null, signal: "SIGTERM" })
      expect(scans).toBe(1)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(counting))))
  })

  it.live("kills a group that ignores SIGTERM, grandchildren included, once the grace ends", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* spawn(spec(`trap "" TERM; (trap "" TERM; sleep 1000) & sleep 1000`))
      yield* waitFor(
        "both sleeps",
        Effect.map(p.groupMembers(h.pgid), (pids) => commsOf(pids).filter((c) => c === "sleep").length === 2)
      )
      const members = yield* p.groupMembers(h.pgid)
      trackPids(members)
      const recorded = members.map((pid) => ({ pid, startTime: statOf(pid)!.startTime }))
      expect(members.length).toBeGreaterThanOrEqual(3)

      // Killed, not Exited: the grace ran out and the group was killed (no time is asserted: a loaded machine lags)
      expect(yield* p.stop(h, 300)).toEqual({ _tag: "Killed" })
      expect(yield* p.groupMembers(h.pgid)).toEqual([])
      expect(recorded.filter((r) => lives(r.pid, r.startTime))).toEqual([])
      expect(yield* p.isAlive(h)).toBe(false)
      expect(yield* p.isRunning(h)).toBe(false)
      expect(yield* p.awaitExit(h)).toEqual({ code: null, signal: "SIGKILL" })
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("family: the leader and its descendants in its group, read from the leader down; none once it is gone", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* spawn(spec(`sh -c 'sleep 1000 & sleep 1000' & setsid sleep 1000 & sleep 1000`))
      yield* waitFor(
        "the group's three sleeps",
        Effect.map(p.groupMembers(h.pgid), (pids) => commsOf(pids).filter((c) => c === "sleep").length === 3)
      )
      trackPids(yield* p.groupMembers(h.pgid))
      const members = yield* p.groupMembers(h.pgid)
      const family = yield* p.family(h)
      // every member of the group, the leader first; the sleep that left by setsid is not in it
      expect(family[0]).toBe(h.pid)
      expect([...family].sort()).toEqual([...members].sort())
      yield* p.stop(h, 200)
      expect(yield* p.family(h)).toEqual([])
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("also kills a descendant that moved to a session of its own", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* spawn(spec(`trap "" TERM; setsid sh -c 'trap "" TERM; sleep 1000' & sleep 1000`))
      const escaped = () => {
        const all = fs.readdirSync("/proc").filter((n) => /^\d+$/.test(n))
        return all
          .map((n) => statOf(Number(n)))
          .filter((s): s is ProcStat => s !== undefined && s.ppid !== 0 && s.session !== h.pgid)
      }
      // the escaped shell is a child of our leader in a new session
      yield* waitFor(
        "the setsid child",
        Effect.sync(() => escaped().some((s) => s.ppid === h.pid && s.comm === "sh"))
      )
      const shell = escaped().find((s) => s.ppid === h.pid && s.comm === "sh")!
      trackPids([shell.pid])
      yield* waitFor(
        "its sleep",
        Effect.sync(() => escaped().some((s) => s.ppid === shell.pid && s.comm === "sleep"))
      )
      const sleeper = escaped().find((s) => s.ppid === shell.pid)!
      trackPids([sleeper.pid])

      expect(yield* p.stop(h, 200)).toEqual({ _tag: "Killed" })
      expect(lives(shell.pid, shell.startTime)).toBe(false)
      expect(lives(sleeper.pid, sleeper.startTime)).toBe(false)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("a command that forks and exits 0 is still running through its group, and stop kills the orphan", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* spawn(spec("(sleep 1000 &); exit 0"))
      expect(yield* p.awaitExit(h)).toEqual({ code: 0, signal: null })
      expect(yield* p.isAlive(h)).toBe(false)
      // the forked subshell is `sh` until it execs sleep
      yield* waitFor(
        "the orphan",
        Effect.map(p.groupMembers(h.pgid), (pids) => commsOf(pids).includes("sleep"))
      )
      const members = yield* p.groupMembers(h.pgid)
      trackPids(members)
      expect(commsOf(members)).toEqual(["sleep"])
      // re-parented away from the leader, yet still in its group
      expect(statOf(members[0]!)?.ppid).not.toBe(h.pid)
      expect(yield* p.isRunning(h)).toBe(true)

      expect(yield* p.stop(h, 2_000)).toEqual({ _tag: "Exited" })
      expect(yield* p.groupMembers(h.pgid)).toEqual([])
      expect(yield* p.isRunning(h)).toBe(false)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("isAlive is false for a start time that does not match, a dead pid and a pid that never was", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* spawn(spec("sleep 1000"))
      expect(yield* p.isAlive(h)).toBe(true)
      const forged = { ...h, startTime: String(BigInt(h.startTime) + 1n) }
      expect(yield* p.isAlive(forged)).toBe(false)
      // its group is led by a different process: someone else's, not ours
      expect(yield* p.isRunning(forged)).toBe(false)

      const done = yield* spawn(spec("true"))
      yield* p.awaitExit(done)
      expect(yield* p.isAlive(done)).toBe(false)
      expect(yield* p.isRunning(done)).toBe(false)

      const never = { pid: 2 ** 22 + 11, pgid: 2 ** 22 + 11, startTime: "1" }
      expect(yield* p.isAlive(never)).toBe(false)
      expect(yield* p.isRunning(never)).toBe(false)
      expect(yield* p.stop(never, 100)).toEqual({ _tag: "Exited" })
      expect(yield* p.stop(h, 1_000)).toEqual({ _tag: "Exited" })
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("awaitExit on a process it did not spawn ends when that process does, even as a zombie nobody reaps", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      // sh starts a short sleep, says its pid, then becomes a long sleep that never reaps it: it ends as a zombie
      const holder = childProcess.spawn("sh", ["-c", "sleep 0.3 & echo $!; exec sleep 30"], {
        stdio: ["ignore", "pipe", "ignore"]
      })
      const pid = yield* Effect.promise(
        () => new Promise<number>((resolve) => holder.stdout.once("data", (d) => resolve(Number(String(d).trim()))))
      )
      const entry = yield* platform.process(pid)
      expect(entry).toBeDefined()
      const handle = { pid, pgid: entry!.pgid, startTime: entry!.startTime }
      // and one that simply ends (its parent, this test, reaps it)
      const plain = childProcess.spawn("sleep", ["0.3"], { stdio: "ignore" })
      const plainEntry = yield* platform.process(plain.pid!)
      const plainHandle = { pid: plain.pid!, pgid: plainEntry!.pgid, startTime: plainEntry!.startTime }
      const started = Date.now()
      const exits = yield* Effect.all([p.awaitExit(handle), p.awaitExit(plainHandle)], { concurrency: "unbounded" })
      // only its parent hears how a process ended
      expect(exits).toEqual([
        { code: null, signal: null },
        { code: null, signal: null }
      ])
      expect(Date.now() - started).toBeLessThan(20_000)
      holder.kill("SIGKILL")
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live("a service outlives the scope that spawned it", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* Effect.scoped(spawn(spec("sleep 1000")))
      expect(yield* p.isRunning(h)).toBe(true)
      // its own session and group: no terminal hang-up or Ctrl-C of the daemon's group reaches it
      expect(statOf(h.pid)).toMatchObject({ session: h.pid, pgrp: h.pid })
      expect(yield* p.stop(h, 1_000)).toEqual({ _tag: "Exited" })
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  it.live(
    "a service outlives the daemon process that spawned it, which can exit at once",
    () =>
      Effect.gen(function* () {
        const p = yield* Processes
        const logFile = path.join(root, "logs", own("outlive.log"))
        const script = `
        import * as Effect from "effect/Effect"
        import * as Layer from "effect/Layer"
        import { Platform, ${exported} } from "./src/services/Platform.js"
        import { Processes, ProcessesLive } from "./src/services/Processes.js"
        const spawn = Effect.flatMap(Processes, (p) =>
          p.spawn({ command: "sleep 1000", cwd: ${JSON.stringify(root)}, env: {}, logFile: ${JSON.stringify(logFile)} }))
        const h = await Effect.runPromise(spawn.pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(Layer.succeed(Platform, ${exported}))))))
        console.log(JSON.stringify(h))
      `
        const out = yield* Effect.promise(
          () =>
            new Promise<string>((resolve, reject) => {
              childProcess.execFile(
                process.execPath,
                ["--import", "tsx", "--input-type=module", "-e", script],
                { cwd: repo, timeout: 30_000 },
                (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout))
              )
            })
        )
        const h: ProcessHandle = JSON.parse(out.trim().split("\n").at(-1)!)
        track(h)
        expect(yield* p.isRunning(h)).toBe(true)
        expect(yield* p.isAlive(h)).toBe(true)
        // not our child: its exit is only seen through /proc
        const exit = yield* Effect.fork(p.awaitExit(h))
        expect(yield* p.stop(h, 1_000)).toEqual({ _tag: "Exited" })
        expect(yield* exit.await).toEqual(Exit.succeed({ code: null, signal: null }))
      }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere)))),
    30_000
  )

  it.live("spawnScoped stops the process when the scope closes", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const h = yield* Effect.scoped(
        Effect.tap(p.spawnScoped(spec("sleep 1000"), 1_000), (h) => Effect.sync(() => track(h)))
      )
      expect(yield* p.isRunning(h)).toBe(false)
      expect(yield* p.awaitExit(h)).toEqual({ code: null, signal: "SIGTERM" })
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )

  // a TestClock nobody advances, inside an uninterruptible region: stop must end on its own deadline
  it.effect("stop ends in bounded time inside a finalizer, whatever the Clock", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      // the bound is the test's own timeout, far below the sleep's 1000 s: nothing here advances the clock
      const h = yield* Effect.scoped(
        Effect.tap(p.spawnScoped(spec(`trap "" TERM; sleep 1000`), 200), (h) => {
          track(h)
          // the trap is in place once the sleep runs: before that a SIGTERM still ends the shell
          return waitFor(
            "the sleep",
            Effect.map(p.groupMembers(h.pgid), (pids) => commsOf(pids).includes("sleep"))
          )
        })
      )
      expect(yield* p.isRunning(h)).toBe(false)
      expect(yield* p.awaitExit(h)).toEqual({ code: null, signal: "SIGKILL" })
      // a process already gone: stop answers at once, without waiting out the grace on a clock nobody advances
      expect(yield* Effect.uninterruptible(p.stop(h, 200))).toEqual({ _tag: "Exited" })
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformHere))))
  )
})
