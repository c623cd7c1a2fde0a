/**
 * What a new user and an agent met in everyday use of a world's life (setup, slices, logs, removal, the
 * service's PATH), each reproduced through the built binary as they met it.
 */
import { appendFileSync, chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { eventually, type Sandbox, sandboxes, type WorldJson, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())
const project = (toml: string, extra: Record<string, string> = {}) =>
  boxes.project({ "berth.toml": toml, ".gitignore": "*.log\nnode_modules/\n", ...extra })

const up = async (box: Sandbox, name: string): Promise<WorldJson> => {
  const r = await box.run(["up", name, "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
  return worldFrom(r.stdout)
}

/** The world's history as `berth logs -s berth` prints it: `<iso time> [service ]kind: message` per line. */
const history = async (box: Sandbox, world: string) => {
  const r = await box.run(["logs", world, "-s", "berth", "-n", "200"])
  expect(r.code, r.stderr).toBe(0)
  return r.stdout.trim().split("\n")
}

describe("everyday use", () => {
  it("says how long setup took, after it ran", async () => {
    const box = await project(`
[project]
setup = "sleep 1.2; echo set"

[services.api]
cmd = "node server.mjs"
url = "api"
`)
    await up(box, "timed")
    const lines = await history(box, "timed")
    const start = lines.findIndex((l) => l.includes("setup_start"))
    const done = lines.findIndex((l) => l.includes("setup_done"))
    expect(start, lines.join("\n")).toBeGreaterThanOrEqual(0)
    // listed oldest first: the start, then its end
    expect(done).toBeGreaterThan(start)
    const seconds = Number(/setup ended after ([\d.]+) s/.exec(lines[done] ?? "")?.[1])
    expect(seconds).toBeGreaterThanOrEqual(1.2)
    const at = (line: string | undefined) => Date.parse(line?.split(" ")[0] ?? "")
    expect(at(lines[done]) - at(lines[start])).toBeGreaterThanOrEqual(1_000)
  })

  it("takes the branch just checked out in the main checkout as its world, however soon after the last command", async () => {
    const box = await project(`
[services.api]
cmd = "node server.mjs"
url = "api"
`)
    // the main checkout's world is its branch: asked about once (main), then moved to another branch at once
    const before = await box.run(["up", "--json"], { timeoutMs: 60_000 })
    expect(before.code, before.stderr).toBe(0)
    expect(worldFrom(before.stdout).name).toBe("main")
    const seen = await box.run(["env", "--json"])
    expect(seen.code, seen.stderr).toBe(0)
    box.git("checkout", "-q", "-b", "feature")
    const env = await box.run(["env", "--json"])
    // the world of the branch now checked out, which does not exist yet; not main's
    expect(env.code, env.stdout).toBe(1)
    expect(env.stderr).toContain("feature")
    const after = await box.run(["up", "--json"], { timeoutMs: 60_000 })
    expect(after.code, after.stderr).toBe(0)
    expect(worldFrom(after.stdout).name).toBe("feature")
  })

  it("shows a slice's migrate output after the migrate failed and the slice went", async () => {
    const box = await project(`
[services.db]
adapter = "sqlite"
migrate = "echo migrating the schema; echo 'no such table: users' >&2; exit 4"

[services.api]
cmd = "node server.mjs"
url = "api"
depends_on = ["db"]
`)
    const failed = await box.run(["up", "broken-migrate"], { timeoutMs: 60_000 })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain("no such table: users")
    const log = await box.run(["logs", "broken-migrate", "-s", "db"])
    expect(log.code, log.stderr).toBe(0)
    expect(log.stdout).toContain("migrating the schema")
    expect(log.stdout).toContain("no such table: users")
  })

  it("never shows a removed world's logs in a new world", async () => {
    const box = await project(`
[services.api]
cmd = "echo I am \${world.name}; node server.mjs"
url = "api"
`)
    await up(box, "first")
    const removed = await box.run(["remove", "first", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    await up(box, "second")
    const log = await box.run(["logs", "second", "-s", "api"])
    expect(log.code, log.stderr).toBe(0)
    expect(log.stdout).toContain("I am second")
    expect(log.stdout).not.toContain("I am first")
    const events = await history(box, "second")
    expect(events.join("\n")).not.toContain("first")
  })

  it("removes a world whose only change to a tracked env_file is berth's own block, and refuses one with the user's", async () => {
    const box = await project(
      `
[services.api]
cmd = "node server.mjs"
url = "api"
env_file = ".env"
env = { GREETING = "hi" }
`,
      { ".env": "# committed settings\nFOO=1\n" }
    )
    const clean = await up(box, "tracked-env")
    expect(readFileSync(join(clean.path, ".env"), "utf8")).toContain("GREETING=hi")
    const removed = await box.run(["remove", "tracked-env"])
    expect(removed.code, removed.stderr).toBe(0)

    const edited = await up(box, "edited-env")
    appendFileSync(join(edited.path, ".env"), "MINE=2\n")
    const refused = await box.run(["remove", "edited-env"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(".env")
  })

  it("shows a world whose service failed after its start as degraded, and up starts that service again", async () => {
    const box = await project(`
[services.api]
cmd = "node server.mjs"
url = "api"

[services.worker]
cmd = "if [ -f fixed ]; then exec sleep 1000; else sleep 1; echo worker gave up >&2; exit 3; fi"
`)
    const w = await up(box, "shaky")
    const world = async () =>
      (JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson & { reason: string }> })
        .worlds[0]
    const degraded = await eventually(world, (x) => x?.state === "degraded")
    expect(degraded?.state).toBe("degraded")
    expect(degraded?.reason).toMatch(/^worker: /)
    expect(degraded?.services.find((s) => s.name === "api")?.state).toBe("healthy")
    const human = await box.run(["status"])
    expect(human.stdout).toMatch(/shaky\s+degraded/)
    // routes still reach what runs
    expect((await box.run(["curl", "shaky", "api"])).code).toBe(0)
    // fixed: `up` starts the failed service again, and the world runs
    writeFileSync(join(w.path, "fixed"), "")
    const again = await up(box, "shaky")
    expect(again.state).toBe("running")
    expect(again.services.find((s) => s.name === "worker")?.state).toMatch(/^(running|healthy)$/)
    expect((await world())?.state).toBe("running")
  })

  it("says on up and status that berth.toml changed since the world started, and that reload applies it", async () => {
    const toml = `[services.api]\ncmd = "node server.mjs"\nurl = "api"\n`
    const box = await project(toml)
    const w = await up(box, "edited")
    writeFileSync(join(w.path, "berth.toml"), `${toml}env = { GREETING = "hello" }\n`)
    const again = await box.run(["up", "edited"], { timeoutMs: 60_000 })
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toMatch(
      /note: .*berth\.toml changed since world edited started: berth reload edited applies it/
    )
    const json = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ configNote?: string }>
    }
    expect(json.worlds[0]?.configNote).toMatch(/berth reload edited/)
    const reloaded = await box.run(["reload", "edited", "--json"], { timeoutMs: 60_000 })
    expect(reloaded.code, reloaded.stderr).toBe(0)
    const after = await eventually(
      async () =>
        JSON.parse((await box.run(["status", "--json"])).stdout) as {
          worlds: Array<{ state: string; configNote?: string }>
        },
      (s) => s.worlds[0]?.state === "running"
    )
    expect(after.worlds[0]?.configNote).toBeUndefined()
  })

  it("names the port a health check probed, quotes the cause of a failure, and says where the whole log is", async () => {
    const box = await project(`
[services.api]
cmd = "sleep 1000"
url = "api"
health = { tcp = true, timeout = "2s" }
`)
    const silent = await box.run(["up", "silent", "--json"], { timeoutMs: 60_000 })
    expect(silent.code).toBe(1)
    const error = (JSON.parse(silent.stderr) as { error: { message: string; hint: string | null } }).error
    const port = (await box.run(["env", "silent", "--json"])).stdout.match(/"API_PORT": "(\d+)"/)?.[1]
    expect(port).toBeDefined()
    expect(error.message).toContain(`port ${port}`)
    expect(error.hint).toContain("berth logs silent -s api")

    // a cause printed before a long stack: the up quotes it, not only the stack's last lines
    box.write(
      "berth.toml",
      `[services.api]\ncmd = "echo starting; echo 'Error: cannot find module ./db'; for i in $(seq 40); do echo \\"    at frame $i\\"; done; exit 1"\n`
    )
    box.git("add", "-A")
    box.git("commit", "-qm", "crashing api")
    const crash = await box.run(["up", "crashing"], { timeoutMs: 60_000 })
    expect(crash.code).toBe(1)
    expect(crash.stderr).toContain("Error: cannot find module ./db")
    expect(crash.stderr).toContain("at frame 40")
    expect(crash.stderr).toContain("hint: berth logs crashing -s api")
    // each start is marked in the log, so runs read apart
    await box.run(["up", "crashing"], { timeoutMs: 60_000 })
    const log = await box.run(["logs", "crashing", "-s", "api", "-n", "500"])
    expect(log.stdout.match(/^── berth: api started at .* ──$/gm)).toHaveLength(2)
  })

  it("resets a world's slices and rebuilds its golden with the world's own environment, not the caller's", async () => {
    const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
    const psql = (statement: string) => `psql -q \${db.url} -c '${statement}'`
    const box = await project(`
[project]
name = "envkept${process.pid}"

[services.db]
adapter = "postgres"
admin_url = "\${env.BERTH_TEST_PG_ADMIN}"
clone_from = "golden"
migrate = "${psql("create table t (id int)")}"
seed = "${psql("insert into t values (1)")}"
`)
    const withAdmin = { BERTH_TEST_PG_ADMIN: adminUrl }
    const r = await box.run(["up", "kept", "--json"], { env: withAdmin, timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    // a shell without the variable: the world was brought up with it, and keeps it
    const without = { BERTH_TEST_PG_ADMIN: undefined }
    const reset = await box.run(["reset", "kept"], { env: without, timeoutMs: 60_000 })
    expect(reset.code, reset.stderr).toBe(0)
    const rebuilt = await box.run(["golden", "rebuild", "kept", "db"], { env: without, timeoutMs: 60_000 })
    expect(rebuilt.code, rebuilt.stderr).toBe(0)
    const removed = await box.run(["remove", "kept", "--force"], { env: without, timeoutMs: 60_000 })
    expect(removed.code, removed.stderr).toBe(0)
    await box.run(["gc", "--goldens"], { env: withAdmin })
  })

  it("puts the worktree's node_modules/.bin on a service's PATH, as npm run does", async () => {
    const tool = '#!/bin/sh\necho dev tool in $PWD\nexec node "$(dirname "$0")/../../server.mjs"\n'
    const box = await project(
      `
[project]
setup = "mkdir -p node_modules/.bin && cp tool.sh node_modules/.bin/devtool && chmod +x node_modules/.bin/devtool"

[services.api]
cmd = "devtool"
url = "api"
`,
      { "tool.sh": tool }
    )
    const w = await up(box, "bins")
    expect(w.state).toBe("running")
    // and in the main checkout too, where node_modules is already there
    mkdirSync(join(box.dir, "node_modules/.bin"), { recursive: true })
    writeFileSync(join(box.dir, "node_modules/.bin/devtool"), tool)
    chmodSync(join(box.dir, "node_modules/.bin/devtool"), 0o755)
    const main = await box.run(["up", "--json"], { timeoutMs: 60_000 })
    expect(main.code, main.stderr).toBe(0)
  })
})
