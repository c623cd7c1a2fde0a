/**
 * The `git` executable, run with an argument array (never a shell: branch names may legally hold `$ ; ( ) ' " | & < >`
 * and backticks). Every method names its repository by a folder; the environment never picks one (GIT_DIR and friends
 * are dropped, so berth behaves the same when it runs inside a git hook).
 */
import { execFile } from "node:child_process"
import {
  closeSync,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync
} from "node:fs"
import * as path from "node:path"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { branchNameProblem } from "../domain/branch.js"

export class NotARepository extends Data.TaggedError("NotARepository")<{ readonly path: string }> {
  override get message(): string {
    return `${this.path} is not inside a git repository`
  }
}

export class InvalidBranchName extends Data.TaggedError("InvalidBranchName")<{
  readonly name: string
  readonly reason: string
}> {
  override get message(): string {
    return `${JSON.stringify(this.name)} is not a valid branch name: ${this.reason}`
  }
}

export class GitFailed extends Data.TaggedError("GitFailed")<{
  readonly args: ReadonlyArray<string>
  readonly stderr: string
  /** -1 when git did not run or was killed by a signal */
  readonly exitCode: number
}> {
  override get message(): string {
    const command = ["git", ...this.args.slice(0, 2).filter((a) => !a.startsWith("-"))].join(" ")
    const detail = this.stderr === "" ? "" : `: ${this.stderr}`
    return `${command} failed (exit ${this.exitCode})${detail}`
  }
}

/** A branch can be checked out in one worktree only. */
export class BranchCheckedOut extends Data.TaggedError("BranchCheckedOut")<{
  readonly branch: string
  readonly worktree: string
}> {
  override get message(): string {
    return `branch ${JSON.stringify(this.branch)} is already checked out in the worktree at ${this.worktree}`
  }
}

/** A repository with no commit yet: a new worktree has no HEAD to branch from. */
export class NoCommits extends Data.TaggedError("NoCommits")<{ readonly repoRoot: string }> {
  override get message(): string {
    return `the repository ${this.repoRoot} has no commit yet, and a new world's worktree branches from the main checkout's committed HEAD\n  hint: commit first: git add -A && git commit -m "first commit"`
  }
}

export interface RepoInfo {
  /** this worktree's top-level folder */
  readonly root: string
  /** the repository's shared git folder, absolute */
  readonly commonDir: string
  /** the main worktree's folder (for a bare repository, the bare folder itself) */
  readonly mainRoot: string
  /** undefined when HEAD is detached */
  readonly branch: string | undefined
  readonly isMain: boolean
}

export interface Worktree {
  readonly path: string
  /** the checked-out commit; empty for a bare entry or an unborn branch */
  readonly head: string
  /** without `refs/heads/` */
  readonly branch?: string
  readonly detached: boolean
  readonly bare: boolean
  readonly locked: boolean
  /** its folder is gone: `git worktree prune` would drop it */
  readonly prunable: boolean
}

export interface Change {
  /** the two porcelain v1 status letters as git prints them: " M", "A ", "R ", "??", … */
  readonly status: string
  /** relative to the worktree root; for a rename or copy, the new name */
  readonly file: string
  /** for a rename or copy, the old name */
  readonly from?: string
}

export interface AddedWorktree {
  readonly path: string
  readonly branch: string
  /** the branch did not exist and was created from HEAD */
  readonly created: boolean
  /** the branch was already checked out at this very path: nothing was done */
  readonly reused: boolean
}

interface Output {
  readonly stdout: string
  readonly stderr: string
  readonly exitCode: number
}

/** Variables that would make git ignore the folder it runs in. */
const REPOSITORY_VARIABLES = [
  "GIT_DIR",
  "GIT_WORK_TREE",
  "GIT_INDEX_FILE",
  "GIT_COMMON_DIR",
  "GIT_OBJECT_DIRECTORY",
  "GIT_ALTERNATE_OBJECT_DIRECTORIES",
  "GIT_NAMESPACE",
  "GIT_PREFIX"
]

