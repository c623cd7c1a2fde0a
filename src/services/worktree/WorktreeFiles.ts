/**
 * What berth does to the files of a world's worktree, in one place: the folder itself (made, checked, removed), what
 * `[project] copy` and `link` bring from the main checkout, the `env_file`s it writes, puts back and takes back, and
 * which changes in a worktree are the user's work rather than berth's. The world actor decides when; this service
 * knows how, and never writes outside the worktree (every path is resolved with its links followed, `paths.ts`).
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Model from "../../domain/config/model.js"
import { createdByBerth, renderEnvFile, withoutEnvBlock } from "../../domain/env-file.js"
import {
  type DiskFull,
  FolderInTheWay,
  GitCommandFailed,
  type PathOutsideWorktree,
  WorktreeFileFailed,
  WorktreeMissing
} from "../../domain/errors.js"
import { asDiskFull } from "../disk.js"
import { Git } from "../Git.js"
import { Home } from "../Home.js"
import type { WorldRow } from "../Registry.js"
import { type Brought, bringIntoWorktree } from "./files.js"
import { LandsOutside, landInside, landing, outsideWorktree, rewriteFile } from "./paths.js"

/** What a file held before berth first wrote it: undefined when there was no file. Keyed by resolved path. */
export type EnvBefore = Map<string, string | undefined>

export interface WorktreeFilesService {
  /**
   * The world's worktree, made when it is missing (answering the branch it made, if it made one). A folder already at
   * its path is the world's only if it is a real worktree of this repository: anything else (a folder made by hand,
   * with a berth.toml of its own, say) would have berth run what it holds, and `remove` could never remove it.
   */
  readonly ensure: (
    w: WorldRow
  ) => Effect.Effect<{ readonly madeBranch: string | undefined }, FolderInTheWay | WorktreeMissing | GitCommandFailed>
  /** What `[project] copy` and `link` bring from the main checkout into a new worktree. */
  readonly bring: (
    w: WorldRow,
    project: Model.ProjectConfig
  ) => Effect.Effect<Brought, WorktreeFileFailed | PathOutsideWorktree | DiskFull>
  /**
   * A service's variables written into the berth block of each of its `env_file`s; what a file held before its first
   * write is kept in `before`. A path that lands outside the worktree is refused before anything is written.
   */
  readonly writeEnv: (
    w: WorldRow,
    service: Model.ProcessService,
    vars: Readonly<Record<string, string>>,
    before: EnvBefore
  ) => Effect.Effect<void, WorktreeFileFailed | PathOutsideWorktree | DiskFull>
  /** The files as they were before (`writeEnv`'s record): one berth made goes. */
  readonly restoreEnv: (before: EnvBefore) => Effect.Effect<void>
  /** What `env_file` wrote, taken back (only the berth block; a file berth made goes). */
  readonly retractEnv: (w: WorldRow, config: Model.Config) => Effect.Effect<void>
  /** The worktree's changes that are the user's work (berth's own env_file writes left out), as `git status` says them. */
  readonly userChanges: (w: WorldRow, config: Model.Config | undefined) => Effect.Effect<ReadonlyArray<string>>
  /**
   * The worktree removed (`git worktree remove`, forced or not); a folder there that is no worktree of this repository
   * is left as it is. Answers whether a worktree was removed.
   */
  readonly remove: (w: WorldRow, force: boolean) => Effect.Effect<boolean, GitCommandFailed>
  /** The scripts of `folder`'s package.json, where a dev server may be named; none if unreadable. */
  readonly packageScripts: (folder: string) => Effect.Effect<Readonly<Record<string, string>>>
}

export class WorktreeFiles extends Context.Tag("berth/WorktreeFiles")<WorktreeFiles, WorktreeFilesService>() {}

