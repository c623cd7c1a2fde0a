/**
 * The worktree's files as berth touches them, on a real git repository: env_files written and put back as they were,
 * berth's block taken back, berth's own writes never counted as the user's work, and a folder that is no worktree of
 * the repository never taken for the world's.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, describe, expect, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Model from "../../src/domain/config/model.js"
import { ConfigFiles, ConfigFilesLive } from "../../src/services/ConfigFiles.js"
import { GitLive } from "../../src/services/Git.js"
import { Home } from "../../src/services/Home.js"
import type { WorldRow } from "../../src/services/Registry.js"
import { type EnvBefore, WorktreeFiles, WorktreeFilesLive } from "../../src/services/worktree/WorktreeFiles.js"

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: "Berth Test",
  GIT_AUTHOR_EMAIL: "test@berth.invalid",
  GIT_COMMITTER_NAME: "Berth Test",
  GIT_COMMITTER_EMAIL: "test@berth.invalid",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1"
}
const base = realpathSync(mkdtempSync(join(tmpdir(), "berth-worktree-files-")))
afterAll(() => rmSync(base, { recursive: true, force: true }))

const TOML = `[project]
name = "files"

[services.api]
cmd = "serve"
env_file = [".env", "made.env"]
env = { GREETING = "hello" }
`

let count = 0
/** A repository holding berth.toml and a committed `.env`, one commit. */
const repository = (): string => {
  const dir = join(base, `repo-${count++}`)
  mkdirSync(dir)
  writeFileSync(join(dir, "berth.toml"), TOML)
  writeFileSync(join(dir, ".env"), "MINE=1\n")
  for (const args of [
    ["init", "-q", "-b", "main"],
    ["add", "-A"],
    ["commit", "-q", "-m", "initial"]
  ]) {
    execFileSync("git", args, { cwd: dir, env: gitEnv })
  }
  return dir
}

/** The main checkout of `dir` as the registry would hold it. */
const mainWorld = (dir: string): WorldRow => ({
  id: 1,
  projectId: 1,
  projectName: "files",
  declaredName: "files",
  mainRoot: dir,
  name: "main",
  slug: "main",
  path: dir,
  branch: "main",
  isMain: true,
  desired: "up",
  observed: "stopped",
  reason: null,
  setupDone: false,
  worktreeReady: true,
  selection: { services: [], groups: [] },
  env: null,
  wakesOnRequest: false,
  createdAt: 0,
  startedAt: null
})

const configOf = (dir: string) =>
  Effect.map(
    Effect.flatMap(ConfigFiles, (c) => c.load(dir)),
    (loaded) => Model.forWorld(loaded.parsed.config, "main")
  )

const api = (config: Model.Config) => Model.processes(config).find((s) => s.name === "api")!

const live = WorktreeFilesLive.pipe(
  Layer.provideMerge(Layer.mergeAll(GitLive, ConfigFilesLive, Home.layerAt(join(base, "home")))),
  Layer.provideMerge(NodeContext.layer)
)

layer(live)("the worktree's files", (it) => {
  describe("env_file", () => {
    it.effect("puts every file back as it was before the first write: a committed one's text, a made one gone", () =>
      Effect.gen(function* () {
        const files = yield* WorktreeFiles
        const dir = repository()
        const config = yield* configOf(dir)
        const before: EnvBefore = new Map()
        yield* files.writeEnv(mainWorld(dir), api(config), { GREETING: "hello", PORT: "4100" }, before)
        yield* files.writeEnv(mainWorld(dir), api(config), { GREETING: "again", PORT: "4101" }, before)
        expect(readFileSync(join(dir, ".env"), "utf8")).toContain("PORT=4101")
        expect(existsSync(join(dir, "made.env"))).toBe(true)

        yield* files.restoreEnv(before)
        expect(readFileSync(join(dir, ".env"), "utf8")).toBe("MINE=1\n")
        expect(existsSync(join(dir, "made.env"))).toBe(false)
      })
    )

    it.effect("counts berth's own writes as none of the user's work, and takes back its block", () =>
      Effect.gen(function* () {
        const files = yield* WorktreeFiles
        const dir = repository()
        const config = yield* configOf(dir)
        const w = mainWorld(dir)
        yield* files.writeEnv(w, api(config), { PORT: "4100" }, new Map())
        expect(yield* files.userChanges(w, config)).toEqual([])

        writeFileSync(join(dir, "notes.txt"), "the user's\n")
        expect(yield* files.userChanges(w, config)).toEqual(["?? notes.txt"])

        yield* files.retractEnv(w, config)
        expect(readFileSync(join(dir, ".env"), "utf8")).toBe("MINE=1\n")
      })
    )

    it.effect(
      "fails with WorktreeFileFailed, naming the world, the field and the file, when one cannot be written",
      () =>
        Effect.gen(function* () {
          const files = yield* WorktreeFiles
          const dir = repository()
          const config = yield* configOf(dir)
          // a folder where berth.toml names a file
          mkdirSync(join(dir, "made.env"))
          const failed = yield* Effect.flip(files.writeEnv(mainWorld(dir), api(config), { PORT: "4100" }, new Map()))
          expect(failed._tag).toBe("WorktreeFileFailed")
          expect(failed.message).toMatch(
            new RegExp(`^world main: services\\.api\\.env_file ${join(dir, "made.env")}: EISDIR`)
          )
          expect(failed.message).toContain("\n  hint: ")
        })
    )
  })

  it.effect("fails with WorktreeMissing when the main checkout a world is has gone", () =>
    Effect.gen(function* () {
      const files = yield* WorktreeFiles
      const gone = join(base, `gone-${count++}`)
      const missing = yield* Effect.flip(files.ensure({ ...mainWorld(gone), path: gone }))
      expect(missing._tag).toBe("WorktreeMissing")
      expect(missing.message).toBe(
        `world main is the main checkout ${gone}, which is missing\n  hint: put the repository back there, or berth remove main forgets the world`
      )
    })
  )

  it.effect("refuses a folder standing at a world's path that is no worktree of the repository", () =>
    Effect.gen(function* () {
      const files = yield* WorktreeFiles
      const dir = repository()
      const stranger = join(base, `stranger-${count++}`)
      mkdirSync(stranger)
      const refused = yield* Effect.flip(
        files.ensure({ ...mainWorld(dir), isMain: false, name: "feat", path: stranger, branch: "feat" })
      )
      expect(refused._tag).toBe("FolderInTheWay")
      expect(refused.message).toContain("is not a worktree of")

      const made = join(base, `made-${count++}`)
      const added = yield* files.ensure({ ...mainWorld(dir), isMain: false, name: "feat", path: made, branch: "feat" })
      expect(added.madeBranch).toBe("feat")
      expect(existsSync(join(made, "berth.toml"))).toBe(true)
    })
  )
})
