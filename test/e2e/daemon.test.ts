import { spawn } from "node:child_process"
import { existsSync, statSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import {
  berthBin,
  ended,
  eventually,
  fetchJson,
  isAlive,
  processesOf,
  type Sandbox,
  sandboxes,
  type WorldJson,
  worldFrom
} from "./harness.js"

const toml = `
[services.api]
cmd = "node server.mjs"
url = "api"
health = { http = "/healthz" }
`

const boxes = sandboxes()
const project = () => boxes.project({ "berth.toml": toml })
afterAll(() => boxes.cleanup())

const daemonPid = async (box: Sandbox): Promise<number | undefined> => {
  const r = await box.run(["daemon", "status", "--json"])
  return (JSON.parse(r.stdout) as { pid?: number }).pid
}

const worldsOf = async (box: Sandbox): Promise<Array<WorldJson>> =>
  (JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson> }).worlds

describe("the daemon", () => {
  it("keeps its home owner-only and its socket 0600", async () => {
    const box = await project()
    expect(statSync(box.home).mode & 0o777).toBe(0o700)
    expect(statSync(join(box.home, "daemon.sock")).mode & 0o777).toBe(0o600)
    expect(statSync(join(box.home, "state.db")).mode & 0o777).toBe(0o600)
  })

  it("survives kill -9: services keep running and the next daemon adopts them", async () => {
    const box = await project()
    const up = worldFrom((await box.run(["up", "adopted", "--json"], { timeoutMs: 60_000 })).stdout)
    const api = up.services[0]!
    const pid = await daemonPid(box)
    expect(pid).toBeDefined()
    process.kill(pid!, "SIGKILL")
    expect(await ended(pid!)).toBe(true)
    expect(isAlive(api.pid!)).toBe(true)
    expect((await fetchJson(api.url!)).world).toBe("adopted")

    // the next command starts a daemon (the stale socket and pid file are replaced) that adopts the world
    const status = await box.run(["status", "--json"])
    expect(status.code, status.stderr).toBe(0)
    const second = await daemonPid(box)
    expect(second).not.toBe(pid)
    const world = await eventually(
      async () => (await worldsOf(box))[0],
      (w) => w?.services[0]?.state === "healthy",
      45_000
    )
    expect(world?.services[0]).toMatchObject({ state: "healthy", pid: api.pid, port: api.port })
    // adopted, so still supervised: down stops it
    expect((await box.run(["down", "adopted"])).code).toBe(0)
    expect(isAlive(api.pid!)).toBe(false)
  }, 120_000)

  it("runs one daemon per home even when asked twice", async () => {
    const box = await project()
    const first = await daemonPid(box)
    const again = await box.run(["daemon", "run"], { timeoutMs: 10_000 })
    expect(again.code).toBe(0)
    expect(await daemonPid(box)).toBe(first)
    const daemons = processesOf(box.home).filter((p) => p === first)
    expect(daemons).toEqual([first])
  })

  it("daemon stop succeeds even when another client starts the next daemon at once", async () => {
    // a dashboard (or an agent polling status) reconnects the moment the old daemon goes: the socket then answers
    // again, from the new daemon, and `stop` must not mistake that for the old one still running
    const box = await project()
    const old = await daemonPid(box)
    let stopping = true
    const pollers = [0, 1].map(async () => {
      while (stopping) await box.run(["daemon", "start", "--json"], { timeoutMs: 30_000 })
    })
    const stop = await box.run(["daemon", "stop", "--json"], { timeoutMs: 40_000 })
    stopping = false
    await Promise.all(pollers)
    expect(stop.code, stop.stderr).toBe(0)
    expect(JSON.parse(stop.stdout)).toMatchObject({ stopped: true })
    expect(old === undefined || !isAlive(old)).toBe(true)
    const next = await daemonPid(box)
    expect(next).not.toBe(old)
  })

  it("replaces a daemon of another version cleanly", async () => {
    const box = boxes.plain({ "berth.toml": toml })
    const { mkdirSync } = await import("node:fs")
    mkdirSync(box.home, { recursive: true, mode: 0o700 })
    // an "old berth" answering Ping with another version, and leaving when asked to
    const fake = `
      const net = require("node:net")
      const server = net.createServer((s) => {
        let buf = ""
        s.on("data", (d) => {
          buf += d
          for (const line of buf.split("\\n").slice(0, -1)) {
            const m = JSON.parse(line)
            if (m._tag !== "Request") continue
            const value = m.tag === "Ping" ? { version: "0.0.1-old", pid: process.pid, home: "x" } : null
            s.write(JSON.stringify({ _tag: "Exit", requestId: m.id, exit: { _tag: "Success", value } }) + "\\n")
            if (m.tag === "Shutdown") { server.close(); setTimeout(() => process.exit(0), 50) }
          }
          buf = buf.slice(buf.lastIndexOf("\\n") + 1)
        })
      })
      server.listen(process.argv[1])
    `
    const old = spawn(process.execPath, ["-e", fake, join(box.home, "daemon.sock")], {
      stdio: "ignore",
      env: { ...process.env, BERTH_HOME: box.home }
    })
    const oldExit = new Promise<number | null>((resolve) => old.once("exit", resolve))
    const socket = join(box.home, "daemon.sock")
    const answers = () =>
      new Promise<boolean>((resolve) => {
        const probe = net.connect(socket)
        probe.once("connect", () => {
          probe.destroy()
          resolve(true)
        })
        probe.once("error", () => resolve(false))
      })
    expect(await eventually(answers, (yes) => yes)).toBe(true)
    const r = await box.run(["daemon", "status", "--json"])
    expect((JSON.parse(r.stdout) as { version: string }).version).toBe("0.0.1-old")
    const started = await box.run(["daemon", "start", "--json"])
    expect(started.code, started.stderr).toBe(0)
    const { version } = (await import("../../package.json", { with: { type: "json" } })).default
    expect((JSON.parse(started.stdout) as { version: string }).version).toBe(version)
    expect(await oldExit).toBe(0)
  })

  it("gives a clear error for a corrupt state database and keeps the file", async () => {
    const box = boxes.plain({ "berth.toml": toml })
    const { mkdirSync, readFileSync } = await import("node:fs")
    mkdirSync(box.home, { recursive: true, mode: 0o700 })
    writeFileSync(join(box.home, "state.db"), "this is not a database, but somebody's data\n")
    const r = await box.run(["status"], { timeoutMs: 40_000 })
    expect(r.code).toBe(1)
    expect(r.stderr).not.toMatch(/\n\s+at /)
    expect(readFileSync(join(box.home, "daemon.log"), "utf8")).toMatch(/not a SQLite database/)
    expect(readFileSync(join(box.home, "state.db"), "utf8")).toBe("this is not a database, but somebody's data\n")
  })

  it("refuses a state database written by a newer berth, and keeps it", async () => {
    const box = await project()
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    const { createRequire } = await import("node:module")
    const Database = createRequire(import.meta.url)("better-sqlite3") as new (
      file: string
    ) => { exec: (sql: string) => void; close: () => void }
    const db = new Database(join(box.home, "state.db"))
    db.exec("INSERT INTO effect_sql_migrations (migration_id, name) VALUES (999, 'from_the_future')")
    db.close()
    const r = await box.run(["status"], { timeoutMs: 40_000 })
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/written by a newer berth/)
    expect(r.stderr).not.toMatch(/\n\s+at /)
  })

  it("brings up 15 worlds started at once from separate processes, on distinct ports", async () => {
    const box = await project()
    const names = Array.from({ length: 15 }, (_, i) => `swarm-${i}`)
    const results = await Promise.all(names.map((n) => box.run(["up", n, "--json"], { timeoutMs: 120_000 })))
    for (const r of results) expect(r.code, r.stderr).toBe(0)
    const worlds = results.map((r) => worldFrom(r.stdout))
    const ports = worlds.map((w) => w.services[0]!.port)
    expect(new Set(ports).size).toBe(15)
    for (const w of worlds) expect((await fetchJson(w.services[0]!.url!)).world).toBe(w.name)
    const down = await box.run(["down", "--all"], { timeoutMs: 60_000 })
    expect(down.code, down.stderr).toBe(0)
    for (const w of worlds) expect(isAlive(w.services[0]!.pid!)).toBe(false)
  })

  it("tears down a world whose worktree was deleted outside berth", async () => {
    const box = await project()
    const w = worldFrom((await box.run(["up", "doomed", "--json"], { timeoutMs: 60_000 })).stdout) as WorldJson & {
      path: string
    }
    const { rmSync } = await import("node:fs")
    rmSync(w.path, { recursive: true, force: true })
    // the reconciler notices on one of its passes (every 3 s) and then stops the world: under load either can take
    // long, so wait for each outcome rather than for a time
    expect(await ended(w.services[0]!.pid!, 60_000)).toBe(true)
    const names = await eventually(
      async () => (await worldsOf(box)).map((x) => x.name),
      (listed) => !listed.includes("doomed"),
      30_000
    )
    expect(names).not.toContain("doomed")
    // git's record of the worktree went too
    expect(box.git("worktree", "list", "--porcelain")).not.toMatch(/prunable/)
    // its port was released: a new world may lease it again
    const socket = net.connect({ port: w.services[0]!.port!, host: "127.0.0.1" })
    await new Promise<void>((resolve) => socket.once("error", () => resolve()).once("connect", () => resolve()))
    socket.destroy()
    expect(existsSync(berthBin)).toBe(true)
  }, 120_000)

  it("after a crash, keeps the world's selection and restarts what died only by its policy", async () => {
    const box = await boxes.project({
      "berth.toml": `${toml}
[services.job]
cmd = "sleep 1000"
restart = "no"

[services.extra]
cmd = "sleep 1000"
`
    })
    const up = await box.run(["up", "picky", "-s", "api", "-s", "job", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const world = worldFrom(up.stdout)
    expect(world.services.map((s) => s.name).sort()).toEqual(["api", "job"])
    process.kill((await daemonPid(box))!, "SIGKILL")
    const job = world.services.find((s) => s.name === "job")!
    process.kill(-job.pid!, "SIGKILL")
    expect(await ended(job.pid!)).toBe(true)
    const after = await eventually(
      async () => (await worldsOf(box))[0],
      (w) => w?.services.find((s) => s.name === "job")?.state === "exited" && w.services[0]?.state === "healthy",
      45_000
    )
    const states = Object.fromEntries((after?.services ?? []).map((s) => [s.name, s.state]))
    expect(states).toEqual({ api: "healthy", job: "exited" })
  }, 120_000)
})
