import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { pgQuery } from "./pg.js"
import { eventually, type Sandbox, sandboxes, varsFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const query = pgQuery
const rows = (url: string, text: string) => query(text, url)

/** every database whose name holds `part`, with its comment */
const databases = async (part: string): Promise<Array<readonly [string, string | null]>> =>
  (
    await query(
      `SELECT datname, shobj_description(oid, 'pg_database') AS mark FROM pg_database WHERE strpos(datname, '${part}') > 0`
    )
  ).map((r) => [String(r.datname), r.mark === null ? null : String(r.mark)] as const)

/**
 * A `dir` slice whose golden is built by a migrate that copies the schema file and a seed that writes rows; every
 * build appends a line to `golden-builds.log` beside the worktrees (shared by every world of the project).
 */
const config = (migrate = "cp ${world.path}/migrations/001.sql ${files.url}/schema.sql") => `
[services.files]
adapter = "dir"
clone_from = "golden"
golden_inputs = ["migrations/**"]
migrate = "sleep 1; ${migrate}; echo \${world.name} >> \${world.path}/../golden-builds.log"
seed = "echo row-1 > \${files.url}/rows.txt"

[services.api]
cmd = "node server.mjs"
url = "api"
env = { FILES = "\${files.url}" }
`

interface StatusJson {
  readonly worlds: ReadonlyArray<{
    readonly name: string
    readonly events: ReadonlyArray<{ readonly kind: string; readonly service: string | null; readonly message: string }>
  }>
}

const envOf = async (box: Sandbox, name: string) => varsFrom((await box.run(["env", name, "--json"])).stdout)

const builds = (box: Sandbox): Array<string> => {
  const log = join(`${box.dir}.worktrees`, "golden-builds.log")
  return existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []
}

const up = async (box: Sandbox, name: string) => {
  const r = await box.run(["up", name, "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
}

const eventsOf = async (box: Sandbox, name: string) => {
  const status = JSON.parse((await box.run(["status", "--json"])).stdout) as StatusJson
  return status.worlds.find((w) => w.name === name)?.events ?? []
}

/** Project `project` with a PostgreSQL slice `db` copied from its golden: a table `t` holding one row, 1. */
const postgresGolden = (project: string) => {
  const psql = (statement: string) => `psql -q \${db.url} -c '${statement}'`
  return `[project]
name = "${project}"

[services.db]
adapter = "postgres"
admin_url = "${adminUrl}"
clone_from = "golden"
migrate = "${psql("create table t (id int)")}"
seed = "${psql("insert into t values (1)")}"
`
}

describe("golden templates", () => {
  it("is built once under five concurrent first ups, and every world gets a copy", async () => {
    const box = await boxes.project({ "berth.toml": config(), "migrations/001.sql": "CREATE TABLE t (id int);\n" })
    const names = ["w1", "w2", "w3", "w4", "w5"]
    const results = await Promise.all(names.map((n) => box.run(["up", n, "--json"], { timeoutMs: 60_000 })))
    for (const r of results) expect(r.code, r.stderr).toBe(0)
    expect(builds(box)).toHaveLength(1)
    for (const n of names) {
      const files = (await envOf(box, n)).FILES_URL!
      expect(readFileSync(join(files, "schema.sql"), "utf8")).toBe("CREATE TABLE t (id int);\n")
      expect(readFileSync(join(files, "rows.txt"), "utf8")).toBe("row-1\n")
    }
    // the copies are independent of each other and of the golden
    const [a, b] = [(await envOf(box, "w1")).FILES_URL!, (await envOf(box, "w2")).FILES_URL!]
    expect(a).not.toBe(b)
    rmSync(join(a, "rows.txt"))
    expect(existsSync(join(b, "rows.txt"))).toBe(true)
    // the worlds that waited say so
    const waited = await Promise.all(names.map(async (n) => (await eventsOf(box, n)).map((e) => e.kind)))
    expect(waited.filter((kinds) => kinds.includes("golden_build"))).toHaveLength(1)
    expect(waited.filter((kinds) => kinds.includes("golden_wait")).length).toBeGreaterThan(0)
  })

  it("reset puts a world's slice back to its golden, restarting its processes around it", async () => {
    const box = await boxes.project({ "berth.toml": config(), "migrations/001.sql": "v1\n" })
    await up(box, "one")
    const files = (await envOf(box, "one")).FILES_URL!
    const pidOf = async () => {
      const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
        worlds: Array<{ name: string; state: string; services: Array<{ name: string; pid: number | null }> }>
      }
      const w = status.worlds.find((x) => x.name === "one")
      return { state: w?.state, pid: w?.services.find((s) => s.name === "api")?.pid }
    }
    const before = await pidOf()
    writeFileSync(join(files, "scratch.txt"), "made by a test run\n")
    expect(existsSync(join(files, "scratch.txt"))).toBe(true)
    const r = await box.run(["reset", "one", "--json"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(existsSync(join(files, "scratch.txt"))).toBe(false)
    expect(readFileSync(join(files, "schema.sql"), "utf8")).toBe("v1\n")
    expect(readFileSync(join(files, "rows.txt"), "utf8")).toBe("row-1\n")
    const after = await pidOf()
    expect(after.state).toBe("running")
    expect(after.pid).not.toBe(before.pid)
    // the golden was copied, not built again
    expect(builds(box)).toEqual(["one"])
    const wrong = await box.run(["reset", "one", "cache"])
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toMatch(/no slice "cache".*slices: files/)
  })

  it("is rebuilt when an input file or the migrate command changes, and on request", async () => {
    const box = await boxes.project({ "berth.toml": config(), "migrations/001.sql": "v1\n" })
    await up(box, "one")
    await up(box, "two")
    expect(builds(box)).toEqual(["one"])
    // an edited migration file makes a new golden (the world branches from the new HEAD)
    box.write("migrations/001.sql", "v2\n")
    box.git("commit", "-qam", "v2")
    await up(box, "three")
    expect(builds(box)).toEqual(["one", "three"])
    expect(readFileSync(join((await envOf(box, "three")).FILES_URL!, "schema.sql"), "utf8")).toBe("v2\n")
    expect(readFileSync(join((await envOf(box, "two")).FILES_URL!, "schema.sql"), "utf8")).toBe("v1\n")
    // a new file matched by golden_inputs counts too
    box.write("migrations/002.sql", "more\n")
    box.git("add", "-A")
    box.git("commit", "-qm", "002")
    await up(box, "four")
    expect(builds(box)).toEqual(["one", "three", "four"])
    // so does the migrate command
    box.write("berth.toml", config("cp ${world.path}/migrations/001.sql ${files.url}/schema.sql; touch ${files.url}/x"))
    box.git("commit", "-qam", "migrate changed")
    await up(box, "five")
    expect(builds(box)).toEqual(["one", "three", "four", "five"])
    expect(existsSync(join((await envOf(box, "five")).FILES_URL!, "x"))).toBe(true)
    // and `golden rebuild` forces one
    const rebuilt = await box.run(["golden", "rebuild", "five", "files"], { timeoutMs: 60_000 })
    expect(rebuilt.code, rebuilt.stderr).toBe(0)
    expect(rebuilt.stdout).toMatch(/golden .* is ready/)
    expect(builds(box)).toEqual(["one", "three", "four", "five", "five"])
    const wrong = await box.run(["golden", "rebuild", "five", "api"])
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toMatch(/"api" is not a slice service with clone_from = "golden"/)
  })

  it("falls back to migrate and seed when the golden cannot be copied, and says so", async () => {
    const box = await boxes.project({ "berth.toml": config(), "migrations/001.sql": "v1\n" })
    await up(box, "first")
    // something in the golden cannot be copied (a named pipe): the next world cannot be a copy of it
    const storage = dirname((await envOf(box, "first")).FILES_URL!)
    const goldens = readdirSync(storage).filter((f) => f.startsWith("golden_"))
    expect(goldens).toHaveLength(1)
    execFileSync("mkfifo", [join(storage, goldens[0]!, "pipe")])
    await up(box, "second")
    const files = (await envOf(box, "second")).FILES_URL!
    expect(readFileSync(join(files, "schema.sql"), "utf8")).toBe("v1\n")
    expect(readFileSync(join(files, "rows.txt"), "utf8")).toBe("row-1\n")
    const events = await eventsOf(box, "second")
    expect(events.find((e) => e.kind === "clone_fallback")?.message).toMatch(/running migrate and seed instead/)
    // the golden is there: it is not built again
    expect(events.map((e) => e.kind)).not.toContain("golden_gone")
    const status = await box.run(["status"])
    expect(status.stdout).toMatch(/clone_fallback \(files\)/)
    // the slice's log says it too
    const logs = await box.run(["logs", "second", "--service", "files"])
    expect(logs.stdout).toMatch(/\[berth\] clone_fallback/)
  })

  it("builds a golden again when it is gone from its server, and copies the new one", async () => {
    const box = await boxes.project({ "berth.toml": config(), "migrations/001.sql": "v1\n" })
    await up(box, "first")
    // the golden vanishes behind berth's back (a disk cleanup, say)
    const storage = dirname((await envOf(box, "first")).FILES_URL!)
    const goldens = readdirSync(storage).filter((f) => f.startsWith("golden_"))
    expect(goldens).toHaveLength(1)
    rmSync(join(storage, goldens[0]!), { recursive: true, force: true })
    await up(box, "second")
    const files = (await envOf(box, "second")).FILES_URL!
    expect(readFileSync(join(files, "schema.sql"), "utf8")).toBe("v1\n")
    expect(readFileSync(join(files, "rows.txt"), "utf8")).toBe("row-1\n")
    const events = await eventsOf(box, "second")
    const kinds = events.map((e) => e.kind)
    expect(events.find((e) => e.kind === "golden_gone")?.message).toMatch(/is gone .*built again/)
    expect(kinds).toContain("golden_ready")
    // a copy of the new golden, not migrate and seed in the world
    expect(kinds).not.toContain("clone_fallback")
    expect(builds(box)).toEqual(["first", "second"])
    expect(readdirSync(storage).filter((f) => f.startsWith("golden_"))).toEqual(goldens)
    // ready again: the next world copies it without a build
    await up(box, "third")
    expect(builds(box)).toEqual(["first", "second"])
    expect((await eventsOf(box, "third")).map((e) => e.kind)).not.toContain("golden_gone")
  })

  it("lets two installations of one project share a PostgreSQL server: the second names its golden and slices apart", async () => {
    const project = `twin${process.pid}x${Date.now() % 100000}`
    const toml = `${postgresGolden(project)}
[services.scratch]
adapter = "postgres"
admin_url = "${adminUrl}"
`
    // two users (or two BERTH_HOMEs) with a clone of the same repository each
    const first = await boxes.project({ "berth.toml": toml })
    const second = await boxes.project({ "berth.toml": toml })
    try {
      await up(first, "one")
      await up(second, "one")
      const mine = await envOf(first, "one")
      const theirs = await envOf(second, "one")
      expect(mine.DB_URL!.endsWith(`/${project}_one_db`)).toBe(true)
      expect(theirs.DB_URL).not.toBe(mine.DB_URL)
      expect(theirs.SCRATCH_URL).not.toBe(mine.SCRATCH_URL)
      expect(new URL(theirs.DB_URL!).pathname.slice(1)).toMatch(new RegExp(`^${project}_one_db_b[0-9a-z]+$`))
      // each world has its own data, copied from its own installation's golden
      await rows(mine.DB_URL!, "insert into t values (2)")
      expect(await rows(mine.DB_URL!, "select id from t order by id")).toEqual([{ id: 1 }, { id: 2 }])
      expect(await rows(theirs.DB_URL!, "select id from t order by id")).toEqual([{ id: 1 }])
      const told = (await eventsOf(second, "one")).filter((e) => e.kind === "slice_named_apart")
      expect(told.map((e) => e.service).sort()).toEqual(["db", "db", "scratch"])
      // the name chosen is kept: the world comes back on the same databases, with its data
      await rows(theirs.DB_URL!, "insert into t values (3)")
      expect((await second.run(["down", "one"])).code).toBe(0)
      await up(second, "one")
      expect((await envOf(second, "one")).DB_URL).toBe(theirs.DB_URL)
      expect(await rows(theirs.DB_URL!, "select id from t order by id")).toEqual([{ id: 1 }, { id: 3 }])
      // removing one installation's world leaves the other's alone
      expect((await second.run(["remove", "one", "--force"])).code).toBe(0)
      expect(await rows(mine.DB_URL!, "select id from t order by id")).toEqual([{ id: 1 }, { id: 2 }])
      const left = (await databases(`${project}_one_`)).map(([name]) => name).sort()
      expect(left).toEqual([`${project}_one_db`, `${project}_one_scratch`])
    } finally {
      for (const box of [first, second]) {
        await box.run(["remove", "one", "--force"])
        await box.run(["daemon", "stop"])
      }
      for (const [name] of await databases(project)) await query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    }
  })

  it("keeps a spare copy of a postgres golden, renamed into the next new world", async () => {
    const project = `spr${process.pid}x${Date.now() % 100000}`
    const box = await boxes.project({ "berth.toml": postgresGolden(project) })
    try {
      await up(box, "one")
      // the spare appears in the background, marked as this installation's
      const spareOf = async () =>
        (await databases(project)).filter(([name, mark]) => name.startsWith("spare_") && mark !== null)
      const first = await eventually(spareOf, (found) => found.length === 1, 60_000)
      expect(first).toHaveLength(1)
      await up(box, "two")
      // it became world two's database; another spare replaces it
      const next = await eventually(spareOf, (found) => found.length === 1 && found[0]![0] !== first[0]![0], 60_000)
      expect(next[0]![0]).not.toBe(first[0]![0])
      const two = (await envOf(box, "two")).DB_URL!
      expect(two.endsWith(`/${project}_two_db`)).toBe(true)
      expect(await rows(two, "select id from t")).toEqual([{ id: 1 }])
      // gc keeps the golden and its one spare
      const gc = JSON.parse((await box.run(["gc", "--dry-run", "--json"])).stdout) as { entries: Array<unknown> }
      expect(gc.entries).toEqual([])
    } finally {
      for (const world of ["one", "two"]) await box.run(["remove", world, "--force"])
      await box.run(["daemon", "stop"])
      for (const [name] of await databases(project)) await query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    }
  })
})
