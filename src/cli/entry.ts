// The process entry. Kept tiny: `--version` answers without evaluating Effect; everything else loads the CLI lazily.
//
// The program (main.ts and all it imports) is not in this file: scripts/build.mjs writes it beside it, to
// dist/berth-program.cjs, since V8 scans all of an entry file's text before running any of it (even comments: ~11 ms
// for this bundle; pre-parsing it as code costs tens). `--version` and the lean path never read it; other commands
// compile it with a V8 code cache in the user's cache folder, which also saves later runs compiling the functions that
// the run which wrote the cache needed. BERTH_CODE_CACHE=0 turns the cache off. The entry is CommonJS: Node loads a
// CommonJS file about 15 ms sooner than an ES module.
import { traceNow } from "../services/trace-mark.js"
import type * as Main from "./main.js"

declare const BERTH_VERSION: string
/**
 * Set by the build: a hash of the program in dist/berth-program.cjs, which reads
 * `(function (exports, require, module, __filename, __dirname, __berthImportMeta) { …main.ts as CommonJS… })`.
 * It names the program's code cache, and the program beside this file must have it.
 */
declare const BERTH_MAIN_HASH: string | undefined

type MainModule = typeof Main

/** when a daemon that found no code cache of its own writes one: its start (adoption, first reconcile) is done by then */
const DAEMON_CACHE_AFTER_MS = 5_000

// dist/berth (the launcher) starts this process without NODE_EXTRA_CA_CERTS: put it back for the daemon and the worlds
const handedOn = process.env.BERTH_NODE_EXTRA_CA_CERTS
if (handedOn !== undefined) {
  process.env.NODE_EXTRA_CA_CERTS = handedOn
  delete process.env.BERTH_NODE_EXTRA_CA_CERTS
}

const argv = process.argv.slice(2)

// `berth logs | head`: a closed pipe ends a command quietly, with no EPIPE stack (the daemon's output is a file)
if (!(argv[0] === "daemon" && argv[1] === "run")) {
  for (const s of [process.stdout, process.stderr]) {
    s.on("error", (e: NodeJS.ErrnoException) => process.exit(e.code === "EPIPE" ? 0 : 1))
  }
}

