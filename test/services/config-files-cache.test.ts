/**
 * What ConfigFiles remembers of a berth.toml: a file is read again only when its identity or stamp changed, a file
 * written again with the same text keeps its parsed config (the route table's per-config cache stays valid), and a
 * file replaced behind the same size and time is still read again.
 */
import { mkdtempSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { ConfigFiles, ConfigFilesLive } from "../../src/services/ConfigFiles.js"

const folders: Array<string> = []
afterAll(() => {
  for (const f of folders) rmSync(f, { recursive: true, force: true })
})
const folder = () => {
  const dir = mkdtempSync(join(tmpdir(), "berth-config-cache-"))
  folders.push(dir)
  return dir
}
const toml = (cmd: string) => `[services.web]\ncmd = "${cmd}"\nurl = "web"\n`

describe("ConfigFiles.load", () => {
  it.effect("keeps the parsed config of a file written again with the same text", () =>
    Effect.gen(function* () {
      const configs = yield* ConfigFiles
      const dir = folder()
      const file = join(dir, "berth.toml")
      writeFileSync(file, toml("node a.js"))
      const first = yield* configs.load(dir)
      // the same text, a later time: read again, but the same config
      writeFileSync(file, toml("node a.js"))
      const later = new Date(Date.now() + 5_000)
      utimesSync(file, later, later)
      const again = yield* configs.load(dir)
      expect(again.parsed).toBe(first.parsed)
      expect(again.digest).toBe(first.digest)
    }).pipe(Effect.provide(ConfigFilesLive), Effect.provide(NodeContext.layer))
  )

  it.effect("reads a file replaced by another of the same size and time", () =>
    Effect.gen(function* () {
      const configs = yield* ConfigFiles
      const dir = folder()
      const file = join(dir, "berth.toml")
      writeFileSync(file, toml("node a.js"))
      const first = yield* configs.load(dir)
      const { atime, mtime } = statSync(file)
      // as an editor or git saves: a new file renamed over the old one, here with the old one's size and times
      const next = join(dir, "berth.toml.new")
      writeFileSync(next, toml("node b.js"))
      utimesSync(next, atime, mtime)
      renameSync(next, file)
      const again = yield* configs.load(dir)
      expect(again.digest).not.toBe(first.digest)
      const web = again.parsed.config.services.find((s) => s.name === "web")
      expect(web?._tag === "Process" ? web.cmd : undefined).toBe("node b.js")
    }).pipe(Effect.provide(ConfigFilesLive), Effect.provide(NodeContext.layer))
  )
})
