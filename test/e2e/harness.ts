/**
 * Drives the built `berth` binary exactly as a user would: in a temporary git repository, with its own BERTH_HOME,
 * output piped (so no TTY), and nothing shared between tests.
 */
import { execFileSync, spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"

export const berthBin = resolve(import.meta.dirname, "../../dist/berth.mjs")

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
  readonly git: (...args: ReadonlyArray<string>) => string
  readonly cleanup: () => void
}

export interface RunOptions {
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string | undefined>>
  readonly timeoutMs?: number
}

export const runBerth = (args: ReadonlyArray<string>, cwd: string, home: string, options?: RunOptions) =>
  new Promise<RunResult>((resolvePromise, reject) => {
    const child = spawn(process.execPath, [berthBin, ...args], {
      cwd: options?.cwd ?? cwd,
      env: { ...process.env, BERTH_HOME: home, NO_COLOR: "1", ...options?.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString()
    })
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString()
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

/** A fresh git repository (one commit) holding `files`, and a BERTH_HOME of its own. */
export const sandbox = (files: Readonly<Record<string, string>> = {}, name = "app"): Sandbox => {
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
  const git = (...args: ReadonlyArray<string>) =>
    execFileSync("git", args, {
      cwd: dir,
      encoding: "utf8",
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: "berth",
        GIT_AUTHOR_EMAIL: "berth@localhost",
        GIT_COMMITTER_NAME: "berth",
        GIT_COMMITTER_EMAIL: "berth@localhost"
      }
    })
  git("init", "-q", "-b", "main")
  git("add", "-A")
  git("commit", "-q", "--allow-empty", "-m", "initial")
  return {
    dir,
    home,
    write,
    git,
    run: (args, options) => runBerth(args, dir, home, options),
    cleanup: () => rmSync(base, { recursive: true, force: true })
  }
}