if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
  process.stdout.write(`${BERTH_VERSION}\n`)
} else {
  void tryFast(argv)
    .then((answered) => {
      if (answered) return exitOnceWritten()
      traceNow("cli: full")
      // the build defines BERTH_MAIN_HASH, so esbuild drops the import() branch, which serves unbundled runs
      const main: Promise<MainModule> =
        typeof BERTH_MAIN_HASH === "string" ? loadBundledMain(BERTH_MAIN_HASH) : import("./main.js")
      return main.then((cli) => cli.run(argv))
    })
    .catch((e: unknown) => {
      // what fails before the CLI runs (a program that is not this entry's, say): one line, never a stack
      process.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`)
      process.exitCode = 1
    })
}

/**
 * A lean answer is written and nothing else is pending: exit at once (with the exit code set), once what was written
 * has left, rather than let Node take its heap and threads apart on the way out, which cost a few milliseconds of
 * every command agents run in loops.
 */
function exitOnceWritten(): void {
  process.stdout.write("", () => process.stderr.write("", () => process.exit()))
}

/** `up`, `down`, `env --json` and `status` straight over the daemon's socket (see fast.ts). */
async function tryFast(args: ReadonlyArray<string>): Promise<boolean> {
  if (!["up", "down", "env", "status"].includes(args[0] ?? "")) return false
  return (await import("./fast.js")).tryFast(args)
}

async function loadBundledMain(hash: string): Promise<MainModule> {
  // imported here rather than at the top so that `--version` does not load them
  const [crypto, fs, os, path, { pathToFileURL }, vm] = await Promise.all([
    import("node:crypto"),
    import("node:fs"),
    import("node:os"),
    import("node:path"),
    import("node:url"),
    import("node:vm")
  ])

  const cacheFolder = (): string | undefined => {
    if (process.env.BERTH_CODE_CACHE === "0") return undefined
    try {
      const xdg = process.env.XDG_CACHE_HOME
      // the XDG spec says to ignore a relative XDG_CACHE_HOME
      const folder = path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".cache"), "berth")
      fs.mkdirSync(folder, { recursive: true, mode: 0o700 })
      // V8 runs what a code cache holds: only trust a folder that no one else can write to
      const stat = fs.statSync(folder)
      const uid = process.getuid?.()
      return uid === undefined || (stat.uid === uid && (stat.mode & 0o022) === 0) ? folder : undefined
    } catch {
      return undefined
    }
  }

  // V8 checks a code cache's header but not its body, and crashes on a damaged one: the file starts with a digest
  const digest = (data: Uint8Array): Buffer => crypto.createHash("sha256").update(data).digest()
  const readCache = (file: string): Buffer | undefined => {
    try {
      const bytes = fs.readFileSync(file)
      const data = bytes.subarray(32)
      return digest(data).equals(bytes.subarray(0, 32)) ? data : undefined
    } catch {
      return undefined
    }
  }
  const writeCache = (file: string, produce: () => Buffer): void => {
    // written aside and renamed into place, so that a concurrent run never reads half a file
    const temporary = `${file}.${process.pid}.tmp`
    try {
      const fd = fs.openSync(temporary, "wx", 0o600)
      try {
        const data = produce()
        fs.writeSync(fd, digest(data))
        fs.writeSync(fd, data)
      } finally {
        fs.closeSync(fd)
      }
      fs.renameSync(temporary, file)
    } catch {
      try {
        fs.rmSync(temporary, { force: true })
      } catch {}
      return
    }
    // caches of other builds or Node versions go once not rewritten for a month
    try {
      const monthAgo = Date.now() - 30 * 24 * 3600 * 1000
      for (const name of fs.readdirSync(path.dirname(file))) {
        const other = path.join(path.dirname(file), name)
        if (other !== file && /^main-.*\.v8$/.test(name) && fs.statSync(other).mtimeMs < monthAgo) fs.rmSync(other)
      }
    } catch {}
  }

  const filename = __filename
  const programFile = path.join(path.dirname(filename), "berth-program.cjs")
  const bytes = fs.readFileSync(programFile)
  // the two files come from one build: another's program would not fit this entry (nor its build id the daemon's).
  // And V8 takes a code cache for any program of the same length: only a program whose hash is the cache's name may
  // run what the cache holds, or a CLI would run another build's code (~2 ms for the hash, on a full command only)
  if (crypto.createHash("sha256").update(bytes).digest("hex").slice(0, 16) !== hash) {
    throw new Error(`${programFile} is not the program of this berth (${filename}): install berth again`)
  }
  const source = bytes.toString("utf8")
  const folder = cacheFolder()
  // V8 rejects a cache written under other V8 flags, and the daemon runs with flags of its own (DAEMON_NODE_FLAGS):
  // one file shared by the CLI and the daemon was rejected, compiled afresh and rewritten by each in turn, so every
  // daemon start and the first command after it compiled the whole program. Each set of flags keeps its own file
  const flags = [...process.execArgv, process.env.NODE_OPTIONS ?? ""].join("\n").trim()
  const flagsKey = flags === "" ? "" : `-${crypto.createHash("sha256").update(flags).digest("hex").slice(0, 8)}`
  const cacheFile = folder && path.join(folder, `main-${hash}-${process.version}-${process.arch}${flagsKey}.v8`)
  const cachedData = cacheFile ? readCache(cacheFile) : undefined
  // the build turns import() into require(), so this is only a fallback (and Node < 20.12 lacks it)
  const importModuleDynamically = (vm as Partial<typeof vm>).constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER
  const script = new vm.Script(source, {
    filename: programFile,
    ...(cachedData ? { cachedData } : {}),
    ...(importModuleDynamically === undefined ? {} : { importModuleDynamically })
  })
  traceNow(
    `code cache: ${cachedData === undefined ? "none" : script.cachedDataRejected === true ? "rejected" : "taken"}`
  )
  if (cacheFile && (cachedData === undefined || script.cachedDataRejected === true)) {
    // written at exit, so that it holds the functions compiled while running too, not only the top level. A daemon
    // runs for days and often ends by a signal, which runs no exit handler: it writes once its start is behind it
    let written = false
    const write = () => {
      if (written) return
      written = true
      writeCache(cacheFile, () => script.createCachedData())
    }
    process.once("exit", write)
    if (argv[0] === "daemon" && argv[1] === "run") setTimeout(write, DAEMON_CACHE_AFTER_MS).unref()
  }

  const module = { exports: {} as MainModule }
  const factory = script.runInThisContext() as (...args: ReadonlyArray<unknown>) => void
  // the program was written as ES modules: what it reads of import.meta, from this file
  const importMeta = { url: pathToFileURL(filename).href, filename, dirname: path.dirname(filename) }
  factory(module.exports, require, module, filename, path.dirname(filename), importMeta)
  return module.exports
}
