/**
 * What agents use, through the built binary: `berth exec`, `berth verify`, and `berth mcp` driven by the official MCP
 * SDK's client over stdio, as Claude Code or any MCP client drives it.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { berthBin, ended, eventually, type Sandbox, sandboxes, type WorldJson, varsFrom } from "./harness.js"

const boxes = sandboxes()
let box: Sandbox

/** The web service answers only after a moment, so that an `up` has something to report progress on. */
const slowServer = `await new Promise((r) => setTimeout(r, 1200))\nawait import("./server.mjs")\n`

const config = (verify: ReadonlyArray<string>) =>
  `[services.web]\ncmd = "node slow.mjs"\nurl = "web"\nhealth = { http = "/healthz" }\n\n[services.files]\nadapter = "dir"\nseed = "echo seeded > \${files.url}/seeded.txt"\n\n[agents]\nverify = ${JSON.stringify(verify)}\n`

const passing = ['echo "checking $WEB_PORT"', 'test -n "$WEB_URL" && test "$AGENT_FLAG" = on']

beforeAll(async () => {
  box = await boxes.project({ "berth.toml": config(passing), "slow.mjs": slowServer })
  const up = await box.run(["up"])
  expect(up.code, up.stderr).toBe(0)
})
afterAll(() => boxes.cleanup())

const worldEnv = async () => varsFrom((await box.run(["env", "--json"])).stdout)

describe("berth exec", () => {
  it("runs a command in the world's worktree with the user's environment and the world's variables", async () => {
    const vars = await worldEnv()
    const r = await box.run(["exec", "--", "sh", "-c", 'echo "$WEB_URL|$WEB_PORT|$AGENT_FLAG"; pwd'], {
      env: { AGENT_FLAG: "on" }
    })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toBe(`${vars.WEB_URL}|${vars.WEB_PORT}|on\n${realpathSync(box.dir)}\n`)
    // no shell unless asked for: the arguments arrive as they were given
    const argv = await box.run([
      "exec",
      "main",
      "--",
      "node",
      "-e",
      "console.log(JSON.stringify(process.argv.slice(1)))",
      "$HOME",
      "a b"
    ])
    expect(argv.code, argv.stderr).toBe(0)
    expect(JSON.parse(argv.stdout)).toEqual(["$HOME", "a b"])
  })

  it("passes the command's exit code through", async () => {
    expect((await box.run(["exec", "--", "sh", "-c", "exit 7"])).code).toBe(7)
    expect((await box.run(["exec", "--", "sh", "-c", "kill -TERM $$"])).code).toBe(143)
    const missing = await box.run(["exec", "--", "no-such-command-here"])
    expect(missing.code).toBe(127)
    expect(missing.stderr).toMatch(/cannot run `no-such-command-here`: command not found/)
  })

  it("stops the command's whole process group after --timeout and exits 124", async () => {
    const started = Date.now()
    const r = await box.run(["exec", "--timeout", "1s", "--", "sh", "-c", "sleep 30 & echo $! > bg.pid; sleep 30"])
    expect(r.code).toBe(124)
    expect(Date.now() - started).toBeLessThan(8_000)
    expect(r.stderr).toMatch(/did not finish within 1s: berth stopped its process group \(exit 124\)/)
    // the child it put in the background went with it
    expect(await ended(Number(readFileSync(join(box.dir, "bg.pid"), "utf8")), 5_000)).toBe(true)
  })

  it("names an unknown world, and wants the command after --", async () => {
    const unknown = await box.run(["exec", "nope", "--", "true"])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/has no world "nope"; its worlds: main/)
    const usage = await box.run(["exec", "main"])
    expect(usage.code).toBe(2)
    expect(usage.stderr).toMatch(/needs a command after --/)
  })
})

describe("berth verify", () => {
  it("runs the verify commands in the world's environment and says they passed", async () => {
    const r = await box.run(["verify"], { env: { AGENT_FLAG: "on" } })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/checking \d+\n/)
    expect(r.stdout).toMatch(/verified main: 2 commands passed in [\d.]+ s\n$/)
    expect(r.stderr).toContain('$ echo "checking $WEB_PORT"\n')
  })

  it("stops at the first failure, naming it and its exit code; --json gives the report", async () => {
    box.write("berth.toml", config(["echo one", "echo bad >&2; exit 3", "touch never-ran"]))
    const r = await box.run(["verify"])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/verify of world main failed: `echo bad >&2; exit 3` exited with 3/)
    expect(existsSync(join(box.dir, "never-ran"))).toBe(false)

    const j = await box.run(["verify", "--json"])
    expect(j.code).toBe(1)
    const report = JSON.parse(j.stdout) as Record<string, unknown>
    expect(report).toMatchObject({
      schema: 1,
      world: "main",
      ok: false,
      commands: [
        { command: "echo one", exitCode: 0, outputTail: ["one"] },
        { command: "echo bad >&2; exit 3", exitCode: 3, outputTail: ["bad"] }
      ]
    })
    for (const c of report.commands as ReadonlyArray<Record<string, unknown>>) {
      expect(Object.keys(c).sort()).toEqual(["command", "durationMs", "exitCode", "outputTail"])
      expect(c.durationMs).toBeTypeOf("number")
    }
    // the commands' output went to stderr, the report alone to stdout; the failure is told in JSON on stderr too
    expect(j.stderr).toContain("bad\n")
    expect(j.stderr.trimEnd().split("\n").at(-1)).toMatch(/^\{"schema":1,"error":\{"tag":"VerifyFailed"/)
  })

  it("says when there is nothing to verify", async () => {
    box.write("berth.toml", config([]))
    const r = await box.run(["verify"])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^nothing to verify: /)
    const j = await box.run(["verify", "--json"])
    expect(JSON.parse(j.stdout)).toEqual({ schema: 1, world: "main", ok: true, commands: [] })
  })
})

