/**
 * berth's promise, through the binary: nothing a user does loses a world's data or kills its processes. Each test
 * reproduces a reported way that promise was broken.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { request } from "../../src/daemon/wire.js"
import {
  ended,
  eventually,
  fetchJson,
  isAlive,
  otherBuild,
  processesOf,
  type RunResult,
  runBerth,
  type Sandbox,
  sandboxes,
  serverScript,
  type WorldJson,
  worldFrom
} from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"

const json = <A>(r: RunResult): A => {
  if (r.code !== 0) throw new Error(`berth failed (${r.code}): ${r.stderr}`)
  return JSON.parse(r.stdout) as A
}

const statusOf = async (box: Sandbox, options?: Parameters<Sandbox["run"]>[1]) =>
  json<{
    worlds: Array<
      WorldJson & { projectNote?: string; services: Array<WorldJson["services"][number] & { kind: string }> }
    >
  }>(await box.run(["status", "--json"], options)).worlds

const daemonPid = async (box: Sandbox): Promise<number | undefined> =>
  (JSON.parse((await box.run(["daemon", "status", "--json"])).stdout) as { pid?: number } | null)?.pid

const pidsOf = (w: WorldJson | undefined) =>
  Object.fromEntries((w?.services ?? []).filter((s) => s.pid !== null).map((s) => [s.name, s.pid]))

const gitIn = (dir: string, ...args: ReadonlyArray<string>) =>
  execFileSync("git", args, {
    cwd: dir,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "b",
      GIT_AUTHOR_EMAIL: "b@l",
      GIT_COMMITTER_NAME: "b",
      GIT_COMMITTER_EMAIL: "b@l"
    }
  })

/** Another repository with the same files and the same folder name ("app"), driven with the box's home. */
const twin = (box: Sandbox, files: Readonly<Record<string, string>>) => {
  const dir = join(mkdtempSync(join(tmpdir(), "berth-twin-")), "app")
  mkdirSync(dir)
  for (const [file, text] of Object.entries({ "server.mjs": serverScript, ...files }))
    writeFileSync(join(dir, file), text)
  gitIn(dir, "init", "-q", "-b", "main")
  gitIn(dir, "add", "-A")
  gitIn(dir, "commit", "-q", "-m", "initial")
  return {
    dir,
    run: (args: ReadonlyArray<string>, options?: Parameters<Sandbox["run"]>[1]) =>
      runBerth(args, dir, box.home, { ...options, env: { ...box.env, ...options?.env } })
  }
}

