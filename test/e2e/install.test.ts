/**
 * berth as a user gets it: the package packed from this checkout, installed globally into a prefix of its own, and
 * the README's demo run with the installed `berth`. The package installs the bundle and the SQLite binding only; a
 * program that embeds it brings its own effect; a slice whose adapter needs a client berth does not bring says which
 * package to add, and finds it once added.
 *
 * npm works from its cache where it can (--prefer-offline): the tarballs are there after `npm ci`. Every install
 * script runs, as for a user; the SQLite binding's downloads its prebuilt binary, here from a loopback mirror of the
 * file it asks GitHub for (scripts/prebuilt-mirror.mjs), since where no download works it compiles SQLite, minutes on
 * a small machine. bench/install.mjs times the same install.
 */
import { execFile } from "node:child_process"
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { bindingHostVariable, startPrebuiltMirror } from "../../scripts/prebuilt-mirror.mjs"
import { drivers, installCommand } from "../../src/domain/drivers.js"
import { demoWork, expectDemoLines, runDemo } from "./demo-run.js"
import { killAll, portBlock, runBerth, sandbox } from "./harness.js"

const repo = resolve(import.meta.dirname, "../..")
const base = mkdtempSync(join(tmpdir(), "berth-install-"))
const prefix = join(base, "prefix")
const installed = join(prefix, "bin", "berth")
const packageDir = join(prefix, "lib", "node_modules", "berth")
const pkg = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as {
  version: string
  dependencies: Record<string, string>
}

/** npm as a user's shell runs it: none of the npm_* variables of an `npm test` that runs this file */
const npm = (args: ReadonlyArray<string>, cwd: string, extra: Record<string, string> = {}) =>
  new Promise<string>((done, reject) => {
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith("npm_"))),
      ...extra
    }
    execFile("npm", [...args], { cwd, env, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) =>
      error === null ? done(stdout) : reject(new Error(`npm ${args.join(" ")}: ${error.message}\n${stderr}`))
    )
  })

const demoBase = join(base, "demo")
const demoHome = join(demoBase, "home")
const scratch = join(demoBase, "tmp")
const [from, to] = portBlock().split("-").map(Number) as [number, number]
const demoEnv = { BERTH_PROXY_PORT: String(to - 1), BERTH_HTTPS_PORT: String(to), TMPDIR: scratch }

