/**
 * The README's first command ends in `examples/hello/demo.sh`: run here as a user runs it, with a BERTH_HOME and
 * proxy ports of its own, and every line it prints checked against what it must say.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { demoWork, expectDemoLines, runDemo } from "./demo-run.js"
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

describe("examples/hello/demo.sh", () => {
  it("brings up two worlds and shows each web talking to its own api, every line as it should be", async () => {
    // the daemon this BERTH_HOME gets leases from the sandbox's own block, as every other test's does
    mkdirSync(scratch, { recursive: true })
    const range = await runBerth(["port", "--range", `${from}-${to - 2}`], base, home, { env })
    expect(range.code, range.stderr).toBe(0)

    const r = await runDemo(join(repo, "examples/hello/demo.sh"), base, home, env)
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const work = demoWork(scratch)
    expect(work).toBeDefined()
    expectDemoLines(r.stdout, work!, home, to - 1, berthBin)

    // the line it gives to stop them works
    const stop = await runBerth(["down", "--all"], work!, home, { env })
    expect(stop.code, stop.stderr).toBe(0)
    expect(stop.stdout.split("\n").sort()).toEqual(["", "checkout-v2: stopped", "login-fix: stopped"])
  }, 120_000)
})