const gitEnvironment = (): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of REPOSITORY_VARIABLES) delete env[name]
  // messages are parsed (checked out at '…'), so keep them in English; never prompt; never take the index lock
  // just to refresh stat data while the user may be running git in the same worktree
  env.LC_ALL = "C"
  env.LANGUAGE = "C"
  env.GIT_TERMINAL_PROMPT = "0"
  env.GIT_OPTIONAL_LOCKS = "0"
  return env
}

const MAX_OUTPUT = 64 * 1024 * 1024

/** Runs git; a non-zero exit is a value here, so callers can read exit codes such as show-ref's 1. */
const exec = (cwd: string, args: ReadonlyArray<string>): Effect.Effect<Output, NotARepository | GitFailed> =>
  Effect.async<Output, NotARepository | GitFailed>((resume, signal) => {
    execFile(
      "git",
      [...args],
      { cwd, env: gitEnvironment(), signal, encoding: "utf8", maxBuffer: MAX_OUTPUT, windowsHide: true },
      (error, stdout, stderr) => {
        if (error === null) return resume(Effect.succeed({ stdout, stderr, exitCode: 0 }))
        if (typeof error.code === "number") return resume(Effect.succeed({ stdout, stderr, exitCode: error.code }))
        // spawn itself failed: node reports a missing cwd as ENOENT too, so tell the two apart
        if (error.code === "ENOENT" && !existsSync(cwd)) return resume(Effect.fail(new NotARepository({ path: cwd })))
        const reason =
          error.code === "ENOENT"
            ? "git was not found on PATH"
            : error.signal
              ? `killed by ${error.signal}`
              : (error.message.split("\n")[0] ?? "")
        resume(Effect.fail(new GitFailed({ args, stderr: `${stderr.trim()}\n${reason}`.trim(), exitCode: -1 })))
      }
    )
  })

const isNotARepository = (stderr: string) => /not a git repository/i.test(stderr)

/** Runs git and wants exit 0. */
const run = (cwd: string, args: ReadonlyArray<string>): Effect.Effect<string, NotARepository | GitFailed> =>
  Effect.flatMap(exec(cwd, args), (out): Effect.Effect<string, NotARepository | GitFailed> => {
    if (out.exitCode === 0) return Effect.succeed(out.stdout)
    if (isNotARepository(out.stderr)) return Effect.fail(new NotARepository({ path: cwd }))
    return Effect.fail(new GitFailed({ args, stderr: out.stderr.trim(), exitCode: out.exitCode }))
  })

/** The same folder however it is spelled (symlinks, `..`, a trailing slash). */
const canonical = (p: string): string => {
  const absolute = path.resolve(p)
  try {
    // one system call, where the JavaScript realpath looks at each component of the path in turn
    return realpathSync.native(absolute)
  } catch {
    return absolute
  }
}

const lines = (text: string): Array<string> => text.split("\n").filter((line) => line !== "")

const stripHeads = (ref: string): string | undefined =>
  ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : undefined

/** A worktree's folder and the branch it has checked out (none when its HEAD is detached). */
export interface Checkout {
  readonly path: string
  readonly branch: string | undefined
}

/**
 * The worktrees of a repository as git's files give them: the main one (`<common>/HEAD`, unless the repository is
 * bare) and each linked one (`<common>/worktrees/<id>/HEAD`, and its folder in `gitdir`, which names its `.git`
 * file). Throws when a file is missing or not as git writes it.
 */
