/**
 * `berth hooks install [--shared [--yes]] | status | uninstall`: berth's block in the repository's `post-checkout`
 * hook, so a worktree made by git (`git worktree add`) gets its world brought up at once, in the background
 * (BERTH_NO_UP=1 skips it). `--shared` keeps the hook in the repository's `.githooks/` (commit it; each clone runs
 * `berth hooks install --shared` once, which points git there). Pointing git there runs every hook the repository
 * commits in that folder too, so those are named and asked about first.
 */
import { execFileSync } from "node:child_process"
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync
} from "node:fs"
import { dirname, join, resolve } from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { InvalidRequest } from "../../domain/errors.js"
import { type HookFile, hasHook, otherHooks, withHook, withoutHook } from "../../domain/hooks.js"
import { printDocument } from "../json.js"
import { launcherPath } from "../launcher.js"
import { confirm, json } from "../output.js"

const git = (cwd: string, args: ReadonlyArray<string>) =>
  Effect.try({
    try: () => execFileSync("git", [...args], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim(),
    catch: () => new InvalidRequest({ reason: `${cwd} is not in a git repository: run berth hooks in your project` })
  })

/** The post-checkout file git runs for this repository (core.hooksPath honoured, shared by every worktree). */
const hookFile = (cwd: string) =>
  Effect.map(git(cwd, ["rev-parse", "--path-format=absolute", "--git-path", "hooks/post-checkout"]), (p) =>
    resolve(cwd, p)
  )

/** This berth's launcher, by absolute path: a hook runs with whatever PATH git was started from. */
const berthPath = () =>
  Effect.gen(function* () {
    const beside = launcherPath()
    if (beside !== undefined) return beside
    const found = yield* Effect.try(() =>
      execFileSync("sh", ["-c", "command -v berth"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    ).pipe(Effect.orElseSucceed(() => ""))
    if (found === "")
      return yield* new InvalidRequest({ reason: "cannot tell where berth is installed: put it on PATH" })
    return found
  })

const read = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : undefined)

const report = (json: boolean, file: string, installed: boolean, said: string) =>
  json ? printDocument("hooks", { file, installed }) : Console.log(said)

/** The folder's files as git would see them as hooks (a link is followed, as git follows it). */
const hookFiles = (folder: string): ReadonlyArray<HookFile> => {
  let names: ReadonlyArray<string>
  try {
    names = readdirSync(folder)
  } catch {
    return []
  }
  return names.flatMap((name): ReadonlyArray<HookFile> => {
    try {
      const file = join(folder, name)
      const stat = statSync(file)
      if (!stat.isFile()) return []
      return [
        {
          name,
          executable: (stat.mode & 0o111) !== 0,
          text: name === "post-checkout" ? readFileSync(file, "utf8") : undefined
        }
      ]
    } catch {
      return []
    }
  })
}

const sameFolder = (a: string, b: string) => {
  try {
    return realpathSync(a) === realpathSync(b)
  } catch {
    return resolve(a) === resolve(b)
  }
}

const install = Command.make(
  "install",
  {
    shared: Options.boolean("shared").pipe(
      Options.withDescription("keep the hook in the repository's .githooks/ (to commit) and point git there")
    ),
    yes: Options.boolean("yes").pipe(
      Options.withDescription(
        "with --shared: accept the other hooks the repository commits in .githooks/, which git then runs too"
      )
    ),
    json
  },
  ({ json, shared, yes }) =>
    Effect.gen(function* () {
      const cwd = process.cwd()
      let others: ReadonlyArray<string> = []
      if (shared) {
        const top = yield* git(cwd, ["rev-parse", "--show-toplevel"])
        const folder = join(top, ".githooks")
        const current = resolve(cwd, yield* git(cwd, ["rev-parse", "--path-format=absolute", "--git-path", "hooks"]))
        // pointing git at .githooks runs whatever the repository commits there: nothing changes before that is accepted
        others = sameFolder(current, folder) ? [] : otherHooks(hookFiles(folder))
        if (others.length > 0 && !yes) {
          const said = `${folder} holds hooks of the repository's own that pointing git there would run too: ${others.join(", ")}`
          const asked = process.stdin.isTTY === true && (yield* confirm(`${said}\nActivate them as well? [y/N] `))
          if (!asked) {
            return yield* new InvalidRequest({
              reason: `${said}; nothing was changed\n  hint: read them; then berth hooks install --shared --yes accepts them, or berth hooks install keeps berth's block in this clone's own hooks`
            })
          }
        }
        yield* git(top, ["config", "core.hooksPath", ".githooks"])
      }
      const file = yield* hookFile(cwd)
      const berth = yield* berthPath()
      yield* Effect.sync(() => {
        mkdirSync(dirname(file), { recursive: true })
        writeFileSync(file, withHook(read(file), berth))
        chmodSync(file, 0o755)
      })
      const also = others.length === 0 ? "" : `; git now runs the repository's own ${others.join(", ")} too`
      yield* report(
        json,
        file,
        true,
        `installed in ${file}: a worktree git checks out gets its world (BERTH_NO_UP=1 skips it)${also}`
      )
    })
).pipe(
  Command.withDescription("Add berth's block to the post-checkout hook: a new worktree's world comes up by itself")
)

const status = Command.make("status", { json }, ({ json }) =>
  Effect.gen(function* () {
    const file = yield* hookFile(process.cwd())
    const installed = hasHook(read(file) ?? "")
    yield* report(json, file, installed, installed ? `installed in ${file}` : `not installed (berth hooks install)`)
  })
).pipe(Command.withDescription("Is berth's hook installed, and where"))

const uninstall = Command.make("uninstall", { json }, ({ json }) =>
  Effect.gen(function* () {
    const file = yield* hookFile(process.cwd())
    const text = read(file)
    if (text !== undefined && hasHook(text)) {
      const left = withoutHook(text)
      yield* Effect.sync(() => (left === undefined ? rmSync(file) : writeFileSync(file, left)))
    }
    yield* report(json, file, false, `removed from ${file}`)
  })
).pipe(Command.withDescription("Take berth's block out of the hook (the file goes if nothing else is in it)"))

export const hooks = Command.make("hooks").pipe(
  Command.withDescription("A git hook that brings up the world of each worktree git makes"),
  Command.withSubcommands([install, status, uninstall])
)
