/**
 * Drives the built `berth` binary exactly as a user would: in a temporary git repository, with its own BERTH_HOME,
 * output piped (so no TTY), and nothing shared between tests.
 */
import { execFileSync, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"

/** the command users run: the launcher, which starts dist/berth.cjs (BERTH_TEST_DIST: another build folder) */
export const berthBin = resolve(import.meta.dirname, "../..", process.env.BERTH_TEST_DIST ?? "dist", "berth")

if (!existsSync(berthBin)) throw new Error(`${berthBin} is missing: run \`npm run build\` first`)

export interface RunResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

export interface Sandbox {
  /** the repository root */
  readonly dir: string
  /** BERTH_HOME for this sandbox */
  readonly home: string
  readonly write: (file: string, text: string) => void
  readonly run: (args: ReadonlyArray<string>, options?: RunOptions) => Promise<RunResult>
  /** what every run of this sandbox adds to the environment (its proxy ports, say) */
  readonly env: Readonly<Record<string, string>>
  readonly git: (...args: ReadonlyArray<string>) => string
  readonly cleanup: () => void
}

export interface RunOptions {
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string | undefined>>
  readonly timeoutMs?: number
  /** the umask the CLI (and so a daemon it starts) runs with, e.g. 0o022; the test process's own when unset */
  readonly umask?: number
  /** another berth binary to run (another build, say); dist/berth when unset */
  readonly bin?: string
  /** the command that runs berth, e.g. `ip netns exec <host>` for a test host of its own (no umask with it) */
  readonly via?: ReadonlyArray<string>
  /** sees stderr as it comes, for a test that acts on what a running command has said so far */
  readonly onStderr?: (text: string) => void
}

export const runBerth = (args: ReadonlyArray<string>, cwd: string, home: string, options?: RunOptions) =>
  new Promise<RunResult>((resolvePromise, reject) => {
    // a umask is set by a shell that then becomes berth, so that nothing else of the test process changes
    const bin = options?.bin ?? berthBin
    const [command, argv] =
      options?.via !== undefined && options.via.length > 0
        ? [options.via[0] as string, [...options.via.slice(1), bin, ...args]]
        : options?.umask === undefined
          ? [bin, args]
          : ["/bin/sh", ["-c", `umask ${options.umask.toString(8).padStart(3, "0")} && exec "$0" "$@"`, bin, ...args]]
    const child = spawn(command, argv, {
      cwd: options?.cwd ?? cwd,
      // the proxy is off unless a test gives the sandbox ports of its own: every daemon would want port 80 otherwise
      env: {
        ...process.env,
        BERTH_HOME: home,
        NO_COLOR: "1",
        BERTH_PROXY_PORT: "off",
        BERTH_HTTPS_PORT: "off",
        ...options?.env
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString()
      options?.onStderr?.(stderr)
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`berth ${args.join(" ")} timed out\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, options?.timeoutMs ?? 30_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolvePromise({ code, stdout, stderr })
    })
  })

/** git in `cwd`, as a fixed author (nothing of the machine's git identity). */
export const gitIn = (cwd: string, ...args: ReadonlyArray<string>) =>
  execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "berth",
      GIT_AUTHOR_EMAIL: "berth@localhost",
      GIT_COMMITTER_NAME: "berth",
      GIT_COMMITTER_EMAIL: "berth@localhost"
    }
  })

/** A fresh git repository (one commit) holding `files`, and a BERTH_HOME of its own. */
export const sandbox = (
  files: Readonly<Record<string, string>> = {},
  name = "app",
  env: Readonly<Record<string, string>> = {}
): Sandbox => {
  const base = mkdtempSync(join(tmpdir(), "berth-e2e-"))
  const dir = join(base, name)
  const home = join(base, "home")
  mkdirSync(dir)
  const write = (file: string, text: string) => {
    const target = join(dir, file)
    mkdirSync(dirname(target), { recursive: true })
    writeFileSync(target, text)
  }
  for (const [file, text] of Object.entries(files)) write(file, text)
  const git = (...args: ReadonlyArray<string>) => gitIn(dir, ...args)
  git("init", "-q", "-b", "main")
  git("add", "-A")
  git("commit", "-q", "--allow-empty", "-m", "initial")
  return {
    dir,
    home,
    write,
    git,
    env,
    run: (args, options) => runBerth(args, dir, home, { ...options, env: { ...env, ...options?.env } }),
    cleanup: () => {
      killAll(home)
      rmSync(base, { recursive: true, force: true })
    }
  }
}

/** Every process whose environment names this BERTH_HOME: the daemon and every service it started. */
export const processesOf = (home: string): Array<number> => {
  const marker = `BERTH_HOME=${home}\u0000`
  const pids: Array<number> = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      if (`${readFileSync(`/proc/${entry}/environ`, "latin1")}\u0000`.includes(marker)) pids.push(Number(entry))
    } catch {
      // gone, or not ours to read
    }
  }
  return pids
}

/** Leaves nothing behind: stops the daemon and SIGKILLs whatever of this sandbox still runs. */
export const killAll = (home: string): void => {
  for (const pid of processesOf(home)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}

export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0]
    return state !== "Z" && state !== "X"
  } catch {
    return false
  }
}

/** A tiny HTTP service for worlds under test: answers /healthz and / with what it knows of its world. */
/**
 * Another build of berth, as the build writes one: `dist/`'s program and entry under another build id, the entry
 * naming its program by the program's own hash. Written where node_modules still resolves; `remove` takes it away.
 * `forged` leaves the entry's hash of the program as it was (a program changed beside its entry, same length).
 */
export const otherBuild = (
  id: string,
  options: { readonly forged?: boolean } = {}
): { readonly bin: string; readonly remove: () => void } => {
  const dist = dirname(berthBin)
  const program = readFileSync(join(dist, "berth-program.cjs"), "utf8")
  const entry = readFileSync(join(dist, "berth.cjs"), "utf8")
  // the build id: the one 8-hex-digit string both files hold
  const ids = [...new Set(entry.match(/"[0-9a-f]{8}"/g) ?? [])].filter((s) => program.includes(s))
  if (ids.length !== 1) throw new Error(`cannot tell dist/'s build id (${ids.join(", ")})`)
  const current = JSON.parse(ids[0] as string) as string
  if (id.length !== current.length) throw new Error(`a build id is ${current.length} characters`)
  const otherProgram = program.replaceAll(JSON.stringify(current), JSON.stringify(id))
  const hashOf = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 16)
  let otherEntry = entry.replaceAll(JSON.stringify(current), JSON.stringify(id))
  if (options.forged !== true) otherEntry = otherEntry.replaceAll(hashOf(program), hashOf(otherProgram))
  const folder = join(dist, "../node_modules", `.berth-other-build-${id}-${process.pid}`)
  mkdirSync(folder, { recursive: true })
  writeFileSync(join(folder, "berth-program.cjs"), otherProgram)
  writeFileSync(join(folder, "berth.cjs"), otherEntry, { mode: 0o755 })
  copyFileSync(berthBin, join(folder, "berth"))
  chmodSync(join(folder, "berth"), 0o755)
  return { bin: join(folder, "berth"), remove: () => rmSync(folder, { recursive: true, force: true }) }
}

export const serverScript = `
import { createServer } from "node:http"
const port = Number(process.env.PORT)
createServer((req, res) => {
  if (req.url === "/healthz") return res.end("ok")
  res.setHeader("content-type", "application/json")
  res.end(JSON.stringify({ service: process.env.BERTH_SERVICE, world: process.env.BERTH_WORLD, port, env: process.env }))
}).listen(port, "127.0.0.1")
`

/**
 * Claims a private block of 100 ports for a sandbox, so that parallel test files (each with its own daemon) never
 * compete for one: the claim is an exclusive mkdir, released when the test process ends.
 */
const claimed: Array<string> = []
const BLOCKS = 127
export const portBlock = (): string => {
  const root = join(tmpdir(), "berth-test-port-blocks")
  mkdirSync(root, { recursive: true })
  // below Linux's ephemeral range (32768+), so that no outgoing connection's local port ever sits in a block
  const start = Math.floor(Math.random() * BLOCKS)
  for (let k = 0; k < BLOCKS; k++) {
    const block = (start + k) % BLOCKS
    const claim = join(root, String(block))
    try {
      mkdirSync(claim)
      writeFileSync(join(claim, "pid"), String(process.pid))
    } catch {
      // a claim whose test process is gone (killed mid-run) is stale: take it over next time round
      try {
        const owner = Number(readFileSync(join(claim, "pid"), "utf8"))
        if (!isAlive(owner)) rmSync(claim, { recursive: true, force: true })
      } catch {}
      continue
    }
    claimed.push(claim)
    const from = 20_000 + block * 100
    return `${from}-${from + 99}`
  }
  throw new Error("no free port block left for tests")
}
process.once("exit", () => {
  for (const claim of claimed) rmSync(claim, { recursive: true, force: true })
})

export const fetchJson = async (url: string): Promise<Record<string, unknown>> => {
  const res = await fetch(url)
  return (await res.json()) as Record<string, unknown>
}

/** A service as `berth status --json` and `berth up --json` print it. */
export interface ServiceJson {
  readonly name: string
  readonly state: string
  readonly pid: number | null
  readonly port: number | null
  readonly url: string | null
  readonly restarts: number
  readonly reason: string | null
  readonly logTail: ReadonlyArray<string>
  readonly command: string | null
}

/** A world as `berth status --json` and `berth up --json` print it. */
export interface WorldJson {
  readonly project: string
  readonly name: string
  readonly path: string
  readonly state: string
  readonly services: ReadonlyArray<ServiceJson>
}

/** The world of `berth up --json` or `berth reload --json`: `{ "schema": 1, "world": … }`. */
export const worldFrom = (stdout: string): WorldJson => (JSON.parse(stdout) as { world: WorldJson }).world

/** The variables of `berth env --json`: `{ "schema": 1, "world", "vars": … }`. */
export const varsFrom = (stdout: string): Record<string, string> =>
  (JSON.parse(stdout) as { vars: Record<string, string> }).vars

/**
 * The sandboxes of one test file: each project gets the test server, a private block of ports and a daemon;
 * `cleanup` (in `afterAll`) leaves nothing behind.
 */
export const sandboxes = () => {
  const boxes: Array<Sandbox> = []
  return {
    plain: (files: Readonly<Record<string, string>>) => {
      const box = sandbox({ "server.mjs": serverScript, ...files })
      boxes.push(box)
      return box
    },
    project: async (
      files: Readonly<Record<string, string>>,
      options: { readonly proxy?: boolean; readonly umask?: number } = {}
    ) => {
      const block = portBlock()
      const [from, to] = block.split("-").map(Number) as [number, number]
      // with a proxy, the block's last two ports are its HTTP and HTTPS ports
      const env = options.proxy === true ? { BERTH_PROXY_PORT: String(to - 1), BERTH_HTTPS_PORT: String(to) } : {}
      const box = sandbox({ "server.mjs": serverScript, ...files }, "app", env)
      boxes.push(box)
      // this first command starts the sandbox's daemon, which keeps the umask it is given
      const range = await box.run(["port", "--range", options.proxy === true ? `${from}-${to - 2}` : block], {
        ...(options.umask === undefined ? {} : { umask: options.umask })
      })
      if (range.code !== 0) throw new Error(`berth port --range failed: ${range.stderr}`)
      return box
    },
    cleanup: () => {
      for (const b of boxes) b.cleanup()
    }
  }
}

/**
 * Polls `probe` every 100 ms until `ok` holds or `timeoutMs` passes; returns the last value either way. A wait that
 * runs out says so on stderr: the test's own assertions decide, but a wait that always runs out is time thrown away.
 */
export const eventually = async <A>(probe: () => Promise<A>, ok: (a: A) => boolean, timeoutMs = 20_000): Promise<A> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (ok(value)) return value
    if (Date.now() > until) {
      const caller = new Error().stack?.split("\n")[2]?.trim() ?? ""
      process.stderr.write(`eventually: gave up after ${timeoutMs} ms ${caller}\n`)
      return value
    }
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** Waits for `pid` to end, up to `timeoutMs`: true once it has. */
export const ended = async (pid: number, timeoutMs = 20_000): Promise<boolean> => {
  const gone = (alive: boolean) => !alive
  return gone(await eventually(async () => isAlive(pid), gone, timeoutMs))
}
