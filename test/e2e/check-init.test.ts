import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { runBerth, type Sandbox, sandbox } from "./harness.js"

const boxes: Array<Sandbox> = []
const box = (files: Record<string, string> = {}) => {
  const b = sandbox(files)
  boxes.push(b)
  return b
}
afterAll(() => {
  for (const b of boxes) b.cleanup()
})

const fixtures = resolve(import.meta.dirname, "../fixtures/compose")

interface JsonDiagnostic {
  readonly file: string
  readonly line: number
  readonly column: number
  readonly path: string
  readonly message: string
}

describe("berth check", () => {
  it("accepts a valid file and says so", async () => {
    const b = box({ "berth.toml": `[services.api]\ncmd = "node api.js"\nurl = "api"\n` })
    const r = await b.run(["check"])
    expect(r).toMatchObject({ code: 0, stdout: "berth.toml: valid (1 service)\n", stderr: "" })
  })

  it("finds berth.toml from a subfolder", async () => {
    const b = box({ "berth.toml": `[services.api]\ncmd = "x"\n`, "src/deep/file.txt": "" })
    const r = await b.run(["check"], { cwd: join(b.dir, "src/deep") })
    expect(r.code).toBe(0)
  })

  it("reports every error with file, line, column, key path and hint, and exits 1", async () => {
    const b = box({
      "berth.toml": `[services.web]\ncmd = "x"\ndepends_on = ["api", "dbb"]\n\n[services.api]\ncmd = "y"\nrestart = "allways"\n\n[services.db]\nadapter = "postgres"\n`
    })
    const r = await b.run(["check"])
    expect(r.code).toBe(1)
    expect(r.stdout).toBe("")
    expect(r.stderr).toContain(
      'berth.toml:3:22: error: "dbb" is not a service in this file (services.web.depends_on[1])\n  hint: did you mean "db"?'
    )
    expect(r.stderr).toContain(
      'berth.toml:7:1: error: expected one of "no", "on-failure", "always", got "allways" (services.api.restart)\n  hint: did you mean "always"?'
    )
    expect(r.stderr).toContain("berth.toml: 2 errors")
  })

  it("prints errors and warnings as JSON", async () => {
    const b = box({ "berth.toml": `[services.worker]\ncmd = "node w.js --port \${self.port}"\n` })
    const ok = await b.run(["check", "--json"])
    expect(ok.code).toBe(0)
    const report = JSON.parse(ok.stdout) as { errors: Array<JsonDiagnostic>; warnings: Array<JsonDiagnostic> }
    expect(report.errors).toEqual([])
    expect(report.warnings).toHaveLength(1)
    expect(report.warnings[0]).toMatchObject({ file: "berth.toml", line: 2, column: 25, path: "services.worker.cmd" })

    b.write("berth.toml", `[services.worker]\ncmdd = "x"\n`)
    const bad = await b.run(["check", "--json"])
    expect(bad.code).toBe(1)
    const errors = (JSON.parse(bad.stdout) as { errors: Array<JsonDiagnostic> }).errors
    expect(errors.map((e) => [e.line, e.path])).toEqual([
      [1, "services.worker.cmd"],
      [2, "services.worker.cmdd"]
    ])
  })

  it("warns about an env_file outside the worktree (not [agents] verify: berth verify runs it), and says when there are no services", async () => {
    const b = box({
      "berth.toml": `[services.api]\ncmd = "node api.js"\nenv_file = "../.env.api"\n\n[agents]\nverify = ["npm test"]\n`
    })
    const r = await b.run(["check"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe("berth.toml: valid (1 service, 1 warning)\n")
    expect(r.stderr).toContain(
      `berth.toml:3:1: warning: env_file "../.env.api" is outside the worktree; berth up will refuse to start "api" (services.api.env_file)\n  hint: `
    )
    expect(r.stderr).not.toContain("agents.verify")

    b.write("berth.toml", `[project]\nname = "nothing"\n`)
    const empty = await b.run(["check"])
    expect(empty.code, empty.stderr).toBe(0)
    expect(empty.stdout).toBe("berth.toml: valid (0 services, 1 warning)\n")
    expect(empty.stderr).toMatch(
      /^berth\.toml:1:1: warning: this file defines no services: berth up would start nothing\n {2}hint: /
    )
  })

  it("explains a TOML syntax error at its position", async () => {
    const b = box({ "berth.toml": `[services.api]\ncmd = "unterminated\n` })
    const r = await b.run(["check"])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^berth\.toml:2:\d+: error: invalid TOML/)
  })
})

describe("berth init", () => {
  const cases = readdirSync(fixtures)
  it.each(cases)("turns the %s compose file into a berth.toml that passes check", async (name) => {
    const files: Record<string, string> = {}
    for (const file of readdirSync(join(fixtures, name))) files[file] = readFileSync(join(fixtures, name, file), "utf8")
    const b = box(files)
    const r = await b.run(["init", "--json"])
    expect(r.code, r.stderr).toBe(0)
    const written = readFileSync(join(b.dir, "berth.toml"), "utf8")
    const check = await b.run(["check", "--json"])
    expect(check.code, check.stdout).toBe(0)
    expect((JSON.parse(check.stdout) as { errors: Array<unknown> }).errors).toEqual([])
    // no secret from the compose file or .env is written inline
    for (const secret of ["pgS3cret-web", "S3cret", "hunter2"]) expect(written).not.toContain(secret)
  })

  it("refuses to overwrite without --force", async () => {
    const b = box({ "berth.toml": "# mine\n", "package.json": `{"scripts":{"dev":"vite"}}` })
    const refused = await b.run(["init"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/berth\.toml already exists/)
    expect(refused.stderr).toMatch(/--force/)
    expect(readFileSync(join(b.dir, "berth.toml"), "utf8")).toBe("# mine\n")
    const forced = await b.run(["init", "--force"])
    expect(forced.code).toBe(0)
    expect(readFileSync(join(b.dir, "berth.toml"), "utf8")).toContain("[services.web]")
  })

  it("writes a minimal config from package.json when there is no compose file", async () => {
    const b = box({ "package.json": `{"name":"x","scripts":{"dev":"node server.js"}}`, "package-lock.json": "{}" })
    const r = await b.run(["init"])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^wrote berth\.toml from package\.json/)
    expect(r.stderr).toBe("")
    const written = readFileSync(join(b.dir, "berth.toml"), "utf8")
    expect(written).toContain('setup = "npm ci"')
    expect(written).toContain('cmd = "npm run dev"')
    expect((await b.run(["check"])).code).toBe(0)
  })

  it("says it wrote a template when there is no package.json, and warns on stderr outside a git repository", async () => {
    const base = mkdtempSync(join(tmpdir(), "berth-init-"))
    try {
      const dir = join(base, "plain")
      mkdirSync(dir)
      const r = await runBerth(["init"], dir, join(base, "home"))
      expect(r.code, r.stderr).toBe(0)
      expect(r.stdout.split("\n")[0]).toBe(
        "wrote berth.toml from a template (no compose file or package.json here): 1 process, 0 slices"
      )
      expect(r.stdout).not.toContain("from package.json")
      expect(r.stderr).toBe(
        `warning: ${dir} is not in a git repository, and berth's worlds are its worktrees: run git init and commit before berth up\n`
      )
      const json = await runBerth(["init", "--force", "--json"], dir, join(base, "home"))
      expect(JSON.parse(json.stdout)).toMatchObject({ source: "template" })
      expect(json.stderr).toContain("is not in a git repository")
    } finally {
      rmSync(base, { recursive: true, force: true })
    }
  })

  it("writes a setup that installs each sub-package, and a service per package run in its folder", async () => {
    const scripts = (dev: string) => JSON.stringify({ name: "x", scripts: { dev } })
    const b = box({
      "api/package.json": scripts("node api.js"),
      "api/package-lock.json": "{}",
      "web/package.json": scripts("node web.js"),
      "web/pnpm-lock.yaml": "",
      "docs/readme.md": "no package here\n"
    })
    const r = await b.run(["init"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.split("\n")[0]).toBe(
      "wrote berth.toml from api/package.json, web/package.json: 2 processes, 0 slices"
    )
    const written = readFileSync(join(b.dir, "berth.toml"), "utf8")
    expect(written).toContain('setup = "(cd api && npm ci) && (cd web && pnpm install --frozen-lockfile)"')
    expect(written).toContain('[services.api]\ncmd = "npm run dev"\ndir = "api"\nurl = "api"')
    expect(written).toContain('[services.web]\ncmd = "pnpm run dev"\ndir = "web"\nurl = "web"')
    expect((await b.run(["check"])).code).toBe(0)
    const json = await b.run(["init", "--force", "--json"])
    expect(JSON.parse(json.stdout)).toMatchObject({ source: "api/package.json, web/package.json" })
  })

  it("names the compose file and line when it is not valid YAML", async () => {
    const b = box({ "compose.yaml": "services:\n  web:\n    image: [unclosed\n" })
    const r = await b.run(["init"])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/compose\.yaml:\d+/)
  })
})
