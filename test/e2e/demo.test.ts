/**
 * The README's first command ends in `examples/hello/demo.sh`: run here as a user runs it, with a BERTH_HOME and
 * proxy ports of its own, and every line it prints checked against what it must say.
 */
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, killAll, portBlock, runBerth } from "./harness.js"

const repo = resolve(import.meta.dirname, "../..")
const base = mkdtempSync(join(tmpdir(), "berth-demo-"))
const home = join(base, "home")
/** the demo's scratch repository lands here (it makes it with mktemp under TMPDIR) */
const scratch = join(base, "tmp")
const block = portBlock()
const [from, to] = block.split("-").map(Number) as [number, number]
const env = { BERTH_PROXY_PORT: String(to - 1), BERTH_HTTPS_PORT: String(to), TMPDIR: scratch }

afterAll(async () => {
  // stop its worlds as the demo says to, then leave nothing behind
  for (const found of readdirSync(scratch)) {
    const work = join(scratch, found, "hello")
    await runBerth(["down", "--all"], work, home, { env }).catch(() => undefined)
  }
  killAll(home)
  rmSync(base, { recursive: true, force: true })
}, 60_000)

const demo = () =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((done, reject) => {
    const child = spawn(join(repo, "examples/hello/demo.sh"), [], {
      cwd: base,
      // without the tests' BERTH_YES: the demo gives its own consent, as a user's run needs it to
      env: { ...process.env, BERTH_HOME: home, NO_COLOR: "1", ...env, BERTH_YES: undefined },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString()
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`demo.sh timed out\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, 100_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      done({ code, stdout, stderr })
    })
  })

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

describe("examples/hello/demo.sh", () => {
  it("brings up two worlds and shows each web talking to its own api, every line as it should be", async () => {
    // the daemon this BERTH_HOME gets leases from the sandbox's own block, as every other test's does
    mkdirSync(scratch, { recursive: true })
    const range = await runBerth(["port", "--range", `${from}-${to - 2}`], base, home, { env })
    expect(range.code, range.stderr).toBe(0)

    const r = await demo()
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const [work] = readdirSync(scratch).map((found) => join(scratch, found, "hello"))
    const proxy = `:${to - 1}`
    const launcher = berthBin
    const world = (name: string, ident: string) => [
      new RegExp(`^${literal(name)}  running  ${literal(`${work}.worktrees/${name}`)}$`),
      new RegExp(`^  db   ready +file://${literal(home)}/slices/hello/hello_${ident}_db\\.sqlite$`),
      new RegExp(`^  api  healthy  pid \\d+ +:\\d+ +http://api\\.${literal(name)}\\.hello\\.localhost${proxy}$`),
      new RegExp(`^  web  healthy  pid \\d+ +:\\d+ +http://web\\.${literal(name)}\\.hello\\.localhost${proxy}$`),
      new RegExp(
        `^  worktree_created: branch ${literal(name)} made from the last commit of the main checkout \\(${literal(work!)}\\); what is not committed there is not carried$`
      )
    ]
    const said = (name: string, ident: string) =>
      new RegExp(
        `^${literal(`http://web.${name}.hello.localhost${proxy}`)} -> hello from ${literal(name)}; ` +
          `api says it serves world ${literal(name)} from database hello_${ident}_db\\.sqlite$`
      )
    const expected = [
      ...world("login-fix", "login_fix"),
      ...world("checkout-v2", "checkout_v2"),
      /^$/,
      said("login-fix", "login_fix"),
      said("checkout-v2", "checkout_v2"),
      /^$/,
      new RegExp(`^both worlds keep running\\. See them with: ${literal(launcher)} status$`),
      new RegExp(`^stop them with: +${literal(`(cd ${work} && ${launcher} down --all)`)}$`)
    ]
    const lines = r.stdout.split("\n")
    expect(lines.pop()).toBe("")
    expect(lines).toEqual(expected.map((line) => expect.stringMatching(line)))

    // the line it gives to stop them works
    const stop = await runBerth(["down", "--all"], work!, home, { env })
    expect(stop.code, stop.stderr).toBe(0)
    expect(stop.stdout.split("\n").sort()).toEqual(["", "checkout-v2: stopped", "login-fix: stopped"])
  }, 120_000)
})