export const readCheckouts = (repo: Pick<RepoInfo, "commonDir" | "mainRoot">): Array<Checkout> => {
  const branchOf = (head: string): string | undefined => {
    const text = readFileSync(head, "utf8").trim()
    if (/^[0-9a-f]{40,64}$/.test(text)) return undefined
    if (!text.startsWith("ref: ")) throw new Error(`${head}: not a HEAD git writes`)
    return stripHeads(text.slice("ref: ".length))
  }
  const result: Array<Checkout> = []
  if (path.basename(repo.commonDir) === ".git") {
    result.push({ path: repo.mainRoot, branch: branchOf(path.join(repo.commonDir, "HEAD")) })
  }
  const admin = path.join(repo.commonDir, "worktrees")
  if (!existsSync(admin)) return result
  for (const id of readdirSync(admin)) {
    const gitdir = readFileSync(path.join(admin, id, "gitdir"), "utf8").trim()
    if (!path.isAbsolute(gitdir)) throw new Error(`${admin}/${id}/gitdir: not an absolute path`)
    result.push({ path: path.dirname(gitdir), branch: branchOf(path.join(admin, id, "HEAD")) })
  }
  return result
}

/** `git worktree list --porcelain -z`: attributes end with NUL, an empty attribute ends a record. */
export const parseWorktreeList = (text: string): Array<Worktree> => {
  const result: Array<Worktree> = []
  let current: { -readonly [K in keyof Worktree]: Worktree[K] } | undefined
  const flush = () => {
    if (current !== undefined) result.push(current)
    current = undefined
  }
  for (const field of text.split("\0")) {
    if (field === "") {
      flush()
      continue
    }
    const space = field.indexOf(" ")
    const key = space === -1 ? field : field.slice(0, space)
    const value = space === -1 ? "" : field.slice(space + 1)
    if (key === "worktree") {
      flush()
      current = { path: value, head: "", detached: false, bare: false, locked: false, prunable: false }
      continue
    }
    if (current === undefined) continue
    if (key === "HEAD") current.head = value
    else if (key === "branch") {
      const branch = stripHeads(value)
      if (branch !== undefined) current.branch = branch
    } else if (key === "detached") current.detached = true
    else if (key === "bare") current.bare = true
    else if (key === "locked") current.locked = true
    else if (key === "prunable") current.prunable = true
  }
  flush()
  return result
}

/** `git status --porcelain=v1 -z`: `XY path` per entry; a rename or copy is followed by its old path. */
export const parseStatus = (text: string): Array<Change> => {
  const fields = text.split("\0")
  const result: Array<Change> = []
  for (let i = 0; i < fields.length; i++) {
    const entry = fields[i] ?? ""
    if (entry.length < 4) continue
    const status = entry.slice(0, 2)
    const file = entry.slice(3)
    if (/[RC]/.test(status)) {
      i++
      result.push({ status, file, from: fields[i] ?? "" })
    } else {
      result.push({ status, file })
    }
  }
  return result
}

const readText = (file: string): string | undefined => {
  try {
    return readFileSync(file, "utf8").trim()
  } catch {
    return undefined
  }
}

/**
 * `folder`'s linked-worktree files as git writes them, read without a process: its `.git` file names an admin folder
 * whose `gitdir` names that `.git` file back; answers the admin folder's common dir. Undefined whenever anything is
 * not so (a main checkout, a plain folder, git's files being written, a format this does not know): ask git then.
 */
export const linkedCommonDir = (folder: string): string | undefined => {
  try {
    const dotGit = path.join(folder, ".git")
    if (!lstatSync(dotGit).isFile()) return undefined
    const pointer = readText(dotGit)
    if (pointer === undefined || !pointer.startsWith("gitdir: ")) return undefined
    const admin = canonical(path.resolve(folder, pointer.slice("gitdir: ".length)))
    const back = readText(path.join(admin, "gitdir"))
    const common = readText(path.join(admin, "commondir"))
    if (back === undefined || common === undefined) return undefined
    if (canonical(path.resolve(admin, back)) !== canonical(dotGit)) return undefined
    return canonical(path.resolve(admin, common))
  } catch {
    return undefined
  }
}

/** how long an answer of `repo` is kept at most, however its files look */
const REPO_MEMORY_MS = 60_000

