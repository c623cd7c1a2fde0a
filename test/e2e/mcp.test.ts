/**
 * `berth mcp` as agents drive it — through the official MCP SDK's client over stdio — where the tools must answer as
 * the CLI does: reload waits, one error shape, strict arguments, declared output.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { berthBin, type Sandbox, sandboxes } from "./harness.js"

const boxes = sandboxes()
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
}

/** An MCP client of `berth mcp` started in `cwd` (the box's checkout by default). */
const connect = async (box: Sandbox, cwd = box.dir) => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v
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
  const call = async (name: string, args: Record<string, unknown> = {}, onprogress?: (p: unknown) => void) =>
    (await client.callTool(
      { name, arguments: args },
      undefined,
      onprogress === undefined ? { timeout: 120_000 } : { onprogress, timeout: 120_000 }
    )) as ToolResult
  return { client, call }
}

let box: Sandbox
let call: Awaited<ReturnType<typeof connect>>["call"]

beforeAll(async () => {
  box = await boxes.project({ "berth.toml": working, "slow.mjs": slowServer, ".gitignore": "*.log\n" })
  ;({ call } = await connect(box))
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
