import { randomBytes } from "node:crypto"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { pgQuery } from "./pg.js"
import { type Sandbox, sandboxes, varsFrom } from "./harness.js"

const boxes = sandboxes()
const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
/** every database of this file holds it, so afterAll finds them all */
const tag = `cf${randomBytes(3).toString("hex")}`

const sql = pgQuery

const databases = async () =>
  (await sql(`SELECT datname FROM pg_database WHERE strpos(datname, '${tag}') > 0`)).map((r) => String(r.datname))

afterAll(async () => {
  boxes.cleanup()
  for (const name of await databases()) await sql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
})

const dbOf = async (box: Sandbox, world: string) => varsFrom((await box.run(["env", world, "--json"])).stdout).DB_URL!

const config = (project: string, source: string) => `[project]
name = "${project}"

[services.db]
adapter = "postgres"
admin_url = "${adminUrl}"
clone_from = "${source}"
migrate = "psql -q \${db.url} -c 'create table migrated (id int)'"
seed = "psql -q \${db.url} -c 'create table seeded (id int)'"
`

describe('clone_from = "<database>"', () => {
  it("makes each new world's slice a copy of the user's own database, then runs migrate on it", async () => {
    const project = `${tag}a`
    // the database the user seeded by hand, with a name berth would never make
    const source = `${tag}-Seeded_dev`
    await sql(`CREATE DATABASE "${source}"`)
    const sourceUrl = adminUrl.replace(/\/[^/]*$/, `/${source}`)
    await sql("CREATE TABLE customers (name text); INSERT INTO customers VALUES ('ada'), ('grace')", sourceUrl)
    const box = await boxes.project({ "berth.toml": config(project, source) })
    const up = await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const one = await dbOf(box, "one")
    expect(one.endsWith(`/${project}_one_db`)).toBe(true)
    expect(await sql("SELECT name FROM customers ORDER BY name", one)).toEqual([{ name: "ada" }, { name: "grace" }])
    // the branch's migrate ran on the copy; seed did not (the data came with the copy)
    expect(
      await sql("SELECT to_regclass('migrated') IS NOT NULL AS m, to_regclass('seeded') IS NOT NULL AS s", one)
    ).toEqual([{ m: true, s: false }])
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ name: string; events: Array<{ kind: string; message: string }> }>
    }
    const events = status.worlds.find((w) => w.name === "one")!.events
    expect(events.find((e) => e.kind === "slice_copied")?.message).toContain(source)
    // each world has its own copy; the source is the user's, untouched and unmarked
    await sql("INSERT INTO customers VALUES ('linus')", one)
    expect((await box.run(["up", "two", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    expect(await sql("SELECT count(*)::int AS n FROM customers", await dbOf(box, "two"))).toEqual([{ n: 2 }])
    expect(await sql("SELECT count(*)::int AS n FROM customers", sourceUrl)).toEqual([{ n: 2 }])
    expect(
      await sql(`SELECT shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE datname = '${source}'`)
    ).toEqual([{ mark: null }])
    expect((await box.run(["remove", "one", "--force"])).code).toBe(0)
    expect((await box.run(["remove", "two", "--force"])).code).toBe(0)
    expect(await databases()).toEqual([source])
  })

  it("fails clearly when the database is not on the server, and leaves nothing behind", async () => {
    const project = `${tag}b`
    const box = await boxes.project({ "berth.toml": config(project, `${tag}_nowhere`) })
    const up = await box.run(["up", "one"], { timeoutMs: 60_000 })
    expect(up.code).toBe(1)
    expect(up.stderr).toMatch(new RegExp(`slice db \\(postgres\\): cannot copy: there is no database "${tag}_nowhere"`))
    expect(up.stderr).toMatch(/hint: make and seed that database on the server, or name another in clone_from/)
    expect(up.stderr).not.toMatch(/\n\s+at /)
    const json = await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })
    expect(JSON.parse(json.stderr.trim().split("\n").at(-1) ?? "{}").error).toMatchObject({
      tag: "SliceServerFailed",
      hint: "make and seed that database on the server, or name another in clone_from"
    })
    expect((await databases()).filter((name) => name.includes(project))).toEqual([])
  })

  it("refuses a name that is not a database name, at check and at up, before anything runs", async () => {
    const project = `${tag}c`
    const box = await boxes.project({ "berth.toml": config(project, "x'; DROP DATABASE postgres; --") })
    const check = await box.run(["check"])
    expect(check.code).toBe(1)
    expect(check.stderr).toMatch(/berth\.toml:\d+:\d+: .*neither "golden" nor a database name/)
    expect(check.stderr).toMatch(/services\.db\.clone_from/)
    const up = await box.run(["up", "one"], { timeoutMs: 60_000 })
    expect(up.code).toBe(1)
    expect(up.stderr).toMatch(/neither "golden" nor a database name/)
    expect((await databases()).filter((name) => name.includes(project))).toEqual([])
  })

  it("copies a MariaDB database the user seeded, table by table, leaving it untouched", async () => {
    const mysql = await import("mysql2/promise")
    const project = `${tag}m`
    const source = `${tag}_shop_dev`
    const admin = await mysql.createConnection("mysql://root@127.0.0.1:3306/")
    try {
      await admin.query(`CREATE DATABASE \`${source}\``)
      await admin.query(`CREATE TABLE \`${source}\`.notes (id INT PRIMARY KEY, text VARCHAR(40))`)
      await admin.query(`INSERT INTO \`${source}\`.notes VALUES (1, 'by hand')`)
      const box = await boxes.project({
        "berth.toml": `[project]
name = "${project}"

[services.db]
adapter = "mariadb"
admin_url = "mysql://root@127.0.0.1:3306/"
clone_from = "${source}"
`
      })
      const up = await box.run(["up", "one"], { timeoutMs: 60_000 })
      expect(up.code, up.stderr).toBe(0)
      const one = await mysql.createConnection(await dbOf(box, "one"))
      try {
        expect((await one.query("SELECT id, text FROM notes"))[0]).toEqual([{ id: 1, text: "by hand" }])
        await one.query("INSERT INTO notes VALUES (2, 'in one')")
      } finally {
        await one.end()
      }
      expect((await admin.query(`SELECT count(*) AS n FROM \`${source}\`.notes`))[0]).toEqual([{ n: 1 }])
      expect((await box.run(["remove", "one", "--force"])).code).toBe(0)
      const [left] = await admin.query(
        "SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name LIKE ?",
        [`${project}%`]
      )
      expect(left).toEqual([])
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS \`${source}\``)
      await admin.end()
    }
  })
})

