import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { type Sandbox, sandboxes, type WorldJson, worldFrom, varsFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const config = `
[services.db]
adapter = "sqlite"

[services.files]
adapter = "dir"
migrate = "echo migrated >> \${files.url}/migrations.log"
seed = "echo seeded > \${files.url}/seed.txt"

[services.api]
cmd = "node server.mjs"
url = "api"
env = { DATABASE_URL = "\${db.url}", FILES = "\${files.url}" }
`

const up = async (box: Sandbox, name: string) => {
  const r = await box.run(["up", name, "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
  return worldFrom(r.stdout)
}

const envOf = async (box: Sandbox, name: string) => varsFrom((await box.run(["env", name, "--json"])).stdout)

describe("slices", () => {
  it("gives each world its own sqlite file and folder, migrated and seeded once, dropped on remove", async () => {
    const box = await boxes.project({ "berth.toml": config })
    const a = await up(box, "alpha")
    const b = await up(box, "beta")
    const ea = await envOf(box, "alpha")
    const eb = await envOf(box, "beta")
    expect(ea.DB_URL).toMatch(/^file:\/\/.*\.sqlite$/)
    expect(ea.DB_URL).not.toBe(eb.DB_URL)
    expect(ea.FILES_URL).not.toBe(eb.FILES_URL)
    expect(existsSync(fileURLToPath(ea.DB_URL!))).toBe(true)
    // the process sees its world's slices
    const seen = (await (await fetch(a.services.find((s) => s.name === "api")!.url!)).json()) as {
      env: Record<string, string>
    }
    expect(seen.env.DATABASE_URL).toBe(ea.DB_URL)
    expect(seen.env.FILES).toBe(ea.FILES_URL)
    // a write to one world's folder is invisible in the other's
    writeFileSync(join(ea.FILES_URL!, "only-alpha.txt"), "a")
    expect(existsSync(join(eb.FILES_URL!, "only-alpha.txt"))).toBe(false)
    // migrate and seed ran on first provision only
    await box.run(["down", "alpha"])
    await up(box, "alpha")
    expect(readFileSync(join(ea.FILES_URL!, "migrations.log"), "utf8")).toBe("migrated\n")
    expect(readFileSync(join(ea.FILES_URL!, "seed.txt"), "utf8")).toBe("seeded\n")
    // status lists the slices with their addresses
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson> }
    const alpha = status.worlds.find((w) => w.name === "alpha")!
    expect(alpha.services.filter((s) => (s as { kind?: string }).kind === "slice").map((s) => s.name)).toEqual([
      "db",
      "files"
    ])
    // remove drops them
    expect((await box.run(["remove", "alpha", "--force"])).code).toBe(0)
    expect(existsSync(fileURLToPath(ea.DB_URL!))).toBe(false)
    expect(existsSync(ea.FILES_URL!)).toBe(false)
    expect(existsSync(fileURLToPath(eb.DB_URL!))).toBe(true)
    expect(b.state).toBe("running")
  })

  it("fails an up whose migrate fails, drops the half-made slice, and tries again on the next up", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.files]\nadapter = "dir"\nmigrate = "test -f \${world.path}/ok || { echo migration broke; exit 4; }"\n`
    })
    const failed = await box.run(["up", "mig"], { timeoutMs: 60_000 })
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/failed \(exit code 4\)/)
    expect(failed.stderr).toContain("migration broke")
    const w = (JSON.parse((await box.run(["status", "--json"])).stdout) as { worlds: Array<WorldJson> }).worlds[0]!
    writeFileSync(join(w.path, "ok"), "")
    const again = await box.run(["up", "mig"], { timeoutMs: 60_000 })
    expect(again.code, again.stderr).toBe(0)
  })

  it("gives each world its own PostgreSQL database on the shared server, dropped on remove", async () => {
    const { default: pg } = await import("pg")
    const box = await boxes.project({
      "berth.toml": `[project]\nname = "pgshop${process.pid}"\n\n[services.db]\nadapter = "postgres"\nadmin_url = "\${env.POSTGRES_ADMIN_URL}"\nmigrate = "echo migrating \${db.url}"\n`
    })
    const admin = "postgres://postgres@127.0.0.1:5432/postgres"
    const run = (args: Array<string>) => box.run(args, { env: { POSTGRES_ADMIN_URL: admin }, timeoutMs: 60_000 })
    for (const world of ["one", "two"]) {
      const r = await run(["up", world])
      expect(r.code, r.stderr).toBe(0)
    }
    const one = varsFrom((await run(["env", "one", "--json"])).stdout)
    const two = varsFrom((await run(["env", "two", "--json"])).stdout)
    expect(one.DB_URL).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:5432\/pgshop\d+_one_db$/)
    expect(one.DB_URL).not.toBe(two.DB_URL)
    const write = new pg.Client({ connectionString: one.DB_URL })
    await write.connect()
    await write.query("CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
    await write.end()
    const read = new pg.Client({ connectionString: two.DB_URL })
    await read.connect()
    const seen = await read.query("SELECT to_regclass('public.t') AS t")
    await read.end()
    expect(seen.rows[0]).toEqual({ t: null })
    for (const world of ["one", "two"]) {
      const r = await run(["remove", world, "--force"])
      expect(r.code, r.stderr).toBe(0)
    }
    const check = new pg.Client({ connectionString: admin })
    await check.connect()
    const left = await check.query("SELECT datname FROM pg_database WHERE datname LIKE $1", [`pgshop${process.pid}%`])
    await check.end()
    expect(left.rows).toEqual([])
  })
  it("says which slice server failed and how, with a hint, when the server cannot be reached", async () => {
    const box = await boxes.project({
      "berth.toml": `[project]\nname = "pgaway${process.pid}"\n\n[services.db]\nadapter = "postgres"\nadmin_url = "postgres://postgres@127.0.0.1:1/postgres"\n`
    })
    const r = await box.run(["up", "away", "--json"], { timeoutMs: 60_000 })
    expect(r.code).toBe(1)
    const error = (
      JSON.parse(r.stderr.trim().split("\n").at(-1)!) as { error: { tag: string; message: string; hint: string } }
    ).error
    expect(error.tag).toBe("SliceServerFailed")
    expect(error.message).toMatch(/world away: slice db \(postgres\)/)
    expect(error.hint).toMatch(/check that the server runs/)
  })

  it("gives each world its own Redis database, flushed and freed on remove", async () => {
    const { Redis } = await import("ioredis")
    const box = await boxes.project({
      "berth.toml": `[project]\nname = "rshop${process.pid}"\n\n[services.cache]\nadapter = "redis"\nadmin_url = "redis://127.0.0.1:6379"\n`
    })
    for (const world of ["one", "two"]) {
      const r = await box.run(["up", world], { timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
    }
    const one = varsFrom((await box.run(["env", "one", "--json"])).stdout)
    const two = varsFrom((await box.run(["env", "two", "--json"])).stdout)
    expect(one.CACHE_URL).toMatch(/^redis:\/\/127\.0\.0\.1:6379\/\d+$/)
    expect(one.CACHE_URL).not.toBe(two.CACHE_URL)
    const a = new Redis(one.CACHE_URL!)
    const b = new Redis(two.CACHE_URL!)
    await a.set("greeting", "from one")
    expect(await b.get("greeting")).toBeNull()
    a.disconnect()
    b.disconnect()
    for (const world of ["one", "two"]) {
      const r = await box.run(["remove", world, "--force"])
      expect(r.code, r.stderr).toBe(0)
    }
    const check = new Redis(one.CACHE_URL!)
    expect(await check.get("greeting")).toBeNull()
    check.disconnect()
  })

  it("drives an external adapter found on PATH (berth-adapter-notes), golden clone included", async () => {
    const notes = join(import.meta.dirname, "../../examples/adapters/notes")
    const box = await boxes.project({
      "berth.toml": `[services.notes]
adapter = "notes"
clone_from = "golden"
migrate = "u=\${notes.url}; echo '{\\"text\\":\\"from golden\\"}' > $\${u#file://}/first.json"

[services.api]
cmd = "node server.mjs"
url = "api"
env = { NOTES = "\${notes.url}" }
`
    })
    // the daemon looks adapters up on its own PATH: start it with the adapter's folder on it
    await box.run(["daemon", "stop"])
    const path = { PATH: `${notes}:${process.env.PATH}` }
    for (const world of ["one", "two"]) {
      const r = await box.run(["up", world], { timeoutMs: 60_000, env: path })
      expect(r.code, r.stderr).toBe(0)
    }
    const one = (await envOf(box, "one")).NOTES_URL!
    const two = (await envOf(box, "two")).NOTES_URL!
    expect(one).toMatch(/^file:\/\//)
    expect(one).not.toBe(two)
    // both are copies of the golden, independent of each other
    expect(readFileSync(join(fileURLToPath(two), "first.json"), "utf8")).toMatch(/from golden/)
    writeFileSync(join(fileURLToPath(one), "only-one.json"), "{}")
    expect(existsSync(join(fileURLToPath(two), "only-one.json"))).toBe(false)
    expect((await box.run(["remove", "one", "--force"])).code).toBe(0)
    expect(existsSync(fileURLToPath(one))).toBe(false)
    expect(existsSync(fileURLToPath(two))).toBe(true)
  })

  it("finds an external adapter put on PATH after the daemon started, on the world's own PATH", async () => {
    const notes = join(import.meta.dirname, "../../examples/adapters/notes")
    const box = await boxes.project({ "berth.toml": `[services.notes]\nadapter = "notes"\n` })
    // the daemon runs already (the sandbox's first command started it) with a PATH that has no adapter on it
    const check = await box.run(["check"], { env: { PATH: `${notes}:${process.env.PATH}` } })
    expect(check.code, check.stderr).toBe(0)
    const r = await box.run(["up", "late"], { timeoutMs: 60_000, env: { PATH: `${notes}:${process.env.PATH}` } })
    expect(r.code, r.stderr).toBe(0)
    const url = (await envOf(box, "late")).NOTES_URL!
    expect(existsSync(fileURLToPath(url))).toBe(true)
    // removed from a shell without it: the world's own PATH still has it
    const removed = await box.run(["remove", "late", "--force"])
    expect(removed.code, removed.stderr).toBe(0)
    expect(existsSync(fileURLToPath(url))).toBe(false)
  })

  it("says clearly when an adapter is neither built in nor on PATH", async () => {
    const box = await boxes.project({ "berth.toml": `[services.store]\nadapter = "nowhere"\n` })
    const r = await box.run(["up", "x"], { timeoutMs: 60_000 })
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/berth-adapter-nowhere/)
    expect(r.stderr).not.toMatch(/\n\s+at /)
  })

  it("lets two installations of one project share a MariaDB server: the second names its slice apart", async () => {
    const project = `mtwin${process.pid}`
    const toml = `[project]
name = "${project}"

[services.db]
adapter = "mariadb"
admin_url = "mysql://root@127.0.0.1:3306/"
clone_from = "golden"
migrate = "true"
`
    const first = await boxes.project({ "berth.toml": toml })
    const second = await boxes.project({ "berth.toml": toml })
    const mysql = await import("mysql2/promise")
    try {
      for (const box of [first, second]) {
        const r = await box.run(["up", "one"], { timeoutMs: 60_000 })
        expect(r.code, r.stderr).toBe(0)
      }
      const mine = (await envOf(first, "one")).DB_URL!
      const theirs = (await envOf(second, "one")).DB_URL!
      expect(mine).toBe(`mysql://root@127.0.0.1:3306/${project}_one_db`)
      expect(theirs).toMatch(new RegExp(`^mysql://root@127\\.0\\.0\\.1:3306/${project}_one_db_b[0-9a-z]+$`))
      for (const box of [first, second]) expect((await box.run(["remove", "one", "--force"])).code).toBe(0)
    } finally {
      for (const box of [first, second]) await box.run(["daemon", "stop"])
      const admin = await mysql.createConnection("mysql://root@127.0.0.1:3306/")
      try {
        const [left] = await admin.query(
          "SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name LIKE ? OR schema_name LIKE ?",
          [`${project}%`, `golden_${project}%`]
        )
        for (const d of left as Array<{ name: string }>) await admin.query(`DROP DATABASE \`${d.name}\``)
      } finally {
        await admin.end()
      }
    }
  })

  it("gives each world a MariaDB database copied server-side from the golden", async () => {
    const project = `mshop${process.pid}`
    const sqlOf = (statement: string) =>
      `'''u=\${db.url}; mariadb -h 127.0.0.1 -u root "$\${u##*/}" -e "${statement}"'''`
    const box = await boxes.project({
      "berth.toml": `[project]
name = "${project}"

[services.db]
adapter = "mariadb"
admin_url = "mysql://root@127.0.0.1:3306/"
clone_from = "golden"
migrate = ${sqlOf("CREATE TABLE notes (id INT PRIMARY KEY, text VARCHAR(40))")}
seed = ${sqlOf("INSERT INTO notes VALUES (1, 'seeded')")}
`
    })
    for (const world of ["one", "two"]) {
      const r = await box.run(["up", world], { timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
    }
    const mysql = await import("mysql2/promise")
    const one = (await envOf(box, "one")).DB_URL!
    const two = (await envOf(box, "two")).DB_URL!
    expect(one).toBe(`mysql://root@127.0.0.1:3306/${project}_one_db`)
    const a = await mysql.createConnection(one)
    const b = await mysql.createConnection(two)
    try {
      await a.query("INSERT INTO notes VALUES (2, 'only one')")
      const [rowsA] = await a.query("SELECT id FROM notes ORDER BY id")
      const [rowsB] = await b.query("SELECT id FROM notes ORDER BY id")
      expect(rowsA).toEqual([{ id: 1 }, { id: 2 }])
      expect(rowsB).toEqual([{ id: 1 }])
    } finally {
      await a.end()
      await b.end()
    }
    for (const world of ["one", "two"]) expect((await box.run(["remove", world, "--force"])).code).toBe(0)
    const admin = await mysql.createConnection("mysql://root@127.0.0.1:3306/")
    try {
      const [left] = await admin.query("SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?", [
        `${project}%`
      ])
      expect(left).toEqual([])
      // goldens outlive worlds (gc keeps the recent ones): this test's goes by hand
      const [goldens] = await admin.query(
        "SELECT schema_name AS name FROM information_schema.schemata WHERE schema_name LIKE ?",
        [`golden_${project}%`]
      )
      expect(goldens).toHaveLength(1)
      for (const g of goldens as Array<{ name: string }>) await admin.query(`DROP DATABASE \`${g.name}\``)
    } finally {
      await admin.end()
    }
  })
})