/**
 * What one answer of `repo` for the folder `dir` rests on, as the files are now: HEAD's identity (git replaces it by a
 * rename at every checkout, so another branch gives it another inode), the worktree's `.git` entry, and that `dir`
 * still exists with no `.git` of its own between it and the worktree's top. Undefined when any of that cannot be read:
 * ask git then. With it, HEAD's text as read.
 */
const repoStamp = (
  dir: string,
  root: string,
  gitDir: string
): { readonly stamp: string; readonly head: string } | undefined => {
  const head = readHead(gitDir)
  const dotGit = dotGitId(root)
  if (head === undefined || dotGit === undefined || !plainPathTo(canonical(dir), root)) return undefined
  return { stamp: `${head.id}|${dotGit}`, head: head.text.trim() }
}

/** HEAD's identity and text, read through one descriptor: the text is the one the identity names. */
const readHead = (gitDir: string): { readonly id: string; readonly text: string } | undefined => {
  try {
    const fd = openSync(path.join(gitDir, "HEAD"), "r")
    try {
      const s = fstatSync(fd, { bigint: true })
      return { id: `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`, text: readFileSync(fd, "utf8") }
    } finally {
      closeSync(fd)
    }
  } catch {
    return undefined
  }
}

/** The worktree's `.git`: a folder by its inode (its time moves with every index write), a file by all it is. */
const dotGitId = (root: string): string | undefined => {
  try {
    const s = lstatSync(path.join(root, ".git"), { bigint: true })
    return s.isDirectory() ? `d${s.dev}:${s.ino}` : `f${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`
  } catch {
    return undefined
  }
}

/** `dir` (resolved) exists, is `root` or under it, and no folder from `dir` up to `root` has a `.git` of its own. */
const plainPathTo = (dir: string, root: string): boolean => {
  if (dir !== root && !dir.startsWith(`${root}${path.sep}`)) return false
  if (!existsSync(dir)) return false
  for (let folder = dir; folder !== root; folder = path.dirname(folder)) {
    if (existsSync(path.join(folder, ".git"))) return false
  }
  return true
}

/**
 * The stamp of an answer just had from git, when the HEAD it names says what the answer says: a checkout between
 * git's read and this one leaves them apart, and nothing is vouched for then.
 */
const answerStamp = (dir: string, info: RepoInfo, gitDir: string): string | undefined => {
  const now = repoStamp(dir, info.root, gitDir)
  if (now === undefined) return undefined
  const agrees =
    info.branch === undefined ? !now.head.startsWith("ref:") : now.head === `ref: refs/heads/${info.branch}`
  return agrees ? now.stamp : undefined
}

/** git's own words when a branch is held by another worktree (2.39: "checked out at", later: "used by worktree at"). */
/** what `git worktree add -b` says when the branch exists already */
const BRANCH_EXISTS = /a branch named .* already exists/

const CHECKED_OUT = /already (?:checked out|used by worktree) at '([^']*)'/

