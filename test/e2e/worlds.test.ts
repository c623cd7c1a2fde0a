import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import {
  ended,
  berthBin,
  eventually,
  fetchJson,
  isAlive,
  type Sandbox,
  type ServiceJson,
  sandboxes,
  type WorldJson,
  worldFrom,
  varsFrom
} from "./harness.js"

const twoServices = `
[project]
name = "shop"

[services.api]
cmd = "node server.mjs"
url = "api"
health = { http = "/healthz" }

[services.web]
cmd = "node server.mjs"
url = "web"
depends_on = ["api"]
env = { API_URL = "\${api.url}", WHO = "\${world.name}" }
`

const boxes = sandboxes()
const project = (toml = twoServices, extra: Record<string, string> = {}) =>
  boxes.project({ "berth.toml": toml, ".gitignore": "*.log\n", ...extra })
afterAll(() => boxes.cleanup())

const up = async (box: Sandbox, name?: string): Promise<WorldJson> => {
  const r = await box.run(["up", ...(name === undefined ? [] : [name]), "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
  return worldFrom(r.stdout)
}

const service = (w: WorldJson, name: string): ServiceJson => {
  const s = w.services.find((x) => x.name === name)
  if (s === undefined) throw new Error(`no service ${name} in ${JSON.stringify(w)}`)
  return s
}

describe("worlds", () => {
  it("hands the user's NODE_EXTRA_CA_CERTS to a world's processes, though the launcher starts the CLI without it", async () => {
    const box = await project()
    await box.run(["daemon", "stop"])
    const r = await box.run(["up", "certs", "--json"], {
      timeoutMs: 60_000,
      env: { NODE_EXTRA_CA_CERTS: "/etc/ssl/certs/berth-test-extra.pem" }
    })
    expect(r.code, r.stderr).toBe(0)
    const w = worldFrom(r.stdout)
    const seen = (await fetchJson(service(w, "api").url!)) as { env: Record<string, string> }
    expect(seen.env.NODE_EXTRA_CA_CERTS).toBe("/etc/ssl/certs/berth-test-extra.pem")
    expect(seen.env.BERTH_NODE_EXTRA_CA_CERTS).toBeUndefined()
  })

  it("runs two worlds of one project side by side, each on its own ports and env", async () => {
    const box = await project()
    const [a, b] = await Promise.all([up(box, "login-fix"), up(box, "checkout-v2")])
    for (const w of [a!, b!]) {
      expect(w.state).toBe("running")
      expect(w.services.map((s) => s.state)).toEqual(["healthy", "healthy"])
    }
    const ports = [a!, b!].flatMap((w) => w.services.map((s) => s.port))
    expect(new Set(ports).size).toBe(4)
    for (const w of [a!, b!]) {
      const web = await fetchJson(service(w, "web").url!)
      expect(web).toMatchObject({ service: "web", world: w.name, port: service(w, "web").port })
      const env = web.env as Record<string, string>
      expect(env.API_URL).toBe(service(w, "api").url)
      expect(env.WHO).toBe(w.name)
      expect(env.BERTH_PROJECT).toBe("shop")
      expect(env.PORT).toBe(String(service(w, "web").port))
      const api = await fetchJson(service(w, "api").url!)
      expect(api.world).toBe(w.name)
    }
    // each world is a worktree of its own branch
    expect(a!.path).not.toBe(b!.path)
    expect(box.git("-C", a!.path, "rev-parse", "--abbrev-ref", "HEAD").trim()).toBe("login-fix")

    const env = await box.run(["env", "login-fix", "--json"])
    expect(varsFrom(env.stdout)).toEqual({
      API_URL: service(a!, "api").url,
      API_PORT: String(service(a!, "api").port),
      WEB_URL: service(a!, "web").url,
      WEB_PORT: String(service(a!, "web").port)
    })
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson> }
    expect(status.worlds.map((w) => [w.project, w.name, w.state]).sort()).toEqual([
      ["shop", "checkout-v2", "running"],
      ["shop", "login-fix", "running"]
    ])
  })

  it("keeps ports through down and up, and changes nothing on up of a running world", async () => {
    const box = await project()
    const first = await up(box, "keep")
    const again = await up(box, "keep")
    expect(again.services.map((s) => [s.pid, s.port])).toEqual(first.services.map((s) => [s.pid, s.port]))

    const down = await box.run(["down", "keep", "--json"])
    expect(down.code, down.stderr).toBe(0)
    for (const s of first.services) expect(isAlive(s.pid!)).toBe(false)
    const stopped = (JSON.parse(down.stdout) as { worlds: Array<WorldJson> }).worlds[0]!
    expect(stopped.state).toBe("stopped")

    const back = await up(box, "keep")
    expect(back.services.map((s) => s.port)).toEqual(first.services.map((s) => s.port))
    expect(back.services.map((s) => s.pid)).not.toEqual(first.services.map((s) => s.pid))
    expect((await fetchJson(service(back, "web").url!)).world).toBe("keep")
  })

  it("reloads on the same ports", async () => {
    const box = await project()
    const first = await up(box, "again")
    const r = await box.run(["reload", "again", "--json"])
    expect(r.code, r.stderr).toBe(0)
    const reloaded = worldFrom(r.stdout)
    expect(reloaded.services.map((s) => s.port)).toEqual(first.services.map((s) => s.port))
    expect(reloaded.services.map((s) => s.pid)).not.toEqual(first.services.map((s) => s.pid))
  })

  it("refuses to remove a dirty worktree, and --force removes it and frees its ports", async () => {
    const box = await project()
    const w = await up(box, "dirty")
    const ports = w.services.map((s) => s.port!)
    const { writeFileSync } = await import("node:fs")
    writeFileSync(join(w.path, "scratch.txt"), "unsaved work\n")
    const refused = await box.run(["remove", "dirty"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("scratch.txt")
    expect(refused.stderr).toContain("--force")
    expect(existsSync(join(w.path, "scratch.txt"))).toBe(true)
    // still running: a refused remove changes nothing
    expect(isAlive(service(w, "api").pid!)).toBe(true)

    const removed = await box.run(["remove", "dirty", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(existsSync(w.path)).toBe(false)
    for (const s of w.services) expect(isAlive(s.pid!)).toBe(false)
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson> }
    expect(status.worlds.map((x) => x.name)).not.toContain("dirty")
    // its ports are free again: a listener can take them
    for (const port of ports) {
      await new Promise<void>((resolve, reject) => {
        const server = net.createServer().listen(port, "127.0.0.1", () => server.close(() => resolve()))
        server.once("error", reject)
      })
    }
  })

  it("never deletes the main checkout", async () => {
    const box = await project()
    const main = await up(box)
    expect(main.path).toBe(box.dir)
    const r = await box.run(["remove", "--force"])
    expect(r.code, r.stderr).toBe(0)
    expect(existsSync(join(box.dir, "berth.toml"))).toBe(true)
  })

  it("starts only the selected services and their dependencies", async () => {
    const box = await project(`${twoServices}
[services.worker]
cmd = "node -e 'setInterval(() => {}, 1000)'"
groups = ["jobs"]
`)
    const w = worldFrom((await box.run(["up", "only-api", "--service", "api", "--json"], { timeoutMs: 60_000 })).stdout)
    expect(w.services.map((s) => s.name)).toEqual(["api"])
    const web = worldFrom((await box.run(["up", "only-web", "-s", "web", "--json"], { timeoutMs: 60_000 })).stdout)
    expect(web.services.map((s) => s.name).sort()).toEqual(["api", "web"])
    const jobs = worldFrom((await box.run(["up", "jobs", "--group", "jobs", "--json"], { timeoutMs: 60_000 })).stdout)
    expect(jobs.services.map((s) => s.name)).toEqual(["worker"])
    const bad = await box.run(["up", "nope", "--service", "wbe"])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/no service "wbe"/)
  })

  it("stops and restarts one service with what depends on it (stop -s, restart -s), and up --all brings every world back", async () => {
    const box = await project()
    const one = await up(box, "svc-one")
    await up(box, "svc-two")
    // stopping api stops web, which depends on it; nothing of the other world moves
    const stopped = await box.run(["stop", "svc-one", "-s", "api", "--json"])
    expect(stopped.code, stopped.stderr).toBe(0)
    const after = (JSON.parse(stopped.stdout) as { worlds: Array<WorldJson> }).worlds[0]!
    expect(after.services.map((s) => [s.name, s.state]).sort()).toEqual([
      ["api", "stopped"],
      ["web", "stopped"]
    ])
    expect(await ended(service(one, "api").pid!)).toBe(true)
    // restart -s api starts api again, then web, which depends on it, on the same ports
    const restarted = await box.run(["restart", "svc-one", "-s", "api", "--json"])
    expect(restarted.code, restarted.stderr).toBe(0)
    const back = worldFrom(restarted.stdout)
    expect(back.services.map((s) => [s.name, s.state]).sort()).toEqual([
      ["api", "healthy"],
      ["web", "healthy"]
    ])
    expect(service(back, "api").port).toBe(service(one, "api").port)
    expect(service(back, "api").pid).not.toBe(service(one, "api").pid)
    const typo = await box.run(["stop", "svc-one", "-s", "apj"])
    expect(typo.code).toBe(1)
    expect(typo.stderr).toMatch(/no service "apj"/)

    // --all: every world of the project whose worktree exists, each as `up <name>` would
    expect((await box.run(["down", "--all"])).code).toBe(0)
    const all = await box.run(["up", "--all", "--json"], { timeoutMs: 90_000 })
    expect(all.code, all.stderr).toBe(0)
    const doc = JSON.parse(all.stdout) as { schema: number; worlds: Array<WorldJson>; failed: Array<unknown> }
    expect(doc.schema).toBe(1)
    expect(doc.failed).toEqual([])
    expect(doc.worlds.map((w) => [w.name, w.state]).sort()).toEqual([
      ["svc-one", "running"],
      ["svc-two", "running"]
    ])
    const both = await box.run(["up", "svc-one", "--all"])
    expect(both.code).toBe(2)
    expect(both.stderr).toMatch(/a world's name or --all, not both/)
  })

  it("runs setup once per world before any service, and fails the up when it fails", async () => {
    const box = await project(
      `[project]\nsetup = "echo ran >> setup-count.txt"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n`
    )
    const w = await up(box, "with-setup")
    await box.run(["down", "with-setup"])
    await up(box, "with-setup")
    expect(readFileSync(join(w.path, "setup-count.txt"), "utf8")).toBe("ran\n")

    box.write(
      "berth.toml",
      `[project]\nsetup = "echo setting up; exit 3"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n`
    )
    box.git("add", "-A")
    box.git("commit", "-qm", "failing setup")
    const failed = await box.run(["up", "broken-setup"], { timeoutMs: 60_000 })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/setup .* failed \(exit code 3\)/)
    expect(failed.stderr).toContain("setting up")
    // its output stays readable afterwards
    const log = await box.run(["logs", "broken-setup", "-s", "setup"])
    expect(log.code, log.stderr).toBe(0)
    expect(log.stdout).toContain("setting up")
  })

  it("quotes branch names with shell metacharacters: nothing unintended runs", async () => {
    const marker = join(tmpdir(), `berth-pwned-${process.pid}`)
    const names = [`x$(touch\${IFS}${marker})`, "semi;touch${IFS}pwned", `q'uote"s`, "back`touch${IFS}pwned`tick"]
    const box = await project(`
[services.echo]
cmd = "printf %s \${world.name} > name.out; node server.mjs"
url = "echo"
env = { NAME = "\${world.name}" }
`)
    for (const name of names) {
      const w = await up(box, name)
      expect(w.name).toBe(name)
      expect(readFileSync(join(w.path, "name.out"), "utf8")).toBe(name)
      const seen = await fetchJson(service(w, "echo").url!)
      expect((seen.env as Record<string, string>).NAME).toBe(name)
      expect((seen.env as Record<string, string>).BERTH_WORLD).toBe(name)
    }
    expect(existsSync(marker)).toBe(false)
    expect(existsSync(join(box.dir, "pwned"))).toBe(false)
    const invalid = await box.run(["up", "has space"])
    expect(invalid.code).toBe(1)
    expect(invalid.stderr).toMatch(/cannot name a world/)
  })

  it("never offers to make a world a command meant to act on: the closest name, or berth status", async () => {
    const box = await project()
    await up(box, "feature-a")
    const hint = (stderr: string) => /\n {2}hint: (.*)\n$/.exec(stderr)?.[1]
    // down goes the lean path (the daemon words the failure), the others the full CLI; all at once, as none acts
    const commands = [
      ["down", "nosuch"],
      ["remove", "nosuch"],
      ["reload", "nosuch"],
      ["logs", "nosuch"],
      ["env", "nosuch"],
      ["exec", "nosuch", "--", "true"]
    ]
    const answers = await Promise.all(
      commands.map((args) =>
        Promise.all([box.run(args), box.run([args[0]!, "featur-a", ...args.slice(2)])]).then(([r, typo]) => ({
          args,
          r,
          typo
        }))
      )
    )
    for (const { args, r, typo } of answers) {
      expect(r.code, args.join(" ")).toBe(1)
      expect(r.stderr).toContain('project shop has no world "nosuch"; its worlds: feature-a')
      expect(hint(r.stderr), args.join(" ")).toBe("use one of them (berth status shows each with its state)")
      expect(hint(typo.stderr), args.join(" ")).toBe(`did you mean feature-a? berth ${args[0]} feature-a`)
    }
    const json = await box.run(["down", "nosuch", "--json"])
    expect(JSON.parse(json.stderr)).toMatchObject({
      error: { tag: "WorldNotFound", hint: "use one of them (berth status shows each with its state)" }
    })
    // no name: the world of the worktree the command runs in, which was never brought up
    const here = await box.run(["env"])
    expect(hint(here.stderr)).toBe("this worktree's world was never brought up: berth up starts it")
  })

  it("says, when up makes a world's worktree, that it branches from the main checkout's last commit (an event too)", async () => {
    const box = await project()
    box.write("uncommitted.txt", "not carried\n")
    const said = `  worktree_created: branch fresh made from the last commit of the main checkout (${box.dir}); what is not committed there is not carried`
    const r = await box.run(["up", "fresh"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.split("\n")).toContain(said)
    const { worlds } = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: ReadonlyArray<{ name: string; path: string; events: ReadonlyArray<{ kind: string; message: string }> }>
    }
    const fresh = worlds.find((x) => x.name === "fresh")!
    expect(existsSync(join(fresh.path, "uncommitted.txt"))).toBe(false)
    expect(fresh.events.filter((e) => e.kind === "worktree_created")).toHaveLength(1)
    // the main checkout is no new worktree
    const main = await box.run(["up"], { timeoutMs: 60_000 })
    expect(main.stdout).not.toContain("worktree_created")
  })

  it("in a repository with no commit yet, up of a new world says to commit first (not git's raw fatal)", async () => {
    const box = await project()
    const fresh = join(dirname(box.dir), "fresh")
    mkdirSync(fresh)
    writeFileSync(join(fresh, "berth.toml"), twoServices)
    execFileSync("git", ["init", "-q", "-b", "main"], { cwd: fresh })
    const r = await box.run(["up", "x"], { cwd: fresh })
    expect(r.code).toBe(1)
    expect(r.stderr).not.toContain("fatal:")
    expect(r.stderr).toBe(
      `error: the repository ${fresh} has no commit yet, and a new world's worktree branches from the main checkout's committed HEAD\n  hint: commit first: git add -A && git commit -m "first commit"\n`
    )
    const json = await box.run(["up", "y", "--json"], { cwd: fresh })
    expect(JSON.parse(json.stderr)).toMatchObject({
      error: { hint: 'commit first: git add -A && git commit -m "first commit"' }
    })
  })

  it("never double-binds a port held by an outside process", async () => {
    const box = await project()
    const w = await up(box, "squatted")
    const apiPort = service(w, "api").port!
    await box.run(["down", "squatted"])
    const squatter = net.createServer((s) => s.end("squatter\n"))
    await new Promise<void>((resolve) => squatter.listen(apiPort, "127.0.0.1", resolve))
    try {
      const back = await up(box, "squatted")
      expect(service(back, "api").port).not.toBe(apiPort)
      expect(service(back, "api").state).toBe("healthy")
      // and it says so: which port was taken, by whom, and where the service went
      const history = await box.run(["logs", "squatted", "-s", "berth"])
      expect(history.stdout).toMatch(
        new RegExp(
          `api port_moved: port ${apiPort} is taken by .*node.*; api moved to port ${service(back, "api").port}`
        )
      )
      expect((await fetchJson(service(back, "api").url!)).world).toBe("squatted")
      // a new world never gets the squatted port either
      const other = await up(box, "other")
      expect(other.services.map((s) => s.port)).not.toContain(apiPort)
    } finally {
      squatter.close()
    }
  })

  it("takes a relative path to status, meaning one under the folder the CLI runs in", async () => {
    const box = await project()
    await up(box, "here")
    // a second project in the same BERTH_HOME, so that a path that names a project shows only its worlds
    const other = join(dirname(box.dir), "other")
    mkdirSync(other)
    writeFileSync(join(other, "berth.toml"), `[project]\nname = "other"\n\n[services.idle]\ncmd = "sleep 1000"\n`)
    box.git("-C", other, "init", "-q", "-b", "main")
    box.git("-C", other, "add", "-A")
    box.git("-C", other, "commit", "-qm", "other")
    const there = await box.run(["up", "--json"], { cwd: other, timeoutMs: 60_000 })
    expect(there.code, there.stderr).toBe(0)

    const projectsOf = (r: { readonly code: number | null; readonly stdout: string; readonly stderr: string }) => {
      expect(r.code, r.stderr).toBe(0)
      return (JSON.parse(r.stdout) as { worlds: Array<WorldJson> }).worlds.map((w) => w.project).sort()
    }
    expect(projectsOf(await box.run(["status", "--json"]))).toEqual(["other", "shop"])
    // the lean path (--json) and the full CLI both resolve it before it goes to the daemon
    expect(projectsOf(await box.run(["status", ".", "--json"]))).toEqual(["shop"])
    expect(projectsOf(await box.run(["status", "--json", "other"], { cwd: dirname(box.dir) }))).toEqual(["other"])
    expect(projectsOf(await box.run(["status", "../app/.", "--json"], { cwd: other }))).toEqual(["shop"])
    const plain = await box.run(["status", "."])
    expect(plain.code, plain.stderr).toBe(0)
    expect(plain.stdout).toContain("here")
    expect(plain.stdout).not.toContain("other")
    // `status` as people read it goes the lean path too, and says exactly what the full CLI says (an option the
    // lean path does not know, such as --log-level, sends a command to the full CLI)
    const trace = join(dirname(box.dir), "status.trace")
    for (const args of [["status"], ["status", "."]]) {
      writeFileSync(trace, "")
      const lean = await box.run(args, { env: { BERTH_TRACE: trace } })
      expect(lean.code, lean.stderr).toBe(0)
      expect(readFileSync(trace, "utf8")).not.toContain("cli: full")
      const full = await box.run([...args, "--log-level", "info"], { env: { BERTH_TRACE: trace } })
      expect(full.code, full.stderr).toBe(0)
      expect(readFileSync(trace, "utf8")).toContain("cli: full")
      expect(lean.stdout).toBe(full.stdout)
    }
    // an error names the folder as the CLI resolved it
    const outside = await box.run(["status", ".."])
    expect(outside.code).toBe(1)
    expect(outside.stderr).toContain(`${dirname(box.dir)} is not inside a git repository`)
  })

  it("shows each service's log, runs a service's own setup first, and follows new lines", async () => {
    const box = await project(`
[services.api]
cmd = "echo api says hello; node server.mjs"
url = "api"
setup = "echo preparing api"

[services.ticker]
cmd = "i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.1; done"
`)
    await up(box, "chatty")
    const all = await box.run(["logs", "chatty", "-n", "5"])
    expect(all.code, all.stderr).toBe(0)
    expect(all.stdout).toContain("api | preparing api")
    expect(all.stdout).toContain("api | api says hello")
    expect(all.stdout).toMatch(/ticker \| tick \d+/)
    const one = await box.run(["logs", "chatty", "--service", "api", "-n", "1"])
    expect(one.stdout).toBe("api says hello\n")
    const json = await box.run(["logs", "chatty", "-s", "api", "-n", "1", "--json"])
    expect(JSON.parse(json.stdout)).toEqual({ schema: 1, service: "api", line: "api says hello" })
    // -f keeps printing lines written after it started
    const { spawn } = await import("node:child_process")
    const follow = spawn(berthBin, ["logs", "chatty", "-s", "ticker", "-n", "0", "-f"], {
      cwd: box.dir,
      env: { ...process.env, BERTH_HOME: box.home }
    })
    let seen = ""
    follow.stdout.on("data", (d: Buffer) => {
      seen += d.toString()
    })
    // two lines that came after it started (-n 0), however long the CLI and the daemon take under load
    const twoTicks = /tick \d+\n.*tick \d+/s
    const hasTwo = (text: string) => twoTicks.test(text)
    try {
      expect(await eventually(async () => seen, hasTwo, 45_000)).toMatch(twoTicks)
    } finally {
      follow.kill()
    }
    const unknown = await box.run(["logs", "chatty", "-s", "nope"])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/no log "nope"/)
  }, 120_000)
})
