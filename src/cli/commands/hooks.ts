/**
 * `berth hooks install [--shared] | status | uninstall`: berth's block in the repository's `post-checkout` hook, so a
 * worktree made by git (`git worktree add`) gets its world brought up at once, in the background (BERTH_NO_UP=1 skips
 * it). `--shared` keeps the hook in the repository's `.githooks/` (commit it; each clone runs `berth hooks install
 * --shared` once, which points git there).
 */
import { execFileSync } from "node:child_process"
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, resolve } from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { InvalidRequest } from "../../domain/errors.js"
import { hasHook, withHook, withoutHook } from "../../domain/hooks.js"
import { printDocument } from "../json.js"
import { launcherPath } from "../launcher.js"
import { json } from "../output.js"

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

const install = Command.make(
  "install",
  {
    shared: Options.boolean("shared").pipe(
      Options.withDescription("keep the hook in the repository's .githooks/ (to commit) and point git there")
    ),
    json
  },
  ({ json, shared }) =>
    Effect.gen(function* () {
      const cwd = process.cwd()
      if (shared) {
        const top = yield* git(cwd, ["rev-parse", "--show-toplevel"])
        yield* git(top, ["config", "core.hooksPath", ".githooks"])
      }
      const file = yield* hookFile(cwd)
      const berth = yield* berthPath()
      yield* Effect.sync(() => {
        mkdirSync(dirname(file), { recursive: true })
        writeFileSync(file, withHook(read(file), berth))
        chmodSync(file, 0o755)
      })
      yield* report(
        json,
        file,
        true,
        `installed in ${file}: a worktree git checks out gets its world (BERTH_NO_UP=1 skips it)`
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
