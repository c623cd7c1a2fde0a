import { describe, expect, it } from "@effect/vitest"
import type { ServiceStatus, WorldEvent, WorldStatus } from "../../src/daemon/api.js"
import { interruptedLine } from "../../src/cli/render.js"
import { onItsWay, waitingLine } from "../../src/mcp/progress.js"

const service = (name: string, kind: "process" | "slice", state: string): ServiceStatus => ({
  name,
  kind,
  state,
  pid: null,
  port: null,
  ports: {},
  url: null,
  restarts: 0,
  reason: null,
  logTail: [],
  command: null
})

const event = (service: string, kind: string, at: number): WorldEvent => ({ service, kind, message: kind, at })

const world = (over: Partial<WorldStatus>): WorldStatus => ({
  project: "shop",
  name: "one",
  slug: "one",
  path: "/w/one",
  branch: "one",
  main: false,
  desired: "up",
  state: "starting",
  reason: null,
  services: [],
  events: [],
  ...over
})

describe("what up says while it waits", () => {
  it("its place in line first", () => {
    expect(waitingLine(world({ state: "queued", queue: { position: 2, waitingFor: "a slot (2 of 2 running)" } }))).toBe(
      "one: #2 in line, waiting for a slot (2 of 2 running)"
    )
  })

  it("a golden being built, until it is ready", () => {
    const building = world({
      services: [service("db", "slice", "provisioning"), service("api", "process", "pending")],
      events: [event("db", "golden_build", 2), event("db", "golden_ready", 1), event("db", "golden_build", 0)]
    })
    expect(waitingLine(building)).toBe("one: starting; building the golden of db")
    const built = world({
      services: [service("db", "slice", "provisioning"), service("api", "process", "pending")],
      events: [event("db", "golden_ready", 3), event("db", "golden_build", 2)]
    })
    expect(waitingLine(built)).toBe("one: starting; waiting for db (provisioning), api (pending)")
  })

  it("the project's setup while it runs, with the last line it printed", () => {
    const running = world({
      services: [service("api", "process", "pending")],
      events: [event("setup", "setup_start", 1)],
      setupTail: "added 212 packages"
    })
    expect(waitingLine(running)).toBe("one: starting; running setup: added 212 packages")
    const done = world({
      services: [service("api", "process", "pending")],
      events: [event("setup", "setup_done", 2), event("setup", "setup_start", 1)]
    })
    expect(waitingLine(done)).toBe("one: starting; waiting for api (pending)")
  })

  it("the services not ready yet, then the state alone", () => {
    const w = world({ services: [service("db", "slice", "ready"), service("api", "process", "starting")] })
    expect(waitingLine(w)).toBe("one: starting; waiting for api (starting)")
    expect(waitingLine(world({ state: "running", services: [service("api", "process", "healthy")] }))).toBe(
      "one: running"
    )
  })
})

describe("what a Ctrl-C of up leaves behind", () => {
  it("says a queued world leaves the line, a starting one keeps starting, a running one runs", () => {
    expect(interruptedLine(world({ state: "queued", queue: { position: 1, waitingFor: "a slot" } }))).toBe(
      "berth: stopped waiting; one is taken out of the line (berth up one puts it back)"
    )
    expect(interruptedLine(world({ state: "starting" }))).toBe(
      "berth: stopped waiting; one keeps starting in the daemon (berth status shows it, berth down one stops it)"
    )
    expect(interruptedLine(world({ state: "running" }))).toBe("berth: stopped waiting; one is running")
    expect(interruptedLine(undefined)).toMatch(/berth status shows it/)
  })
})

describe("which worlds a waiting tool reports on", () => {
  it("one in line or starting; never one stopping, stopped or running still", () => {
    expect(onItsWay(world({ state: "starting" }))).toBe(true)
    expect(onItsWay(world({ state: "queued" }))).toBe(true)
    expect(onItsWay(world({ state: "suspended", queue: { position: 1, waitingFor: "memory" } }))).toBe(true)
    for (const state of ["stopped", "stopping", "running", "failed", "suspended"]) {
      expect(onItsWay(world({ state })), state).toBe(false)
    }
  })
})
