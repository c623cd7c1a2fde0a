/**
 * A full disk under BERTH_HOME (a small tmpfs), through the built binary: every command says so with a DiskFull that
 * names what could not be written, the free space and the way out — never an internal error or a Node fragment — and
 * berth works again once there is room.
 */
import { describe, expect, it } from "@effect/vitest"
import { eventually, isAlive, type RunResult, runBerth, serverScript, type WorldJson } from "./harness.js"
import { fillDisk, freeDisk, smallDisk } from "./tmpfs.js"

const disk = smallDisk({
  "server.mjs": serverScript,
  "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n`
})

/** The `{ error }` document a failing `--json` command prints on stderr. */
const failure = (r: RunResult): { tag: string; message: string; hint: string | null } => {
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(1)
  return (JSON.parse(r.stderr) as { error: { tag: string; message: string; hint: string | null } }).error
}

const expectDiskFull = (r: RunResult, path: string) => {
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(1)
  expect(r.stderr).toContain(`the disk is full: berth cannot write ${path}`)
  expect(r.stderr).toContain("berth gc")
  expect(r.stderr).toContain(`${disk.box.home} (BERTH_HOME)`)
  expect(r.stderr).not.toContain("internal error")
  expect(r.stderr).not.toContain("ENOSPC")
  expect(r.stderr).not.toContain("Node.js")
}

const daemonPid = async (): Promise<number> => {
  const status = await disk.box.run(["daemon", "status", "--json"])
  return (JSON.parse(status.stdout) as { pid: number }).pid
}

/** kill -9 of the daemon, and `meanwhile` (while it dies), answered once it is gone */
const killDaemon = async (meanwhile: () => void = () => {}): Promise<void> => {
  const pid = await daemonPid()
  process.kill(pid, "SIGKILL")
  meanwhile()
  while (isAlive(pid)) await new Promise((r) => setTimeout(r, 20))
}