export interface GitService {
  /** The repository `cwd` is in: its worktree root, common dir, main checkout and branch. */
  readonly repo: (cwd: string) => Effect.Effect<RepoInfo, NotARepository | GitFailed>
  readonly worktrees: (repoRoot: string) => Effect.Effect<ReadonlyArray<Worktree>, NotARepository | GitFailed>
  /**
   * The folder and branch of every worktree of the repository, read from git's own files (`readCheckouts`): what
   * `worktrees` answers of them, without a process. Undefined when the files are not as expected (a worktree being
   * added right now): ask `worktrees` then.
   */
  readonly checkouts: (repo: RepoInfo) => Effect.Effect<ReadonlyArray<Checkout> | undefined>
  /** git's branch-name rules, checked without a process: the name, or why it is not one. */
  readonly validateBranch: (name: string) => Effect.Effect<string, InvalidBranchName>
  readonly branchExists: (repoRoot: string, name: string) => Effect.Effect<boolean, NotARepository | GitFailed>
  /**
   * Checks out `branch` in a new worktree at `worktreePath`, creating the branch from HEAD when it does not exist;
   * nothing is done when it is already checked out at that very path.
   */
  readonly addWorktree: (
    repoRoot: string,
    worktreePath: string,
    branch: string
  ) => Effect.Effect<AddedWorktree, NotARepository | InvalidBranchName | GitFailed | BranchCheckedOut | NoCommits>
  /**
   * Whether `folder` is a worktree of the repository whose main checkout is `mainRoot`: git's common dir there is
   * that repository's and its top level is that very folder. A folder merely standing at a world's path (made by
   * hand, or left by something else) is not one.
   */
  readonly isWorktreeOf: (mainRoot: string, folder: string) => Effect.Effect<boolean>
  /**
   * `git worktree remove` (refused for a worktree with changes unless `force`), then `git worktree prune`. A folder
   * there that is not a worktree of this repository is not berth's: it is left as it is, and only pruned around.
   * Answers whether a worktree was removed.
   */
  readonly removeWorktree: (
    repoRoot: string,
    worktreePath: string,
    force: boolean
  ) => Effect.Effect<boolean, NotARepository | GitFailed>
  /** Uncommitted and untracked files, paths relative to the worktree root. */
  readonly changes: (worktreePath: string) => Effect.Effect<ReadonlyArray<Change>, NotARepository | GitFailed>
  /** A file's text as git's index holds it (what a change is measured against); undefined when it holds none. */
  readonly indexed: (
    worktreePath: string,
    file: string
  ) => Effect.Effect<string | undefined, NotARepository | GitFailed>
  /** The address of `remote` (say `origin`) in the repository, if it has one. */
  readonly remoteUrl: (
    repoRoot: string,
    remote: string
  ) => Effect.Effect<string | undefined, NotARepository | GitFailed>
  /** Whether the repository at `url` has the branch (`git ls-remote`): what another machine can clone. */
  readonly remoteHasBranch: (url: string, branch: string) => Effect.Effect<boolean, NotARepository | GitFailed>
  /**
   * A clone of `url` at `path`, made when there is none yet (a clone there is kept as it is), its own checkout detached
   * at `branch`: whatever the remote's HEAD names, and with every branch left free for a worktree.
   */
  readonly cloneOnce: (url: string, path: string, branch: string) => Effect.Effect<void, NotARepository | GitFailed>
  /**
   * Brings `branch` from `url` into the repository when it has no branch of that name (one it has is its own: never
   * moved), so that a worktree of it can be made.
   */
  readonly fetchBranch: (
    repoRoot: string,
    url: string,
    branch: string
  ) => Effect.Effect<void, NotARepository | GitFailed>
}

export class Git extends Context.Tag("berth/Git")<Git, GitService>() {}