describe("up <new> --from <world>", () => {
  const config = (project: string) => `[project]
name = "${project}"

[services.db]
adapter = "postgres"
admin_url = "${adminUrl}"
migrate = "psql -q \${db.url} -c 'create table notes (text text)'"

[services.holder]
cmd = "psql -q \${db.url} -c 'select pg_sleep(3600)'"
depends_on = ["db"]
`
  interface Status {
    worlds: Array<{
      name: string
      state: string
      services: Array<{ name: string; pid: number | null }>
      events: Array<{ kind: string; message: string; service: string | null }>
    }>
  }
  const statusOf = async (box: Sandbox, world: string) =>
    (JSON.parse((await box.run(["status", "--json"])).stdout) as Status).worlds.find((w) => w.name === world)

  it("makes a world whose slices are copies of another world's as they are now, pausing its services around it", async () => {
    const project = `${tag}u`
    const box = await boxes.project({ "berth.toml": config(project) })
    expect((await box.run(["up", "source", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    const source = await dbOf(box, "source")
    await sql("INSERT INTO notes VALUES ('written in source')", source)
    const before = (await statusOf(box, "source"))!.services.find((s) => s.name === "holder")!.pid
    // the source's holder keeps a session open on its database: PostgreSQL copies one only while none is
    const up = await box.run(["up", "copy", "--from", "source", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const copy = await dbOf(box, "copy")
    expect(copy.endsWith(`/${project}_copy_db`)).toBe(true)
    expect(await sql("SELECT text FROM notes", copy)).toEqual([{ text: "written in source" }])
    // its own data from now on
    await sql("INSERT INTO notes VALUES ('only in copy')", copy)
    expect(await sql("SELECT count(*)::int AS n FROM notes", source)).toEqual([{ n: 1 }])
    // the source runs again, with a new holder, and says what happened
    const after = (await statusOf(box, "source"))!
    expect(after.state).toBe("running")
    expect(after.services.find((s) => s.name === "holder")!.pid).not.toBe(before)
    expect(after.events.find((e) => e.kind === "slices_copied")?.message).toMatch(
      /stopped its services while its slices were copied into world copy, and started them again/
    )
    const target = (await statusOf(box, "copy"))!
    expect(target.state).toBe("running")
    expect(target.events.find((e) => e.kind === "slice_copied")?.message).toMatch(/a copy of world source's/)
    for (const w of ["source", "copy"]) expect((await box.run(["remove", w, "--force"])).code).toBe(0)
  })

  it("refuses a source that does not exist, and a world that exists already", async () => {
    const project = `${tag}v`
    const box = await boxes.project({ "berth.toml": config(project) })
    const missing = await box.run(["up", "copy", "--from", "nowhere"], { timeoutMs: 60_000 })
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/no world "nowhere"/)
    expect(missing.stderr).not.toMatch(/\n\s+at /)
    // nothing was made for the world asked for
    expect(await statusOf(box, "copy")).toBeUndefined()
    expect((await box.run(["up", "one", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    expect((await box.run(["up", "two", "--json"], { timeoutMs: 60_000 })).code).toBe(0)
    const exists = await box.run(["up", "two", "--from", "one"], { timeoutMs: 60_000 })
    expect(exists.code).toBe(1)
    expect(exists.stderr).toMatch(/world two exists already: --from makes a new world/)
    expect(exists.stderr).toMatch(/hint: /)
    const json = await box.run(["up", "two", "--from", "one", "--json"], { timeoutMs: 60_000 })
    expect(JSON.parse(json.stderr.trim().split("\n").at(-1) ?? "{}").error?.tag).toBe("WorldExists")
    const all = await box.run(["up", "--all", "--from", "one"])
    expect(all.code).toBe(2)
    for (const w of ["one", "two"]) expect((await box.run(["remove", w, "--force"])).code).toBe(0)
  })

  it("refuses a source whose slice the adapter cannot clone, before anything is made", async () => {
    // an adapter written for binky: binky's protocol has no clone
    const fixtures = resolve(import.meta.dirname, "../../adapters/external/fixtures")
    const box = await boxes.project({ "berth.toml": `[services.drawer]\nadapter = "drawer"\n` })
    await box.run(["daemon", "stop"])
    const env = { PATH: `${fixtures}:${process.env.PATH}`, BINKY_DRAWER_LOG: join(box.home, "..", "drawer.jsonl") }
    expect((await box.run(["up", "one", "--json"], { timeoutMs: 60_000, env })).code).toBe(0)
    const up = await box.run(["up", "two", "--from", "one"], { timeoutMs: 60_000, env })
    expect(up.code).toBe(1)
    expect(up.stderr).toMatch(
      /world one: slice drawer \(drawer\) cannot be copied: the drawer adapter cannot clone a slice/
    )
    expect(up.stderr).toMatch(/hint: berth up two without --from/)
    const json = await box.run(["up", "two", "--from", "one", "--json"], { timeoutMs: 60_000, env })
    expect(JSON.parse(json.stderr.trim().split("\n").at(-1) ?? "{}").error?.tag).toBe("SliceCopyUnsupported")
    expect(await statusOf(box, "two")).toBeUndefined()
    expect((await statusOf(box, "one"))?.state).toBe("running")
    expect((await box.run(["remove", "one", "--force"], { env })).code).toBe(0)
  })
})
