/**
 * `berth mcp` as agents drive it — through the official MCP SDK's client over stdio — where the tools must answer as
 * the CLI does: reload waits, one error shape, strict arguments, declared output.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Ajv } from "ajv"
import { berthBin, eventually, fetchJson, type Sandbox, sandboxes, type WorldJson } from "./harness.js"

const boxes = sandboxes()
const ajv = new Ajv({ allErrors: true, strict: false })
const clients: Array<Client> = []
afterAll(async () => {
  for (const c of clients) await c.close()
  boxes.cleanup()
})

/** The web service answers only after a moment, so that a waiting call has something to report. */
const slowServer = `await new Promise((r) => setTimeout(r, 800))\nawait import("./server.mjs")\n`

const working = `[services.api]
cmd = "node server.mjs"
url = "api"
groups = ["back"]
health = { http = "/healthz" }

[services.web]
cmd = "node slow.mjs"
url = "web"
depends_on = ["api"]
health = { http = "/healthz" }

[services.docs]
cmd = "node server.mjs"
url = "docs"
groups = ["front"]
health = { http = "/healthz" }
`
const broken = working.replace('cmd = "node slow.mjs"', `cmd = "echo web cannot start here; exit 3"`)

interface ToolResult {
  readonly isError?: boolean
  readonly structuredContent: Record<string, unknown>
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
}

/** Every failing call answers in this one shape, as AGENTS.md tells it. */
const failureKeys = ["hint", "logTail", "message", "tag"]

const failure = (r: ToolResult) => {
  expect(r.isError, JSON.stringify(r)).toBe(true)
  expect(Object.keys(r.structuredContent).sort()).toEqual(failureKeys)
  // the text is the same failure, for clients that read only text
  expect(JSON.parse(r.content[0]?.text ?? "")).toEqual(r.structuredContent)
  return r.structuredContent as { tag: string; message: string; hint: string | null; logTail: ReadonlyArray<string> }
}

/** An MCP client of `berth mcp` started in `cwd` (the box's checkout by default). */
const connect = async (box: Sandbox, cwd = box.dir, without: ReadonlyArray<string> = []) => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !without.includes(k)) env[k] = v
  const client = new Client({ name: "berth-e2e", version: "1.0.0" })
  await client.connect(
    new StdioClientTransport({
      command: berthBin,
      args: ["mcp"],
      cwd,
      env: {
        ...env,
        ...box.env,
        BERTH_HOME: box.home,
        NO_COLOR: "1",
        BERTH_PROXY_PORT: "off",
        BERTH_HTTPS_PORT: "off"
      },
      stderr: "pipe"
    })
  )
  clients.push(client)
  // every answer is checked against the outputSchema its tool declares, success and failure alike
  const { tools } = await client.listTools()
  const validators = new Map(
    tools.flatMap((t) => (t.outputSchema === undefined ? [] : [[t.name, ajv.compile(t.outputSchema)] as const]))
  )
  const call = async (name: string, args: Record<string, unknown> = {}, onprogress?: (p: unknown) => void) => {
    const result = (await client.callTool(
      { name, arguments: args },
      undefined,
      onprogress === undefined ? { timeout: 120_000 } : { onprogress, timeout: 120_000 }
    )) as ToolResult
    const validate = validators.get(name)
    if (validate !== undefined) {
      expect(validate(result.structuredContent), `${name}: ${ajv.errorsText(validate.errors)}`).toBe(true)
    }
    return result
  }
  return { client, call, tools }
}

let box: Sandbox
let call: Awaited<ReturnType<typeof connect>>["call"]
let tools: Awaited<ReturnType<typeof connect>>["tools"]

beforeAll(async () => {
  box = await boxes.project({ "berth.toml": working, "slow.mjs": slowServer, ".gitignore": "*.log\n" })
  ;({ call, tools } = await connect(box))
})

describe("the tools' declared output", () => {
  it("is an outputSchema on every tool: an object, the tool's answer or the failure's one shape", () => {
    expect(tools.length).toBe(10)
    for (const tool of tools) {
      expect(tool.outputSchema, tool.name).toMatchObject({ type: "object" })
      const validate = ajv.compile(tool.outputSchema!)
      const failure = { tag: "WorldNotFound", message: "no world", hint: null, logTail: [] }
      expect(validate(failure), `${tool.name}: ${ajv.errorsText(validate.errors)}`).toBe(true)
      // nothing else is a failure: an _tag more, or hint left out, does not pass
      expect(validate({ ...failure, _tag: "ToolFailure" }), tool.name).toBe(false)
      expect(validate({ tag: "WorldNotFound", message: "no world", logTail: [] }), tool.name).toBe(false)
    }
  })
})

