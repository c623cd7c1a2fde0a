/**
 * One daemon per BERTH_HOME, even when several start at once after a crash (found by the chaos run: six commands
 * racing to start a daemon after kill -9 left two daemons, which both adopted the same world). Each round, several
 * processes take the lock at the same moment over a pid file a killed daemon left; exactly one may get it.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { describe, expect, it } from "@effect/vitest"

const lockModule = resolve(import.meta.dirname, "../../src/daemon/lock.ts")
const tsx = resolve(import.meta.dirname, "../../node_modules/.bin/tsx")

/**
 * A process that waits for `go`, takes the lock and says what it got, then holds it until `end` (so that a later
 * starter cannot take a lock merely released: every contender answers while the winner still holds it).
 */
const contender = (pidFile: string, go: string, end: string) => {
  const script = `
    import { existsSync } from "node:fs"
    import { acquireLock } from ${JSON.stringify(lockModule)}
    const until = async (file) => { while (!existsSync(file)) await new Promise((r) => setTimeout(r, 2)) }
    await until(${JSON.stringify(go)})
    const got = await acquireLock(${JSON.stringify(pidFile)})
    process.stdout.write(got._tag)
    await until(${JSON.stringify(end)})
    if (got._tag === "Acquired") got.release()
  `
  const child = spawn(tsx, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] })
  let out = ""
  const answered = new Promise<string>((done, fail) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString()
      done(out)
    })
    child.on("error", fail)
    child.on("close", () => done(out))
  })
  const exited = new Promise<void>((done) => child.on("close", () => done()))
  return { answered, exited }
}

describe("the daemon lock", () => {
  it("goes to exactly one of several daemons starting at once over a stale pid file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "berth-lock-"))
    try {
      for (let round = 0; round < 3; round++) {
        const pidFile = join(dir, `daemon-${round}.pid`)
        const go = join(dir, `go-${round}`)
        const end = join(dir, `end-${round}`)
        // a daemon killed with -9 left its pid file: that pid is gone
        writeFileSync(pidFile, "999999999 12345\n")
        const contenders = Array.from({ length: 6 }, () => contender(pidFile, go, end))
        await new Promise((r) => setTimeout(r, 1_500))
        writeFileSync(go, "")
        const got = await Promise.all(contenders.map((c) => c.answered))
        writeFileSync(end, "")
        await Promise.all(contenders.map((c) => c.exited))
        expect(
          got.filter((g) => g === "Acquired"),
          `round ${round}: ${got.join(", ")}`
        ).toHaveLength(1)
        expect(got.filter((g) => g === "Held")).toHaveLength(5)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