interface ToolResult {
  readonly isError?: boolean
  /** berth's tools always answer with structured content */
  readonly structuredContent: Record<string, unknown>
}

describe("berth mcp", () => {
  let client: Client

  beforeAll(async () => {
    box.write("berth.toml", config(passing))
    expect((await box.run(["down"])).code).toBe(0)
    const env: Record<string, string> = {}
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v
    client = new Client({ name: "berth-e2e", version: "1.0.0" })
    await client.connect(
      new StdioClientTransport({
        command: berthBin,
        args: ["mcp"],
        cwd: box.dir,
        env: {
          ...env,
          BERTH_HOME: box.home,
          NO_COLOR: "1",
          BERTH_PROXY_PORT: "off",
          BERTH_HTTPS_PORT: "off",
          AGENT_FLAG: "on",
          DEPLOY_TOKEN: "tok-e2e-secret"
        },
        stderr: "pipe"
      })
    )
  })
  afterAll(async () => {
    await client?.close()
  })

  const call = async (name: string, args: Record<string, unknown> = {}, onprogress?: (p: unknown) => void) =>
    (await client.callTool(
      { name, arguments: args },
      undefined,
      onprogress === undefined ? {} : { onprogress }
    )) as ToolResult

  it("initializes and lists its tools with their hints, and no remove", async () => {
    expect(client.getServerVersion()?.name).toBe("berth")
    const { tools } = await client.listTools()
    const byName = new Map(tools.map((t) => [t.name, t]))
    expect([...byName.keys()].sort()).toEqual(
      ["curl", "down", "env", "exec", "logs", "reload", "reset", "status", "up", "verify"].sort()
    )
    expect(byName.has("remove")).toBe(false)
    for (const name of ["status", "env", "logs"]) {
      expect(byName.get(name)?.annotations).toMatchObject({
        readOnlyHint: true,
        destructiveHint: false,
        openWorldHint: false
      })
    }
    for (const name of ["down", "reload", "reset"]) {
      expect(byName.get(name)?.annotations).toMatchObject({
        readOnlyHint: false,
        destructiveHint: true,
        openWorldHint: false
      })
    }
    expect(byName.get("up")?.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true
    })
    expect(byName.get("exec")?.annotations).toMatchObject({ destructiveHint: true, openWorldHint: true })
    expect(byName.get("exec")?.inputSchema).toMatchObject({ required: ["command"] })
  })

  it("drives a world: up (with progress) → status → env → verify → reset → exec → down", async () => {
    const progress: Array<unknown> = []
    const up = await call("up", {}, (p) => progress.push(p))
    expect(up.isError, JSON.stringify(up)).toBe(false)
    expect(up.structuredContent).toMatchObject({ name: "main", state: "running" })
    expect(progress.length).toBeGreaterThan(0)
    expect(progress[0]).toMatchObject({ progress: 1, message: expect.stringMatching(/^main: /) })

    const status = await call("status")
    const worlds = status.structuredContent.worlds as ReadonlyArray<WorldJson>
    expect(worlds.map((w) => [w.name, w.state])).toEqual([["main", "running"]])

    const env = await call("env")
    const vars = (env.structuredContent as { vars: Record<string, string> }).vars
    expect(vars.WEB_PORT).toMatch(/^\d+$/)

    const verify = await call("verify")
    expect(verify.structuredContent).toMatchObject({ schema: 1, world: "main", ok: true })
    expect((verify.structuredContent.commands as ReadonlyArray<unknown>).length).toBe(2)

    // what the world wrote into its slice goes with a reset; the seed's data comes back; the process is a new one
    const files = vars.FILES_URL!
    expect(readFileSync(join(files, "seeded.txt"), "utf8")).toBe("seeded\n")
    writeFileSync(join(files, "scratch.txt"), "written by the agent\n")
    const pidBefore = worlds[0]!.services.find((s) => s.name === "web")?.pid
    const reset = await call("reset")
    expect(reset.isError, JSON.stringify(reset)).toBe(false)
    expect(reset.structuredContent).toMatchObject({ name: "main", state: "running" })
    expect(existsSync(join(files, "scratch.txt"))).toBe(false)
    expect(readFileSync(join(files, "seeded.txt"), "utf8")).toBe("seeded\n")
    const web = (reset.structuredContent.services as ReadonlyArray<{ name: string; pid: number | null }>).find(
      (s) => s.name === "web"
    )
    expect(web?.pid).not.toBe(pidBefore)
    const unknown = await call("reset", { slices: ["nope"] })
    expect(unknown.isError).toBe(true)
    expect(unknown.structuredContent).toMatchObject({ message: expect.stringMatching(/no slice "nope".*files/) })

    const exec = await call("exec", {
      command: ["sh", "-c", 'echo "port $WEB_PORT"; echo oops >&2; exit 5', "DEPLOY_TOKEN=tok-e2e-secret"]
    })
    expect(exec.isError).toBe(false)
    expect(exec.structuredContent).toMatchObject({
      exitCode: 5,
      timedOut: false,
      stdoutTail: [`port ${vars.WEB_PORT}`],
      stderrTail: ["oops"]
    })
    const timedOut = await call("exec", { command: ["sleep", "30"], timeoutSeconds: 1 })
    expect(timedOut.structuredContent).toMatchObject({ exitCode: 124, timedOut: true })

    // a follower of the history sees the next call as it is recorded
    const { spawn } = await import("node:child_process")
    const follower = spawn(berthBin, ["logs", "-s", "berth", "-f", "-n", "1"], {
      cwd: box.dir,
      env: { ...process.env, BERTH_HOME: box.home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let followed = ""
    follower.stderr.on("data", (d: Buffer) => {
      followed += d.toString()
    })
    follower.stdout.on("data", (d: Buffer) => {
      followed += d.toString()
    })
    // it is following once it has printed the last line so far (the exec above)
    await eventually(
      async () => followed,
      (t) => /agent: exec /.test(t)
    )
    const down = await call("down")
    expect((down.structuredContent.worlds as ReadonlyArray<WorldJson>)[0]?.state).toBe("stopped")
    try {
      expect(
        await eventually(
          async () => followed,
          (t) => /agent: down → /.test(t)
        )
      ).toMatch(/agent: down → /)
      // each event once, however many polls pass (one a second): each asks only for what came after the last line
      await new Promise((r) => setTimeout(r, 2_500))
      expect(followed.match(/agent: down → /g)).toHaveLength(1)
      expect(followed).not.toMatch(/agent: up → /)
    } finally {
      follower.kill()
    }

    // every call is in the world's history, its secrets masked
    const after = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: ReadonlyArray<{ events: ReadonlyArray<{ kind: string; message: string }> }>
    }
    const agent = after.worlds[0]!.events.filter((e) => e.kind === "agent").map((e) => e.message)
    expect(agent).toContain("up → running")
    expect(agent).toContain("verify → ok")
    expect(agent).toContain("reset → running")
    expect(agent.find((m) => m.startsWith("exec ") && m.endsWith("→ exit 5"))).toContain("DEPLOY_TOKEN=***")
    expect(agent.join("\n")).not.toContain("tok-e2e-secret")
    // and in its log: `berth logs -s berth` is the world's history, oldest first
    const history = await box.run(["logs", "-s", "berth", "-n", "200"])
    expect(history.code, history.stderr).toBe(0)
    const lines = history.stdout.trimEnd().split("\n")
    expect(lines.find((l) => l.endsWith("agent: up → running"))).toMatch(/^\d{4}-\d\d-\d\dT/)
    expect(lines.findIndex((l) => l.endsWith("agent: up → running"))).toBeLessThan(
      lines.findIndex((l) => l.endsWith("agent: reset → running"))
    )
    expect(history.stdout).not.toContain("tok-e2e-secret")
  })

  it("answers a failing call with a structured error", async () => {
    const r = await call("env", { world: "no-such-world" })
    expect(r.isError).toBe(true)
    expect(r.structuredContent).toMatchObject({
      tag: "WorldNotFound",
      message: expect.stringContaining('no world "no-such-world"'),
      // a world named that does not exist is not offered to be made by a tool that acts on one
      hint: "use one of them (the status tool shows each with its state)",
      logTail: []
    })
    // arguments the tool's schema refuses fail in the same shape
    const bad = await call("exec", { command: [] })
    expect(bad.isError).toBe(true)
    expect(bad.structuredContent).toMatchObject({ tag: "InvalidParams", message: expect.stringContaining("exec") })
  })
})
