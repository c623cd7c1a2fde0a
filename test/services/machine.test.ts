import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { PlatformLive } from "../../src/services/Platform.js"
import { Machine, MachineLive } from "../../src/services/Machine.js"

const base = mkdtempSync(join(tmpdir(), "berth-machine-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))

describe("the machine's readings", () => {
  it.effect("list each filesystem once however many worktrees it holds, and skip a path that is gone", () =>
    Effect.gen(function* () {
      const machine = yield* Machine
      const worktrees = Array.from({ length: 20 }, (_, i) => join(base, `w${i}`))
      for (const w of worktrees) mkdirSync(w)
      const readings = yield* machine.read([base, ...worktrees, join(base, "removed-world")])
      expect(readings.disks.map((d) => d.path)).toEqual([base])
      expect(readings.disks[0]!.freeBytes).toBeGreaterThan(0)
      expect(readings.memTotalBytes).toBeGreaterThan(0)
      // read again: the same answer from what was learned
      expect((yield* machine.read([...worktrees, base])).disks.map((d) => d.path)).toEqual([worktrees[0]])
    }).pipe(Effect.provide(MachineLive.pipe(Layer.provide(PlatformLive))))
  )
})
