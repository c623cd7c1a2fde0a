/**
 * Running examples/hello/demo.sh as a user runs it, and what every line it prints must say: shared by the test of the
 * demo from a checkout and the one from an installed package.
 */
import { spawn } from "node:child_process"
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { expect } from "@effect/vitest"

export interface DemoResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `script` in `cwd` with BERTH_HOME `home` and `env` on top of the test's environment. */
export const runDemo = (script: string, cwd: string, home: string, env: Record<string, string | undefined>) =>
  new Promise<DemoResult>((done, reject) => {
    const child = spawn(script, [], {
      cwd,
      // without the tests' BERTH_YES: the demo gives its own consent, as a user's run needs it to
      env: { ...process.env, BERTH_HOME: home, NO_COLOR: "1", ...env, BERTH_YES: undefined },
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
      reject(new Error(`demo.sh timed out\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, 100_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      done({ code, stdout, stderr })
    })
  })

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** The scratch repository the demo made under `scratch` (its TMPDIR). */
export const demoWork = (scratch: string): string | undefined =>
  readdirSync(scratch).map((found) => join(scratch, found, "hello"))[0]

/**
 * Every line of a successful run: both worlds with their services, each web's answer through the proxy on
 * `proxyPort`, and the lines that name `launcher` (the berth the demo ran).
 */
export const expectDemoLines = (stdout: string, work: string, home: string, proxyPort: number, launcher: string) => {
  const proxy = `:${proxyPort}`
  const world = (name: string, ident: string) => [
    new RegExp(`^${literal(name)}  running  ${literal(`${work}.worktrees/${name}`)}$`),
    new RegExp(`^  db   ready +file://${literal(home)}/slices/hello/hello_${ident}_db\\.sqlite$`),
    new RegExp(`^  api  healthy  pid \\d+ +:\\d+ +http://api\\.${literal(name)}\\.hello\\.localhost${proxy}$`),
    new RegExp(`^  web  healthy  pid \\d+ +:\\d+ +http://web\\.${literal(name)}\\.hello\\.localhost${proxy}$`),
    new RegExp(
      `^  worktree_created: branch ${literal(name)} made from the last commit of the main checkout \\(${literal(work)}\\); what is not committed there is not carried$`
    )
  ]
  const said = (name: string, ident: string) =>
    new RegExp(
      `^${literal(`http://web.${name}.hello.localhost${proxy}`)} -> hello from ${literal(name)}; ` +
        `api says it serves world ${literal(name)} from database hello_${ident}_db\\.sqlite$`
    )
  const expected = [
    ...world("login-fix", "login_fix"),
    ...world("checkout-v2", "checkout_v2"),
    /^$/,
    said("login-fix", "login_fix"),
    said("checkout-v2", "checkout_v2"),
    /^$/,
    new RegExp(`^both worlds keep running\\. See them with: ${literal(launcher)} status$`),
    new RegExp(`^stop them with: +${literal(`(cd ${work} && ${launcher} down --all)`)}$`)
  ]
  const lines = stdout.split("\n")
  expect(lines.pop()).toBe("")
  expect(lines).toEqual(expected.map((line) => expect.stringMatching(line)))
}
