/**
 * The holder (src/cluster/holder.ts), with real processes: a stand-in daemon (a Node process running `makeHolder`)
 * holds a service's process group; when the daemon is killed with SIGKILL, and nothing else is left to stop it, the
 * group ends; a group let go of, or a daemon that lives, leaves it running.
 */
import { execFileSync, spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { eventually, isAlive } from "../e2e/harness.js"

const root = join(import.meta.dirname, "..", "..")
const tsx = join(root, "node_modules", ".bin", "tsx")

/**
 * A stand-in daemon: starts a service group (`sleep`, and a child of it) detached as berth does, holds it (and lets
 * it go again if told), prints the group's pid, then waits to be killed.
 */
const daemon = (release: boolean) => {
  const script = `
import { spawn } from "node:child_process"
import { makeHolder } from ${JSON.stringify(join(root, "src/cluster/holder.ts"))}
const service = spawn("/bin/sh", ["-c", "sleep 300 & sleep 300"], { detached: true, stdio: "ignore" })
service.unref()
const holder = makeHolder({ graceMs: 200, env: { PATH: process.env.PATH ?? "" } })
holder.hold(service.pid)
${release ? "holder.release(service.pid)" : ""}
console.log(service.pid + " " + process.pid)
setInterval(() => {}, 1000)
`
  const child = spawn(tsx, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] })
  return new Promise<{ pid: number; pgid: number }>((resolve, reject) => {
    // tsx runs the script in a child of its own: the daemon is the process that prints
    child.stdout.once("data", (d: Buffer) => {
      const [pgid, pid] = String(d).trim().split(" ").map(Number)
      resolve({ pid: pid as number, pgid: pgid as number })
    })
    child.once("error", reject)
  })
}

const groupAlive = (pgid: number) => {
  try {
    process.kill(-pgid, 0)
    return execFileSync("ps", ["-o", "pid=,stat=", "-g", String(pgid)], { encoding: "utf8" })
      .split("\n")
      .some((l) => l.trim() !== "" && !l.trim().split(/\s+/)[1]?.startsWith("Z"))
  } catch {
    return false
  }
}

const killGroup = (pgid: number) => {
  try {
    process.kill(-pgid, "SIGKILL")
  } catch {
    // gone
  }
}

describe("the holder", () => {
  it("ends a held group once its daemon is killed", async () => {
    const { pid, pgid } = await daemon(false)
    try {
      // the holder runs on its own, out of the daemon's group and the service's
      await new Promise((r) => setTimeout(r, 500))
      expect(groupAlive(pgid)).toBe(true)
      process.kill(pid, "SIGKILL")
      expect(
        await eventually(
          async () => groupAlive(pgid),
          (alive) => !alive,
          10_000
        )
      ).toBe(false)
    } finally {
      killGroup(pgid)
    }
  }, 30_000)

  it("leaves a group it was told to let go of, and one whose daemon lives", async () => {
    const released = await daemon(true)
    const kept = await daemon(false)
    try {
      await new Promise((r) => setTimeout(r, 500))
      process.kill(released.pid, "SIGKILL")
      await new Promise((r) => setTimeout(r, 1_500))
      expect(groupAlive(released.pgid)).toBe(true)
      expect(groupAlive(kept.pgid)).toBe(true)
      expect(isAlive(kept.pid)).toBe(true)
    } finally {
      for (const d of [released, kept]) {
        killGroup(d.pgid)
        try {
          process.kill(d.pid, "SIGKILL")
        } catch {
          // gone
        }
      }
    }
  }, 30_000)
})
