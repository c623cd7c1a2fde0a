import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import * as Effect from "effect/Effect"
import { Git, GitLive, parseStatus, parseWorktreeList } from "../../src/services/Git.js"

// a fixed identity, and nothing from the machine's git config (hooks, templates, defaultBranch)
Object.assign(process.env, {
  GIT_AUTHOR_NAME: "Berth Test",
  GIT_AUTHOR_EMAIL: "test@berth.invalid",
  GIT_COMMITTER_NAME: "Berth Test",
  GIT_COMMITTER_EMAIL: "test@berth.invalid",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1"
})

const base = realpathSync(mkdtempSync(join(tmpdir(), "berth-git-")))
const marker = `/tmp/PWNED_${randomBytes(6).toString("hex")}`

afterAll(() => {
  rmSync(base, { recursive: true, force: true })
  expect(existsSync(marker)).toBe(false)
})

const git = (cwd: string, ...args: ReadonlyArray<string>): string =>
  execFileSync("git", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

let count = 0
const fresh = (name: string): string => join(base, `${name}-${count++}`)

/** A repository on branch main with one commit. */
const makeRepo = (options: { readonly commit?: boolean } = {}): string => {
  const dir = fresh("repo")
  mkdirSync(dir)
  git(dir, "init", "-q", "-b", "main")
  if (options.commit !== false) {
    writeFileSync(join(dir, "README.md"), "hello\n")
    git(dir, "add", "README.md")
    git(dir, "commit", "-q", "-m", "initial")
  }
  return dir
}

layer(GitLive)("Git", (it) => {
  describe("checkouts", () => {
    it.effect("reads every worktree's folder and branch from git's files, as `worktree list` gives them", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const linked = fresh("linked")
        const detached = fresh("detached")
        const gone = fresh("gone")
        git(dir, "worktree", "add", "-q", "-b", "feat/one", linked)
        git(dir, "worktree", "add", "-q", "--detach", detached)
        git(dir, "worktree", "add", "-q", "-b", "gone", gone)
        rmSync(gone, { recursive: true, force: true })
        const repo = yield* g.repo(linked)
        const listed = (yield* g.worktrees(dir)).map((t) => ({ path: t.path, branch: t.branch }))
        const read = yield* g.checkouts(repo)
        expect(read).toEqual(listed)
        // the main one first, the linked ones in the order git keeps them (its folder's)
        expect(read?.[0]).toEqual({ path: dir, branch: "main" })
        expect(new Map(read?.map((t) => [t.path, t.branch]))).toEqual(
          new Map([
            [dir, "main"],
            [linked, "feat/one"],
            [detached, undefined],
            [gone, "gone"]
          ])
        )
        // a worktree half made (no HEAD yet): not guessed at
        mkdirSync(join(dir, ".git", "worktrees", "half"))
        expect(yield* g.checkouts(repo)).toBeUndefined()
      })
    )
  })

  describe("repo", () => {
    it.effect("describes the main checkout, also from a subfolder", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const expected = { root: dir, commonDir: join(dir, ".git"), mainRoot: dir, branch: "main", isMain: true }
        expect(yield* g.repo(dir)).toEqual(expected)
        mkdirSync(join(dir, "a", "b"), { recursive: true })
        // here rev-parse prints --git-common-dir relative to the folder it ran in
        expect(yield* g.repo(join(dir, "a", "b"))).toEqual(expected)
      })
    )

    it.effect("names the branch of a repository without commits, and none when detached", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const empty = makeRepo({ commit: false })
        expect((yield* g.repo(empty)).branch).toBe("main")
        const dir = makeRepo()
        git(dir, "checkout", "-q", "--detach")
        const info = yield* g.repo(dir)
        expect(info.branch).toBeUndefined()
        expect(info.isMain).toBe(true)
      })
    )

    it.effect("says heads/x is x even when a tag has the same name", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        git(dir, "tag", "same")
        git(dir, "checkout", "-q", "-b", "same")
        expect((yield* g.repo(dir)).branch).toBe("same")
      })
    )

    it.effect("describes a linked worktree: mainRoot is the main checkout", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        git(dir, "worktree", "add", "-q", "-b", "feat/x", wt)
        const expected = { root: wt, commonDir: join(dir, ".git"), mainRoot: dir, branch: "feat/x", isMain: false }
        expect(yield* g.repo(wt)).toEqual(expected)
        mkdirSync(join(wt, "sub"))
        expect(yield* g.repo(join(wt, "sub"))).toEqual(expected)
      })
    )

    it.effect(
      "asks git once while its files stay as they were, and again at once after a checkout or a new repository",
      () =>
        Effect.gen(function* () {
          const g = yield* Git
          const dir = makeRepo()
          // every git the service runs passes through this one, which counts it
          const bin = fresh("bin")
          mkdirSync(bin)
          const counted = join(bin, "runs")
          const real = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim()
          writeFileSync(join(bin, "git"), `#!/bin/sh\necho run >> '${counted}'\nexec '${real}' "$@"\n`, { mode: 0o755 })
          // the test's own git, not counted
          const direct = (cwd: string, ...args: ReadonlyArray<string>) =>
            execFileSync(real, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
          const runs = () => (existsSync(counted) ? readFileSync(counted, "utf8").split("\n").length - 1 : 0)
          const path = process.env.PATH
          process.env.PATH = `${bin}:${path}`
          yield* Effect.gen(function* () {
            expect((yield* g.repo(dir)).branch).toBe("main")
            const asked = runs()
            expect(asked).toBe(1)
            // a commit moves the branch, not HEAD: the answer holds, and no git runs
            writeFileSync(join(dir, "more.md"), "more\n")
            direct(dir, "add", "more.md")
            direct(dir, "commit", "-q", "-m", "more")
            expect((yield* g.repo(dir)).branch).toBe("main")
            expect(runs()).toBe(asked)
            // asked through a symlink: kept too
            const link = fresh("link")
            symlinkSync(dir, link)
            expect((yield* g.repo(link)).root).toBe(dir)
            expect((yield* g.repo(link)).root).toBe(dir)
            expect(runs()).toBe(asked + 1)
            // another branch checked out: seen by the very next ask
            direct(dir, "checkout", "-q", "-b", "feature")
            expect((yield* g.repo(dir)).branch).toBe("feature")
            direct(dir, "checkout", "-q", "--detach")
            expect((yield* g.repo(dir)).branch).toBeUndefined()
            direct(dir, "checkout", "-q", "main")
            expect((yield* g.repo(dir)).branch).toBe("main")
            // a subfolder asked about, then made a repository of its own
            const sub = join(dir, "sub")
            mkdirSync(sub)
            expect((yield* g.repo(sub)).root).toBe(dir)
            direct(sub, "init", "-q", "-b", "inner")
            expect(yield* g.repo(sub)).toMatchObject({ root: sub, branch: "inner" })
            // the repository replaced under the same folder
            rmSync(join(dir, ".git"), { recursive: true, force: true })
            direct(dir, "init", "-q", "-b", "again")
            expect((yield* g.repo(dir)).branch).toBe("again")
          }).pipe(Effect.ensuring(Effect.sync(() => (process.env.PATH = path))))
        })
    )

    it.effect("fails with NotARepository outside a repository and for a missing folder", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const plain = fresh("plain")
        mkdirSync(plain)
        // keep git from finding a repository above the temp folder
        process.env.GIT_CEILING_DIRECTORIES = base
        const outside = yield* Effect.flip(g.repo(plain)).pipe(
          Effect.ensuring(Effect.sync(() => delete process.env.GIT_CEILING_DIRECTORIES))
        )
        expect(outside._tag).toBe("NotARepository")
        expect(outside.message).toBe(`${plain} is not inside a git repository`)
        const missing = yield* Effect.flip(g.repo(join(base, "nowhere")))
        expect(missing._tag).toBe("NotARepository")
      })
    )
  })

  describe("validateBranch", () => {
    it.effect("accepts git's branch names, shell metacharacters included", () =>
      Effect.gen(function* () {
        const g = yield* Git
        for (const name of ["main", "feat/x", "a;b", `q'uo"te`, "b`id`c", "p|i&p<e>s", "d$o(l)lar", "ünï"]) {
          expect(yield* g.validateBranch(name)).toBe(name)
        }
      })
    )

    it.effect("rejects what git rejects, a leading '-', and what --branch would expand", () =>
      Effect.gen(function* () {
        const g = yield* Git
        for (const name of [
          "",
          "-x",
          "--force",
          "a b",
          "a..b",
          "a.lock",
          "a/",
          "@",
          "HEAD",
          "@{-1}",
          "x@{1}",
          "a\tb"
        ]) {
          const error = yield* Effect.flip(g.validateBranch(name))
          expect(error._tag).toBe("InvalidBranchName")
          expect(error.name).toBe(name)
          expect(error.message).toContain("is not a valid branch name")
        }
      })
    )
  })

  describe("worktrees", () => {
    it.effect("adds a worktree for a new branch, created from HEAD", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        expect(yield* g.branchExists(dir, "feat/new")).toBe(false)
        const added = yield* g.addWorktree(dir, wt, "feat/new")
        expect(added).toEqual({ path: wt, branch: "feat/new", created: true, reused: false })
        expect(yield* g.branchExists(dir, "feat/new")).toBe(true)
        expect(git(wt, "rev-parse", "HEAD")).toBe(git(dir, "rev-parse", "HEAD"))
        expect((yield* g.repo(wt)).branch).toBe("feat/new")
      })
    )

    it.effect("adds a worktree for an existing branch without moving it", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        git(dir, "checkout", "-q", "-b", "old")
        writeFileSync(join(dir, "old.txt"), "old\n")
        git(dir, "add", "old.txt")
        git(dir, "commit", "-q", "-m", "old")
        const tip = git(dir, "rev-parse", "old")
        git(dir, "checkout", "-q", "main")
        const wt = fresh("wt")
        const added = yield* g.addWorktree(dir, wt, "old")
        expect(added.created).toBe(false)
        expect(git(wt, "rev-parse", "HEAD")).toBe(tip)
        expect(existsSync(join(wt, "old.txt"))).toBe(true)
      })
    )

    it.effect("names the worktree that already holds the branch, and reuses the same path", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        yield* g.addWorktree(dir, wt, "busy")
        const error = yield* Effect.flip(g.addWorktree(dir, fresh("wt"), "busy"))
        expect(error._tag).toBe("BranchCheckedOut")
        expect(error.message).toContain(wt)
        const main = yield* Effect.flip(g.addWorktree(dir, fresh("wt"), "main"))
        expect(main.message).toContain(dir)
        expect(yield* g.addWorktree(dir, wt, "busy")).toEqual({
          path: wt,
          branch: "busy",
          created: false,
          reused: true
        })
      })
    )

    it.effect("tells a worktree of the repository from any other folder at a world's path, and never removes one", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const other = makeRepo()
        const wt = fresh("wt")
        git(dir, "worktree", "add", "-q", "-b", "real", wt)
        expect(yield* g.isWorktreeOf(dir, wt)).toBe(true)
        // a plain folder, one inside the main checkout (git finds the repository there, at another top level), another
        // repository's worktree, and a folder whose .git file points into this repository's worktree records
        const plain = fresh("plain")
        mkdirSync(plain)
        const insideMain = join(dir, "sub")
        mkdirSync(insideMain)
        const foreign = fresh("foreign")
        git(other, "worktree", "add", "-q", "-b", "x", foreign)
        const forged = fresh("forged")
        mkdirSync(forged)
        writeFileSync(join(forged, ".git"), `gitdir: ${join(dir, ".git", "worktrees", basename(wt))}\n`)
        for (const folder of [plain, insideMain, foreign, forged])
          expect(yield* g.isWorktreeOf(dir, folder)).toBe(false)
        for (const folder of [plain, insideMain, foreign]) {
          writeFileSync(join(folder, "mine.txt"), "not berth's\n")
          expect(yield* g.removeWorktree(dir, folder, true)).toBe(false)
          expect(existsSync(join(folder, "mine.txt"))).toBe(true)
        }
        expect(yield* g.removeWorktree(dir, wt, true)).toBe(true)
        expect(existsSync(wt)).toBe(false)
      })
    )

    it.effect("prunes a worktree deleted by hand so its branch can be checked out again", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        yield* g.addWorktree(dir, wt, "gone")
        rmSync(wt, { recursive: true, force: true })
        expect((yield* g.worktrees(dir)).find((w) => w.path === wt)?.prunable).toBe(true)
        const again = fresh("wt")
        expect((yield* g.addWorktree(dir, again, "gone")).path).toBe(again)
      })
    )

    it.effect("never hands a branch name to a shell", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const withSpace = `a$(touch ${marker})b`
        expect((yield* Effect.flip(g.validateBranch(withSpace)))._tag).toBe("InvalidBranchName")
        expect((yield* Effect.flip(g.addWorktree(dir, fresh("wt"), withSpace)))._tag).toBe("InvalidBranchName")
        const names = [
          `a$(touch\${IFS}${marker})b`,
          `b\`touch\${IFS}${marker}\`c`,
          `c;touch\${IFS}${marker};d`,
          `e|touch\${IFS}${marker}&f>g<h`,
          `it's"quoted"`
        ]
        for (const [i, name] of names.entries()) {
          // the folder carries metacharacters too
          const wt = join(base, `wt $(touch ${marker}) ;\`x\` '${i}"`)
          const added = yield* g.addWorktree(dir, wt, name)
          expect(added).toEqual({ path: wt, branch: name, created: true, reused: false })
          expect(yield* g.branchExists(dir, name)).toBe(true)
          expect((yield* g.repo(wt)).branch).toBe(name)
          expect((yield* g.worktrees(dir)).find((w) => w.path === wt)?.branch).toBe(name)
          // and once more, now that the branch exists
          yield* g.removeWorktree(dir, wt, false)
          expect((yield* g.addWorktree(dir, wt, name)).created).toBe(false)
        }
        expect(existsSync(marker)).toBe(false)
      })
    )

    it.effect("refuses a branch starting with '-' and creates nothing", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        const error = yield* Effect.flip(g.addWorktree(dir, wt, "-x"))
        expect(error._tag).toBe("InvalidBranchName")
        expect(existsSync(wt)).toBe(false)
        expect(yield* g.worktrees(dir)).toHaveLength(1)
      })
    )

    it.effect("lists worktrees with their flags", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const head = git(dir, "rev-parse", "HEAD").trim()
        const feature = fresh("wt")
        const detached = fresh("wt")
        const locked = fresh("wt")
        yield* g.addWorktree(dir, feature, "feat/list")
        git(dir, "worktree", "add", "-q", "--detach", detached)
        yield* g.addWorktree(dir, locked, "locked")
        git(dir, "worktree", "lock", "--reason", "a reason with spaces", locked)
        const flags = { detached: false, bare: false, locked: false, prunable: false }
        expect(yield* g.worktrees(dir)).toEqual([
          { path: dir, head, branch: "main", ...flags },
          { path: feature, head, branch: "feat/list", ...flags },
          { path: detached, head, ...flags, detached: true },
          { path: locked, head, branch: "locked", ...flags, locked: true }
        ])
        git(dir, "worktree", "unlock", locked)
      })
    )

    it.effect("removes a clean worktree, refuses a dirty one unless forced", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const clean = fresh("wt")
        const dirty = fresh("wt")
        yield* g.addWorktree(dir, clean, "clean")
        yield* g.addWorktree(dir, dirty, "dirty")
        writeFileSync(join(dirty, "scratch.txt"), "unsaved\n")

        yield* g.removeWorktree(dir, clean, false)
        expect(existsSync(clean)).toBe(false)

        const refused = yield* Effect.flip(g.removeWorktree(dir, dirty, false))
        expect(refused._tag).toBe("GitFailed")
        expect(refused.message).toMatch(/^git worktree remove failed \(exit \d+\): .*modified or untracked files/)
        expect(refused.message).not.toMatch(/\n\s+at /)
        expect(existsSync(join(dirty, "scratch.txt"))).toBe(true)

        yield* g.removeWorktree(dir, dirty, true)
        expect(existsSync(dirty)).toBe(false)
        expect((yield* g.worktrees(dir)).map((w) => w.path)).toEqual([dir])
        // branches stay: removing a world keeps its commits
        expect(yield* g.branchExists(dir, "dirty")).toBe(true)
      })
    )

    it.effect("treats a worktree folder deleted by hand as removed", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        yield* g.addWorktree(dir, wt, "vanished")
        rmSync(wt, { recursive: true, force: true })
        yield* g.removeWorktree(dir, wt, false)
        expect((yield* g.worktrees(dir)).map((w) => w.path)).toEqual([dir])
      })
    )
  })

  describe("changes", () => {
    it.effect("lists modified, added, deleted, untracked and renamed files", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        for (const file of ["keep.txt", "move.txt", "drop.txt", `we ird "name".txt`]) {
          writeFileSync(join(dir, file), `${file}\n`)
        }
        git(dir, "add", "-A")
        git(dir, "commit", "-q", "-m", "files")
        expect(yield* g.changes(dir)).toEqual([])

        writeFileSync(join(dir, "README.md"), "changed\n")
        writeFileSync(join(dir, `we ird "name".txt`), "changed\n")
        writeFileSync(join(dir, "added.txt"), "new\n")
        git(dir, "add", "added.txt")
        rmSync(join(dir, "drop.txt"))
        git(dir, "mv", "move.txt", "moved.txt")
        mkdirSync(join(dir, "deep", "er"), { recursive: true })
        writeFileSync(join(dir, "deep", "er", "untracked.txt"), "?\n")

        const changes = yield* g.changes(dir)
        expect([...changes].sort((a, b) => (a.file < b.file ? -1 : 1))).toEqual([
          { status: " M", file: "README.md" },
          { status: "A ", file: "added.txt" },
          { status: "??", file: "deep/er/untracked.txt" },
          { status: " D", file: "drop.txt" },
          { status: "R ", file: "moved.txt", from: "move.txt" },
          { status: " M", file: `we ird "name".txt` }
        ])
      })
    )

    it.effect("reports changes of a linked worktree only", () =>
      Effect.gen(function* () {
        const g = yield* Git
        const dir = makeRepo()
        const wt = fresh("wt")
        yield* g.addWorktree(dir, wt, "side")
        writeFileSync(join(wt, "only-here.txt"), "x\n")
        expect(yield* g.changes(wt)).toEqual([{ status: "??", file: "only-here.txt" }])
        expect(yield* g.changes(dir)).toEqual([])
      })
    )
  })
})

describe("parsers", () => {
  it.effect("parse porcelain output", () =>
    Effect.sync(() => {
      expect(parseStatus("R  new\0old\0 M a b\0?? c\0")).toEqual([
        { status: "R ", file: "new", from: "old" },
        { status: " M", file: "a b" },
        { status: "??", file: "c" }
      ])
      expect(parseWorktreeList("worktree /r\0bare\0\0worktree /w\0HEAD abc\0prunable gone\0\0")).toEqual([
        { path: "/r", head: "", detached: false, bare: true, locked: false, prunable: false },
        { path: "/w", head: "abc", detached: false, bare: false, locked: false, prunable: true }
      ])
    })
  )
})