describe("the reload tool", () => {
  it("waits until the world runs again, and fails as up does when it then fails", async () => {
    const up = await call("up")
    expect(up.isError, JSON.stringify(up)).toBe(false)
    const reload = await call("reload")
    expect(reload.isError, JSON.stringify(reload)).toBe(false)
    expect(reload.structuredContent).toMatchObject({ name: "main", state: "running" })

    // groups: those services and what depends on them (api, and web after it), the rest untouched
    const pids = (r: ToolResult) =>
      Object.fromEntries(
        (r.structuredContent.services as ReadonlyArray<{ name: string; pid: number | null }>).map((s) => [
          s.name,
          s.pid
        ])
      )
    const before = pids(reload)
    const back = await call("reload", { groups: ["back"] })
    expect(back.isError, JSON.stringify(back)).toBe(false)
    expect(pids(back).api).not.toBe(before.api)
    expect(pids(back).web).not.toBe(before.web)
    expect(pids(back).docs).toBe(before.docs)

    box.write("berth.toml", broken)
    const failed = await call("reload")
    expect(failed.isError).toBe(true)
    expect(failed.structuredContent).toMatchObject({
      tag: "StartFailed",
      message: expect.stringContaining("world main: web"),
      logTail: expect.arrayContaining(["web cannot start here"])
    })
    box.write("berth.toml", working)
  })
})

describe("exec and verify in a world", () => {
  it("get the identity variables its services get: BERTH_WORLD, BERTH_PROJECT", async () => {
    const up = await call("up")
    expect(up.isError, JSON.stringify(up)).toBe(false)
    // what a service of the world sees, as the test server reports its environment
    const api = (up.structuredContent as unknown as WorldJson).services.find((s) => s.name === "api")!
    const seen = (await fetchJson(api.url!)).env as Record<string, string>
    expect(seen.BERTH_WORLD).toBe("main")
    expect(seen.BERTH_PROJECT).toBe("app")
    const identity = ["BERTH_WORLD", "BERTH_PROJECT"]
    const printed = identity.map((k) => `${k}=${seen[k]}`)
    const script = identity.map((k) => `echo ${k}=$${k}`).join("; ")

    const exec = await call("exec", { command: ["sh", "-c", script] })
    expect(exec.structuredContent).toMatchObject({ exitCode: 0, stdoutTail: printed })
    const cli = await box.run(["exec", "--", "sh", "-c", script])
    expect(cli.code, cli.stderr).toBe(0)
    expect(cli.stdout.trimEnd().split("\n")).toEqual(printed)

    // a verify command can branch on the world it checks
    box.write(
      "berth.toml",
      `${working}\n[agents]\nverify = ["test \\"$BERTH_WORLD\\" = main && test \\"$BERTH_PROJECT\\" = app"]\n`
    )
    const verify = await call("verify")
    expect(verify.structuredContent).toMatchObject({ ok: true })
    const cliVerify = await box.run(["verify"])
    expect(cliVerify.code, cliVerify.stderr).toBe(0)
    box.write("berth.toml", working)

    // a world named explicitly is the one named, not the server's own
    const other = await box.run(["up", "feature"], { timeoutMs: 60_000 })
    expect(other.code, other.stderr).toBe(0)
    const named = await call("exec", { world: "feature", command: ["sh", "-c", "echo $BERTH_WORLD; pwd"] })
    expect(named.structuredContent).toMatchObject({ exitCode: 0 })
    const [world, folder] = named.structuredContent.stdoutTail as ReadonlyArray<string>
    expect(world).toBe("feature")
    expect(folder).not.toBe(box.dir)
    expect(folder).toMatch(/\/feature$/)
    expect((await box.run(["down", "feature"])).code).toBe(0)
  })
})

