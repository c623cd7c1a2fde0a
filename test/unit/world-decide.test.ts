import { describe, expect, it } from "@effect/vitest"
import { decide, type WorldFacts } from "../../src/domain/world-state.js"

const facts = (f: Partial<WorldFacts>): WorldFacts => ({
  desired: "up",
  observed: "running",
  isMain: false,
  pathExists: true,
  worktreeReady: true,
  hasActor: false,
  liveProcesses: 0,
  recorded: true,
  wakesOnRequest: false,
  runsAnywhere: false,
  ...f
})

describe("decide", () => {
  it.each<[string, Partial<WorldFacts>, ReturnType<typeof decide>]>([
    ["a running world after a daemon restart is adopted", {}, "adopt"],
    ["a world whose processes died while no daemon ran is adopted (restarted)", { liveProcesses: 0 }, "adopt"],
    ["a world an actor already runs is left alone", { hasActor: true, liveProcesses: 3 }, "none"],
    [
      "a world asleep for idleness stays asleep after a daemon restart",
      { observed: "suspended", wakesOnRequest: true },
      "none"
    ],
    ["a world suspended for memory goes back in line", { observed: "suspended" }, "adopt"],
    [
      "a world asleep for idleness whose processes run (an older daemon's) is adopted",
      { observed: "suspended", wakesOnRequest: true, liveProcesses: 1 },
      "adopt"
    ],
    ["a failed world stays failed", { observed: "failed" }, "none"],
    ["a world that runs anywhere is let go, not adopted", { runsAnywhere: true, liveProcesses: 2 }, "release"],
    ["a failed world that runs anywhere is let go too", { runsAnywhere: true, observed: "failed" }, "release"],
    ["a world that runs anywhere, wanted down, is left as it is", { runsAnywhere: true, desired: "down" }, "none"],
    ["a world that runs anywhere and runs here now is left alone", { runsAnywhere: true, hasActor: true }, "none"],
    ["a deleted worktree is torn down", { pathExists: false, liveProcesses: 2 }, "teardown"],
    [
      "a new world whose worktree is still being made is left alone",
      { pathExists: false, worktreeReady: false, hasActor: true },
      "none"
    ],
    ["a deleted worktree is torn down even when an actor has it", { pathExists: false, hasActor: true }, "teardown"],
    ["the main checkout is never torn down for a missing folder", { pathExists: false, isMain: true }, "adopt"],
    ["a teardown a crash interrupted is finished", { pathExists: false, observed: "removing" }, "settle"],
    [
      "a removal a crash interrupted is finished",
      { desired: "removed", observed: "removing", pathExists: false },
      "settle"
    ],
    ["a world left stopping by a crash settles", { desired: "down", observed: "stopping" }, "settle"],
    ["a world left starting by a crash, now wanted down, settles", { desired: "down", observed: "starting" }, "settle"],
    ["a failed world wanted down stays as it is", { desired: "down", observed: "failed" }, "none"],
    ["a stopped world with live processes has them stopped", { desired: "down", liveProcesses: 1 }, "stop-strays"],
    ["a stopped world with nothing alive needs nothing", { desired: "down", observed: "stopped" }, "none"],
    ["a removed world's strays are stopped with it", { desired: "removed", liveProcesses: 1 }, "settle"],
    ["a world created and never started waits for its up", { observed: "stopped", recorded: false }, "none"],
    [
      "a world queued when the daemon went comes back through the gate",
      { observed: "queued", recorded: false },
      "adopt"
    ],
    ["a suspended world queues to resume", { observed: "suspended", recorded: false }, "adopt"],
    ["a failed world's strays are stopped", { observed: "failed", liveProcesses: 2 }, "stop-strays"],
    ["a world with processes nobody watches is adopted again", { observed: "running", liveProcesses: 2 }, "adopt"]
  ])("%s", (_, f, expected) => {
    expect(decide(facts(f))).toBe(expected)
  })
})
