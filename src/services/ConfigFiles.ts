/**
 * Finding, reading and checking `berth.toml` on disk. The parsing itself is pure (`domain/config`); this service is
 * the edge that touches the file system and the environment.
 */
import { createHash } from "node:crypto"
import * as nodeFs from "node:fs"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { binkyAdapterCommand, externalAdapterCommand } from "../domain/adapters.js"
import type { Diagnostic } from "../domain/config/diagnostic.js"
import { lintConfig } from "../domain/config/lint.js"
import { type ParsedConfig, parseConfig } from "../domain/config/parse.js"
import { parseDotenv } from "../domain/dotenv.js"
import { ConfigInvalid, ConfigNotFound, ConfigUnreadable } from "../domain/errors.js"
import { landing } from "./worktree/paths.js"

export const CONFIG_FILE = "berth.toml"

/** A config's digest: its exact content, which consent is given to (`domain/consent.ts`) and edits are told by. */
export const configDigest = (text: string): string => createHash("sha256").update(text).digest("hex")

export interface LoadedConfig {
  /** absolute path of berth.toml */
  readonly file: string
  /** the folder holding it: the worktree root */
  readonly root: string
  readonly parsed: ParsedConfig
  /** the project's `.env`, when present */
  readonly dotenv: ReadonlyMap<string, string>
  /** a digest of berth.toml's text: it differs exactly when the file does */
  readonly digest: string
}

export interface ConfigFilesService {
  /** The berth.toml `start` names, or the nearest one at or above the folder `start` names. */
  readonly locate: (start: string) => Effect.Effect<string, ConfigNotFound>
  /** Located, read and parsed (remembered while the file and its `.env` are unchanged). */
  readonly load: (start: string) => Effect.Effect<LoadedConfig, ConfigNotFound | ConfigUnreadable | ConfigInvalid>
  /** `check`'s warnings for a loaded config. */
  readonly lint: (loaded: LoadedConfig) => Effect.Effect<ReadonlyArray<Diagnostic>>
  /** How a file is named in messages: relative to the working folder when it is below it. */
  readonly display: (file: string) => string
  /** a folder's `.env` (empty when there is none) */
  readonly dotenv: (root: string) => Effect.Effect<ReadonlyMap<string, string>>
}

export class ConfigFiles extends Context.Tag("berth/ConfigFiles")<ConfigFiles, ConfigFilesService>() {}

