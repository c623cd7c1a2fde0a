// One daemon's whole life, for timing from outside: a fresh BERTH_HOME, a command that starts the daemon and waits for
// its answer, `daemon status`, then `daemon stop`. Meant to be run by farm-bench, beside another build, e.g.
//   farm-bench -n 12 --warmup 2 --vs "node bench/daemon-cycle.mjs --berth /tmp/before/dist/berth --cpu-log /tmp/b" \
//     -- node bench/daemon-cycle.mjs --cpu-log /tmp/a
// Usage: node bench/daemon-cycle.mjs [--berth PATH (dist/berth)] [--cpu-log FILE]
// --cpu-log appends the daemon's CPU (ms, user + system, from /proc) by the time it first answered: the daemon is
// detached, so farm-bench's figures hold only the commands' own CPU.
import { spawnSync } from "node:child_process"
import { appendFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { cpuMs } from "./fixtures.mjs"

const { values: options } = parseArgs({
  options: { berth: { type: "string" }, "cpu-log": { type: "string" } }
})
const cli = options.berth ?? fileURLToPath(new URL("../dist/berth", import.meta.url))
const home = mkdtempSync(join(tmpdir(), "berth-bench-cycle-"))
const env = { ...process.env, BERTH_HOME: home }
const berth = (...args) => {
  const r = spawnSync(cli, args, { cwd: home, env, encoding: "utf8" })
  if (r.status !== 0) throw new Error(`berth ${args.join(" ")}: exit ${r.status}\n${r.stderr}`)
  return r.stdout
}
try {
  // any command that needs the daemon starts it and waits for its answer: setting the port range writes nothing else
  berth("port", "--range", "45000-45099")
  const { pid } = JSON.parse(berth("daemon", "status", "--json"))
  if (options["cpu-log"] !== undefined) appendFileSync(options["cpu-log"], `${cpuMs(pid)}\n`)
  berth("daemon", "stop")
} finally {
  rmSync(home, { recursive: true, force: true })
}
