/**
 * README.md and docs/*.md hold to what they say:
 * - every ```sh runnable block runs, with the built berth first on PATH, in a fresh folder with its own BERTH_HOME, and
 *   prints what the ```text expected block after it says, line by line (`…` stands for any text);
 * - every ```toml berth.toml block passes `berth check` with no error and no warning;
 * - every relative link and #anchor resolves;
 * - every figure (a number followed by ms, s, MiB, req/s or ×) in README.md and docs/benchmarks.md has a command that
 *   measures it again (`npm run bench:…`, `node bench/…`, or for the suite's own time `time npm test` and
 *   `time npm run test:fast`) in its section.
 * README.md's first command, the demo, is run by test/e2e/demo.test.ts; here only its presence is checked.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, killAll, portBlock, runBerth } from "./harness.js"

const root = resolve(import.meta.dirname, "../..")
const pages = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`)
]
const read = (page: string) => readFileSync(join(root, page), "utf8")

const base = mkdtempSync(join(tmpdir(), "berth-docs-"))
const homes: Array<string> = []
afterAll(() => {
  for (const home of homes) killAll(home)
  rmSync(base, { recursive: true, force: true })
})

interface Block {
  readonly page: string
  readonly line: number
  readonly info: string
  readonly body: string
}

/** Every fenced block of a page, with its info string (```sh runnable → "sh runnable"). */
const blocks = (page: string): Array<Block> => {
  const out: Array<Block> = []
  const lines = read(page).split("\n")
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i]!)
    if (open === null) continue
    const start = i
    const body: Array<string> = []
    for (i++; i < lines.length && lines[i] !== "```"; i++) body.push(lines[i]!)
    out.push({ page, line: start + 1, info: open[1]!.trim(), body: body.join("\n") })
  }
  return out
}

/** The page's text outside fenced blocks and inline code, where links and figures are read. */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```$/gm, "").replace(/`[^`\n]*`/g, "")

/** GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-")

const anchorsOf = (page: string): Set<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const m of read(page)
    .replace(/^```[\s\S]*?^```$/gm, "")
    .matchAll(/^#{1,6} (.+)$/gm)) {
    const s = slug(m[1]!)
    const n = seen.get(s) ?? 0
    seen.set(s, n + 1)
    anchors.add(n === 0 ? s : `${s}-${n}`)
  }
  return anchors
}

const runScript = (script: string, cwd: string, env: Record<string, string | undefined>) =>
  new Promise<{ code: number | null; output: string }>((done, reject) => {
    // one stream, as a terminal shows it: each command finishes before the next starts, so nothing interleaves
    const child = spawn("bash", ["-euo", "pipefail", "-c", `exec 2>&1\n${script}`], {
      cwd,
      env,
      stdio: ["ignore", "pipe", "inherit"]
    })
    let output = ""
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString()
    })
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`timed out; so far:\n${output}`))
    }, 50_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      done({ code, output })
    })
  })

const matches = (expected: string, actual: string) => {
  const pattern = expected
    .split("…")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*")
  return new RegExp(`^${pattern}$`).test(actual)
}

const all = pages.flatMap(blocks)
const runnable = all.filter((b) => b.info === "sh runnable")
const configs = all.filter((b) => b.info === "toml berth.toml")

describe("the docs", () => {
  it("keep README.md's two first commands, whose demo test/e2e/demo.test.ts runs", () => {
    const first = blocks("README.md")[0]
    expect(first?.body).toBe("npm ci && npm run build && examples/hello/demo.sh\nnpm ci && npm test")
    expect(read("test/e2e/demo.test.ts")).toContain("examples/hello/demo.sh")
    // and there is something to run here, or the marker was lost
    expect(runnable.length).toBeGreaterThan(0)
    expect(configs.length).toBeGreaterThan(0)
  })

  for (const block of runnable) {
    it(`runs the example at ${block.page}:${block.line} and prints what it says`, async () => {
      const after = all[all.indexOf(block) + 1]
      expect(
        after?.info,
        `${block.page}:${block.line}: a runnable block needs a \`\`\`text expected block after it`
      ).toBe("text expected")
      const dir = mkdtempSync(join(base, "run-"))
      const home = join(dir, ".berth")
      homes.push(home)
      const [from, to] = portBlock().split("-").map(Number) as [number, number]
      const env = {
        ...process.env,
        BERTH_HOME: home,
        // the example gives its own consent where it needs it
        BERTH_YES: undefined,
        NO_COLOR: "1",
        BERTH_PROXY_PORT: String(to - 1),
        BERTH_HTTPS_PORT: String(to),
        PATH: `${dirname(berthBin)}:${process.env.PATH ?? ""}`,
        GIT_AUTHOR_NAME: "berth",
        GIT_AUTHOR_EMAIL: "berth@localhost",
        GIT_COMMITTER_NAME: "berth",
        GIT_COMMITTER_EMAIL: "berth@localhost"
      }
      // ports of this test's own (not shown in the docs: a user's machine has its range already)
      const range = await runBerth(["port", "--range", `${from}-${to - 2}`], dir, home, { env })
      expect(range.code, range.stderr).toBe(0)
      const { code, output } = await runScript(block.body, dir, env)
      const actual = output.trimEnd().split("\n")
      const expected = after!.body.split("\n")
      const where = `${block.page}:${block.line}`
      expect(code, `${where} exited ${code}:\n${output}`).toBe(0)
      const wrong = expected.findIndex((line, i) => actual[i] === undefined || !matches(line, actual[i]!))
      expect(
        wrong === -1 && actual.length === expected.length,
        `${where}: output differs at line ${wrong + 1}\nexpected:\n${expected.join("\n")}\nactual:\n${actual.join("\n")}`
      ).toBe(true)
    })
  }

  it("has every berth.toml example pass berth check with no error and no warning", async () => {
    for (const block of configs) {
      const dir = mkdtempSync(join(base, "check-"))
      writeFileSync(join(dir, "berth.toml"), block.body)
      // the ${env.…} an example names are set, as its user would have them
      const vars = Object.fromEntries([...block.body.matchAll(/\$\{env\.(\w+)\}/g)].map((m) => [m[1]!, "set"]))
      const run = await runBerth(["check", "--json"], dir, join(dir, ".berth"), { env: vars })
      const report = JSON.parse(run.stdout) as { errors: ReadonlyArray<unknown>; warnings: ReadonlyArray<unknown> }
      const where = `${block.page}:${block.line}`
      expect({ where, errors: report.errors, warnings: report.warnings }).toEqual({ where, errors: [], warnings: [] })
    }
  })

  it("links only to files and #anchors that exist", () => {
    const broken: Array<string> = []
    for (const page of pages) {
      for (const m of prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!
        if (/^[a-z]+:/.test(target)) continue
        const [path, anchor] = target.split("#") as [string, string | undefined]
        const file = path === "" ? join(root, page) : resolve(dirname(join(root, page)), path)
        if (!existsSync(file)) {
          broken.push(`${page}: ${target} (no ${relative(root, file)})`)
          continue
        }
        if (anchor !== undefined && !(statSync(file).isFile() && anchorsOf(relative(root, file)).has(anchor))) {
          broken.push(`${page}: ${target} (no heading #${anchor})`)
        }
      }
    }
    expect(broken).toEqual([])
  })

  it("gives every figure in README.md and docs/benchmarks.md the command that measures it again, in its section", () => {
    const figure = /\d(?:[\d.,]*\d)?k?\s?(?:ms|s|MiB|req\/s|×)(?![\p{L}\p{N}])/gu
    const command = /npm run bench:|node bench\/|time npm (test|run test:fast)/
    const orphans: Array<string> = []
    for (const page of ["README.md", "docs/benchmarks.md"]) {
      for (const section of read(page).split(/^(?=#{1,6} )/m)) {
        const title = section.split("\n")[0]
        const found = section.replace(/^```[\s\S]*?^```$/gm, "").match(figure)
        if (found !== null && !command.test(section)) orphans.push(`${page} "${title}": ${found.join(", ")}`)
      }
    }
    expect(orphans).toEqual([])
  })
})
