import { randomBytes } from "node:crypto"
import { readdirSync, readFileSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import pg from "pg"
import { ownerOf } from "../../src/services/slices/Slices.js"
import { eventually, type Sandbox, sandboxes } from "./harness.js"

const boxes = sandboxes()
const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
/** every database of this file starts with it, so afterAll finds them all */
const tag = `gc${randomBytes(3).toString("hex")}`

const sql = async (text: string, params: ReadonlyArray<unknown> = []) => {
  const client = new pg.Client({ connectionString: adminUrl })
  client.on("error", () => undefined)
  await client.connect()
  try {
    return (await client.query<Record<string, unknown>>(text, [...params])).rows
  } finally {
    await client.end().catch(() => undefined)
  }
}

const databases = async (): Promise<Map<string, string | null>> =>
  new Map(
    (
      await sql(
        "SELECT datname, shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE starts_with(datname, $1)",
        [tag]
      )
    ).map((r) => [String(r.datname), r.mark === null ? null : String(r.mark)])
  )

/** the databases this sandbox's berth owns, by the mark on the server */
const owned = async (box: Sandbox) => {
  const owner = ownerOf(box.home)
  return [...(await databases())].filter(([, mark]) => mark?.startsWith(`berth:${owner}:`)).map(([name]) => name)
}

afterAll(async () => {
  boxes.cleanup()
  for (const name of (await databases()).keys()) await sql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
})

const config = (project: string, migrate = "true") => `
[project]
name = "${project}"

[services.db]
adapter = "postgres"
admin_url = "${adminUrl}"
migrate = "${migrate}"
`

/** how many processes have `needle` in their command line */
const running = (needle: string): number =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "latin1").includes(needle)
      } catch {
        return false
      }
    }).length

const daemonPid = async (box: Sandbox) =>
  (JSON.parse((await box.run(["daemon", "status", "--json"])).stdout) as { pid: number }).pid

interface GcJson {
  readonly entries: ReadonlyArray<{ reason: string; name: string; outcome: string; adapter: string; where: string }>
  readonly unreachable: ReadonlyArray<{ adapter: string; where: string; error: string }>
  readonly forgotten?: ReadonlyArray<{ adapter: string; where: string; name?: string; outcome: string; reason: string }>
}

interface StateDb {
  readonly exec: (sql: string) => void
  readonly prepare: (sql: string) => { all: () => Array<Record<string, unknown>> }
  readonly close: () => void
}
const openState = (box: Sandbox): StateDb => {
  const Database = createRequire(import.meta.url)("better-sqlite3") as new (file: string) => StateDb
  return new Database(join(box.home, "state.db"))
}
const stateRows = (box: Sandbox, sql: string) => {
  const db = openState(box)
  try {
    return db.prepare(sql).all()
  } finally {
    db.close()
  }
}

