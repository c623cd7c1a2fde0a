// How long the built CLI takes to start, next to an empty Node process, measured in one interleaved run so that
// machine load affects every command alike. Usage: node bench/cli-start.mjs [--runs N] [--warmups N] [--cold] [--json]
// Build first (npm run build). The CLI's code cache goes to a temporary XDG_CACHE_HOME, filled by the warm-ups;
// --cold adds `check` without it (BERTH_CODE_CACHE=0), as on the first run after an install or upgrade.
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { machineNow, median, printTable, summarize, summaryLine } from "./stats.mjs"

const { values: options } = parseArgs({
  options: {
    runs: { type: "string", default: "30" },
    warmups: { type: "string", default: "3" },
    cold: { type: "boolean" },
    json: { type: "boolean" },
    "clean-env": { type: "boolean" }
  }
})
const runs = Number(options.runs)
const warmups = Number(options.warmups)
if (!Number.isInteger(runs) || runs < 20 || !Number.isInteger(warmups) || warmups < 0) {
  console.error("usage: node bench/cli-start.mjs [--runs N (20 or more)] [--warmups N] [--cold] [--json]")
  process.exit(2)
}

// the command users run: dist/berth, the launcher of dist/berth.cjs
const cli = fileURLToPath(new URL("../dist/berth", import.meta.url))
if (!existsSync(cli)) {
  console.error(`${cli} is missing: run \`npm run build\` first`)
  process.exit(1)
}

const work = mkdtempSync(join(tmpdir(), "berth-bench-"))
const fixture = join(work, "berth.toml")
writeFileSync(
  fixture,
  [
    "[project]",
    'name = "bench"',
    "",
    "[services.api]",
    'cmd = "node api.mjs"',
    'url = "api"',
    'health = { http = "/healthz" }',
    "",
    "[services.web]",
    'cmd = "node web.mjs"',
    'url = "web"',
    'depends_on = ["api"]',
    'env = { API_URL = "${api.url}" }',
    ""
  ].join("\n")
)

const commands = [
  { name: "node -e 0", command: process.execPath, args: ["-e", "0"] },
  { name: "berth --version", command: cli, args: ["--version"] },
  { name: "berth check berth.toml", command: cli, args: ["check", fixture] },
  ...(options.cold
    ? [
        {
          name: "berth check berth.toml, no code cache",
          command: cli,
          args: ["check", fixture],
          env: { BERTH_CODE_CACHE: "0" }
        }
      ]
    : [])
]
// --clean-env: PATH and HOME only (variables such as NODE_EXTRA_CA_CERTS slow every node process down)
const inherited = options["clean-env"] ? { PATH: process.env.PATH, HOME: process.env.HOME } : process.env
const env = { ...inherited, XDG_CACHE_HOME: join(work, "cache") }
const samples = commands.map(() => [])
const failures = new Map()

const machineBefore = machineNow()
try {
  for (let round = 0; round < warmups + runs; round++) {
    // rotate the order too, so that no command always runs right after the same other one
    for (let k = 0; k < commands.length; k++) {
      const i = (round + k) % commands.length
      const start = process.hrtime.bigint()
      const child = spawnSync(commands[i].command, commands[i].args, {
        env: { ...env, ...commands[i].env },
        cwd: work,
        stdio: ["ignore", "pipe", "pipe"]
      })
      const ms = Number(process.hrtime.bigint() - start) / 1e6
      if (child.status !== 0 && !failures.has(i)) {
        failures.set(i, `exit ${child.status ?? child.signal}: ${String(child.stderr).trim().slice(0, 500)}`)
      }
      if (round >= warmups) samples[i].push(ms)
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true })
}

const baseline = median(samples[0])
const results = commands.map((command, i) => ({
  ...summarize(command.name, samples[i], baseline),
  ...(failures.has(i) ? { failed: failures.get(i) } : {})
}))

const summaries = commands.map((command, i) =>
  summaryLine({
    what: command.name,
    values: samples[i],
    unit: "ms",
    digits: 1,
    before: machineBefore,
    goal: i === 0 ? undefined : `${(median(samples[i]) / baseline).toFixed(2)}× node -e 0`
  })
)
for (const [i, message] of failures) console.error(`warning: ${commands[i].name} failed (${message})`)
if (options.json) {
  console.log(JSON.stringify({ node: process.version, runs, warmups, results, summaries }, null, 2))
} else {
  console.log(`${runs} runs each after ${warmups} warm-ups, interleaved; Node ${process.version}\n`)
  printTable(results)
  console.log("")
  for (const line of summaries) console.log(line)
}
