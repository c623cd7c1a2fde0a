import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { pgQuery } from "./pg.js"
import { fetchJson, sandboxes, varsFrom, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const adminUrl = process.env.POSTGRES_ADMIN_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

const query = pgQuery

const withDatabase = (url: string, database: string) => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

describe("berth init from another tool's config", () => {
  it("converts an .isola.toml that berth check accepts and berth up runs, the database copied from isola's template", async () => {
    const tag = `${process.pid}x${Date.now() % 100000}`
    const project = `isola${tag}`
    const template = `tmpl_${tag}`
    await query(`CREATE DATABASE "${template}"`)
    await query(
      "CREATE TABLE greetings (text text); INSERT INTO greetings VALUES ('from the template')",
      withDatabase(adminUrl, template)
    )
    const box = await boxes.project({
      ".isola.toml": `# the project's isola config
project = "${project}"

[services.api]
command = "node server.mjs"
port_range = { min = 3100, max = 3199 }
proxy_port = 3000

[services.api.env]
DATABASE_URL = "\${accessories.db.url}"
GREETING = "\${HELLO}"
BRANCH = "\${ISOLA_BRANCH}"

[accessories.db]
kind = "postgres"
server_url = "${adminUrl}"
clone_from = "${template}"
name = "${project}_\${ISOLA_BRANCH_SLUG}"
`
    })
    const env = { HELLO: "hello from the shell" }
    try {
      const init = await box.run(["init"])
      expect(init.code, init.stderr).toBe(0)
      expect(init.stdout).toContain("wrote berth.toml from .isola.toml: 1 process, 1 slice")
      // what does not carry over is said, with isola's line
      expect(init.stdout).toContain(
        `note: .isola.toml:18: accessories.db.name = "${project}_\${ISOLA_BRANCH_SLUG}": berth names each world's slice itself`
      )
      expect(init.stdout).toContain("`berth port --range 3100-3199` takes the same")
      // … and written above its spot in berth.toml
      const written = readFileSync(join(box.dir, "berth.toml"), "utf8")
      expect(written).toMatch(/# \.isola\.toml:18: accessories\.db\.name = .*\n\[services\.db\]\n/)

      const check = await box.run(["check"], { env })
      expect(check).toMatchObject({ code: 0, stdout: "berth.toml: valid (2 services)\n", stderr: "" })

      const up = await box.run(["up", "--json"], { env, timeoutMs: 90_000 })
      expect(up.code, up.stderr).toBe(0)
      const world = worldFrom(up.stdout)
      expect(world.state).toBe("running")
      const vars = varsFrom((await box.run(["env", "--json"])).stdout)
      expect(vars.DB_URL).toMatch(new RegExp(`/${project}_main_db$`))
      // the world's database is a copy of isola's template
      expect(await query("SELECT text FROM greetings", vars.DB_URL)).toEqual([{ text: "from the template" }])
      const api = world.services.find((s) => s.name === "api")!
      const seen = (await fetchJson(api.url!)) as { env: Record<string, string> }
      expect(seen.env.DATABASE_URL).toBe(vars.DB_URL)
      expect(seen.env.GREETING).toBe("hello from the shell")
      expect(seen.env.BRANCH).toBe("main")
    } finally {
      await box.run(["down"])
      await box.run(["daemon", "stop"])
      const left = await query(`SELECT datname FROM pg_database WHERE strpos(datname, '${tag}') > 0`)
      for (const row of left) await query(`DROP DATABASE IF EXISTS "${String(row.datname)}" WITH (FORCE)`)
    }
    // a golden built by dump and restore, then copied: room on a busy machine
  }, 180_000)
})
