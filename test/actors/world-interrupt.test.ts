/**
 * A generation is a scoped resource: whatever stage its start has reached — in line for a permit, running setup,
 * filling a slice, a service spawned and waiting for its check, a dependent waiting for it — a `down` at that moment
 * releases all of it. Afterwards no permit is held and none is waited for, no process of the world is alive, and the
 * `env_file`s are as they were before the start (one the start made is gone, a committed one holds what it held).
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { FakeProcess } from "./fakes.js"
import { eventually, type WorldHarness, worldHarness } from "./world.js"

const STAGED = `[project]
name = "staged"
setup = "prepare things"

[services.db]
adapter = "dir"
migrate = "migrate db"

[services.api]
cmd = "serve api"
env_file = ".env.api"
health = { cmd = "check api" }

[services.worker]
cmd = "work"
env_file = ".env.worker"
depends_on = ["api"]
health = { cmd = "check worker" }
`

/** what the committed env_file holds before any start */
const COMMITTED = "KEEP=1\n"

/** The world's processes whose command starts with `command`, once one has been spawned. */
const spawned = (h: WorldHarness, command: string) =>
  Effect.gen(function* () {
    let found: FakeProcess | undefined
    yield* eventually(
      `\`${command}\` is spawned`,
      Effect.map(h.fakes.processes.all, (all) => {
        found = all.find((p) => p.spec.command.startsWith(command) && p.alive)
        return found !== undefined
      })
    )
    return found as FakeProcess
  })

interface Stage {
  readonly name: string
  /** brings the start to its stage and waits there */
  readonly reach: (h: WorldHarness) => Effect.Effect<unknown, unknown>
}

const stages: ReadonlyArray<Stage> = [
  {
    name: "in line for a permit",
    reach: (h) =>
      Effect.gen(function* () {
        yield* h.fakes.machine.setMemoryPercent(1)
        yield* h.nextReading
        yield* h.up("alpha")
        yield* h.awaitState("alpha", "queued")
      })
  },
  { name: "running setup", reach: (h) => Effect.zipRight(h.up("alpha"), spawned(h, "prepare things")) },
  {
    name: "filling a slice (its migrate runs)",
    reach: (h) =>
      Effect.gen(function* () {
        yield* h.up("alpha")
        const setup = yield* spawned(h, "prepare things")
        yield* h.fakes.processes.exit(setup, { code: 0, signal: null })
        yield* spawned(h, "migrate db")
      })
  },
  {
    name: "a service spawned, waiting for its check",
    reach: (h) =>
      Effect.gen(function* () {
        yield* h.fakes.health.setServiceHealthy("api", false)
        yield* h.up("alpha")
        yield* h.fakes.processes.exit(yield* spawned(h, "prepare things"), { code: 0, signal: null })
        yield* h.fakes.processes.exit(yield* spawned(h, "migrate db"), { code: 0, signal: null })
        yield* h.process("alpha", "api")
      })
  },
  {
    name: "a dependent spawned once its dependency was ready",
    reach: (h) =>
      Effect.gen(function* () {
        yield* h.fakes.health.setServiceHealthy("api", true)
        yield* h.fakes.health.setServiceHealthy("worker", false)
        yield* h.up("alpha")
        yield* h.fakes.processes.exit(yield* spawned(h, "prepare things"), { code: 0, signal: null })
        yield* h.fakes.processes.exit(yield* spawned(h, "migrate db"), { code: 0, signal: null })
        yield* h.process("alpha", "worker")
      })
  }
]

describe("a start interrupted at any stage", () => {
  for (const stage of stages) {
    it.scoped(`leaves nothing behind when stopped ${stage.name}`, () =>
      Effect.gen(function* () {
        const h = yield* worldHarness(STAGED, { files: { ".env.api": COMMITTED } })
        yield* stage.reach(h)
        const id = yield* h.idOf("alpha")
        // the up that waits for this start hears why it ended, with its own tag
        const waiting = yield* Effect.fork(Effect.either(h.engine.worlds.waitReady(h.ref("alpha"))))
        const path = (yield* h.status("alpha"))?.path ?? ""

        yield* h.engine.worlds.down(h.ref("alpha"), false)
        const heard = yield* Fiber.join(waiting)
        expect(heard._tag === "Left" ? heard.left._tag : "ready").toBe("StartInterrupted")

        expect((yield* h.status("alpha"))?.state).toBe("stopped")
        expect(h.engine.admission.holds(id), "no permit held").toBe(false)
        expect(h.engine.admission.entry(id), "no place in line").toBeUndefined()
        const alive = (yield* h.fakes.processes.all).filter((p) => p.alive)
        expect(
          alive.map((p) => p.spec.command),
          "no process alive"
        ).toEqual([])
        expect(readFileSync(join(path, ".env.api"), "utf8"), "the committed env_file as it was").toBe(COMMITTED)
        expect(existsSync(join(path, ".env.worker")), "the env_file the start made is gone").toBe(false)
      })
    )
  }
})