/** A path berth would use that lands outside the worktree: the refusal, or what else the file system said. */
export const outsideOr = (w: WorldRow, what: string) => (e: unknown) =>
  e instanceof LandsOutside
    ? outsideWorktree(w.name, e)
    : new WorktreeFileFailed({ world: w.name, what, reason: e instanceof Error ? e.message : String(e) })

/**
 * The folder a service runs in: its `dir` under the worktree, every link on the way followed, or the worktree. A `dir`
 * that lands outside it (a committed `sub -> /elsewhere`, or `..`) is refused.
 */
export const serviceFolder = (w: WorldRow, service: Model.ProcessService) =>
  Effect.try({
    try: () => (service.dir === undefined ? w.path : landInside(`services.${service.name}.dir`, w.path, service.dir)),
    catch: outsideOr(w, `services.${service.name}.dir`)
  })

/** Where each of a service's `env_file`s lands, every link followed; relative to its folder as written. */
export const envFileLandings = (worktree: string, service: Model.ProcessService) =>
  service.envFiles.map((file) => ({
    file,
    landing: landing(worktree, file.startsWith("/") ? file : join(service.dir ?? "", file))
  }))

/** The files a config's `env_file`s name in a worktree, those that land inside it only: absolute, and relative to it. */
export const envFilePaths = (
  worktree: string,
  config: Model.Config
): ReadonlyArray<{ readonly path: string; readonly relative: string }> =>
  Model.processes(config).flatMap((service) =>
    envFileLandings(worktree, service).flatMap(({ landing: l }) =>
      l.inside ? [{ path: l.resolved, relative: l.relative ?? "" }] : []
    )
  )

/**
 * What a start may not do, checked before anything is touched: run a selected service in (or write its env_file to)
 * a place outside the worktree.
 */
export const checkPaths = (w: WorldRow, config: Model.Config, names: ReadonlyArray<string>) =>
  Effect.forEach(
    Model.processes(config).filter((s) => names.includes(s.name)),
    (service) =>
      Effect.gen(function* () {
        yield* serviceFolder(w, service)
        for (const { file, landing: l } of envFileLandings(w.path, service)) {
          if (!l.inside) {
            return yield* outsideWorktree(
              w.name,
              new LandsOutside({ field: `services.${service.name}.env_file`, path: file, landing: l })
            )
          }
        }
      }),
    { discard: true }
  )

/** An env_file berth made itself (its first line says so): berth's, not the user's work. */
const madeByBerth = (path: string): boolean => {
  try {
    return createdByBerth(readFileSync(path, "utf8"))
  } catch {
    return false
  }
}