describe("a failing call", () => {
  it("answers { tag, message, hint, logTail }, hint null when berth has none", async () => {
    const notFound = failure(await call("env", { world: "no-such-world" }))
    expect(notFound).toMatchObject({ tag: "WorldNotFound", logTail: [] })
    expect(notFound.hint).toEqual(expect.any(String))
    expect((await call("up")).isError).toBe(false)
    const none = failure(await call("curl", { service: "nope" }))
    expect(none).toMatchObject({ tag: "NoServiceUrl", hint: null, logTail: [] })
    expect(none.message).toContain('no service "nope"')
  })

  it("refuses arguments that do not match the tool's schema with a message naming each and what it must be", async () => {
    const empty = failure(await call("exec", { command: [] }))
    expect(empty.tag).toBe("InvalidParams")
    expect(empty.message).toBe(
      'exec: argument "command" must be a non-empty array of strings (the program and its arguments), not []'
    )
    expect(empty.hint).toMatch(/^exec takes command \(required\), world, timeoutSeconds, tailLines/)

    const lines = failure(await call("logs", { lines: 0, service: 7 }))
    expect(lines.message).toBe(
      'logs: argument "service" must be a string (only this service\'s log; "berth" is the world\'s history (berth\'s events, agents\' tool calls)), not 7; argument "lines" must be an integer from 1 to 1000 (lines per service, default 100), not 0'
    )
    const missing = failure(await call("curl", {}))
    expect(missing.message).toBe('curl: argument "service" is required: a string (a service with a url or a port)')
    expect(missing.message).not.toMatch(/readonly|└─|Failed to decode/)
  })
})

describe("unknown arguments", () => {
  it("are refused, named with the closest argument the tool takes, and nothing runs", async () => {
    const status = failure(await call("status", { wrld: "nope" }))
    expect(status).toMatchObject({
      tag: "InvalidParams",
      message: 'status: unknown argument "wrld" (did you mean "world"?)',
      hint: "status takes world, project, as its inputSchema describes them"
    })
    const exec = failure(await call("exec", { command: ["touch", "ran-it"], cwd: "/etc" }))
    expect(exec).toMatchObject({ tag: "InvalidParams", message: 'exec: unknown argument "cwd"' })
    expect(existsSync(join(box.dir, "ran-it"))).toBe(false)
    const several = failure(await call("logs", { servce: "api", line: 5 }))
    expect(several.message).toBe(
      'logs: unknown argument "servce" (did you mean "service"?); unknown argument "line" (did you mean "lines"?)'
    )
  })
})

describe("the env tool", () => {
  it("answers what berth env --json prints, schema and all", async () => {
    expect((await call("up")).isError).toBe(false)
    const env = await call("env")
    expect(env.isError, JSON.stringify(env)).toBe(false)
    const cli = await box.run(["env", "--json"])
    expect(cli.code, cli.stderr).toBe(0)
    expect(env.structuredContent).toEqual(JSON.parse(cli.stdout))
    expect(env.structuredContent.schema).toBe(1)
  })
})

describe("the logs tool", () => {
  it("names every log it can read when asked for one it cannot: the services', and berth, the world's history", async () => {
    expect((await call("up")).isError).toBe(false)
    const nope = failure(await call("logs", { service: "nope" }))
    expect(nope.tag).toBe("UnknownLog")
    expect(nope.message).toBe(
      "world main has no log \"nope\"; its logs: api, web, docs, and berth (the world's history: berth's events and agents' tool calls)"
    )
    // what it lists, it reads
    const history = await call("logs", { service: "berth", lines: 5 })
    expect(history.isError, JSON.stringify(history)).toBe(false)
    expect((history.structuredContent.lines as ReadonlyArray<unknown>).length).toBeGreaterThan(0)
    const close = failure(await call("logs", { service: "wbe" }))
    expect(close.hint).toBe('did you mean "web"?')
    const cli = await box.run(["logs", "-s", "nope"])
    expect(cli.code).toBe(1)
    expect(cli.stderr).toContain("its logs: api, web, docs, and berth (the world's history")
  })
})

describe("in a new worktree before its first up", () => {
  it("status, env and logs say it has no world yet and hint at the up tool, never answering another world", async () => {
    expect((await call("up")).isError).toBe(false)
    // a worktree inside the main checkout, as agents' harnesses make them
    const folder = join(box.dir, ".worktrees", "fresh")
    box.git("worktree", "add", "-q", folder, "-b", "fresh")
    const fresh = await connect(box, folder)
    for (const tool of ["status", "env", "logs"]) {
      const r = failure(await fresh.call(tool))
      expect(r.tag, tool).toBe("WorldNotFound")
      expect(r.message, tool).toContain('no world "fresh"')
      expect(r.hint, tool).toBe("call the up tool: it makes this worktree's world")
    }
    // a world named that does not exist is not offered to be made by a tool that acts on one; the up tool makes it
    const named = failure(await fresh.call("env", { world: "nope" }))
    expect(named.hint).toBe("use one of them (the status tool shows each with its state)")
    const makes = failure(await fresh.call("logs", { world: "nope", service: "web" }))
    expect(makes.tag).toBe("WorldNotFound")
    const up = await fresh.call("up")
    expect(up.isError, JSON.stringify(up)).toBe(false)
    const status = await fresh.call("status")
    expect((status.structuredContent.worlds as ReadonlyArray<WorldJson>).map((w) => w.name)).toEqual(["fresh"])
    expect((await fresh.call("down")).isError).toBe(false)
  })
})

