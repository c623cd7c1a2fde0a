/**
 * `berth init [dir] [--force]`: write a starting berth.toml from binky's `binky.toml` or isola's `.isola.toml` (tools
 * that also give each worktree its own world), else from the project's compose file (and `.env`), else from
 * package.json scripts (the root's, or else those of packages in folders of their own: `api/`, `web/`), else a
 * template. Never overwrites without --force; the result is checked before returning, and a folder outside a git
 * repository is warned about (every world is a worktree).
 */
import { execFileSync } from "node:child_process"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { formatDiagnostic } from "../../domain/config/diagnostic.js"
import { InitFailed, InitRefused } from "../../domain/errors.js"
import { fromPackageJson, fromPackages, type SubPackage } from "../../domain/init/packageJson.js"
import { projectLabel } from "../../domain/names.js"
import { CONFIG_FILE, ConfigFiles } from "../../services/ConfigFiles.js"
import { printDocument } from "../json.js"
import { json, printError } from "../output.js"

const dir = Args.directory({ name: "dir", exists: "yes" }).pipe(
  Args.withDescription("the repository root to write berth.toml into (default: the current folder)"),
  Args.withDefault(".")
)

const force = Options.boolean("force").pipe(Options.withDescription("Overwrite an existing berth.toml"))

/** Configs of tools that give each worktree a world of its own: the closest to berth.toml, so read first. */
const worldFiles = ["binky.toml", ".isola.toml"] as const
/** Compose's own lookup order. */
const composeFiles = ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"]
const lockfiles = ["package-lock.json", "pnpm-lock.yaml", "yarn.lock", "bun.lockb", "bun.lock"]
/** The source when there was nothing to read: a berth.toml with a TODO for the command. */
const TEMPLATE = "template"

/** Whether `dir` is inside a git work tree (`up` makes every world a worktree of it). */
const inRepository = (dir: string): boolean => {
  try {
    execFileSync("git", ["rev-parse", "--is-inside-work-tree"], { cwd: dir, stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

export const init = Command.make("init", { dir, force, json }, ({ dir, force, json }) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const files = yield* ConfigFiles
    const root = path.resolve(dir)
    const target = path.join(root, CONFIG_FILE)
    const shown = files.display(target)
    if (!force && (yield* fs.exists(target))) return yield* new InitRefused({ file: shown })

    const readIfThere = (name: string) =>
      fs.readFileString(path.join(root, name)).pipe(Effect.orElseSucceed(() => undefined))
    const projectName = projectLabel(path.basename(root))

    let source: string | undefined
    let result: { readonly toml: string; readonly notes: ReadonlyArray<string> } | undefined
    for (const name of worldFiles) {
      const text = yield* readIfThere(name)
      if (text === undefined) continue
      const { fromBinky, fromIsola } = yield* Effect.promise(() => import("../../domain/init/imported.js"))
      const converted = (name === "binky.toml" ? fromBinky : fromIsola)({ text, file: name, projectName })
      if (Either.isLeft(converted)) {
        const at = converted.left.line === undefined ? name : `${name}:${converted.left.line}`
        return yield* new InitFailed({ file: at, reason: converted.left.message })
      }
      const others = worldFiles.filter((other) => other !== name)
      const also: Array<string> = []
      for (const other of [...others, ...composeFiles]) if (yield* fs.exists(path.join(root, other))) also.push(other)
      source = name
      result = {
        toml: converted.right.toml,
        notes: [...converted.right.notes, ...(also.length > 0 ? [`read ${name}; ${also.join(", ")} not read`] : [])]
      }
      break
    }
    for (const name of result === undefined ? composeFiles : []) {
      const composeText = yield* readIfThere(name)
      if (composeText === undefined) continue
      // the YAML parser is loaded only here: the daemon runs this same program and never needs it
      const { fromCompose } = yield* Effect.promise(() => import("../../domain/init/compose.js"))
      const converted = fromCompose({
        composeText,
        composeFile: name,
        envText: yield* readIfThere(".env"),
        projectName
      })
      if (Either.isLeft(converted)) {
        const at = converted.left.line === undefined ? name : `${name}:${converted.left.line}`
        return yield* new InitFailed({ file: at, reason: converted.left.message })
      }
      source = name
      result = converted.right
      break
    }
    const lockfilesIn = (dir: string) =>
      Effect.filter(lockfiles, (name) => fs.exists(path.join(root, dir, name)).pipe(Effect.orElseSucceed(() => false)))
    const packageJsonText = result === undefined ? yield* readIfThere("package.json") : undefined
    if (result === undefined && packageJsonText === undefined) {
      // no package.json above them: packages in folders of their own (api/, web/), each installed and run there
      const packages: Array<SubPackage> = []
      const entries = yield* fs.readDirectory(root).pipe(Effect.orElseSucceed((): Array<string> => []))
      for (const dir of entries) {
        if (dir.startsWith(".") || dir === "node_modules") continue
        const text = yield* readIfThere(path.join(dir, "package.json"))
        if (text !== undefined) packages.push({ dir, packageJsonText: text, lockfiles: yield* lockfilesIn(dir) })
      }
      if (packages.length > 0) {
        result = fromPackages({ projectName, packages })
        source = [...packages.map((p) => `${p.dir}/package.json`)].sort().join(", ")
      }
    }
    if (result === undefined) {
      result = fromPackageJson({ packageJsonText, projectName, lockfiles: yield* lockfilesIn(".") })
      source = packageJsonText === undefined ? TEMPLATE : "package.json"
    }

    yield* fs
      .writeFileString(target, result.toml)
      .pipe(Effect.mapError((e) => new InitFailed({ file: shown, reason: e.message })))
    const loaded = yield* files.load(target)
    const warnings = yield* files.lint(loaded)
    if (!inRepository(root)) {
      yield* printError(
        `warning: ${root} is not in a git repository, and berth's worlds are its worktrees: run git init and commit before berth up`
      )
    }

    if (json)
      return yield* printDocument("init", {
        file: target,
        source: source ?? TEMPLATE,
        notes: result.notes,
        warnings
      })
    const services = loaded.parsed.config.services
    const slices = services.filter((s) => s._tag === "Slice").length
    yield* Console.log(
      `wrote ${shown} from ${source === TEMPLATE ? "a template (no compose file or package.json here)" : source}: ${services.length - slices} process${services.length - slices === 1 ? "" : "es"}, ${slices} slice${slices === 1 ? "" : "s"}`
    )
    for (const note of result.notes) yield* Console.log(`  note: ${note}`)
    for (const warning of warnings) yield* Console.log(`  ${formatDiagnostic(warning)}`)
    yield* Console.log("next: review it, then run `berth check`")
  })
).pipe(
  Command.withDescription(
    "Write a starting berth.toml from binky.toml or .isola.toml, else from docker-compose or package.json"
  )
)