const make = Effect.gen(function* () {
  const git = yield* Git
  const home = yield* Home

  const ensure = (w: WorldRow) =>
    Effect.gen(function* () {
      if (existsSync(w.path)) {
        if (w.isMain || (yield* git.isWorktreeOf(w.mainRoot, w.path))) return { madeBranch: undefined }
        return yield* new FolderInTheWay({ world: w.name, path: w.path, mainRoot: w.mainRoot })
      }
      if (w.isMain) return yield* new WorktreeMissing({ world: w.name, path: w.path, main: true })
      const added = yield* git
        .addWorktree(w.mainRoot, w.path, w.branch ?? w.name)
        .pipe(Effect.mapError((e) => new GitCommandFailed({ reason: e.message })))
      return { madeBranch: added.created ? added.branch : undefined }
    })

  const bring = (w: WorldRow, project: Model.ProjectConfig) =>
    Effect.try({
      try: () => bringIntoWorktree(w.mainRoot, w.path, project),
      catch: (e) =>
        asDiskFull(e, w.path, home.root) ?? outsideOr(w, `bringing [project] copy/link files from ${w.mainRoot}`)(e)
    })

  const writeEnv = (
    w: WorldRow,
    service: Model.ProcessService,
    vars: Readonly<Record<string, string>>,
    before: EnvBefore
  ) =>
    Effect.forEach(
      envFileLandings(w.path, service),
      ({ file, landing: l }) =>
        Effect.gen(function* () {
          const field = `services.${service.name}.env_file`
          if (!l.inside) return yield* outsideWorktree(w.name, new LandsOutside({ field, path: file, landing: l }))
          yield* Effect.try({
            try: () => {
              mkdirSync(dirname(l.resolved), { recursive: true })
              rewriteFile(
                l.resolved,
                (existing) => {
                  if (!before.has(l.resolved)) before.set(l.resolved, existing)
                  return renderEnvFile(existing, vars, w.name)
                },
                { create: true, mode: 0o600 }
              )
            },
            catch: (e) =>
              asDiskFull(e, l.resolved, home.root) ??
              new WorktreeFileFailed({
                world: w.name,
                what: `${field} ${l.resolved}`,
                reason: e instanceof Error ? e.message : String(e)
              })
          })
        }),
      { discard: true }
    )

  const restoreEnv = (before: EnvBefore) =>
    Effect.sync(() => {
      for (const [path, text] of before) {
        try {
          rewriteFile(path, () => text, { create: false })
        } catch {
          // a file berth cannot write now (or a link put there since): it keeps what berth wrote
        }
      }
    })

  const retractEnv = (w: WorldRow, config: Model.Config) =>
    Effect.sync(() => {
      for (const { path } of envFilePaths(w.path, config)) {
        try {
          rewriteFile(path, (text) => (text === undefined ? undefined : withoutEnvBlock(text)), { create: false })
        } catch {
          // a file berth cannot read (or a link put there since): nothing of berth's to take back
        }
      }
    })

  /** The file differs from git's index only by what `env_file` wrote into it. */
  const onlyBerthsBlock = (worktree: string, file: string) =>
    Effect.gen(function* () {
      const committed = yield* git.indexed(worktree, file).pipe(Effect.orElseSucceed(() => undefined))
      if (committed === undefined) return false
      const text = yield* Effect.sync(() => {
        try {
          return readFileSync(join(worktree, file), "utf8")
        } catch {
          return undefined
        }
      })
      return text !== undefined && withoutEnvBlock(text) === committed
    })

  const userChanges = (w: WorldRow, config: Model.Config | undefined) =>
    Effect.gen(function* () {
      const all = yield* git.changes(w.path).pipe(Effect.orElseSucceed(() => []))
      const files = config === undefined ? [] : envFilePaths(w.path, config)
      // an env_file berth made is berth's, not the user's work: it goes with the worktree
      const berths = new Set(files.filter((f) => madeByBerth(f.path)).map((f) => f.relative))
      const envFiles = new Set(files.map((f) => f.relative))
      const changes: Array<string> = []
      for (const c of all) {
        if (c.status === "??" && berths.has(c.file)) continue
        // a tracked env_file whose only change is berth's block: berth's too
        if (c.status === " M" && envFiles.has(c.file) && (yield* onlyBerthsBlock(w.path, c.file))) continue
        changes.push(`${c.status} ${c.file}`)
      }
      return changes
    })

  const remove = (w: WorldRow, force: boolean) =>
    git
      .removeWorktree(w.mainRoot, w.path, force)
      .pipe(Effect.mapError((e) => new GitCommandFailed({ reason: e.message })))

  const packageScripts = (folder: string) =>
    Effect.sync((): Readonly<Record<string, string>> => {
      try {
        const scripts = (JSON.parse(readFileSync(join(folder, "package.json"), "utf8")) as { scripts?: unknown })
          .scripts
        if (typeof scripts !== "object" || scripts === null) return {}
        return Object.fromEntries(
          Object.entries(scripts).filter((e): e is [string, string] => typeof e[1] === "string")
        )
      } catch {
        return {}
      }
    })

  return {
    ensure,
    bring,
    writeEnv,
    restoreEnv,
    retractEnv,
    userChanges,
    remove,
    packageScripts
  } satisfies WorktreeFilesService
})

export const WorktreeFilesLive = Layer.effect(WorktreeFiles, make)
