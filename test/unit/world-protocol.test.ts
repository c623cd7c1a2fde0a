import { describe, expect, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as Protocol from "../../src/actors/protocol.js"
import { StartFailed } from "../../src/domain/errors.js"

const commands: ReadonlyArray<Protocol.WorldCommand> = [
  new Protocol.Up({ selection: { services: ["api"], groups: [] }, env: { PATH: "/bin", TOKEN: "s3cret" } }),
  new Protocol.Down(),
  new Protocol.Reload({ env: {} }),
  new Protocol.Remove({ force: true }),
  new Protocol.Vanished(),
  new Protocol.RebuildGolden({ service: "db", env: {} }),
  new Protocol.Suspend({ reason: "memory", requeue: true }),
  new Protocol.Wake(),
  new Protocol.Withdraw(),
  new Protocol.Reset({ slices: ["db"], env: {} }),
  new Protocol.CopySlices({ to: { id: 2, name: "review", slug: "review", path: "/w/review" }, env: { PATH: "/bin" } }),
  new Protocol.StopServices({ services: ["worker"] }),
  new Protocol.RestartServices({ services: ["api"] }),
  new Protocol.ServicesChanged()
]

describe("the world protocol", () => {
  it.each(commands.map((c) => [c._tag, c] as const))("%s survives the wire unchanged", (_, command) => {
    const json = JSON.parse(JSON.stringify(Schema.encodeSync(Protocol.WorldCommand)(command)))
    const back = Schema.decodeUnknownSync(Protocol.WorldCommand)(json)
    expect(back).toBeInstanceOf(command.constructor)
    expect(back).toEqual(command)
  })

  it("carries a world's typed failures across", () => {
    const failure = new StartFailed({ world: "w", service: "api", reason: "exit 1", logTail: ["boom"] })
    const json = JSON.parse(JSON.stringify(Schema.encodeSync(Protocol.WorldFailure)(failure)))
    const back = Schema.decodeUnknownSync(Protocol.WorldFailure)(json)
    expect(back).toBeInstanceOf(StartFailed)
    expect(back.message).toBe(failure.message)
  })

  it("gives each command the failures its code can answer, and no other's", () => {
    const tags = (union: { readonly members: ReadonlyArray<{ readonly identifier: string }> }) =>
      union.members.map((m) => m.identifier).sort()
    // a down of this machine's world stops it: nothing of a start, a worktree or a slice can fail it
    expect(tags(Protocol.DownFailure)).toEqual(["DiskFull", "InternalError", "WorldNotFound"])
    expect(tags(Protocol.CommandFailure.down)).not.toContain("WorktreeDirty")
    expect(tags(Protocol.CommandFailure.remove)).toContain("WorktreeDirty")
    expect(tags(Protocol.CommandFailure.stopServices)).toContain("WorldNotRunning")
    expect(tags(Protocol.CommandFailure.stopServices)).not.toContain("StartFailed")
    expect(tags(Protocol.CommandFailure.up)).toEqual(expect.arrayContaining(["StartFailed", "WorldExists"]))
    expect(tags(Protocol.CommandFailure.logs)).toContain("UnknownLog")
    // none of them says only InvalidRequest: what a world's command refuses has a tag of its own
    for (const union of [...Object.values(Protocol.CommandFailure), Protocol.WorldFailure]) {
      expect(tags(union)).not.toContain("InvalidRequest")
    }
  })

  it("is an RPC group with one RPC per command: what a cluster entity is made of", () => {
    expect([...Protocol.WorldRpcs.requests.keys()].sort()).toEqual(commands.map((c) => c._tag).sort())
  })
})
