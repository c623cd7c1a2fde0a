/**
 * What a world's actor asks of its worktree's files, seen through the in-memory fake (`makeFakeWorktreeFiles`) around
 * the real folder: each service's env_file written as its start goes, kept once the start completes, put back when it
 * fails, taken back before the worktree is removed.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { CONFIRM_MS } from "../../src/actors/ServiceActor.js"
import { makeFakeWorktreeFiles } from "./fakes.js"
import { passTime, worldHarness } from "./world.js"

const FILES = `[project]
name = "files"

[services.api]
cmd = "serve api"
url = "api"
env_file = ".env.api"
env = { GREETING = "hello" }
health = { cmd = "check api" }

[services.worker]
cmd = "work"
env_file = ".env.worker"
depends_on = ["api"]
health = { cmd = "check worker" }
`

describe("a world's worktree files", () => {
  it.scoped("a start writes each service's env_file; one that completes keeps them; remove takes them back first", () =>
    Effect.gen(function* () {
      const files = yield* makeFakeWorktreeFiles
      const h = yield* worldHarness(FILES, { worktreeFiles: files.around })
      yield* h.fakes.health.setDefault(true)
      yield* h.up("alpha")
      yield* passTime("api and worker stay up after their checks passed", CONFIRM_MS, 2)
      yield* h.awaitState("alpha", "running")
      const path = (yield* h.status("alpha"))?.path ?? ""
      const port = String((yield* h.status("alpha"))?.services.find((s) => s.name === "api")?.port)

      const written = yield* files.control.envFiles
      expect([...written.keys()].sort()).toEqual([join(path, ".env.api"), join(path, ".env.worker")])
      // the service's own variables: its env, and PORT
      expect(written.get(join(path, ".env.api"))).toEqual({ GREETING: "hello", PORT: port })

      // stopped, its files stay the world's: nothing was put back
      yield* h.engine.worlds.down(h.ref("alpha"), false)
      expect((yield* files.control.envFiles).size).toBe(2)
      expect((yield* files.control.calls).filter((c) => c.startsWith("restoreEnv"))).toEqual(["restoreEnv -"])

      yield* h.engine.worlds.remove(h.ref("alpha"), false)
      const calls = yield* files.control.calls
      expect(calls.slice(calls.indexOf("userChanges alpha"))).toEqual([
        "userChanges alpha",
        "retractEnv alpha",
        "remove alpha"
      ])
      expect((yield* files.control.envFiles).size).toBe(0)
    })
  )

  it.scoped("a start that fails puts back the env_files it wrote", () =>
    Effect.gen(function* () {
      const files = yield* makeFakeWorktreeFiles
      const h = yield* worldHarness(FILES, { worktreeFiles: files.around })
      yield* h.fakes.health.setDefault(true)
      yield* h.fakes.health.setServiceHealthy("api", false)
      yield* h.up("alpha")
      const api = yield* h.process("alpha", "api")
      expect((yield* files.control.envFiles).size).toBe(2)

      yield* h.fakes.processes.exit(api, { code: 1, signal: null })
      yield* h.awaitState("alpha", "failed")
      expect((yield* files.control.envFiles).size).toBe(0)
      const path = (yield* h.status("alpha"))?.path ?? ""
      expect((yield* files.control.calls).filter((c) => c.startsWith("restoreEnv"))).toEqual([
        `restoreEnv ${join(path, ".env.api")}, ${join(path, ".env.worker")}`
      ])
    })
  )

  it.scoped("the main checkout's world runs on the fake alone: berth's writes stay in memory", () =>
    Effect.gen(function* () {
      const files = yield* makeFakeWorktreeFiles
      const h = yield* worldHarness(FILES, { worktreeFiles: () => files.service })
      yield* h.fakes.health.setDefault(true)
      yield* h.up("main")
      yield* passTime("api and worker stay up after their checks passed", CONFIRM_MS, 2)
      yield* h.awaitState("main", "running")

      expect((yield* h.status("main"))?.path).toBe(h.dir)
      expect([...(yield* files.control.envFiles).keys()].sort()).toEqual([
        join(h.dir, ".env.api"),
        join(h.dir, ".env.worker")
      ])
      expect(existsSync(join(h.dir, ".env.api"))).toBe(false)
      // the main checkout brings nothing from itself
      const calls = yield* files.control.calls
      expect(calls[0]).toBe("ensure main")
      expect(calls).not.toContain("bring main")
    })
  )
})
