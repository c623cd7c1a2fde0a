/**
 * A chatty service on a small disk (BERTH_HOME on an 8 MB tmpfs), through the built binary: the log budget keeps its
 * logs to their share of the disk, so the disk never fills, the daemon keeps serving, and the world stops when asked.
 */
import { statfsSync } from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { eventually, isAlive, processesOf } from "./harness.js"
import { fillDisk, freeDisk, smallDisk } from "./tmpfs.js"

/** writes about 800 KB a second, without pause, and is started again whenever it ends */
const chatty = `const line = "x".repeat(1023) + "\\n"
setInterval(() => process.stdout.write(line.repeat(16)), 20)
`

const disk = smallDisk({
  "chatty.mjs": chatty,
  "berth.toml": `[services.chatty]\ncmd = "node chatty.mjs"\nrestart = "always"\n`
})

const freeBytes = () => {
  const s = statfsSync(disk.box.home)
  return s.bavail * s.bsize
}

describe("a chatty service on a small disk", () => {
  it("never fills it: its logs stay within their budget, and the world stops when asked", async (ctx) => {
    if (disk.skipped !== undefined) return ctx.skip(disk.skipped)
    const up = await disk.box.run(["up", "--yes"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    // 12 s of output is about 10 MB, more than the disk holds
    let least = freeBytes()
    const until = Date.now() + 12_000
    while (Date.now() < until) {
      least = Math.min(least, freeBytes())
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(least).toBeGreaterThan(2 * 1024 * 1024)
    const status = await disk.box.run(["status", "--json"])
    expect(status.code, status.stderr).toBe(0)
    const logs = await disk.box.run(["logs", "-s", "chatty", "-n", "1"])
    expect(logs.code, logs.stderr).toBe(0)
    const down = await disk.box.run(["down"], { timeoutMs: 60_000 })
    expect(down.code, down.stderr).toBe(0)
    const stopped = await eventually(
      async () => (await disk.box.run(["status", "--json"])).stdout,
      (out) => out.includes('"state": "stopped"')
    )
    expect(stopped).toContain('"state": "stopped"')
  }, 90_000)
})

describe("a world whose daemon cannot start", () => {
  it("is stopped by down all the same, from its processes' marks", async (ctx) => {
    if (disk.skipped !== undefined) return ctx.skip(disk.skipped)
    // a quiet service: one that writes would die of the full disk by itself
    disk.box.write("berth.toml", `[services.quiet]\ncmd = "sleep 600"\nrestart = "always"\n`)
    disk.box.git("commit", "-qam", "quiet")
    const up = await disk.box.run(["up", "--yes"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const status = await disk.box.run(["daemon", "status", "--json"])
    const daemon = (JSON.parse(status.stdout) as { pid: number }).pid
    fillDisk(disk.box.home)
    try {
      process.kill(daemon, "SIGKILL")
      while (isAlive(daemon)) await new Promise((r) => setTimeout(r, 20))
      expect(processesOf(disk.box.home).length).toBeGreaterThan(0)
      const down = await disk.box.run(["down", "--all", "--json"], { timeoutMs: 60_000 })
      const worlds = (JSON.parse(down.stdout) as { worlds: ReadonlyArray<{ name: string; state: string }> }).worlds
      expect(worlds.map((w) => `${w.name} ${w.state}`)).toEqual(["main stopped"])
      expect(processesOf(disk.box.home)).toEqual([])
      // the world could not be recorded down on a full disk: it says so, and that the next daemon starts it again
      expect(down.code).toBe(1)
      expect(down.stderr).toContain("not recorded down: the next daemon starts it again")
      expect(down.stderr).toContain('"tag":"DiskFull"')
    } finally {
      freeDisk(disk.box.home)
    }
    const again = await disk.box.run(["down"], { timeoutMs: 60_000 })
    expect(again.code, again.stderr).toBe(0)
  }, 90_000)
})