describe("safety", () => {
  it("keeps two repositories with the same project name apart: slices, routes and removal", async () => {
    const files = {
      "berth.toml": `[services.db]\nadapter = "sqlite"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\nenv = { DATABASE_URL = "\${db.url}" }\n`
    }
    const a = await boxes.project(files, { proxy: true })
    const b = twin(a, files)
    expect((await a.run(["up", "w1"], { timeoutMs: 60_000 })).code).toBe(0)
    const upB = await b.run(["up", "w1", "--json"], { timeoutMs: 60_000 })
    expect(upB.code, upB.stderr).toBe(0)
    const worldB = (JSON.parse(upB.stdout) as { world: WorldJson & { projectNote?: string } }).world
    // the second repository gets a label of its own, and is told why
    expect(worldB.project).not.toBe("app")
    expect(worldB.project).toMatch(/^app-[0-9a-z]+$/)
    expect(worldB.projectNote).toContain(a.dir)
    const envA = json<{ vars: Record<string, string> }>(await a.run(["env", "w1", "--json"])).vars
    const envB = json<{ vars: Record<string, string> }>(await b.run(["env", "w1", "--json"])).vars
    expect(envA.DB_URL).not.toBe(envB.DB_URL)
    expect(envA.API_URL).not.toBe(envB.API_URL)
    // each repository's curl answers from its own world
    const seenA = JSON.parse((await a.run(["curl", "w1", "api"])).stdout) as { env: Record<string, string> }
    const seenB = JSON.parse((await b.run(["curl", "w1", "api"])).stdout) as { env: Record<string, string> }
    expect(seenA.env.DATABASE_URL).toBe(envA.DB_URL)
    expect(seenB.env.DATABASE_URL).toBe(envB.DB_URL)
    // status and check say so in text too
    const text = await b.run(["status"])
    expect(text.stdout).toContain("also the name of")
    const check = await b.run(["check"])
    expect(check.code).toBe(0)
    expect(check.stderr).toContain(`also the name of ${a.dir}`)
    expect(check.stderr).toContain(worldB.project)
    // removing the twin's world leaves the first one's data and processes alone
    expect((await b.run(["remove", "w1", "--force"])).code).toBe(0)
    expect(existsSync(fileURLToPath(envA.DB_URL!))).toBe(true)
    const [w] = await statusOf(a)
    expect(w?.state).toBe("running")
  })

  it("keeps a world's own environment: a daemon from an empty shell adopts, restarts and gc's without harm", async () => {
    const project = `envkeep${process.pid}`
    const box = await boxes.project({
      "berth.toml": `[project]\nname = "${project}"\n\n[services.db]\nadapter = "postgres"\nadmin_url = "\${env.PG_ADMIN}"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\nrestart = "always"\nhealth = { http = "/healthz" }\nenv = { DATABASE_URL = "\${db.url}", APP_TOKEN = "\${env.APP_TOKEN}" }\n`
    })
    const withEnv = { env: { PG_ADMIN: ADMIN, APP_TOKEN: "tok-abcdef" }, timeoutMs: 60_000 }
    const without = { env: { PG_ADMIN: undefined, APP_TOKEN: undefined }, timeoutMs: 60_000 }
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], withEnv)).world
    const api = up.services.find((s) => s.name === "api")!
    expect(api.state).toBe("healthy")

    // a graceful stop leaves the services running; a daemon started from a shell without PG_ADMIN adopts them
    const stopped = await box.run(["daemon", "stop"])
    expect(stopped.code, stopped.stderr).toBe(0)
    expect(isAlive(api.pid!)).toBe(true)
    const adopted = await eventually(
      () => statusOf(box, without),
      (ws) => ws[0]?.state === "running" && ws[0]?.services.find((s) => s.name === "api")?.state === "healthy"
    )
    expect(adopted[0]?.state).toBe("running")
    expect(pidsOf(adopted[0]).api).toBe(api.pid)
    const slice = adopted[0]?.services.find((s) => s.name === "db")
    expect(slice?.url).toContain(`${project}_w1_db`)
    expect(slice?.url).not.toContain("${")

    // gc from that shell drops nothing of a live world
    const dry = json<{ entries: Array<{ name: string }> }>(await box.run(["gc", "--dry-run", "--json"], without))
    expect(dry.entries.map((e) => e.name)).not.toContain(`${project}_w1_db`)
    const gc = json<{ entries: Array<{ name: string }> }>(await box.run(["gc", "--json"], without))
    expect(gc.entries.map((e) => e.name)).not.toContain(`${project}_w1_db`)

    // a crashed service (its whole group) is restarted with the world's own environment, not the daemon's
    process.kill(-api.pid!, "SIGKILL")
    const restarted = await eventually(
      () => statusOf(box, without),
      (ws) => {
        const s = ws[0]?.services.find((x) => x.name === "api")
        return s?.state === "healthy" && s.pid !== api.pid
      }
    )
    const seen = (await fetchJson(`http://127.0.0.1:${restarted[0]!.services.find((s) => s.name === "api")!.port}/`))
      .env as Record<string, string>
    expect(seen.PG_ADMIN).toBe(ADMIN)
    expect(seen.APP_TOKEN).toBe("tok-abcdef")

    // a reload that cannot resolve admin_url fails for that world, names the variable, and stops nothing
    const pid = restarted[0]!.services.find((s) => s.name === "api")!.pid!
    const reload = await box.run(["reload", "w1"], without)
    expect(reload.code).toBe(1)
    expect(reload.stderr).toContain("${env.PG_ADMIN} is not set")
    expect(isAlive(pid)).toBe(true)
    expect((await box.run(["remove", "w1", "--force"], withEnv)).code).toBe(0)
  })

  it("reads .env from the main checkout for a new worktree", async () => {
    const box = await boxes.project({
      ".gitignore": ".env\n",
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\nenv = { GREETING = "\${env.GREETING}" }\n`
    })
    writeFileSync(join(box.dir, ".env"), "GREETING=from-main\n")
    const up = json<{ world: WorldJson }>(await box.run(["up", "feature", "--json"], { timeoutMs: 60_000 })).world
    const seen = (await fetchJson(up.services[0]!.url!)).env as Record<string, string>
    expect(seen.GREETING).toBe("from-main")
  })

  it("says what became of a slice whose service left berth.toml, and lists it no more", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.db]\nadapter = "sqlite"\n\n[services.files]\nadapter = "dir"\n`
    })
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    writeFileSync(join(up.path, "berth.toml"), `[services.files]\nadapter = "dir"\n`)
    const reload = await box.run(["reload", "w1"], { timeoutMs: 60_000 })
    expect(reload.code, reload.stderr).toBe(0)
    const [w] = await statusOf(box)
    expect(w?.services.map((s) => s.name)).toEqual(["files"])
    const events = (w as unknown as { events: Array<{ kind: string; message: string }> }).events
    expect(events.find((e) => e.kind === "slice_detached")?.message).toMatch(/no longer in berth\.toml.*berth gc/)
    const dry = json<{ entries: Array<{ name: string; reason: string }> }>(await box.run(["gc", "--dry-run", "--json"]))
    expect(dry.entries.map((e) => e.reason)).toEqual(["no longer in berth.toml"])
    // the daemon's own sweep leaves it to the user: only an explicit gc drops it
    await new Promise((r) => setTimeout(r, 3_000))
    const still = json<{ entries: Array<{ reason: string }> }>(await box.run(["gc", "--dry-run", "--json"]))
    expect(still.entries.map((e) => e.reason)).toEqual(["no longer in berth.toml"])
  })

  it("detaches on daemon stop: the same pids afterwards, adopted by the next daemon, and stop waits for it to go", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[services.worker]\ncmd = "sleep 600"\n`
    })
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    const before = pidsOf(up)
    const daemon = await daemonPid(box)
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    // it has let go of its socket and lock by the time stop returns
    expect(isAlive(daemon!)).toBe(false)
    for (const pid of Object.values(before)) expect(isAlive(pid!)).toBe(true)
    const after = await eventually(
      () => statusOf(box),
      (ws) => ws[0]?.services.every((s) => s.state === "healthy" || s.state === "running") === true
    )
    expect(pidsOf(after[0])).toEqual(before)
    // still supervised: down stops them
    expect((await box.run(["down", "w1"])).code).toBe(0)
    for (const pid of Object.values(before)) expect(isAlive(pid!)).toBe(false)
  })

  it("detaches when a CLI of another build replaces the daemon: same pids, and the very next command works", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n`
    })
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    const before = pidsOf(up)
    // another build: the same program with another build id, where node_modules still resolves
    const pong = await request(join(box.home, "daemon.sock"), "Ping", undefined, 5_000)
    expect((pong as { value: { build: string } }).value.build).not.toBe("0therb1d")
    const other = otherBuild("0therb1d")
    try {
      // its code cache in a folder of its own, away from the one the suite's runs share
      const cache = { XDG_CACHE_HOME: mkdtempSync(join(tmpdir(), "berth-cache-")) }
      const replaced = await box.run(["status", "--json"], { bin: other.bin, env: cache })
      expect(replaced.code, replaced.stderr).toBe(0)
      const seen = (JSON.parse(replaced.stdout) as { worlds: Array<WorldJson> }).worlds[0]
      expect(pidsOf(seen)).toEqual(before)
      for (const pid of Object.values(before)) expect(isAlive(pid!)).toBe(true)
      // and back to this build: again the very first command works, and nothing was restarted
      const back = await box.run(["status", "--json"])
      expect(back.code, back.stderr).toBe(0)
      const after = await eventually(
        () => statusOf(box),
        (ws) => ws[0]?.services[0]?.state === "healthy"
      )
      expect(pidsOf(after[0])).toEqual(before)
    } finally {
      other.remove()
    }
  })

  it("answers a command queued behind a remove of the same world", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.slow]\ncmd = "trap 'sleep 2; exit 0' TERM; while true; do sleep 0.2; done"\n`
    })
    expect((await box.run(["up", "w1"], { timeoutMs: 60_000 })).code).toBe(0)
    const remove = box.run(["remove", "w1", "--force"], { timeoutMs: 60_000 })
    // the slow service takes seconds to stop: the down is queued behind the remove
    await eventually(
      () => statusOf(box),
      (ws) => ws[0]?.state === "removing"
    )
    const down = await box.run(["down", "w1"], { timeoutMs: 30_000 })
    expect((await remove).code).toBe(0)
    expect(down.code).toBe(1)
    expect(down.stderr).toMatch(/no world "w1"/)
  })

  it("starts what a selection adds to a running world, and refuses an unknown service whether or not it runs", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[services.web]\ncmd = "node server.mjs"\nurl = "web"\nhealth = { http = "/healthz" }\n`
    })
    const first = json<{ world: WorldJson }>(
      await box.run(["up", "w1", "-s", "api", "--json"], { timeoutMs: 60_000 })
    ).world
    expect(first.services.map((s) => s.name)).toEqual(["api"])
    const second = json<{ world: WorldJson }>(
      await box.run(["up", "w1", "-s", "web", "--json"], { timeoutMs: 60_000 })
    ).world
    expect(second.services.map((s) => [s.name, s.state]).sort()).toEqual([
      ["api", "healthy"],
      ["web", "healthy"]
    ])
    expect(pidsOf(second).api).toBe(pidsOf(first).api)
    const unknown = await box.run(["up", "w1", "-s", "nope"])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/no service "nope"/)
    const fresh = await box.run(["up", "w2", "-s", "nope"])
    expect(fresh.code).toBe(1)
  })

  it("resolves every token in migrate, seed and the project's setup", async () => {
    const box = await boxes.project({
      "berth.toml": `[project]\nsetup = "echo \${world.name} > setup-ran.txt"\n\n[services.files]\nadapter = "dir"\nmigrate = "echo migrated > \${self.url}/m.txt"\nseed = "echo \${project.name} > \${self.url}/s.txt"\n`
    })
    const r = await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    const w = worldFrom(r.stdout)
    expect(readFileSync(join(w.path, "setup-ran.txt"), "utf8")).toBe("w1\n")
    const env = json<{ vars: Record<string, string> }>(await box.run(["env", "w1", "--json"])).vars
    const folder = env.FILES_URL!.startsWith("file:") ? fileURLToPath(env.FILES_URL!) : env.FILES_URL!
    expect(readFileSync(join(folder, "m.txt"), "utf8")).toBe("migrated\n")
    expect(readFileSync(join(folder, "s.txt"), "utf8")).toBe("app\n")
  })

  it("masks the admin password in a failing migrate's output", async () => {
    const project = `masked${process.pid}`
    const box = await boxes.project({
      "berth.toml": `[project]\nname = "${project}"\n\n[services.db]\nadapter = "postgres"\nadmin_url = "\${env.PG_ADMIN}"\nmigrate = "echo connecting to \${self.url}; echo admin $PG_ADMIN; exit 3"\n`
    })
    // trust auth accepts any password: a real one-looking secret reaches the URLs
    const secret = "s3cr3t-pa55word"
    const env = { PG_ADMIN: `postgres://postgres:${secret}@127.0.0.1:5432/postgres` }
    const r = await box.run(["up", "w1"], { env, timeoutMs: 60_000 })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("connecting to")
    expect(r.stderr).not.toContain(secret)
    const daemonLog = readFileSync(join(box.home, "daemon.log"), "utf8")
    expect(daemonLog).not.toContain(secret)
    await box.run(["remove", "w1", "--force"], { env })
  })

  it("adopts before it acts: kill -9 then an immediate up starts no second copy", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[services.worker]\ncmd = "sleep 600"\n`
    })
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    const before = pidsOf(up)
    process.kill((await daemonPid(box))!, "SIGKILL")
    const again = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    expect(pidsOf(again)).toEqual(before)
    // exactly one process per service: the daemon and the two services' groups
    const sleeps = processesOf(box.home).filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "latin1").startsWith("sleep\u0000600")
      } catch {
        return false
      }
    })
    expect(sleeps).toHaveLength(1)
  })

  it("stops the copy a crash left unrecorded: kill -9 between a spawn and its record, then one copy and none after down", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[services.worker]\ncmd = "sleep 601"\n`
    })
    const sleeps = () =>
      processesOf(box.home).filter((p) => {
        try {
          return readFileSync(`/proc/${p}/cmdline`, "latin1").startsWith("sleep\u0000601")
        } catch {
          return false
        }
      })
    // a daemon started with the hook dies right after it started the worker, before the worker's pid is written anywhere
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    const crashed = await box.run(["up", "w1", "--json"], {
      timeoutMs: 60_000,
      env: { BERTH_TEST_CRASH_AFTER_SPAWN: "worker" }
    })
    expect(crashed.code, crashed.stdout + crashed.stderr).toBe(1)
    expect(sleeps()).toHaveLength(1)
    const again = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    expect(["running", "healthy"]).toContain(again.state)
    // the next daemon stopped the unrecorded one before it started the worker again
    const left = await eventually(
      async () => sleeps(),
      (pids) => pids.length === 1
    )
    expect(left).toHaveLength(1)
    expect(pidsOf(again).worker).toBeDefined()
    expect((await box.run(["down", "--all"], { timeoutMs: 60_000 })).code).toBe(0)
    expect(
      await eventually(
        async () => sleeps(),
        (pids) => pids.length === 0
      )
    ).toEqual([])
  })

  it("brings up a new world when its up reaches a daemon finishing a removal a crash cut short", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.slow]\ncmd = "trap 'sleep 4; exit 0' TERM; while true; do sleep 0.2; done"\n`
    })
    const first = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    // the removal stops the service first (4 s, room enough on a loaded machine): the daemon dies in the middle of it
    const removing = box.run(["remove", "w1"], { timeoutMs: 30_000 })
    await eventually(
      () => statusOf(box),
      (ws) => ws[0]?.state === "removing" || (ws[0] as { desired?: string } | undefined)?.desired === "removed"
    )
    process.kill((await daemonPid(box))!, "SIGKILL")
    expect((await removing).code).toBe(1)
    // the next daemon finishes the removal before anything else; this up comes after it: a new world
    const again = await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })
    expect(again.code, again.stderr).toBe(0)
    const w = json<{ world: WorldJson }>(again).world
    expect(w.state).toBe("running")
    expect(w.services[0]!.pid).not.toBe(first.services[0]!.pid)
    expect(await ended(first.services[0]!.pid!)).toBe(true)
  })

  it("settles a world a crash left stopping", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.slow]\ncmd = "trap 'sleep 3; exit 0' TERM; while true; do sleep 0.2; done"\n`
    })
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    const pid = up.services[0]!.pid!
    const down = box.run(["down", "w1"], { timeoutMs: 30_000 })
    await eventually(
      () => statusOf(box),
      (ws) => ws[0]?.state === "stopping"
    )
    process.kill((await daemonPid(box))!, "SIGKILL")
    await down
    const settled = await eventually(
      () => statusOf(box),
      (ws) => ws[0]?.state === "stopped",
      30_000
    )
    expect(settled[0]?.state).toBe("stopped")
    await eventually(
      async () => isAlive(pid),
      (alive) => !alive
    )
    expect(isAlive(pid)).toBe(false)
  })

  it("finishes a reload a crash cut short while a service was leaving: started again, never taken for a crash", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[services.slow]\ncmd = "trap 'sleep 3; exit 0' TERM; while true; do sleep 0.2; done"\nstop_grace = "10s"\n`
    })
    const up = json<{ world: WorldJson }>(await box.run(["up", "w1", "--json"], { timeoutMs: 60_000 })).world
    const slow = up.services.find((s) => s.name === "slow")!.pid!
    // the reload stops both services first; the slow one takes 3 s to leave (restart = "no", the default)
    const reloading = box.run(["reload", "w1"], { timeoutMs: 30_000 })
    await eventually(
      () => statusOf(box),
      (ws) => ws[0]?.services.find((s) => s.name === "slow")?.state === "stopping"
    )
    process.kill((await daemonPid(box))!, "SIGKILL")
    expect((await reloading).code).toBe(1)
    // the next daemon lets the leaving process go and starts the service again, as the reload would have
    const settled = await eventually(
      () => statusOf(box),
      (ws) =>
        ws[0]?.state === "running" && ws[0]?.services.every((s) => s.state === "healthy" || s.state === "running"),
      30_000
    )
    expect(settled[0]?.state, JSON.stringify(settled[0])).toBe("running")
    const again = settled[0]!.services.find((s) => s.name === "slow")!
    expect(["running", "healthy"]).toContain(again.state)
    expect(again.pid).not.toBe(slow)
    expect(await ended(slow)).toBe(true)
    // and it stays so once the old process has gone
    await new Promise((r) => setTimeout(r, 4_000))
    const later = await statusOf(box)
    expect(later[0]?.state, JSON.stringify(later[0])).toBe("running")
  })

  it("leaves no world behind when git refuses the branch", async () => {
    const box = await boxes.project({ "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\n` })
    box.git("branch", "feat/x")
    const r = await box.run(["up", "feat"], { timeoutMs: 60_000 })
    expect(r.code).toBe(1)
    expect((await statusOf(box)).map((w) => w.name)).not.toContain("feat")
  })
})
