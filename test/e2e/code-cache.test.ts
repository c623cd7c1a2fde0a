/**
 * The program's V8 code cache (src/cli/entry.ts). V8 takes a cache for any program of the same length, so a cache
 * named after another program must never be run: a CLI running another build's code takes the daemon for one of
 * another build, replaces it, and its own daemons in turn (it once failed two CI runs' worth of tests at once, every
 * BERTH_HOME of the machine sharing the one cache folder).
 */
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { otherBuild, portBlock, runBerth, sandboxes } from "./harness.js"

const boxes = sandboxes()
const builds: Array<{ readonly remove: () => void }> = []
afterAll(() => {
  boxes.cleanup()
  for (const b of builds) b.remove()
})

const buildOf = (stdout: string) => (JSON.parse(stdout) as { readonly build: string }).build

describe("the code cache", () => {
  it("runs the program beside the entry, never another build's of the same length, and starts its daemon at once", async () => {
    const box = boxes.plain({})
    // a cache folder of this test's own: what other builds write there must not reach the rest of the suite
    const env = { XDG_CACHE_HOME: mkdtempSync(join(tmpdir(), "berth-cache-")) }
    const ours = buildOf((await box.run(["version", "--json"], { env: { BERTH_CODE_CACHE: "0" } })).stdout)
    const other = otherBuild(ours === "0therb1d" ? "1therb1d" : "0therb1d")
    builds.push(other)
    // the other build first, so that the cache it writes is there when this build starts
    for (const [bin, expected] of [
      [other.bin, "0therb1d"],
      [undefined, ours],
      [other.bin, "0therb1d"],
      [undefined, ours]
    ] as const) {
      const r = await box.run(["version", "--json"], { env, ...(bin === undefined ? {} : { bin }) })
      expect(r.code, r.stderr).toBe(0)
      expect(buildOf(r.stdout)).toBe(expected)
    }
    expect(readdirSync(join(env.XDG_CACHE_HOME, "berth")).filter((f) => f.endsWith(".v8"))).toHaveLength(2)
    // with the other build's cache beside its own, this build starts its daemon and talks to it
    const other2 = await box.run(["port", "--range", portBlock()], { env, bin: other.bin })
    expect(other2.code, other2.stderr).toBe(0)
    const started = await box.run(["port", "--range", portBlock()], { env })
    expect(started.code, started.stderr).toBe(0)
    expect(buildOf((await box.run(["daemon", "status", "--json"], { env })).stdout)).toBe(ours)
  }, 60_000)

  it("keeps the daemon's cache apart from the CLI's: neither throws the other's away, and a daemon starts from its own", async () => {
    const box = boxes.plain({})
    const cacheHome = mkdtempSync(join(tmpdir(), "berth-cache-"))
    const env = { XDG_CACHE_HOME: cacheHome, BERTH_TRACE: join(cacheHome, "trace") }
    const folder = join(env.XDG_CACHE_HOME, "berth")
    const caches = () => readdirSync(folder).filter((f) => f.endsWith(".v8"))
    /** what each process said of its code cache, in order: `<pid> taken|none|rejected` */
    const said = () =>
      readFileSync(env.BERTH_TRACE, "utf8")
        .split("\n")
        .flatMap((line) => {
          const m = /^\S+ (\d+) code cache: (\w+)$/.exec(line)
          return m === null ? [] : [{ pid: Number(m[1]), cache: m[2] }]
        })
    expect((await box.run(["version", "--json"], { env })).code).toBe(0)
    const [cli] = caches()
    expect(cli).toBeDefined()
    const written = statSync(join(folder, cli!)).mtimeMs
    // the daemon runs with flags of its own (V8 rejects a cache written under others): it starts, then stops
    expect((await box.run(["port", "--range", portBlock()], { env })).code).toBe(0)
    const first = JSON.parse((await box.run(["daemon", "status", "--json"], { env })).stdout) as { pid: number }
    // a daemon writes its cache once it has started, not only at its exit (a daemon is often ended by a signal)
    const deadline = Date.now() + 20_000
    while (caches().length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200))
    expect(caches()).toHaveLength(2)
    expect((await box.run(["daemon", "stop"], { env })).code).toBe(0)
    expect(statSync(join(folder, cli!)).mtimeMs).toBe(written)
    // the next daemon takes what the first wrote, and every command after the first took the CLI's
    expect((await box.run(["port", "--range", portBlock()], { env })).code).toBe(0)
    const second = JSON.parse((await box.run(["daemon", "status", "--json"], { env })).stdout) as { pid: number }
    const lines = said()
    expect(lines.filter((l) => l.pid === first.pid).map((l) => l.cache)).toEqual(["none"])
    expect(lines.filter((l) => l.pid === second.pid).map((l) => l.cache)).toEqual(["taken"])
    const commands = lines.filter((l) => l.pid !== first.pid && l.pid !== second.pid)
    expect(commands.map((l) => l.cache)).toEqual(["none", ...commands.slice(1).map(() => "taken")])
    expect(statSync(join(folder, cli!)).mtimeMs).toBe(written)
  }, 60_000)

  it("refuses a program that is not its entry's, even of the same length: one line, no stack, exit 1", async () => {
    const box = boxes.plain({})
    const env = { XDG_CACHE_HOME: mkdtempSync(join(tmpdir(), "berth-cache-")) }
    const forged = otherBuild("f0f0f0f0", { forged: true })
    builds.push(forged)
    const r = await runBerth(["version", "--json"], box.dir, box.home, { env, bin: forged.bin })
    expect(r.code, r.stdout).toBe(1)
    expect(r.stderr).toMatch(/^error: .*berth-program\.cjs is not the program of this berth .*: install berth again\n$/)
    expect(r.stderr).not.toMatch(/\bat \S+ \(/)
    // and it wrote no cache in its entry's name that this build would take: this build is itself, and its daemon stays
    const ours = await box.run(["port", "--range", portBlock()], { env })
    expect(ours.code, ours.stderr).toBe(0)
    const status = await box.run(["daemon", "status", "--json"], { env })
    const version = await box.run(["version", "--json"], { env })
    expect(buildOf(status.stdout)).toBe(buildOf(version.stdout))
    expect(buildOf(version.stdout)).not.toBe("f0f0f0f0")
  }, 60_000)
})