describe("gc", () => {
  it("drops owned slices the registry does not know, and nothing unowned", async () => {
    const project = `${tag}a`
    const box = await boxes.project({ "berth.toml": config(project) })
    expect((await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    // the daemon sweeps on its own 2 s after it starts: let that pass first, or it may drop the leftover below before
    // the explicit gc this test is about
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    // leftovers: one marked as this berth's (a state file lost, say), one of another berth, one of nobody
    const mine = `${project}_leftover_db`
    const theirs = `${project}_theirs_db`
    const nobodys = `${project}_nobody_db`
    for (const name of [mine, theirs, nobodys]) await sql(`CREATE DATABASE "${name}"`)
    await sql(`COMMENT ON DATABASE "${mine}" IS 'berth:${ownerOf(box.home)}:${mine}'`)
    await sql(`COMMENT ON DATABASE "${theirs}" IS 'berth:bsomeoneelse:${theirs}'`)
    const dry = await box.run(["gc", "--dry-run", "--json"])
    expect(dry.code, dry.stderr).toBe(0)
    const planned = JSON.parse(dry.stdout) as GcJson
    expect(planned.entries.map((e) => [e.outcome, e.name, e.reason])).toEqual([["would drop", mine, "unrecorded"]])
    // the admin URL's password (none here) would be hidden; the server is named
    expect(planned.entries[0]!.where).toMatch(/127\.0\.0\.1:5432/)
    expect((await databases()).has(mine)).toBe(true)
    const done = await box.run(["gc"])
    expect(done.code, done.stderr).toBe(0)
    expect(done.stdout).toMatch(new RegExp(`dropped\\s+postgres\\s+${mine}\\s+unrecorded`))
    const left = await databases()
    expect(left.has(mine)).toBe(false)
    expect(left.has(theirs)).toBe(true)
    expect(left.has(nobodys)).toBe(true)
    // the world's own database is recorded: untouched
    expect(left.has(`${project}_one_db`)).toBe(true)
    expect((await box.run(["gc"])).stdout).toMatch(/nothing collected/)
  })

  it("leaves nothing owned behind after the daemon is killed mid-provision", async () => {
    const project = `${tag}b`
    const box = await boxes.project({ "berth.toml": config(project, `sleep 600; : ${tag}`) })
    await sql(`CREATE DATABASE "${project}_unowned"`)
    const upping = box.run(["up", "crash", "--json"], { timeoutMs: 60_000 })
    // the database exists and migrate is running: the slice is half-made
    await eventually(databases, (dbs) => dbs.has(`${project}_crash_db`))
    process.kill(await daemonPid(box), "SIGKILL")
    const interrupted = await upping
    expect(interrupted.code).toBe(1)
    expect(interrupted.stderr).toMatch(/the daemon stopped while handling/)
    // the world goes too, behind berth's back
    rmSync(`${box.dir}.worktrees`, { recursive: true, force: true })
    box.git("worktree", "prune")
    const gc = await box.run(["gc", "--json"])
    expect(gc.code, gc.stderr).toBe(0)
    // whichever of gc and the reconciler (which tears down a vanished world) gets there first, nothing owned stays
    expect(
      await eventually(
        () => owned(box),
        (names) => names.length === 0
      )
    ).toEqual([])
    expect((await databases()).has(`${project}_unowned`)).toBe(true)
    // the migrate the dead daemon left running was stopped by the next one
    expect(
      await eventually(
        async () => running(`sleep 600; : ${tag}`),
        (n) => n === 0
      )
    ).toBe(0)
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: ReadonlyArray<unknown> }
    expect(status.worlds).toEqual([])
  })

  it("is also run by the daemon on its own", async () => {
    const project = `${tag}c`
    const box = await boxes.project({ "berth.toml": config(project) })
    // a daemon that sweeps every half second
    await box.run(["daemon", "stop"])
    const started = await box.run(["up", "one", "--json"], {
      timeoutMs: 60_000,
      env: { BERTH_GC_INTERVAL_MS: "500" }
    })
    expect(started.code, started.stderr).toBe(0)
    const stray = `${project}_stray_db`
    await sql(`CREATE DATABASE "${stray}"`)
    await sql(`COMMENT ON DATABASE "${stray}" IS 'berth:${ownerOf(box.home)}:${stray}'`)
    expect((await eventually(databases, (dbs) => !dbs.has(stray))).has(stray)).toBe(false)
    expect((await databases()).has(`${project}_one_db`)).toBe(true)
  })

  it("records nothing for a mistyped adapter, so no later gc has anything to say about it", async () => {
    const project = `${tag}d`
    const box = await boxes.project({ "berth.toml": config(project).replace('"postgres"', '"postgress"') })
    const up = await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })
    expect(up.code).toBe(1)
    expect(up.stderr).toMatch(/no built-in adapter \\"postgress\\"/)
    expect(stateRows(box, "SELECT name FROM slices")).toEqual([])
    expect(stateRows(box, "SELECT key FROM settings WHERE key LIKE 'slice-server:%'")).toEqual([])
    const gc = JSON.parse((await box.run(["gc", "--json"])).stdout) as GcJson
    expect(gc.entries).toEqual([])
    expect(gc.unreachable).toEqual([])
    // fixed, a world comes up
    box.write("berth.toml", config(project))
    box.git("commit", "-qam", "adapter fixed")
    const fixed = await box.run(["up", "two", "--json"], { timeoutMs: 60_000 })
    expect(fixed.code, fixed.stderr).toBe(0)
  })

  it("forgets a record of an unknown adapter that no world uses, saying so", async () => {
    const project = `${tag}e`
    const box = await boxes.project({ "berth.toml": config(project) })
    expect((await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    // what a mistyped adapter left behind before: the server it was to be made on, and the row of a world since removed
    const db = openState(box)
    const server = JSON.stringify({
      adapter: "postgress",
      adminUrl,
      storage: join(box.home, "slices", project),
      options: {}
    })
    db.exec(`INSERT INTO settings (key, value) VALUES ('slice-server:mistyped0001', '${server}')`)
    db.exec(`INSERT INTO slices (world_id, project, service, adapter, name, admin_url, storage, state, created_at, used_at)
      VALUES (NULL, '${project}', 'db', 'postgress', '${project}_gone_db', '${adminUrl}', '${join(box.home, "slices", project)}', 'provisioning', 1, 1)`)
    db.close()
    const dry = await box.run(["gc", "--dry-run", "--json"])
    expect(dry.code, dry.stderr).toBe(0)
    const planned = JSON.parse(dry.stdout) as GcJson
    expect(planned.entries).toEqual([])
    expect(planned.unreachable).toEqual([])
    expect(planned.forgotten?.map((f) => [f.outcome, f.adapter, f.name ?? null])).toEqual([
      ["would forget", "postgress", `${project}_gone_db`],
      ["would forget", "postgress", null]
    ])
    expect(planned.forgotten?.[0]?.reason).toMatch(/no built-in adapter "postgress"/)
    const done = await box.run(["gc"])
    expect(done.code, done.stderr).toBe(0)
    // the daemon's own sweep, 2 s after it starts, forgets them as `gc` does, and may come first on a slow machine:
    // whichever forgot them said so
    const said = `${done.stdout}\n${readFileSync(join(box.home, "daemon.log"), "utf8")}`
    expect(said).toMatch(/forgot postgress slice .*_gone_db/)
    expect(said).toMatch(/forgot postgress at /)
    expect(done.stdout).not.toMatch(/skipped/)
    const again = await box.run(["gc"])
    expect(again.stdout.trim()).toBe("nothing collected")
    // the world's own database and its record stay
    expect((await databases()).has(`${project}_one_db`)).toBe(true)
    expect(stateRows(box, "SELECT name FROM slices").map((r) => r.name)).toEqual([`${project}_one_db`])
  })

  it("has the daemon's own sweep forget such a record too, and say so in its log", async () => {
    const project = `${tag}f`
    const box = await boxes.project({ "berth.toml": config(project) })
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    const db = openState(box)
    db.exec(`INSERT INTO slices (world_id, project, service, adapter, name, admin_url, storage, state, created_at, used_at)
      VALUES (NULL, '${project}', 'db', 'postgress', '${project}_swept_db', '${adminUrl}', '${join(box.home, "slices", project)}', 'provisioning', 1, 1)`)
    db.close()
    // a daemon whose first sweep comes half a second after it starts, and no `gc` asked for
    expect((await box.run(["daemon", "start"], { env: { BERTH_GC_INTERVAL_MS: "500" } })).code).toBe(0)
    const log = await eventually(
      async () => readFileSync(join(box.home, "daemon.log"), "utf8"),
      (text) => text.includes(`_swept_db`)
    )
    expect(log).toMatch(
      new RegExp(`gc: forgot postgress slice ${project}_swept_db at .*no built-in adapter "postgress"`)
    )
    expect(stateRows(box, "SELECT name FROM slices")).toEqual([])
  })

  describe("goldens of a project with no world left", () => {
    const golden = (
      project: string
    ) => `${config(project, "psql -q ${db.url} -c 'create table t (id int)'")}clone_from = "golden"
`
    /** this project's goldens and spares on the server */
    const templates = async (project: string) =>
      (
        await sql(
          "SELECT datname FROM pg_database WHERE strpos(datname, $1) > 0 AND (starts_with(datname, 'golden_') OR starts_with(datname, 'spare_'))",
          [project]
        )
      ).map((r) => String(r.datname))
    const dropAll = async (project: string) => {
      for (const name of await templates(project)) await sql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    }
    const gcJson = async (box: Sandbox, ...args: ReadonlyArray<string>) => {
      const r = await box.run(["gc", "--json", ...args])
      expect(r.code, r.stderr).toBe(0)
      return JSON.parse(r.stdout) as GcJson
    }
    const idle = (report: GcJson) => report.entries.filter((e) => e.reason === "no world of the project")

    it("are dropped by gc once the grace period has passed since the last world went", async () => {
      const project = `${tag}f`
      const box = await boxes.project({ "berth.toml": golden(project) })
      try {
        await box.run(["daemon", "stop"])
        const up = await box.run(["up", "one", "--json"], { timeoutMs: 60_000, env: { BERTH_GOLDEN_GRACE: "3s" } })
        expect(up.code, up.stderr).toBe(0)
        // the golden and, in the background, its spare copy
        expect(
          await eventually(
            () => templates(project),
            (names) => names.length === 2,
            60_000
          )
        ).toHaveLength(2)
        expect(idle(await gcJson(box, "--dry-run"))).toEqual([])
        expect((await box.run(["remove", "one", "--force"])).code).toBe(0)
        // the grace starts now: nothing of them goes yet
        expect(idle(await gcJson(box))).toEqual([])
        expect(await templates(project)).toHaveLength(2)
        const due = await eventually(
          async () => idle(await gcJson(box, "--dry-run")),
          (entries) => entries.length === 2
        )
        expect(due.map((e) => e.outcome)).toEqual(["would drop", "would drop"])
        const done = await box.run(["gc"])
        expect(done.stdout).toMatch(/dropped\s+postgres\s+golden_\S+\s+no world of the project/)
        expect(done.stdout).toMatch(/dropped\s+postgres\s+spare_\S+\s+no world of the project/)
        expect(await templates(project)).toEqual([])
        expect((await box.run(["config"])).stdout).toMatch(/golden_grace\s+3s\s+\(environment\)/)
      } finally {
        await dropAll(project)
      }
    })

    it("are dropped at once by gc --goldens, and kept while a world of the project remains", async () => {
      const project = `${tag}g`
      const box = await boxes.project({ "berth.toml": golden(project) })
      try {
        expect((await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
        expect((await box.run(["up", "two", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
        await eventually(
          () => templates(project),
          (names) => names.length === 2,
          60_000
        )
        expect((await box.run(["remove", "one", "--force"])).code).toBe(0)
        // world two still uses them
        expect(idle(await gcJson(box, "--goldens"))).toEqual([])
        expect((await box.run(["remove", "two", "--force"])).code).toBe(0)
        // within the default grace (a day), only an explicit --goldens drops them
        expect(idle(await gcJson(box))).toEqual([])
        const planned = idle(await gcJson(box, "--goldens", "--dry-run"))
        expect(planned.map((e) => e.outcome)).toEqual(["would drop", "would drop"])
        expect(await templates(project)).toHaveLength(2)
        const done = idle(await gcJson(box, "--goldens"))
        expect(done.map((e) => e.outcome)).toEqual(["dropped", "dropped"])
        expect(await templates(project)).toEqual([])
        expect((await box.run(["gc"])).stdout.trim()).toBe("nothing collected")
      } finally {
        await dropAll(project)
      }
    })
  })
})
