import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { fetchJson, sandboxes, varsFrom, worldFrom } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

/** holds binky-adapter-drawer: an adapter written to binky's protocol, not berth's */
const fixtures = resolve(import.meta.dirname, "../../adapters/external/fixtures")

interface Logged {
  readonly verb: string
  readonly request: Record<string, unknown>
}

interface StatusJson {
  readonly worlds: ReadonlyArray<{
    readonly name: string
    readonly events: ReadonlyArray<{ readonly kind: string; readonly service: string | null; readonly message: string }>
  }>
}

interface GcJson {
  readonly entries: ReadonlyArray<{ readonly reason: string; readonly adapter: string; readonly name: string }>
}

describe("an adapter written for binky", () => {
  it("serves a slice unchanged: up provisions through it, env shows its address, gc lists what it holds, remove tears it down", async () => {
    const box = await boxes.project({
      "binky.toml": `[slices.drawer]
adapter = "drawer"

[services.api]
command = "node server.mjs"
port_range = "3000-3099"
env = { DRAWER = "\${slices.drawer.address}" }
`
    })
    const log = join(box.home, "..", "drawer.jsonl")
    // the daemon looks adapters up on its own PATH: start it with the fixture's folder on it
    await box.run(["daemon", "stop"])
    const env = { PATH: `${fixtures}:${process.env.PATH}`, BINKY_DRAWER_LOG: log }
    const logged = (): Array<Logged> =>
      existsSync(log)
        ? readFileSync(log, "utf8")
            .trim()
            .split("\n")
            .map((line) => JSON.parse(line) as Logged)
        : []

    const init = await box.run(["init"], { env })
    expect(init.code, init.stderr).toBe(0)
    expect(init.stdout).toContain("wrote berth.toml from binky.toml: 1 process, 1 slice")
    box.git("add", "-A")
    box.git("commit", "-q", "-m", "berth.toml from binky.toml")

    // check says which protocol will serve the slice
    const check = await box.run(["check"], { env })
    expect(check.code, check.stderr).toBe(0)
    expect(check.stderr).toMatch(
      /warning: berth has no built-in adapter "drawer": binky-adapter-drawer serves it, and berth speaks binky's protocol to it/
    )

    const up = await box.run(["up", "feat", "--json"], { env, timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const world = worldFrom(up.stdout)
    const vars = varsFrom((await box.run(["env", "feat", "--json"], { env })).stdout)
    const address = vars.DRAWER_URL!
    expect(address).toMatch(/^file:\/\/.*\.drawer\/$/)
    expect(existsSync(fileURLToPath(address))).toBe(true)
    const api = world.services.find((s) => s.name === "api")!
    expect(((await fetchJson(api.url!)) as { env: Record<string, string> }).env.DRAWER).toBe(address)

    // binky's verbs and fields, never berth's
    const create = logged().find((l) => l.verb === "create")!
    expect(create).toBeDefined()
    expect(Object.keys(create.request).sort()).toEqual(
      ["data_dir", "owner", "project", "service", "settings", "slice", "verb", "world"].sort()
    )
    expect(create.request.slice).toBe(address.replace(/^.*\/([^/]+)\.drawer\/$/, "$1"))
    expect(logged().map((l) => l.verb)).not.toContain("provision")

    // the world's events say which executable and protocol made the slice
    const status = JSON.parse((await box.run(["status", "--json"], { env })).stdout) as StatusJson
    const said = status.worlds.find((w) => w.name === "feat")?.events.find((e) => e.kind === "slice_adapter")
    expect(said?.service).toBe("drawer")
    expect(said?.message).toMatch(/binky-adapter-drawer.*binky's protocol/)

    // something of this installation's that no world records: gc finds it through binky's list, and drops it
    const { owner, data_dir } = create.request as { owner: string; data_dir: string }
    execFileSync(join(fixtures, "binky-adapter-drawer"), ["create"], {
      input: JSON.stringify({ slice: "left_behind", owner, data_dir, settings: {} })
    })
    const dry = JSON.parse((await box.run(["gc", "--dry-run", "--json"], { env })).stdout) as GcJson
    if (dry.entries.length > 0) {
      expect(dry.entries).toEqual([
        expect.objectContaining({ reason: "unrecorded", adapter: "drawer", name: "left_behind" })
      ])
    } else {
      // the daemon's own sweep, two seconds after its start, got there first (a loaded machine): it found it the same
      // way, through binky's list, and says so in its log
      expect(readFileSync(join(box.home, "daemon.log"), "utf8")).toContain(
        "gc: dropped drawer left_behind (unrecorded)"
      )
    }
    expect((await box.run(["gc"], { env })).code).toBe(0)
    expect(existsSync(join(data_dir, "left_behind.drawer"))).toBe(false)
    expect(existsSync(fileURLToPath(address))).toBe(true)

    const removed = await box.run(["remove", "feat", "--force"], { env })
    expect(removed.code, removed.stderr).toBe(0)
    expect(existsSync(fileURLToPath(address))).toBe(false)
    expect(
      logged()
        .filter((l) => l.verb === "destroy")
        .map((l) => l.request.slice)
    ).toContain(create.request.slice)
    // a dozen commands one after another, each a process (and the adapter a process per verb): room on a busy machine
  }, 180_000)
})
