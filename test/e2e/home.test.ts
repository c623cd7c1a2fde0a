import { chmodSync, lstatSync, readdirSync } from "node:fs"
import { join, relative } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { sandboxes, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

/** Every entry under `root` (itself included) as `path mode`, for the ones anyone but the owner may use. */
const loose = (root: string): Array<string> => {
  const found: Array<string> = []
  const visit = (path: string) => {
    const stat = lstatSync(path)
    const mode = stat.mode & 0o777
    const wanted = stat.isDirectory() ? 0o700 : 0o600
    if (mode !== wanted) found.push(`${relative(root, path) || "."} ${mode.toString(8)}`)
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name))
  }
  visit(root)
  return found.sort()
}

describe("BERTH_HOME", () => {
  it("keeps every folder 0700 and every file 0600 whatever the umask", async () => {
    const umask = 0o022
    // with the proxy on, so that berth's CA (ca/) is made too; every command (and so the daemon) under this umask
    const box = await boxes.project(
      {
        "berth.toml": `
[services.db]
adapter = "sqlite"

[services.files]
adapter = "dir"

[services.chatty]
cmd = "echo hello from chatty; exec sleep 1000"
`
      },
      { proxy: true, umask }
    )
    const up = await box.run(["up", "private", "--json"], { umask, timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const world = worldFrom(up.stdout)
    expect(world.services.map((s) => s.name).sort()).toEqual(["chatty", "db", "files"])
    // a read and a write more through the daemon, so that its database and the logs have been used
    expect((await box.run(["logs", "private", "-s", "chatty", "-n", "1"], { umask })).stdout).toBe(
      "hello from chatty\n"
    )
    expect((await box.run(["down", "private"], { umask })).code).toBe(0)
    expect((await box.run(["up", "private"], { umask, timeoutMs: 60_000 })).code).toBe(0)
    expect(readdirSync(join(box.home, "ca"))).toContain("ca.key")

    const found = loose(box.home)
    // the state database's WAL and shared-memory files hold what the database does (admin URLs with passwords).
    // SQLite creates them with state.db's mode, so they are owner-only because Home makes state.db 0600 before
    // SQLite opens it: apart, so that a failure here points at that
    const sqliteCompanions = found.filter((f) => /^state\.db-(wal|shm) /.test(f))
    expect.soft(sqliteCompanions, "state.db-wal/-shm are not owner-only").toEqual([])
    expect(found.filter((f) => !sqliteCompanions.includes(f))).toEqual([])

    // what an older berth (or a hand) left looser is tightened when the daemon starts again
    expect((await box.run(["daemon", "stop"], { umask })).code).toBe(0)
    for (const [path, mode] of [
      ["state.db", 0o644],
      ["daemon.log", 0o644],
      ["logs", 0o755],
      ["slices", 0o755],
      ["ca/ca.key", 0o644]
    ] as const) {
      chmodSync(join(box.home, path), mode)
    }
    expect((await box.run(["status"], { umask })).code).toBe(0)
    expect(loose(box.home)).toEqual([])
  })
})
