import { describe, expect, it } from "@effect/vitest"
import { type FenceLease, leaseLets, watchStep } from "../../src/domain/fence.js"
import { fenceGroups } from "../../src/cluster/watchdogFence.js"

/**
 * A daemon frozen past its lease thaws: its hold is renewed, the lease file too, and it starts its copy again — while
 * its watchdog, which read the stale lease a moment before, is looking the machine's processes up. The new copy must
 * not be stopped as a fenced one (test/cluster/faults.test.ts once saw it killed right after its health check passed).
 */
const serves = { daemon: 100, session: "s1" }
const lease = (until: number): FenceLease => ({ ...serves, until, worlds: [7], home: "/h", done: false })

const recorder = (current: { lease: FenceLease }, found: ReadonlyArray<number>, onLook: () => void = () => {}) => {
  const signals: Array<string> = []
  return {
    signals,
    io: {
      lease: () => current.lease,
      groups: () => {
        onLook()
        return found
      },
      signal: (pgid: number, signal: NodeJS.Signals) => void signals.push(`${signal} ${pgid}`),
      sleep: async () => {},
      daemonAlive: () => true,
      now: () => 1_000
    }
  }
}

describe("one fence of the watchdog", () => {
  it("stops the groups of a lease that stays run out", async () => {
    const current = { lease: lease(900) }
    const step = watchStep({ lease: current.lease, serves, daemonAlive: true, now: 1_000 })
    expect(step._tag).toBe("Fence")
    if (step._tag !== "Fence") return
    const { io, signals } = recorder(current, [41])
    expect(await fenceGroups(step, serves, io)).toEqual([41])
    expect(signals).toEqual(["SIGTERM 41", "SIGKILL 41"])
  })

  it("stops nothing when the lease is renewed while it looks the processes up: what it found may be a new copy", async () => {
    const current = { lease: lease(900) }
    const step = watchStep({ lease: current.lease, serves, daemonAlive: true, now: 1_000 })
    if (step._tag !== "Fence") throw new Error("expected a fence")
    // the daemon thaws during the look-up: it renews the lease, then starts the copy the look-up finds
    const { io, signals } = recorder(current, [42], () => {
      current.lease = lease(5_000)
    })
    expect(await fenceGroups(step, serves, io)).toEqual([])
    expect(signals).toEqual([])
  })

  it("lets a start through only on a lease of this daemon that is good now and not let go", () => {
    expect(leaseLets(lease(5_000), 100, 1_000)).toBe(true)
    expect(leaseLets(lease(900), 100, 1_000)).toBe(false)
    expect(leaseLets(lease(5_000), 101, 1_000)).toBe(false)
    expect(leaseLets({ ...lease(5_000), done: true }, 100, 1_000)).toBe(false)
    expect(leaseLets(undefined, 100, 1_000)).toBe(false)
  })
})