describe("a full disk", () => {
  it("is a DiskFull naming the path, the free space and the fix, on every path, and berth works again once freed", async (ctx) => {
    if (disk.skipped !== undefined) return ctx.skip(disk.skipped)
    const up = await disk.box.run(["up", "--yes"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const database = `${disk.box.home}/state.db`

    fillDisk(disk.box.home)
    try {
      // the lean path, the full CLI, and their --json forms
      expectDiskFull(await disk.box.run(["down"]), database)
      // a reload may well succeed (its services need no disk, and the world's row follows once it fits); if not, it
      // says why
      const reload = await disk.box.run(["reload"])
      if (reload.code !== 0) expectDiskFull(reload, database)
      const removed = failure(await disk.box.run(["remove", "--force", "--json"]))
      expect(removed.tag).toBe("DiskFull")
      expect(removed.message).toMatch(
        new RegExp(`^the disk is full: berth cannot write ${database} \\(\\d+ B free there\\)$`)
      )
      expect(removed.hint).toContain("berth gc")
      const down = failure(await disk.box.run(["down", "--json"]))
      expect(down.tag).toBe("DiskFull")

      // a daemon killed on a full disk cannot start again: the next command says why, in berth's words
      await killDaemon()
      expectDiskFull(await disk.box.run(["status"]), disk.box.home)
      expect(failure(await disk.box.run(["up", "--json"])).tag).toBe("DiskFull")
    } finally {
      freeDisk(disk.box.home)
    }

    const down = await disk.box.run(["down"], { timeoutMs: 60_000 })
    expect(down.code, down.stderr).toBe(0)
    const again = await disk.box.run(["up"], { timeoutMs: 60_000 })
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain("web  healthy")
  }, 120_000)
})

const statusOf = async (): Promise<WorldJson | undefined> => {
  const r = await disk.box.run(["status", "--json"])
  if (r.code !== 0) return undefined
  return (JSON.parse(r.stdout) as { worlds: ReadonlyArray<WorldJson> }).worlds.find((w) => w.name === "main")
}

/** What status says is true: no world left mid-way, and every service shown running has its process alive. */
const truthful = (w: WorldJson | undefined): boolean =>
  w !== undefined &&
  !["starting", "stopping", "queued"].includes(w.state) &&
  w.services.every((s) =>
    ["running", "healthy", "unhealthy"].includes(s.state)
      ? s.pid !== null && isAlive(s.pid)
      : ["stopped", "exited", "failed"].includes(s.state)
  )

describe("a world whose up met a full disk", () => {
  it("converges once space is back: its state and its services' processes are true again within seconds", async (ctx) => {
    if (disk.skipped !== undefined) return ctx.skip(disk.skipped)
    // down after the test before (none when run alone)
    await disk.box.run(["down"], { timeoutMs: 60_000 })
    // a service slow to answer: the disk fills while its world starts
    disk.box.write(
      "berth.toml",
      `[services.web]\ncmd = "sleep 1.5 && exec node server.mjs"\nurl = "web"\nrestart = "always"\n`
    )
    disk.box.git("commit", "-qam", "a slow web")
    const up = runBerth(["up", "--yes", "--json"], disk.box.dir, disk.box.home, { timeoutMs: 60_000 })
    const starting = await eventually(statusOf, (w) => w?.state === "starting")
    expect(starting?.state).toBe("starting")
    fillDisk(disk.box.home)
    try {
      await up
      // whatever it answered, the services go on as they do (a restart, a stop) while the disk is full
      await new Promise((r) => setTimeout(r, 2_500))
    } finally {
      freeDisk(disk.box.home)
    }
    const settled = await eventually(statusOf, truthful, 15_000)
    expect(truthful(settled), JSON.stringify(settled)).toBe(true)
    // the reconciler's passes keep it true
    const web = settled?.services.find((s) => s.name === "web")
    if (web?.pid !== null && web?.pid !== undefined) {
      process.kill(-web.pid, "SIGKILL")
      const again = await eventually(statusOf, (w) => truthful(w) && w?.services[0]?.pid !== web.pid, 15_000)
      expect(truthful(again), JSON.stringify(again)).toBe(true)
    }

    // the daemon killed on a full disk and the world's processes gone meanwhile: the next daemon starts them again
    const before = await statusOf()
    fillDisk(disk.box.home)
    try {
      await killDaemon(() => {
        for (const s of before?.services ?? []) if (s.pid !== null) process.kill(-s.pid, "SIGKILL")
      })
      expect((await disk.box.run(["status"])).code).toBe(1)
    } finally {
      freeDisk(disk.box.home)
    }
    const restarted = await eventually(
      statusOf,
      (w) => truthful(w) && w?.state === "running" && w.services.every((s) => s.state === "healthy"),
      15_000
    )
    expect(restarted?.state, JSON.stringify(restarted)).toBe("running")
    expect(truthful(restarted), JSON.stringify(restarted)).toBe(true)
  }, 120_000)
})

describe("a reload on a full disk", () => {
  it("stops nothing it could not record: what runs runs on, and a daemon killed meanwhile loses none of it", async (ctx) => {
    if (disk.skipped !== undefined) return ctx.skip(disk.skipped)
    await disk.box.run(["down"], { timeoutMs: 60_000 })
    disk.box.write(
      "berth.toml",
      `[services.api]\ncmd = "node server.mjs"\nurl = "api"\n\n` +
        `[services.web]\ncmd = "node server.mjs"\nurl = "web"\ndepends_on = ["api"]\n`
    )
    disk.box.git("commit", "-qam", "two services")
    const up = await disk.box.run(["up", "--yes"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const before = await statusOf()
    expect(before?.services.map((s) => s.state)).toEqual(["healthy", "healthy"])

    fillDisk(disk.box.home)
    try {
      const reload = await disk.box.run(["reload", "--json"], { timeoutMs: 60_000 })
      if (reload.code !== 0) {
        expect(failure(reload).tag).toBe("DiskFull")
        // refused before anything stopped: the same processes, and status says so
        const now = await statusOf()
        expect(now?.state, JSON.stringify(now)).toBe("running")
        expect(now?.services.map((s) => [s.state, s.pid])).toEqual(before?.services.map((s) => ["healthy", s.pid]))
        for (const s of before?.services ?? []) expect(isAlive(s.pid ?? 0)).toBe(true)
      }
      // whatever the reload did, a daemon killed now (its rows not all written) must leave the next one the truth
      await killDaemon()
    } finally {
      freeDisk(disk.box.home)
    }
    const settled = await eventually(
      statusOf,
      (w) => truthful(w) && w?.state === "running" && w.services.every((s) => s.state === "healthy"),
      20_000
    )
    expect(settled?.state, JSON.stringify(settled)).toBe("running")
    expect(truthful(settled), JSON.stringify(settled)).toBe(true)
  }, 120_000)
})
