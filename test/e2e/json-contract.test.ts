/**
 * The `--json` contract against the built binary: real output of each command, validated by the JSON Schema published
 * for it in docs/json (with ajv, which the MCP SDK already brings), and the command aliases.
 */
import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { type Sandbox, sandboxes } from "./harness.js"

const boxes = sandboxes()
let box: Sandbox

const ajv = new Ajv({ allErrors: true, strict: false })
const schemaOf = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../docs/json/${name}.schema.json`, import.meta.url), "utf8")) as object

/** The document, checked against its schema; an invalid one fails the test with ajv's reasons. */
const valid = (name: string, text: string): Record<string, unknown> => {
  const document = JSON.parse(text) as Record<string, unknown>
  const validate = ajv.compile(schemaOf(name))
  expect(validate(document), `${name}: ${ajv.errorsText(validate.errors)}\n${text}`).toBe(true)
  expect(document.schema).toBe(1)
  return document
}

const json = async (name: string, args: ReadonlyArray<string>, code = 0) => {
  const r = await box.run([...args, "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(code)
  return valid(name, r.stdout)
}

beforeAll(async () => {
  box = await boxes.project({
    "berth.toml": `[services.api]\ncmd = "node server.mjs"\nurl = "api"\nhealth = { http = "/healthz" }\n\n[agents]\nverify = ["true"]\n`
  })
})
afterAll(() => boxes.cleanup())

describe("every --json output follows its published schema", () => {
  it("up, status, env, reload, down", async () => {
    const up = await json("up", ["up"])
    expect((up.world as { state: string }).state).toBe("running")
    const status = await json("status", ["status"])
    expect((status.worlds as ReadonlyArray<unknown>).length).toBe(1)
    const env = await json("env", ["env"])
    expect(env.world).toBe("main")
    expect((env.vars as Record<string, string>).API_URL).toMatch(/^http/)
    // `status <path>` goes the lean path too
    await json("status", ["status", "."])
    await json("reload", ["reload"])
    const down = await json("down", ["down"])
    expect((down.worlds as ReadonlyArray<{ state: string }>)[0]?.state).toBe("stopped")
  })

  it("up --progress: one up-progress document per change, then the world, each on one line", async () => {
    const slow = await boxes.project({
      "berth.toml": `[project]\nsetup = "echo fetching the parts; sleep 2"\n\n[services.slow]\ncmd = "sleep 2 && exec node server.mjs"\nurl = "slow"\nhealth = { http = "/healthz" }\n`
    })
    const r = await slow.run(["up", "--json", "--progress"], { timeoutMs: 60_000 })
    expect(r.code, r.stderr).toBe(0)
    const lines = r.stdout.trimEnd().split("\n")
    expect(lines.length).toBeGreaterThanOrEqual(2)
    const events = lines.slice(0, -1).map((line) => valid("up-progress", line).progress as Record<string, unknown>)
    // the setup and then the service were waited for, and each line tells a change
    expect(events.some((e) => e.setup === true)).toBe(true)
    expect(events.some((e) => (e.waiting as ReadonlyArray<{ name: string }>).some((w) => w.name === "slow"))).toBe(true)
    const keys = events.map(({ elapsedMs: _, ...rest }) => JSON.stringify(rest))
    expect(new Set(keys).size).toBe(keys.length)
    const last = valid("up", lines[lines.length - 1]!)
    expect((last.world as { state: string }).state).toBe("running")
    // piped without --json, the same changes are told as lines on stderr (a new worktree runs its setup again)
    const told = await slow.run(["up", "other", "--progress"], { timeoutMs: 60_000 })
    expect(told.code, told.stderr).toBe(0)
    expect(told.stderr).toMatch(/other: starting; running setup: fetching the parts/)
    expect(told.stderr).toMatch(/other: starting; waiting for slow/)
  })

  it("check, gc --dry-run, verify, port, config, metrics, daemon status, version", async () => {
    expect((await json("check", ["check"])).errors).toEqual([])
    expect((await json("gc", ["gc", "--dry-run"])).dryRun).toBe(true)
    expect((await json("verify", ["verify"])).ok).toBe(true)
    await json("port", ["port"])
    await json("config", ["config"])
    await json("metrics", ["metrics"])
    expect((await json("daemon-status", ["daemon", "status"])).running).toBe(true)
    expect((await json("version", ["version"])).version).toMatch(/^\d+\.\d+\.\d+/)
  })

  it("an error is one line on stderr with its tag, message and hint apart; the exit code is kept", async () => {
    // the second goes the lean path, whose failures the daemon renders
    for (const args of [
      ["env", "nosuch"],
      ["up", "--service", "nope"]
    ]) {
      const r = await box.run([...args, "--json"], { timeoutMs: 60_000 })
      expect(r.code).toBe(1)
      expect(r.stdout).toBe("")
      const { error } = valid("error", r.stderr) as { error: { tag: string; message: string; hint: string | null } }
      expect(error.tag).not.toBe("")
      expect(error.message).not.toContain("hint:")
    }
    const missing = await box.run(["env", "nosuch", "--json"])
    const { error } = JSON.parse(missing.stderr) as { error: { tag: string; hint: string | null } }
    expect(error).toMatchObject({
      tag: "WorldNotFound",
      hint: "use one of them (berth status shows each with its state)"
    })
    // a usage error too, exit 2
    const usage = await box.run(["statsu", "--json"])
    expect(usage.code).toBe(2)
    expect((valid("error", usage.stderr).error as { tag: string }).tag).toBe("UsageError")
  })
})

describe("aliases", () => {
  it("ls and list are status, stop is down, restart is reload; a typo is pointed at them", async () => {
    await json("up", ["up"])
    for (const alias of ["ls", "list"]) {
      const worlds = (await json("status", [alias])).worlds as ReadonlyArray<{ name: string }>
      expect(worlds.map((w) => w.name)).toEqual(["main"])
    }
    expect(((await json("reload", ["restart"])).world as { name: string }).name).toBe("main")
    const stopped = (await json("down", ["stop"])).worlds as ReadonlyArray<{ state: string }>
    expect(stopped[0]?.state).toBe("stopped")
    const plain = await box.run(["ls"])
    expect(plain.code, plain.stderr).toBe(0)
    expect(plain.stdout).toMatch(/main {2}stopped/)
    const typo = await box.run(["restar"])
    expect(typo).toMatchObject({
      code: 2,
      stderr: 'berth: unknown command "restar" for berth; did you mean "restart"?\n'
    })
  })
})
