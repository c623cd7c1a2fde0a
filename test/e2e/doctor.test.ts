/** `berth doctor` through the built binary, against setups broken on purpose. */
import { spawn } from "node:child_process"
import { chmodSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { eventually, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

interface Doc {
  readonly schema: number
  readonly ok: boolean
  readonly findings: ReadonlyArray<{ check: string; verdict: string; detail: string; fix?: string }>
}

const byCheck = (doc: Doc, check: string) => doc.findings.find((f) => f.check === check)

describe("berth doctor", () => {
  it("finds nothing broken in a working project, and names the daemon it runs", async () => {
    const box = await boxes.project({ "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\n` })
    const r = await box.run(["doctor", "--json"])
    expect(r.code, r.stdout + r.stderr).toBe(0)
    const doc = JSON.parse(r.stdout) as Doc
    expect(doc).toMatchObject({ schema: 1, ok: true })
    expect(byCheck(doc, "git")?.verdict).toBe("ok")
    expect(byCheck(doc, "config")).toMatchObject({ verdict: "ok" })
    expect(byCheck(doc, "daemon")?.detail).toMatch(/^running, pid \d+/)
    expect(byCheck(doc, "home")?.detail).toMatch(/owner-only/)
    const plain = await box.run(["doctor"])
    expect(plain.stdout).toMatch(/^ok +git +git version/m)
  })

  it("fails on a server a slice names that does not answer, an unreadable config, and a home others can read", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.db]\nadapter = "postgres"\nadmin_url = "postgres://postgres@127.0.0.1:1/postgres"\n\n[services.cache]\nadapter = "redis"\nadmin_url = "\${env.NO_SUCH_REDIS_URL}"\n`
    })
    chmodSync(box.home, 0o755)
    const r = await box.run(["doctor", "--json"])
    expect(r.code).toBe(1)
    const doc = JSON.parse(r.stdout) as Doc
    expect(doc.ok).toBe(false)
    expect(byCheck(doc, "slice db")).toMatchObject({
      verdict: "fail",
      detail: expect.stringMatching(/127\.0\.0\.1:1 does not answer/)
    })
    expect(byCheck(doc, "slice cache")).toMatchObject({
      verdict: "fail",
      fix: "set NO_SUCH_REDIS_URL in .env (or export it)"
    })
    expect(byCheck(doc, "home")).toMatchObject({ verdict: "fail", fix: `chmod 700 ${box.home}` })
    chmodSync(box.home, 0o700)

    box.write("berth.toml", `[services.api]\ncmdd = "x"\n`)
    const broken = await box.run(["doctor"])
    expect(broken.code).toBe(1)
    expect(broken.stdout).toMatch(/^FAIL +config/m)
    expect(broken.stdout).toMatch(/fix: berth check lists every error with its line/)
    expect(broken.stdout.trimEnd()).toMatch(/\(exit 1\)$/)
  })

  it("names a leased port another process holds, processes of a world berth does not track, and a broken state database", async () => {
    const box = await boxes.project({
      "berth.toml": `[project]\nname = "doc"\n\n[services.api]\ncmd = "node server.mjs"\nurl = "api"\n`
    })
    const up = await box.run(["up", "--json"])
    expect(up.code, up.stderr).toBe(0)
    const port = (JSON.parse(up.stdout) as { world: { services: Array<{ port: number }> } }).world.services[0]!.port
    expect((await box.run(["down"])).code).toBe(0)
    // something else takes the world's port while it is down, and a process carries its environment untracked
    const squatter = spawn(process.execPath, ["-e", `require("http").createServer().listen(${port}, "127.0.0.1")`], {
      stdio: "ignore"
    })
    const stray = spawn("sleep", ["60"], {
      detached: true,
      stdio: "ignore",
      env: { ...process.env, BERTH_HOME: box.home, BERTH_PROJECT: "doc", BERTH_WORLD: "main", BERTH_SERVICE: "api" }
    })
    try {
      await eventually(
        () => box.run(["doctor", "--json"]),
        (r) => (JSON.parse(r.stdout) as Doc).findings.some((f) => f.check === "leased ports")
      )
      const r = await box.run(["doctor", "--json"])
      expect(r.code).toBe(1)
      const doc = JSON.parse(r.stdout) as Doc
      expect(byCheck(doc, "leased ports")).toMatchObject({
        verdict: "fail",
        detail: `${port} (leased to doc/main api) is held by node (pid ${squatter.pid})`
      })
      expect(byCheck(doc, "stale processes")).toMatchObject({ verdict: "warn", fix: `kill -TERM -${stray.pid}` })
      expect(byCheck(doc, "state")).toMatchObject({
        verdict: "ok",
        detail: expect.stringMatching(/intact, schema \d+/)
      })
      expect(byCheck(doc, "port range")?.verdict).toBe("ok")
    } finally {
      squatter.kill("SIGKILL")
      stray.kill("SIGKILL")
    }

    const plain = boxes.plain({ "berth.toml": `[services.api]\ncmd = "node server.mjs"\n` })
    mkdirSync(plain.home, { recursive: true, mode: 0o700 })
    writeFileSync(join(plain.home, "state.db"), "not a database at all, but long enough to have a header of sorts")
    const broken = await plain.run(["doctor", "--json"])
    expect(broken.code).toBe(1)
    expect(byCheck(JSON.parse(broken.stdout) as Doc, "state")).toMatchObject({
      verdict: "fail",
      detail: expect.stringMatching(/state\.db cannot be read: file is not a database/)
    })
  })

  it("reads the project's .env as up does (the main checkout's, overlaid by the worktree's) and checks the server it names", async () => {
    const toml = `[services.db]\nadapter = "postgres"\nadmin_url = "\${env.DOCTOR_TEST_ADMIN_URL}"\n`
    const box = boxes.plain({ "berth.toml": toml, ".gitignore": ".env\n" })
    // where init tells users to put it: the main checkout's .env, which git never carries to a worktree
    box.write(".env", "DOCTOR_TEST_ADMIN_URL=postgres://postgres@127.0.0.1:5432/postgres\n")
    const doctor = async (cwd: string) => {
      const r = await box.run(["doctor", "--json"], { cwd })
      return { code: r.code, slice: byCheck(JSON.parse(r.stdout) as Doc, "slice db") }
    }
    expect(await doctor(box.dir)).toMatchObject({
      slice: { verdict: "ok", detail: "postgres server at 127.0.0.1:5432 answers" }
    })

    const worktree = join(box.dir, "..", "app.worktrees", "feature")
    box.git("worktree", "add", "-q", "-b", "feature", worktree)
    expect(await doctor(worktree)).toMatchObject({
      slice: { verdict: "ok", detail: "postgres server at 127.0.0.1:5432 answers" }
    })
    // the worktree's own .env wins, and the server it names is tried
    writeFileSync(join(worktree, ".env"), "DOCTOR_TEST_ADMIN_URL=postgres://postgres@127.0.0.1:1/postgres\n")
    expect(await doctor(worktree)).toMatchObject({
      code: 1,
      slice: { verdict: "fail", detail: expect.stringMatching(/^postgres server at 127\.0\.0\.1:1 does not answer/) }
    })
    // the environment wins over both, as it does for up
    const r = await box.run(["doctor", "--json"], {
      cwd: worktree,
      env: { DOCTOR_TEST_ADMIN_URL: "postgres://postgres@127.0.0.1:5432/postgres" }
    })
    expect(byCheck(JSON.parse(r.stdout) as Doc, "slice db")?.verdict).toBe("ok")
  })
})
