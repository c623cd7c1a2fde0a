import { randomBytes } from "node:crypto"
import { readdirSync, readFileSync, rmSync } from "node:fs"
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
})
