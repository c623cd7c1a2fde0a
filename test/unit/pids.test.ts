/**
 * `pidAlive`: what the CLI waits on while a daemon stops, and the fence's watchdog reads of its daemon. A zombie has
 * ended (it runs nothing and holds no file, the daemon's lock and socket included) though `kill 0` still reaches it
 * until its parent reaps it, which under some inits (a container's or a VM's) takes seconds.
 */
import { spawn } from "node:child_process"
import { describe, expect, it } from "@effect/vitest"
import { pidAlive } from "../../src/services/pids.js"

const until = async (check: () => boolean, ms: number) => {
  const deadline = Date.now() + ms
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
  return check()
}

describe("pidAlive", () => {
  it("is true for a running process, false for one that ended, even while nobody has reaped it", async () => {
    expect(pidAlive(process.pid)).toBe(true)
    // the short sleep's parent execs a long one, which never reaps it: once it ends, it stays a zombie
    const parent = spawn("sh", ["-c", "sleep 0.2 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] })
    try {
      const child = await new Promise<number>((resolve) =>
        parent.stdout.once("data", (d) => resolve(Number(String(d))))
      )
      expect(pidAlive(child)).toBe(true)
      expect(await until(() => !pidAlive(child), 5_000)).toBe(true)
      // still there as a zombie: kill 0 reaches it
      expect(() => process.kill(child, 0)).not.toThrow()
      expect(pidAlive(parent.pid ?? 0)).toBe(true)
    } finally {
      parent.kill("SIGKILL")
    }
  })
})
