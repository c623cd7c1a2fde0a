/**
 * `berth … | head`: a reader that goes away after the first line ends the command quietly — exit 0, nothing on
 * stderr — on the lean path and the full CLI alike. Before, Node's unhandled EPIPE printed a 25-line stack trace in
 * about four runs of six, so each case runs many times.
 */
import { spawn } from "node:child_process"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { berthBin, type Sandbox, sandboxes } from "./harness.js"

const boxes = sandboxes()
let box: Sandbox
afterAll(() => boxes.cleanup())

/** a service that logs many lines, and answers any path but /healthz with many lines */
const talker = `
import { createServer } from "node:http"
for (let i = 0; i < 5000; i++) console.log(\`log line \${i} of a service that says a lot\`)
const body = Array.from({ length: 20000 }, (_, i) => \`body line \${i}\`).join("\\n")
createServer((req, res) => res.end(req.url === "/healthz" ? "ok" : body)).listen(Number(process.env.PORT), "127.0.0.1")
`

beforeAll(async () => {
  box = await boxes.project(
    {
      "berth.toml": `[project]\nname = "pipes"\n\n[services.web]\ncmd = "node talker.mjs"\nurl = "web"\nhealth = { http = "/healthz" }\n`,
      "talker.mjs": talker
    },
    { proxy: true }
  )
  const up = await box.run(["up"], { timeoutMs: 60_000 })
  expect(up.code, up.stderr).toBe(0)
}, 90_000)

/**
 * Runs berth with its stdout read until `lines` lines have come (0: none), then closed, as `head -n <lines>` does.
 */
const head = (args: ReadonlyArray<string>, lines: number) =>
  new Promise<{ code: number | null; signal: string | null; stderr: string; read: string }>((resolve, reject) => {
    const child = spawn(berthBin, args, {
      cwd: box.dir,
      env: { ...process.env, ...box.env, BERTH_HOME: box.home, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let read = ""
    let stderr = ""
    if (lines === 0) child.stdout.destroy()
    else {
      child.stdout.on("data", (d: Buffer) => {
        read += d.toString()
        if (read.split("\n").length > lines) child.stdout.destroy()
      })
    }
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString()
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`berth ${args.join(" ")} did not end once its reader had gone\nstderr: ${stderr}`))
    }, 30_000)
    child.on("error", reject)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stderr, read })
    })
  })

/** it failed in about four runs of six: eight runs that all pass leave no doubt */
const RUNS = 8

describe("a reader that closes the pipe (berth … | head)", () => {
  it.each([
    ["curl (full CLI)", ["curl", "main", "web", "/big"], 1],
    ["logs (full CLI)", ["logs", "-n", "5000"], 1],
    ["status --json (lean path)", ["status", "--json"], 0],
    ["env --json (lean path)", ["env", "--json"], 0]
  ] as const)("%s ends quietly: exit 0, nothing on stderr", async (_, args, lines) => {
    for (let run = 0; run < RUNS; run++) {
      const r = await head(args, lines)
      expect({ run, code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({
        run,
        code: 0,
        signal: null,
        stderr: ""
      })
    }
  })
})
