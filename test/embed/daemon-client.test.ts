/**
 * The daemon's client served in the caller's process (`DaemonClientInProcess`): the daemon's own handlers over an
 * embedded engine, without a socket. What a thin client is told — answers and typed failures — is what the CLI gets.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ClusterSolo } from "../../src/cluster/Cluster.js"
import { DaemonClient } from "../../src/daemon/client.js"
import { DaemonClientInProcess } from "../../src/daemon/server.js"
import { EmbedClusterLive, EmbedLive } from "../../src/index.js"
import { HostsKeeper } from "../../src/services/proxy/HostsKeeper.js"
import { sandbox } from "../e2e/harness.js"

process.env.BERTH_PROXY_PORT = "off"
process.env.BERTH_HTTPS_PORT = "off"

describe("DaemonClientInProcess", () => {
  it("answers the daemon's API in this process: an up, the status, a typed failure, a down", async () => {
    const box = sandbox({ "berth.toml": `[services.api]\ncmd = "sleep 30"\n` })
    try {
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", BERTH_YES: "1" }
      const program = Effect.gen(function* () {
        const client = yield* DaemonClient
        const pong = yield* client.Ping()
        expect(pong.pid).toBe(process.pid)
        const up = yield* client.Up({ cwd: box.dir, world: "inproc", env, services: [], groups: [] })
        expect(up.state).toBe("running")
        const { worlds } = yield* client.Status({ cwd: box.dir })
        expect(worlds.map((w) => [w.name, w.state])).toEqual([["inproc", "running"]])
        // a failure comes as its own tag, as it would over the socket
        const missing = yield* Effect.flip(client.Env({ cwd: box.dir, world: "nowhere" }))
        expect(missing._tag).toBe("WorldNotFound")
        const [down] = yield* client.Down({ cwd: box.dir, world: "inproc", all: false })
        expect(down?.state).toBe("stopped")
      })
      await Effect.runPromise(
        Effect.scoped(program).pipe(
          Effect.provide(DaemonClientInProcess.pipe(Layer.provide(EmbedClusterLive(box.home))))
        )
      )
    } finally {
      box.cleanup()
    }
  })

  it("runs over this machine's engine alone with ClusterSolo: no cluster, and joining one is refused", async () => {
    const box = sandbox({ "berth.toml": `[services.api]\ncmd = "sleep 30"\n` })
    try {
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", BERTH_YES: "1" }
      const program = Effect.gen(function* () {
        const client = yield* DaemonClient
        expect((yield* client.ClusterStatus()).state).toBe("solo")
        const joined = yield* Effect.flip(
          client.ClusterJoin({ url: "postgres://127.0.0.1:5432/berth", init: false, replace: false })
        )
        expect(joined._tag).toBe("ClusterRefused")
        const anywhere = yield* Effect.flip(
          client.Up({ cwd: box.dir, world: "far", env, services: [], groups: [], anywhere: true })
        )
        expect([anywhere._tag, anywhere.message]).toEqual([
          "ClusterRefused",
          expect.stringMatching(/only in a cluster/)
        ])
        const up = yield* client.Up({ cwd: box.dir, world: "near", env, services: [], groups: [] })
        expect(up.state).toBe("running")
        yield* client.Down({ cwd: box.dir, world: "near", all: false })
      })
      const engine = Layer.mergeAll(ClusterSolo, HostsKeeper.Default).pipe(Layer.provideMerge(EmbedLive(box.home)))
      await Effect.runPromise(
        Effect.scoped(program).pipe(Effect.provide(DaemonClientInProcess.pipe(Layer.provide(engine))))
      )
    } finally {
      box.cleanup()
    }
  })
})
