import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as Option from "effect/Option"
import { Cluster } from "../../src/cluster/Cluster.js"
import { EmbedClusterLive, EmbedLive, Ports, Worlds, watch } from "../../src/index.js"
import { fetchJson, isAlive, portBlock, sandbox, serverScript } from "../e2e/harness.js"

// the embedded engine runs the proxy too (settings or BERTH_PROXY_PORT); this test reaches its service directly
process.env.BERTH_PROXY_PORT = "off"
process.env.BERTH_HTTPS_PORT = "off"

describe("embedding berth through its layers", () => {
  it("carries the cluster only when asked for: EmbedLive is this machine's engine, EmbedClusterLive adds it", async () => {
    const box = sandbox({ "berth.toml": `[services.api]\ncmd = "true"\n` })
    try {
      const has = Effect.map(Effect.serviceOption(Cluster), Option.isSome)
      expect(await Effect.runPromise(Effect.scoped(has).pipe(Effect.provide(EmbedLive(box.home))))).toBe(false)
      expect(await Effect.runPromise(Effect.scoped(has).pipe(Effect.provide(EmbedClusterLive(box.home))))).toBe(true)
    } finally {
      box.cleanup()
    }
  })

  it("brings a world up and down in the caller's process", async () => {
    const box = sandbox({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n`,
      "server.mjs": serverScript
    })
    try {
      const [from, to] = portBlock().split("-").map(Number)
      const program = Effect.gen(function* () {
        const worlds = yield* Worlds
        const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", BERTH_YES: "1" }
        // the state stream the dashboards read: a snapshot first, then the world's changes
        const stream = yield* watch(box.dir).pipe(
          Stream.takeUntil((m) => m._tag === "WorldChanged" && m.world.status.state === "running"),
          Stream.runCollect,
          Effect.fork
        )
        const world = yield* worlds.up({ cwd: box.dir, world: "embedded" }, { services: [], groups: [] }, env)
        const seenByWatch = Chunk.toReadonlyArray(yield* Fiber.join(stream))
        expect(seenByWatch[0]?._tag).toBe("Snapshot")
        expect(seenByWatch.some((m) => m._tag === "WorldChanged" && m.world.status.name === "embedded")).toBe(true)
        const api = world.services[0]!
        expect(world.state).toBe("running")
        expect(api.port).toBeGreaterThanOrEqual(from!)
        const seen = yield* Effect.promise(() => fetchJson(api.url!))
        expect(seen.world).toBe("embedded")
        const vars = yield* worlds.env({ cwd: box.dir, world: "embedded" })
        expect(vars.vars.API_URL).toBe(api.url)
        const [down] = yield* worlds.down({ cwd: box.dir, world: "embedded" }, false)
        expect(down!.state).toBe("stopped")
        expect(isAlive(api.pid!)).toBe(false)
        return api.pid
      })
      // a private port range for this test, set through the same registry the daemon uses
      const setup = Effect.gen(function* () {
        const ports = yield* Ports
        yield* ports.setRange({ from: from!, to: to! })
      })
      await Effect.runPromise(Effect.scoped(Effect.zipRight(setup, program)).pipe(Effect.provide(EmbedLive(box.home))))
    } finally {
      box.cleanup()
    }
  })

  it("makes a world whose slices are copies of another world's (up's from)", async () => {
    const box = sandbox({ "berth.toml": `[services.files]\nadapter = "dir"\n` })
    try {
      const program = Effect.gen(function* () {
        const worlds = yield* Worlds
        const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", BERTH_YES: "1" }
        const none = { services: [], groups: [] }
        yield* worlds.up({ cwd: box.dir, world: "source" }, none, env)
        const source = (yield* worlds.env({ cwd: box.dir, world: "source" })).vars.FILES_URL!
        writeFileSync(join(source, "data.txt"), "from source\n")
        yield* worlds.up({ cwd: box.dir, world: "copy" }, none, env, true, { from: "source" })
        const copy = (yield* worlds.env({ cwd: box.dir, world: "copy" })).vars.FILES_URL!
        expect(copy).not.toBe(source)
        expect(readFileSync(join(copy, "data.txt"), "utf8")).toBe("from source\n")
      })
      await Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(EmbedLive(box.home))))
    } finally {
      box.cleanup()
    }
  })

  it("streams every observed move and waits for readiness (up without waiting, then waitReady)", async () => {
    const box = sandbox({
      "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[services.broken]\ncmd = "exit 3"\ngroups = ["bad"]\n`,
      "server.mjs": serverScript
    })
    try {
      const [from, to] = portBlock().split("-").map(Number)
      const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", BERTH_YES: "1" }
      const ref = { cwd: box.dir, world: "watched" }
      const program = Effect.gen(function* () {
        const worlds = yield* Worlds
        yield* (yield* Ports).setRange({ from: from!, to: to! })
        const watcher = yield* worlds.changes.pipe(
          Stream.filter((c) => c.world === "watched"),
          Stream.takeUntil((c) => c.to === "stopped"),
          Stream.runCollect,
          Effect.fork
        )
        // the subscription is taken when the stream starts: give the forked watcher its turn
        yield* Effect.yieldNow()
        const queued = yield* worlds.up(ref, { services: ["api"], groups: [] }, env, false)
        expect(["queued", "starting"]).toContain(queued.state)
        const ready = yield* worlds.waitReady(ref)
        expect(ready.state).toBe("running")
        yield* worlds.down(ref, false)
        const moves = Chunk.toReadonlyArray(yield* Fiber.join(watcher)).map((c) => `${c.from}>${c.to}:${c.event}`)
        expect(moves).toEqual([
          "stopped>starting:Start",
          "starting>running:Started",
          "running>stopping:Stop",
          "stopping>stopped:Stopped"
        ])

        // a start that fails: waitReady fails with the start's own error, naming the service
        yield* worlds.up(ref, { services: [], groups: ["bad"] }, env, false)
        const failure = yield* Effect.flip(worlds.waitReady(ref))
        expect(failure._tag).toBe("StartFailed")
        expect(failure.message).toContain("broken")
      })
      await Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(EmbedLive(box.home))))
    } finally {
      box.cleanup()
    }
  })
})