beforeAll(async () => {
  // dist/ as the suite built it; its types (prepack's build:types) are not what this test is about
  const tarball = (await npm(["pack", "--ignore-scripts", "--silent", "--pack-destination", base], repo)).trim()
  const mirror = await startPrebuiltMirror(repo)
  try {
    await npm(
      // npm's cache holds the SQLite binding's tarball after `npm ci`, not always the registry's listing that resolving
      // it by version reads: what the cache lacks comes from the registry
      ["install", "--global", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", tarball],
      base,
      { [bindingHostVariable]: mirror.host("install") }
    )
    // the binding came from the download, not a build from source
    expect(mirror.asked("install")).toBe(1)
  } finally {
    await mirror.close()
  }
}, 120_000)

afterAll(async () => {
  for (const found of existsSync(scratch) ? readdirSync(scratch, { withFileTypes: true }) : []) {
    if (!found.isDirectory()) continue
    await runBerth(["down", "--all"], join(scratch, found.name, "hello"), demoHome, {
      env: demoEnv,
      bin: installed
    }).catch(() => undefined)
  }
  killAll(demoHome)
  rmSync(base, { recursive: true, force: true })
}, 60_000)

describe("the installed package", () => {
  it("holds the bundle and installs only the SQLite binding beside it", async () => {
    expect(Object.keys(pkg.dependencies)).toEqual(["better-sqlite3"])
    const modules = readdirSync(join(packageDir, "node_modules"))
    expect(modules).toContain("better-sqlite3")
    for (const bundled of ["effect", "@effect", "pg", "mysql2", "ioredis", "smol-toml"]) {
      expect(modules).not.toContain(bundled)
    }
    for (const driver of drivers.values()) expect(modules).not.toContain(driver.packageName.split("/")[0])
    const version = await runBerth(["--version"], base, join(base, "version-home"), { bin: installed })
    expect(version.stderr).toBe("")
    expect(version.stdout).toContain(pkg.version)
  })

  it("runs the README's demo with the installed berth", async () => {
    mkdirSync(scratch, { recursive: true })
    // the demo as shipped in the repository, with the installed berth in place of the checkout's dist/berth
    const example = join(demoBase, "hello")
    cpSync(join(repo, "examples", "hello"), example, { recursive: true })
    const script = join(example, "demo.sh")
    const text = readFileSync(script, "utf8")
    const line = /^bin=.*$/m
    expect(text).toMatch(line)
    writeFileSync(script, text.replace(line, `bin=${installed}`), { mode: 0o755 })

    const range = await runBerth(["port", "--range", `${from}-${to - 2}`], demoBase, demoHome, {
      env: demoEnv,
      bin: installed
    })
    expect(range.code, range.stderr).toBe(0)
    const r = await runDemo(script, demoBase, demoHome, demoEnv)
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const work = demoWork(scratch)
    expect(work).toBeDefined()
    expectDemoLines(r.stdout, work!, demoHome, to - 1, installed)
  }, 120_000)

  it("embeds: the installed library runs on the embedder's own Effect (its peer)", async () => {
    // an embedder's project: its own effect and the installed berth in its node_modules (the effect berth's bundle
    // imports is found beside berth, where a local install puts it; here, the same package)
    const effect = join(repo, "node_modules", "effect")
    const app = join(base, "app")
    mkdirSync(join(app, "node_modules"), { recursive: true })
    symlinkSync(effect, join(app, "node_modules", "effect"))
    symlinkSync(packageDir, join(app, "node_modules", "berth"))
    symlinkSync(effect, join(prefix, "lib", "node_modules", "effect"))
    const program = join(app, "embed.mjs")
    writeFileSync(
      program,
      [
        'import * as Effect from "effect/Effect"',
        'import { EmbedLive, Worlds, version } from "berth"',
        "const statuses = await Effect.runPromise(",
        "  Effect.gen(function* () {",
        "    const worlds = yield* Worlds",
        "    return yield* worlds.status(undefined)",
        `  }).pipe(Effect.provide(EmbedLive(${JSON.stringify(join(base, "embed-home"))})), Effect.scoped)`,
        ")",
        "console.log(JSON.stringify({ version, worlds: statuses.worlds.length }))",
        ""
      ].join("\n")
    )
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((done) =>
      execFile(process.execPath, [program], { cwd: app }, (error, stdout, stderr) =>
        done({ code: error === null ? 0 : (error.code as number), stdout, stderr })
      )
    )
    expect(r.stderr).toBe("")
    expect(JSON.parse(r.stdout)).toEqual({ version: pkg.version, worlds: 0 })
  })

  it("says which package a slice's adapter needs, and finds it once it is installed beside berth", async () => {
    const s3 = drivers.get("s3")!
    const kafka = drivers.get("kafka")!
    const files = sandbox({
      "berth.toml": '[services.files]\nadapter = "minio"\nadmin_url = "http://key:secret@127.0.0.1:1"\n'
    })
    const events = sandbox({
      "berth.toml": '[services.events]\nadapter = "redpanda"\nadmin_url = "kafka://127.0.0.1:1"\n'
    })
    try {
      const up = await files.run(["up", "--json"], { bin: installed })
      expect(up.code).toBe(1)
      const failure = JSON.parse(up.stderr) as { error: { tag: string; message: string; hint: string } }
      expect(failure.error.tag).toBe("DriverMissing")
      expect(failure.error.message).toContain(`the minio adapter needs the package ${s3.packageName}`)
      expect(failure.error.hint).toContain(installCommand(s3))

      const before = await events.run(["up"], { bin: installed })
      expect(before.code).toBe(1)
      expect(before.stderr).toContain(`hint: ${installCommand(kafka)}`)
      expect(before.stderr).not.toMatch(/\n\s+at /)
      // installed beside berth as the hint says (into this prefix): kafkajs needs nothing else, and this checkout has
      // it (npm's cache holds its tarball, not the registry's listing that installing it by name reads)
      const driver = (
        await npm(["pack", "--silent", "--pack-destination", base, join(repo, "node_modules", kafka.packageName)], base)
      ).trim()
      await npm(["install", "--global", "--prefix", prefix, "--offline", "--no-audit", "--no-fund", driver], base)
      // the daemon that answered before finds it without a restart: what fails now is reaching the broker
      const after = await events.run(["up"], { bin: installed })
      expect(after.code).toBe(1)
      expect(after.stderr).not.toContain("is not installed")
      expect(after.stderr).toContain("127.0.0.1:1")
    } finally {
      files.cleanup()
      events.cleanup()
    }
  }, 120_000)
})
