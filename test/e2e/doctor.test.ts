/** `berth doctor` through the built binary, against setups broken on purpose. */
import { chmodSync } from "node:fs"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { sandboxes } from "./harness.js"

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
    expect(byCheck(doc, "slice cache")).toMatchObject({ verdict: "fail", fix: "export NO_SUCH_REDIS_URL=…" })
    expect(byCheck(doc, "home")).toMatchObject({ verdict: "fail", fix: `chmod 700 ${box.home}` })
    chmodSync(box.home, 0o700)

    box.write("berth.toml", `[services.api]\ncmdd = "x"\n`)
    const broken = await box.run(["doctor"])
    expect(broken.code).toBe(1)
    expect(broken.stdout).toMatch(/^FAIL +config/m)
    expect(broken.stdout).toMatch(/fix: berth check lists every error with its line/)
    expect(broken.stdout.trimEnd()).toMatch(/\(exit 1\)$/)
  })
})
