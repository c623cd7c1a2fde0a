/**
 * The gate and the pressure monitor through the real daemon, with the machine's readings staged in a file
 * (BERTH_READINGS_FILE) so that pressure can rise and fall on cue.
 */
import { spawn } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, eventually, isAlive, type RunResult, type Sandbox, sandboxes, type WorldJson } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

type World = WorldJson & { queue?: { position: number; waitingFor: string } }

const json = <A>(r: RunResult): A => {
  if (r.code !== 0) throw new Error(`berth failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout) as A
}

const statusOf = async (box: Sandbox) => json<{ worlds: Array<World> }>(await box.run(["status", "--json"])).worlds

const byName = (worlds: ReadonlyArray<World>, name: string) => worlds.find((w) => w.name === name)

const toml = `[services.api]
cmd = "node server.mjs"
url = "api"
health = { http = "/healthz" }

[services.files]
adapter = "dir"
`

/** A project whose daemon reads the machine from a file the test writes. */
const staged = async (freePercent: number) => {
  const box = await boxes.project({ "berth.toml": toml })
  const readings = join(box.home, "..", "readings.json")
  const set = (percent: number) => writeFileSync(readings, JSON.stringify({ memAvailablePercent: percent }))
  set(freePercent)
  const env = { BERTH_READINGS_FILE: readings, BERTH_PRESSURE_SETTLE_MS: "500", BERTH_PRESSURE_DWELL_MS: "0" }
  // the daemon reads the file: start it with that environment
  await box.run(["daemon", "stop"])
  const run = (args: ReadonlyArray<string>, timeoutMs = 60_000, onStderr?: (text: string) => void) =>
    box.run(args, { env, timeoutMs, ...(onStderr === undefined ? {} : { onStderr }) })
  expect((await run(["daemon", "start"])).code).toBe(0)
  return { box, set, run }
}

describe("admission", () => {
  it("runs max_parallel worlds and queues the rest in arrival order; each starts as one stops", async () => {
    const { box, run } = await staged(60)
    expect((await run(["reserve", "--max-parallel", "2"])).code).toBe(0)
    const names = ["q1", "q2", "q3", "q4", "q5"]
    const ups: Array<Promise<RunResult>> = []
    /** what q5's up has written on stderr so far: the test moves on once it has told each place in line */
    let q5said = ""
    const q5told = (place: number) =>
      eventually(
        async () => q5said,
        (text) => new RegExp(`^q5: (queued|stopped), #${place} in line, waiting for a slot`, "m").test(text)
      )
    for (const name of names) {
      // q5's up is a plain one, piped: it says where it stands in line, a line per change
      ups.push(
        name === "q5"
          ? run(["up", name], 120_000, (text) => {
              q5said = text
            })
          : run(["up", name, "--json"], 120_000)
      )
      // arrival order is the order the daemon hears them in
      await eventually(
        () => statusOf(box),
        (ws) => byName(ws, name) !== undefined
      )
    }
    const queued = await eventually(
      () => statusOf(box),
      (ws) =>
        ws.filter((w) => w.state === "running").length === 2 && ws.filter((w) => w.state === "queued").length === 3
    )
    expect(queued.filter((w) => w.state === "running").map((w) => w.name)).toEqual(["q1", "q2"])
    expect(names.slice(2).map((n) => byName(queued, n)?.queue?.position)).toEqual([1, 2, 3])
    expect(byName(queued, "q3")?.queue?.waitingFor).toMatch(/slot/)
    // a down of a queued world takes it out of the line
    await q5told(3)
    expect((await run(["down", "q4"])).code).toBe(0)
    const afterDown = await statusOf(box)
    expect(byName(afterDown, "q4")?.state).toBe("stopped")
    expect(byName(afterDown, "q5")?.queue?.position).toBe(2)
    await q5told(2)
    // each starts as one stops, in order
    expect((await run(["down", "q1"])).code).toBe(0)
    await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "q3")?.state === "running"
    )
    expect(byName(await statusOf(box), "q5")?.state).toBe("queued")
    await q5told(1)
    expect((await run(["down", "q2"])).code).toBe(0)
    await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "q5")?.state === "running"
    )
    const results = await Promise.all(ups)
    for (const [i, r] of results.entries()) {
      if (names[i] === "q4") {
        expect(r.code).toBe(1)
        expect(r.stderr).toMatch(/stopped before it was ready/)
      } else expect(r.code, `${names[i]}: ${r.stderr}`).toBe(0)
    }
    const q5 = results[4]!
    // a line per change of its place (its place is taken in the same step that moves it to `queued`: a status read
    // between the two may still say stopped)
    expect(q5.stderr).toMatch(/^q5: (queued|stopped), #3 in line, waiting for a slot \(2 of 2 worlds run\)$/m)
    expect(q5.stderr).toMatch(/^q5: queued, #2 in line, waiting for a slot/m)
    expect(q5.stderr).toMatch(/^q5: queued, #1 in line, waiting for a slot/m)
    expect(q5.stdout).toMatch(/q5/)
  }, 180_000)

  it("returns at once with --no-wait, saying the world is queued", async () => {
    const { run } = await staged(5)
    const r = await run(["up", "nw", "--no-wait", "--json"])
    expect(r.code, r.stderr).toBe(0)
    const w = (JSON.parse(r.stdout) as { world: World }).world
    expect(w.state).toBe("queued")
    expect(w.queue?.waitingFor).toMatch(/memory/)
    expect((await run(["down", "nw"])).code).toBe(0)
  })

  it("suspends the newest world under pressure and resumes it on the same ports with its data", async () => {
    const { box, set, run } = await staged(60)
    for (const name of ["p1", "p2", "p3"]) expect((await run(["up", name])).code).toBe(0)
    const before = await statusOf(box)
    const newest = byName(before, "p3")!
    const api = newest.services.find((s) => s.name === "api")!
    const files = newest.services.find((s) => s.name === "files")!
    writeFileSync(join(files.url!.replace(/^file:\/\//, ""), "kept.txt"), "data")
    set(5)
    const suspended = await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "p3")?.state === "suspended"
    )
    // only the newest; its processes are gone, its ports and slices kept
    expect(byName(suspended, "p1")?.state).toBe("running")
    expect(byName(suspended, "p2")?.state).toBe("running")
    expect(isAlive(api.pid!)).toBe(false)
    const env = json<{ vars: Record<string, string> }>(await run(["env", "p3", "--json"])).vars
    expect(env.API_PORT).toBe(String(api.port))
    // a request to it is answered by a page saying it is waking up
    set(60)
    const resumed = await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "p3")?.state === "running",
      30_000
    )
    const again = byName(resumed, "p3")!.services.find((s) => s.name === "api")!
    expect(again.port).toBe(api.port)
    expect(again.pid).not.toBe(api.pid)
    const events = (byName(resumed, "p3") as unknown as { events: Array<{ kind: string }> }).events.map((e) => e.kind)
    expect(events).toContain("suspended")
    expect(events).toContain("resumed")
    const { readFileSync } = await import("node:fs")
    expect(readFileSync(join(files.url!.replace(/^file:\/\//, ""), "kept.txt"), "utf8")).toBe("data")
  })

  it("answers a request to a suspended world with a page that wakes it", async () => {
    const block = await boxes.project({ "berth.toml": toml }, { proxy: true })
    const readings = join(block.home, "..", "readings.json")
    writeFileSync(readings, JSON.stringify({ memAvailablePercent: 60 }))
    const env = { BERTH_READINGS_FILE: readings, BERTH_PRESSURE_SETTLE_MS: "500", BERTH_PRESSURE_DWELL_MS: "0" }
    await block.run(["daemon", "stop"])
    const run = (args: ReadonlyArray<string>) => block.run(args, { env, timeoutMs: 60_000 })
    expect((await run(["up", "sleepy"])).code).toBe(0)
    writeFileSync(readings, JSON.stringify({ memAvailablePercent: 5 }))
    await eventually(
      () => statusOf(block),
      (ws) => byName(ws, "sleepy")?.state === "suspended"
    )
    const page = await run(["curl", "sleepy", "api", "-i"])
    expect(page.stdout).toMatch(/^HTTP\/1\.1 503/)
    expect(page.stdout).toMatch(/retry-after: 2/i)
    expect(page.stdout).toMatch(/waking up/i)
    writeFileSync(readings, JSON.stringify({ memAvailablePercent: 60 }))
    await eventually(
      () => run(["curl", "sleepy", "api", "/healthz"]),
      (r) => r.stdout === "ok",
      30_000
    )
  })

  it("suspends a world idle for [project] idle_suspend, and its next request wakes it", async () => {
    const box = await boxes.project({ "berth.toml": `[project]\nidle_suspend = "3s"\n\n${toml}` }, { proxy: true })
    expect((await box.run(["up", "idle", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    const slept = await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "idle")?.state === "suspended",
      30_000
    )
    expect(byName(slept, "idle")?.services.find((s) => s.name === "api")?.state).not.toBe("healthy")
    const page = await box.run(["curl", "idle", "api", "-i"])
    expect(page.stdout).toMatch(/^HTTP\/1\.1 503/)
    await eventually(
      () => box.run(["curl", "idle", "api", "/healthz"]),
      (r) => r.stdout === "ok",
      30_000
    )
  })

  it("says what a queued world waits for now: disk, after it queued for a slot", async () => {
    const { box, run } = await staged(60)
    expect((await run(["reserve", "--max-parallel", "1"])).code).toBe(0)
    expect((await run(["up", "first"])).code).toBe(0)
    expect((await run(["up", "second", "--no-wait"])).code).toBe(0)
    const slot = await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "second")?.queue !== undefined
    )
    expect(byName(slot, "second")?.queue?.waitingFor).toMatch(/^a slot/)
    // the disk runs short, then the slot frees: disk is what it waits for now, wherever it is told
    writeFileSync(
      join(box.home, "..", "readings.json"),
      JSON.stringify({ memAvailablePercent: 60, diskFreeBytes: 1024 ** 2 })
    )
    await eventually(
      () => run(["metrics", "--json"]),
      (r) => /"freeBytes":\s*1048576/.test(r.stdout)
    )
    expect((await run(["down", "first"])).code).toBe(0)
    const disk = await eventually(
      () => statusOf(box),
      (ws) => /^disk space/.test(byName(ws, "second")?.queue?.waitingFor ?? "")
    )
    const second = byName(disk, "second") as World & { reason: string | null }
    expect(second.queue?.waitingFor).toMatch(/^disk space on /)
    expect(second.reason).toMatch(/^waiting for disk space on /)
    const said = await run(["status"])
    expect(said.stdout).toMatch(/second .*disk space on /)
    expect(said.stdout).not.toMatch(/a slot/)
  })

  it("keeps an idle world suspended across a daemon restart, until a request wakes it", async () => {
    const box = await boxes.project({ "berth.toml": `[project]\nidle_suspend = "2s"\n\n${toml}` }, { proxy: true })
    expect((await box.run(["up", "dozy", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "dozy")?.state === "suspended",
      30_000
    )
    // replaced gracefully, then killed: neither new daemon wakes it on its own
    for (const restart of ["graceful", "kill"] as const) {
      if (restart === "graceful") expect((await box.run(["daemon", "stop"])).code).toBe(0)
      else {
        const pid = Number((await box.run(["daemon", "status", "--json"])).stdout.match(/"pid":\s*(\d+)/)?.[1])
        process.kill(pid, "SIGKILL")
        await eventually(
          async () => isAlive(pid),
          (alive) => !alive
        )
      }
      expect((await box.run(["daemon", "start"])).code).toBe(0)
      // past the new daemon's first reconcile passes (at start, then every 3 s)
      await new Promise((r) => setTimeout(r, 4_000))
      const dozy = byName(await statusOf(box), "dozy")
      expect(dozy?.state, restart).toBe("suspended")
      expect(dozy?.services.find((s) => s.name === "api")?.pid ?? null, restart).toBeNull()
    }
    await eventually(
      () => box.run(["curl", "dozy", "api", "/healthz"]),
      (r) => r.stdout === "ok",
      30_000
    )
  })

  it("takes a world out of the line when its waiting up is interrupted (Ctrl-C)", async () => {
    const { box, run } = await staged(60)
    expect((await run(["reserve", "--max-parallel", "1"])).code).toBe(0)
    expect((await run(["up", "first"])).code).toBe(0)
    const child = spawn(berthBin, ["up", "second"], {
      cwd: box.dir,
      env: {
        ...process.env,
        ...box.env,
        BERTH_HOME: box.home,
        NO_COLOR: "1",
        BERTH_PROXY_PORT: "off",
        BERTH_HTTPS_PORT: "off"
      },
      stdio: ["ignore", "ignore", "pipe"]
    })
    let said = ""
    child.stderr!.on("data", (d: Buffer) => {
      said += d.toString()
    })
    const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)))
    await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "second")?.state === "queued"
    )
    child.kill("SIGINT")
    // it says what it leaves behind
    expect(await exited).toBe(130)
    expect(said).toMatch(/^berth: stopped waiting; second is taken out of the line \(berth up second puts it back\)$/m)
    const after = await eventually(
      () => statusOf(box),
      (ws) => byName(ws, "second")?.state === "stopped"
    )
    expect(byName(after, "second")?.queue).toBeUndefined()
    // the line is empty: the first world's down lets nobody in
    expect((await run(["down", "first"])).code).toBe(0)
    await new Promise((r) => setTimeout(r, 2_500))
    expect(byName(await statusOf(box), "second")?.state).toBe("stopped")
  })
})