const make = Effect.gen(function* () {
  // git's worktree bookkeeping (.git/worktrees) is not safe against concurrent adds and removes in one repository:
  // one `worktree add` reads another's half-written entry. Worlds start in parallel, so these take turns.
  const worktreeLock = yield* Effect.makeSemaphore(1)
  const worktrees = Effect.fn("Git.worktrees")(function* (repoRoot: string) {
    return parseWorktreeList(yield* run(repoRoot, ["worktree", "list", "--porcelain", "-z"]))
  })

  /**
   * Which repository each folder asked about is in, kept while git's files say the answer still holds
   * (`repoStamp`): agents run `env` and `up` in tight loops, and asking git costs a process each time, while a
   * checkout of another branch must be seen by the very next command. Kept a minute at most besides.
   */
  const remembered = new Map<
    string,
    { readonly at: number; readonly gitDir: string; readonly stamp: string; readonly info: RepoInfo }
  >()

  /**
   * One rev-parse call. `--symbolic-full-name` rather than `--abbrev-ref`: the latter prints `heads/x` when a tag
   * is also called `x`. A branch with no commit yet makes rev-parse fail after printing the paths; symbolic-ref
   * names it then.
   */
  const askRepo = Effect.fn("Git.askRepo")(function* (dir: string) {
    const args = [
      "rev-parse",
      "--show-toplevel",
      "--absolute-git-dir",
      "--git-common-dir",
      "--symbolic-full-name",
      "HEAD"
    ]
    const out = yield* exec(dir, args)
    const [top, gitDir, common, head] = lines(out.stdout)
    if (out.exitCode !== 0 || top === undefined || gitDir === undefined || common === undefined) {
      if (isNotARepository(out.stderr)) return yield* new NotARepository({ path: dir })
      if (
        !/unknown revision|bad revision/.test(out.stderr) ||
        top === undefined ||
        gitDir === undefined ||
        common === undefined
      ) {
        return yield* new GitFailed({ args, stderr: out.stderr.trim(), exitCode: out.exitCode })
      }
    }
    const unborn = out.exitCode !== 0
    const ref = unborn
      ? lines((yield* exec(dir, ["symbolic-ref", "--quiet", "HEAD"])).stdout)[0]
      : head === "HEAD"
        ? undefined
        : head
    const root = canonical(top)
    // relative to the folder git ran in (".git", "../../.git")
    const commonDir = canonical(path.resolve(dir, common))
    const mainRoot =
      path.basename(commonDir) === ".git"
        ? path.dirname(commonDir)
        : canonical((yield* worktrees(root))[0]?.path ?? path.dirname(commonDir))
    const info: RepoInfo = {
      root,
      commonDir,
      mainRoot,
      branch: ref === undefined ? undefined : stripHeads(ref),
      isMain: root === mainRoot
    }
    return { info, gitDir }
  })

  const repo = Effect.fn("Git.repo")(function* (cwd: string) {
    const dir = path.resolve(cwd)
    const known = remembered.get(dir)
    if (
      known !== undefined &&
      Date.now() - known.at < REPO_MEMORY_MS &&
      repoStamp(dir, known.info.root, known.gitDir)?.stamp === known.stamp
    ) {
      return known.info
    }
    const { info, gitDir } = yield* askRepo(dir)
    const stamp = answerStamp(dir, info, gitDir)
    if (stamp === undefined) remembered.delete(dir)
    else {
      // bounded: a long-lived daemon is asked about many folders
      if (remembered.size >= 1_000) remembered.clear()
      remembered.set(dir, { at: Date.now(), gitDir, stamp, info })
    }
    return info
  })

  /** git's branch-name rules (`domain/branch.ts`): checked without a process. */
  const validateBranch = Effect.fn("Git.validateBranch")(function* (name: string) {
    const problem = branchNameProblem(name)
    if (problem !== undefined) return yield* new InvalidBranchName({ name, reason: problem })
    return name
  })

  const branchExists = Effect.fn("Git.branchExists")(function* (repoRoot: string, name: string) {
    const args = ["show-ref", "--verify", "--quiet", `refs/heads/${name}`]
    const out = yield* exec(repoRoot, args)
    if (out.exitCode === 0) return true
    if (out.exitCode === 1) return false
    if (isNotARepository(out.stderr)) return yield* new NotARepository({ path: repoRoot })
    return yield* new GitFailed({ args, stderr: out.stderr.trim(), exitCode: out.exitCode })
  })

  /**
   * Checks out `branch` in a new worktree at `worktreePath`, creating the branch from HEAD when it does not exist.
   * Stale entries (folders deleted by hand) are pruned first, so they do not hold on to their branch. When the
   * branch is already checked out at that very path, nothing is done.
   */
  const addWorktree = Effect.fn("Git.addWorktree")(function* (repoRoot: string, worktreePath: string, branch: string) {
    yield* validateBranch(branch)
    const target = path.resolve(repoRoot, worktreePath)
    // the usual case, a new branch into a new folder, in one process: git refuses -b for a branch that exists (checked
    // out anywhere or not) and a folder that exists or is registered, before it makes anything; those cases take the
    // careful path below, which lists the worktrees first (a git process fewer for every new world)
    const quick = yield* run(repoRoot, ["worktree", "add", "-b", branch, "--", target, "HEAD"]).pipe(
      Effect.as(true),
      Effect.catchTag("GitFailed", () => Effect.succeed(false))
    )
    if (quick) return { path: canonical(target), branch, created: true, reused: false } satisfies AddedWorktree
    // no commit to branch from (git's own words: "fatal: not a valid object name: 'HEAD'"), and no branch to check out
    const committed = yield* run(repoRoot, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).pipe(
      Effect.as(true),
      Effect.catchTag("GitFailed", () => Effect.succeed(false))
    )
    if (!committed && !(yield* branchExists(repoRoot, branch))) return yield* new NoCommits({ repoRoot })
    let list = yield* worktrees(repoRoot)
    if (list.some((w) => w.prunable)) {
      yield* run(repoRoot, ["worktree", "prune"])
      list = yield* worktrees(repoRoot)
    }
    const holder = list.find((w) => w.branch === branch)
    if (holder !== undefined) {
      if (canonical(holder.path) === canonical(target)) {
        return { path: canonical(target), branch, created: false, reused: true } satisfies AddedWorktree
      }
      return yield* new BranchCheckedOut({ branch, worktree: holder.path })
    }
    const add = (args: ReadonlyArray<string>) =>
      run(repoRoot, args).pipe(
        Effect.catchTag("GitFailed", (e): Effect.Effect<never, GitFailed | BranchCheckedOut> => {
          const held = CHECKED_OUT.exec(e.stderr)
          return held?.[1] !== undefined ? new BranchCheckedOut({ branch, worktree: held[1] }) : e
        })
      )
    // a new branch (the usual case) in one process; git refuses -b for a branch that exists, then it is checked out
    const created = yield* add(["worktree", "add", "-b", branch, "--", target, "HEAD"]).pipe(
      Effect.as(true),
      Effect.catchIf(
        (e) => e._tag === "GitFailed" && BRANCH_EXISTS.test(e.stderr),
        () => Effect.as(add(["worktree", "add", "--", target, branch]), false)
      )
    )
    return { path: canonical(target), branch, created, reused: false } satisfies AddedWorktree
  })

  /** The common dir git finds from `folder`, and its top level; undefined where git finds no repository. */
  const discover = (folder: string) =>
    Effect.map(exec(folder, ["rev-parse", "--path-format=absolute", "--git-common-dir", "--show-toplevel"]), (out) => {
      const [common, top] = lines(out.stdout)
      return out.exitCode !== 0 || common === undefined
        ? undefined
        : { commonDir: canonical(common), top: top === undefined ? undefined : canonical(top) }
    }).pipe(Effect.orElseSucceed(() => undefined))

  /**
   * Read from git's files when they are as git writes them (no process: this runs on every `up` of a world), else
   * asked of git in both folders.
   */
  const isWorktreeOf = Effect.fn("Git.isWorktreeOf")(function* (mainRoot: string, folder: string) {
    const dotGit = path.join(mainRoot, ".git")
    const linked = linkedCommonDir(folder)
    if (linked !== undefined && existsSync(dotGit) && lstatSync(dotGit).isDirectory() && linked === canonical(dotGit)) {
      return true
    }
    const [here, main] = yield* Effect.all([discover(folder), discover(mainRoot)])
    if (here === undefined || main === undefined || here.commonDir !== main.commonDir) return false
    if (here.top !== canonical(folder)) return false
    // and git's record of its worktrees names this folder (a `.git` file copied elsewhere points at another's record)
    const listed = yield* worktrees(mainRoot).pipe(Effect.orElseSucceed((): ReadonlyArray<Worktree> => []))
    return listed.some((w) => canonical(w.path) === here.top)
  })

  /**
   * `git worktree remove` (refused by git when the worktree has changes, unless `force`; a locked worktree needs
   * unlocking first) then `git worktree prune`. A folder that is already gone is only pruned; so is one that is not a
   * worktree of this repository (git would refuse it, every time: "is not a working tree").
   */
  const removeWorktree = Effect.fn("Git.removeWorktree")(function* (
    repoRoot: string,
    worktreePath: string,
    force: boolean
  ) {
    const target = path.resolve(repoRoot, worktreePath)
    const ours = existsSync(target) && (yield* isWorktreeOf(repoRoot, target))
    if (ours) yield* run(repoRoot, ["worktree", "remove", ...(force ? ["--force"] : []), "--", target])
    yield* run(repoRoot, ["worktree", "prune"])
    return ours
  })

  /** Uncommitted and untracked files, paths relative to the worktree root. */
  const changes = Effect.fn("Git.changes")(function* (worktreePath: string) {
    return parseStatus(yield* run(worktreePath, ["status", "--porcelain=v1", "-z", "--untracked-files=all"]))
  })

  const indexed = Effect.fn("Git.indexed")(function* (worktreePath: string, file: string) {
    // `:<path>` is the index's copy; `./` reads the path from the worktree's root, whatever it is called
    const out = yield* exec(worktreePath, ["show", `:./${file}`])
    if (out.exitCode === 0) return out.stdout
    if (isNotARepository(out.stderr)) return yield* new NotARepository({ path: worktreePath })
    return undefined
  })

  const remoteUrl = Effect.fn("Git.remoteUrl")(function* (repoRoot: string, remote: string) {
    const out = yield* exec(repoRoot, ["remote", "get-url", "--", remote])
    if (out.exitCode === 0) return out.stdout.trim() || undefined
    if (isNotARepository(out.stderr)) return yield* new NotARepository({ path: repoRoot })
    return undefined
  })

  const remoteHasBranch = Effect.fn("Git.remoteHasBranch")(function* (url: string, branch: string) {
    const args = ["ls-remote", "--heads", "--", url, `refs/heads/${branch}`]
    const out = yield* exec(process.cwd(), args)
    if (out.exitCode !== 0) return yield* new GitFailed({ args, stderr: out.stderr.trim(), exitCode: out.exitCode })
    return out.stdout.trim() !== ""
  })

  const cloneOnce = Effect.fn("Git.cloneOnce")(function* (url: string, target: string, branch: string) {
    if (existsSync(`${target}/.git`)) return
    const parent = path.dirname(target)
    mkdirSync(parent, { recursive: true, mode: 0o700 })
    // into a folder of its own first: a clone cut off half-way is never taken for one
    const partial = `${target}.partial-${process.pid}`
    rmSync(partial, { recursive: true, force: true })
    yield* run(parent, ["clone", "--quiet", "--no-checkout", "--", url, partial])
    yield* run(partial, ["checkout", "--quiet", "--detach", `refs/remotes/origin/${branch}`])
    renameSync(partial, target)
  })

  const fetchBranch = Effect.fn("Git.fetchBranch")(function* (repoRoot: string, url: string, branch: string) {
    if (yield* branchExists(repoRoot, branch)) return
    yield* run(repoRoot, ["fetch", "--quiet", "--", url, `refs/heads/${branch}:refs/heads/${branch}`])
  })

  return {
    repo,
    indexed,
    remoteUrl,
    fetchBranch,
    remoteHasBranch,
    cloneOnce,
    // a listing during another add can read a half-written entry too
    worktrees: (repoRoot: string) => worktreeLock.withPermits(1)(worktrees(repoRoot)),
    checkouts: (repo: RepoInfo) =>
      Effect.sync(() => {
        try {
          return readCheckouts(repo)
        } catch {
          return undefined
        }
      }),
    validateBranch,
    branchExists,
    isWorktreeOf,
    addWorktree: (repoRoot: string, worktreePath: string, branch: string) =>
      worktreeLock.withPermits(1)(addWorktree(repoRoot, worktreePath, branch)),
    removeWorktree: (repoRoot: string, worktreePath: string, force: boolean) =>
      worktreeLock.withPermits(1)(removeWorktree(repoRoot, worktreePath, force)),
    changes
  } satisfies GitService
})

export const GitLive: Layer.Layer<Git> = Layer.effect(Git, make)