const make = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path

  const exists = (p: string) => fs.exists(p).pipe(Effect.orElseSucceed(() => false))
  const isDirectory = (p: string) =>
    fs.stat(p).pipe(
      Effect.map((s) => s.type === "Directory"),
      Effect.orElseSucceed(() => false)
    )

  /** `start` may name the file itself or any folder at or below the one holding it. */
  const locate = Effect.fn("ConfigFiles.locate")(function* (start: string) {
    const absolute = path.resolve(start)
    if (!(yield* isDirectory(absolute))) {
      if (yield* exists(absolute)) return absolute
      return yield* new ConfigNotFound({ searched: absolute })
    }
    for (let dir = absolute; ; dir = path.dirname(dir)) {
      const candidate = path.join(dir, CONFIG_FILE)
      if (yield* exists(candidate)) return candidate
      if (path.dirname(dir) === dir) return yield* new ConfigNotFound({ searched: absolute })
    }
  })

  const readText = (file: string) =>
    fs
      .readFileString(file)
      .pipe(Effect.mapError((e) => new ConfigUnreadable({ file, reason: e.message.replace(/^[^:]*: /, "") })))

  const readDotenv = (root: string) =>
    fs.readFileString(path.join(root, ".env")).pipe(
      Effect.map(parseDotenv),
      Effect.orElseSucceed((): ReadonlyMap<string, string> => new Map())
    )

  /** How a file is named in messages: relative to the working folder when it is below it. */
  const display = (file: string) => {
    const relative = path.relative(process.cwd(), file)
    return relative !== "" && !relative.startsWith("..") && !path.isAbsolute(relative) ? relative : file
  }

  /**
   * Parsed files are remembered by path, identity, size and modification time (and the `.env`'s), and by their text's
   * digest when those changed but the text did not: the daemon reads the same
   * berth.toml for every `env` or `status` an agent asks for in a loop, and every world's on each rebuild of the
   * routes. The stamp is read synchronously: two stats cost microseconds, where a trip through the thread pool for each
   * cost a rebuild of eight worlds' routes 20-100 ms on a busy machine, on the way to every `up`'s answer.
   */
  const cache = new Map<string, { readonly stamp: string; readonly loaded: LoadedConfig }>()
  const stampOf = (file: string): string | undefined => {
    const stat = (p: string) => nodeFs.statSync(p, { throwIfNoEntry: false })
    try {
      const toml = stat(file)
      if (toml === undefined) return undefined
      let dotenv: nodeFs.Stats | undefined
      try {
        dotenv = stat(path.join(path.dirname(file), ".env"))
      } catch {
        // an unreadable .env reads as none, as readDotenv takes it
      }
      // identity (device and inode) too: a file renamed over the old one (as editors and git save) with the same size
      // and time is another file
      return [toml, dotenv].map((s) => (s === undefined ? "-" : `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`)).join("/")
    } catch {
      return undefined
    }
  }

  /** The config of `start`'s folder as last parsed, when its file there is unchanged since: two stats, no walk. */
  const unchanged = (start: string): LoadedConfig | undefined => {
    const direct = path.join(path.resolve(start), CONFIG_FILE)
    const known = cache.get(direct)
    return known !== undefined && known.stamp === stampOf(direct) ? known.loaded : undefined
  }

  const loadChanged = Effect.fn("ConfigFiles.load")(function* (start: string) {
    const file = yield* locate(start)
    const stamp = stampOf(file)
    const cached = cache.get(file)
    if (stamp !== undefined && cached?.stamp === stamp) return cached.loaded
    const text = yield* readText(file)
    const digest = configDigest(text)
    // the same text as before (written again, touched, checked out unchanged) keeps its parsed config: what is made
    // from it (the route table's entries) is remembered by that object
    const same = cached !== undefined && cached.loaded.digest === digest ? cached.loaded.parsed : undefined
    const parsed = same === undefined ? parseConfig(text, display(file)) : Either.right(same)
    if (Either.isLeft(parsed)) return yield* new ConfigInvalid({ file: display(file), diagnostics: parsed.left })
    const root = path.dirname(file)
    const loaded: LoadedConfig = {
      file,
      root,
      parsed: parsed.right,
      dotenv: yield* readDotenv(root),
      digest
    }
    if (stamp !== undefined) {
      if (cache.size > 500) cache.clear()
      cache.set(file, { stamp, loaded })
    }
    return loaded
  })

  // the usual caller names the folder holding the file, and it is usually unchanged: found again without a walk, and
  // without a span (a `status` of a hundred worlds loads a hundred configs, each span costing more than its stats)
  const load = (start: string) =>
    Effect.suspend(() => {
      const known = unchanged(start)
      return known === undefined ? loadChanged(start) : Effect.succeed(known)
    })

  const isExecutable = (file: string) =>
    fs.stat(file).pipe(
      Effect.map((s) => s.type === "File" && (s.mode & 0o111) !== 0),
      Effect.orElseSucceed(() => false)
    )

  const onPath = (command: string) =>
    Effect.gen(function* () {
      for (const dir of (process.env.PATH ?? "").split(":")) {
        if (dir !== "" && (yield* isExecutable(path.join(dir, command)))) return true
      }
      return false
    })

  /** `check`'s warnings for a loaded config. */
  const lint = Effect.fn("ConfigFiles.lint")(function* (loaded: LoadedConfig) {
    const adapters = loaded.parsed.config.services.flatMap((s) => (s._tag === "Slice" ? [s.adapter] : []))
    const present = new Set<string>()
    for (const adapter of new Set(adapters)) {
      for (const command of [externalAdapterCommand(adapter), binkyAdapterCommand(adapter)]) {
        if (yield* onPath(command)) present.add(command)
      }
    }
    return lintConfig(loaded.parsed, {
      onPath: (command) => present.has(command),
      env: (name) => process.env[name] ?? loaded.dotenv.get(name),
      lands: (p, options) => landing(loaded.root, p, options)
    }) satisfies ReadonlyArray<Diagnostic>
  })

  return {
    locate,
    load,
    lint,
    display,
    dotenv: (root: string) => readDotenv(root)
  } satisfies ConfigFilesService
})

export const ConfigFilesLive: Layer.Layer<ConfigFiles, never, FileSystem.FileSystem | Path.Path> = Layer.effect(
  ConfigFiles,
  make
)
