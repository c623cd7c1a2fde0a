import { afterAll, describe, expect, it } from "@effect/vitest"
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { formatLease } from "../../src/domain/fence.js"
import { homePaths } from "../../src/services/homePaths.js"

/**
 * The fence's watchdog finds the processes to stop by their marks, read through the Platform's plain reads
 * (platformProc.ts on Linux): a lease run out stops the marked groups of its worlds of its home, and no other.
 */

const repo = path.resolve(import.meta.dirname, "../..")
const home = fs.mkdtempSync(path.join(os.tmpdir(), "berth-watchdog-"))
const groups: Array<number> = []

afterAll(() => {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, "SIGKILL")
    } catch {
      // gone
    }
  }
  fs.rmSync(home, { recursive: true, force: true })
})

/** A `sleep` in a group of its own, carrying `mark` in its environment. */
const marked = (mark: string): number => {
  const child = childProcess.spawn("sleep", ["1000"], {
    detached: true,
    stdio: "ignore",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", BERTH_MARK: mark }
  })
  child.unref()
  if (child.pid === undefined) throw new Error("sleep did not start")
  groups.push(child.pid)
  return child.pid
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  // a zombie is not alive: ours are reaped by this process once they die, so wait on the exit instead
  return !childProcess
    .execFileSync("ps", ["-o", "stat=", "-p", String(pid)], { encoding: "utf8" })
    .trim()
    .startsWith("Z")
}

describe("the fence's watchdog", () => {
  it("stops the marked groups of its worlds of its home once the lease has run out, and nothing else", async () => {
    const fenced = marked(`life1 7 web ${home}`)
    const otherWorld = marked(`life2 8 web ${home}`)
    const otherHome = marked(`life3 7 web ${home}-elsewhere`)
    // a daemon that is gone: the watchdog fences once, then leaves
    const gone = childProcess.spawnSync("true").pid
    fs.writeFileSync(
      homePaths(home).fenceFile,
      formatLease({ daemon: gone, session: "s1", until: Date.now() - 1, worlds: [7], home, done: false })
    )
    const watchdog = childProcess.spawnSync(
      process.execPath,
      ["--import", "tsx", "src/cluster/watchdog.ts", home, String(gone), "s1"],
      { cwd: repo, encoding: "utf8", timeout: 60_000 }
    )
    expect(watchdog.status, watchdog.stderr).toBe(0)
    const deadline = Date.now() + 5_000
    while (alive(fenced) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(alive(fenced)).toBe(false)
    expect(alive(otherWorld)).toBe(true)
    expect(alive(otherHome)).toBe(true)
    expect(fs.readFileSync(homePaths(home).daemonLog, "utf8")).toContain(`(groups ${fenced})`)
  }, 90_000)
})
