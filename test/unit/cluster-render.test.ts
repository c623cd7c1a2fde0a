import { describe, expect, it } from "@effect/vitest"
import { renderCluster } from "../../src/cli/commands/cluster.js"
import type { ClusterStatus } from "../../src/daemon/api.js"

const machine = (name: string, room: ClusterStatus["machines"][number]["room"]): ClusterStatus["machines"][number] => ({
  name,
  slot: Number(name.slice(1)),
  address: `10.0.0.${name.slice(1)}`,
  runnerPort: 7357,
  proxyPort: 7358,
  version: "0.1.0",
  state: "up",
  lastSeenMs: 400,
  worlds: 2,
  self: name === "h1",
  room
})

describe("berth cluster status", () => {
  it("says of each machine whether it has room for a world that runs anywhere", () => {
    const text = renderCluster({
      state: "member",
      url: "postgres://berth@db/cluster",
      name: "h1",
      address: "10.0.0.1",
      runnerPort: 7357,
      slot: 1,
      error: null,
      machines: [
        machine("h1", { admits: true, running: 2, waiting: 0, draining: false }),
        machine("h2", { admits: false, running: 8, waiting: 3, draining: false }),
        machine("h3", { admits: false, running: 0, waiting: 0, draining: true }),
        machine("h4", null)
      ]
    })
    const line = (name: string) => text.split("\n").find((l) => l.slice(2).startsWith(`${name} `)) ?? ""
    expect(line("h1")).toContain("has room")
    expect(line("h1").startsWith("*")).toBe(true)
    expect(line("h2")).toContain("full, 3 waiting")
    expect(line("h3")).toContain("stopping")
    expect(line("h4")).toContain("room ?")
  })
})