describe("progress", () => {
  /** web takes a while to answer; stubborn takes its whole stop grace to leave */
  const slowly = `[services.web]
cmd = "node slow.mjs"
url = "web"
health = { http = "/healthz" }

[services.stubborn]
cmd = "node stubborn.mjs"
stop_grace = "3s"

[services.files]
adapter = "dir"
`
  const stubborn = `process.on("SIGTERM", () => {})\nsetInterval(() => {}, 1000)\n`
  const slow = `await new Promise((r) => setTimeout(r, 2500))\nawait import("./server.mjs")\n`

  it("up, reload and reset report only what a world on its way waits for, never the state it leaves", async () => {
    const own = await boxes.project({ "berth.toml": slowly, "slow.mjs": slow, "stubborn.mjs": stubborn })
    const agent = await connect(own)
    const messages = async (name: string, args: Record<string, unknown> = {}) => {
      const said: Array<string> = []
      const r = await agent.call(name, args, (p) => said.push((p as { message: string }).message))
      expect(r.isError, JSON.stringify(r)).toBe(false)
      expect(r.structuredContent).toMatchObject({ name: "main", state: "running" })
      return said
    }
    const onItsWay = /^main: (starting|#\d+ in line)/

    const first = await messages("up")
    expect(first.length).toBeGreaterThan(0)
    for (const m of first) expect(m).toMatch(onItsWay)

    // the world is leaving when the up comes: it waits behind the down, and says nothing of it
    const down = own.run(["down"], { timeoutMs: 60_000 })
    await eventually(
      async () => JSON.parse((await own.run(["status", "--json"])).stdout) as { worlds: ReadonlyArray<WorldJson> },
      (s) => s.worlds[0]?.services.some((x) => x.state === "stopping") === true
    )
    const again = await messages("up")
    expect((await down).code).toBe(0)
    expect(again.length).toBeGreaterThan(0)
    for (const m of again) expect(m).toMatch(onItsWay)

    for (const tool of ["reload", "reset"]) {
      const said = await messages(tool)
      expect(said.length, tool).toBeGreaterThan(0)
      for (const m of said) expect(m, tool).toMatch(onItsWay)
    }
  })
})

describe("a repository's commands not allowed yet", () => {
  it("are refused with a tool error that names the command allowing them, and nothing runs", async () => {
    const fresh = await boxes.project({ "berth.toml": working, "slow.mjs": slowServer, ".gitignore": "*.log\n" })
    const agent = await connect(fresh, fresh.dir, ["BERTH_YES"])
    const refused = failure(await agent.call("up", {}))
    expect(refused.tag).toBe("ConfigNotAllowed")
    expect(refused.message).toContain("services.api.cmd: node server.mjs")
    expect(refused.hint).toMatch(/berth allow /)
    const status = await agent.call("status", { project: true })
    expect(JSON.stringify(status.structuredContent)).not.toMatch(/"pid":\s*\d/)
  })
})

describe("the up tool's from", () => {
  it("makes a new world whose slices are copies of another world's, and refuses a source that is not there", async () => {
    const own = await boxes.project({
      "berth.toml": `[services.files]\nadapter = "dir"\nseed = "echo seeded > \${files.url}/seed.txt"\n`
    })
    const tools = await connect(own)
    const folderOf = async (world: string) => {
      const r = await own.run(["env", world, "--json"])
      return (JSON.parse(r.stdout) as { vars: Record<string, string> }).vars.FILES_URL!
    }
    expect((await tools.call("up", { world: "source" })).isError).not.toBe(true)
    writeFileSync(join(await folderOf("source"), "work.txt"), "made in source\n")
    const copied = await tools.call("up", { world: "copy", from: "source" })
    expect(copied.isError, JSON.stringify(copied)).not.toBe(true)
    expect((copied.structuredContent as { name: string }).name).toBe("copy")
    const folder = await folderOf("copy")
    expect(folder).not.toBe(await folderOf("source"))
    expect(readFileSync(join(folder, "work.txt"), "utf8")).toBe("made in source\n")
    const missing = failure(await tools.call("up", { world: "other", from: "nowhere" }))
    expect(missing.tag).toBe("WorldNotFound")
    expect(missing.message).toMatch(/no world "nowhere"/)
  })
})
