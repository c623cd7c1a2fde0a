import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import {
  ended,
  eventually,
  isAlive,
  processesOf,
  type Sandbox,
  sandboxes,
  type WorldJson,
  worldFrom
} from "./harness.js"

const boxes = sandboxes()
const project = (toml: string) => boxes.project({ "berth.toml": toml, ".gitignore": "*.out\n" })
afterAll(() => boxes.cleanup())

const statusOf = async (box: Sandbox, world: string): Promise<WorldJson> => {
  const all = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson> }
  const w = all.worlds.find((x) => x.name === world)
  if (w === undefined) throw new Error(`no world ${world}`)
  return w
}

/** Processes whose command line carries `token`: what a test started, found without trusting berth's records. */
const withToken = (home: string, token: string) =>
  processesOf(home).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(token)
    } catch {
      return false
    }
  })

describe("supervised services", () => {
  it("restarts a crashing service, and marks a crash-looping one failed with its last log lines", async () => {
    const box = await project(`
[services.flaky]
cmd = "if [ -f crashed.out ]; then exec node server.mjs; else touch crashed.out; echo first run dies; exit 1; fi"
url = "flaky"
restart = "on-failure"
restart_backoff = "50ms"

[services.loop]
cmd = "echo loop-crash-\${world.name}; exit 7"
restart = "always"
max_restarts = 3
restart_backoff = "20ms"
`)
    const r = await box.run(["up", "crashy", "--service", "flaky", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    const flaky = worldFrom(r.stdout).services[0]!
    expect(flaky).toMatchObject({ state: "healthy", restarts: 1 })

    const loop = await box.run(["up", "loopy", "--service", "loop"], { timeoutMs: 60_000 })
    expect(loop.code).toBe(1)
    expect(loop.stderr).toMatch(/restarted 3 times in 60s and crashed again \(exit code 7\)/)
    expect(loop.stderr).toContain("loop-crash-loopy")
    const w = await statusOf(box, "loopy")
    expect(w.state).toBe("failed")
  })

  it("restarts a service that dies after it was healthy", async () => {
    const box = await project(`
[services.api]
cmd = "node server.mjs"
url = "api"
restart = "always"
max_restarts = 2
restart_backoff = "20ms"
`)
    const up = await box.run(["up", "later", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const pid = worldFrom(up.stdout).services[0]!.pid!
    // the whole process group, as a crash of the service would end it
    process.kill(-pid, "SIGKILL")
    const restarted = await eventually(
      () => statusOf(box, "later"),
      (w) => w.services[0]!.state === "healthy" && w.services[0]!.pid !== pid
    )
    expect(restarted.services[0]!.restarts).toBe(1)
  })

  it("fails an up whose health check times out, leaving nothing running", async () => {
    const token = `never-healthy-${process.pid}`
    const box = await project(`
[services.slow]
cmd = "echo starting slowly; sleep 1000; : ${token}"
url = "slow"
health = { http = "/not-there", timeout = "1500ms", interval = "100ms" }
`)
    const r = await box.run(["up", "sick"], { timeoutMs: 60_000 })
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/world sick: slow not healthy after/)
    expect(r.stderr).toContain("starting slowly")
    expect(r.stderr).toMatch(/nothing that this up started is left running/)
    expect(withToken(box.home, token)).toEqual([])
    expect((await statusOf(box, "sick")).state).toBe("failed")
  })

  it("kills a service that ignores SIGTERM after its grace, and its grandchild too", async () => {
    const token = `stubborn-${process.pid}`
    const box = await project(`
[services.stubborn]
cmd = "trap '' TERM; sh -c 'trap \\"\\" TERM; sleep 1000; :' ${token}-grandchild & sleep 1000; : ${token}"
stop_grace = "700ms"
`)
    const r = await box.run(["up", "stubborn"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    await eventually(
      async () => withToken(box.home, `${token}-grandchild`),
      (p) => p.length > 0
    )
    const before = withToken(box.home, token)
    expect(before.length).toBeGreaterThanOrEqual(2)
    const started = Date.now()
    const down = await box.run(["down", "stubborn"])
    expect(down.code, down.stderr).toBe(0)
    expect(Date.now() - started).toBeGreaterThanOrEqual(600)
    for (const pid of before) expect(isAlive(pid)).toBe(false)
    expect(withToken(box.home, token)).toEqual([])
  })

  it("tracks and stops a command that forks and exits 0", async () => {
    const token = `forker-${process.pid}`
    const box = await project(`
[services.forker]
cmd = "sh -c 'sleep 1000; :' ${token} & exit 0"
`)
    const r = await box.run(["up", "forks", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    // once the leader has exited, only its fork is left: then the service must still count as running
    expect(await ended(worldFrom(r.stdout).services[0]!.pid!)).toBe(true)
    expect(withToken(box.home, token).length).toBe(1)
    const w = await statusOf(box, "forks")
    expect(w.services[0]!.state).not.toBe("exited")
    expect((await box.run(["down", "forks"])).code).toBe(0)
    expect(withToken(box.home, token)).toEqual([])
  })

  it("fails the up of a service that dies of EADDRINUSE while another process answers on its port", async () => {
    // the service waits until this test listens on its port, then tries to listen there itself
    const handshake = mkdtempSync(join(tmpdir(), "berth-eaddrinuse-"))
    const box = await project(`
[services.web]
cmd = '''echo "$PORT" > ${handshake}/port; while [ ! -f ${handshake}/go ]; do sleep 0.05; done; node -e "require('node:net').createServer().listen(Number(process.env.PORT), '127.0.0.1')"'''
url = "web"
`)
    const up = box.run(["up", "taken"], { timeoutMs: 60_000 })
    const portFile = join(handshake, "port")
    await eventually(
      async () => existsSync(portFile) && readFileSync(portFile, "utf8").endsWith("\n"),
      (ok) => ok
    )
    const server = net.createServer((socket) => socket.destroy())
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(Number(readFileSync(portFile, "utf8")), "127.0.0.1", resolve)
    })
    try {
      // the default tcp check now connects, to this test's listener, while the service has not even tried
      await new Promise((resolve) => setTimeout(resolve, 300))
      writeFileSync(join(handshake, "go"), "")
      const r = await up
      expect(r.code, r.stdout).toBe(1)
      expect(r.stderr).toMatch(/world taken: web exited \(exit code 1\)/)
      expect(r.stderr).toContain(`held by pid ${process.pid}`)
      expect(r.stderr).toContain("EADDRINUSE")
      expect((await statusOf(box, "taken")).state).toBe("failed")
    } finally {
      server.close()
      rmSync(handshake, { recursive: true, force: true })
    }
  })

  it("is healthy when a child the service forked holds the listener", async () => {
    const box = await project(`
[services.parent]
cmd = '''node -e "require('node:child_process').spawn(process.execPath, ['server.mjs'], { stdio: 'inherit' }); setInterval(() => {}, 1 << 30)"'''
url = "parent"
`)
    const r = await box.run(["up", "forked", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(worldFrom(r.stdout).services[0]!.state).toBe("healthy")
  })
})
