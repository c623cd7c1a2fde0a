// berth's headline benchmark: N PostgreSQL worlds of --rows rows each, made three ways in one run.
// Usage: node bench/worlds.mjs [--worlds 1,2,4,8] [--rows 200000] [--samples 5] [--clones 5] [--quick] [--clean-env]
//        [--json]
//        [--admin-url postgres://postgres@127.0.0.1:5432/postgres] [--pg-bin /usr/lib/postgresql/15/bin]
// Build first (npm run build). Run as root (initdb and pg_ctl then run as the `postgres` user) or as a user that may
// run initdb itself; PSS readings of another user's processes need root.
//
// - a server each (standing in for a container per world): initdb a cluster into a temporary folder, start it with
//   pg_ctl on its own port (unix socket only), create a database, load the schema and rows
// - berth: one shared server; `berth up w1 … wN` one after another in a repository whose `db` slice has
//   clone_from = "golden" (the first `up` builds the golden: migrate + seed; every later one is a server-side copy)
// - raw clone: `CREATE DATABASE … TEMPLATE <berth's golden>` through psql (STRATEGY FILE_COPY on 15+, as berth),
//   once after each `berth up` and --clones times more: the baseline of the goal
// Worlds accumulate: the readings for N = 4 are taken when the 4th world is up, beside the first three. The time of
// the Nth world is --samples readings, since one slow copy would decide a single one: the Nth world itself, then as
// many more less one, each made after removing the latest world, so that each is made beside the same N - 1 others;
// a raw clone follows each of them. Memory is the PSS of the processes involved without its shared-memory part, plus
// the growth of the machine's resident shared memory (see "Memory" below; the shared server's buffer pool is made
// resident first), with plain PSS beside it; on disk is pg_database_size, and the cluster's folder for "a server
// each". Afterwards it times the parts of a further world's `up`, one by one, to show where its time goes.
// --quick: 20,000 rows, N = 1,2, 3 extra clones, 2 samples (a smoke run). --clean-env: PATH and HOME only for every
// process.
// Everything made (clusters, databases, worlds, the daemon, temporary folders) is removed at the end, on failure and
// on Ctrl-C; names carry a random suffix, so runs beside each other do not collide.
import { spawn, spawnSync } from "node:child_process"
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync
} from "node:fs"
import { createServer } from "node:net"
import { availableParallelism, cpus, tmpdir, totalmem } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { machineNow, median, p90, summaryLine } from "./stats.mjs"

const usage =
  "usage: node bench/worlds.mjs [--worlds 1,2,4,8] [--rows 200000] [--samples 5] [--clones 5] [--quick] [--clean-env]\n" +
  "                             [--json] [--admin-url postgres://…] [--pg-bin DIR]"
const { values: options } = parseArgs({
  options: {
    worlds: { type: "string" },
    rows: { type: "string" },
    clones: { type: "string" },
    samples: { type: "string" },
    quick: { type: "boolean" },
    json: { type: "boolean" },
    "clean-env": { type: "boolean" },
    "admin-url": { type: "string", default: "postgres://postgres@127.0.0.1:5432/postgres" },
    "pg-bin": { type: "string" }
  }
})
const checkpoints = [...new Set((options.worlds ?? (options.quick ? "1,2" : "1,2,4,8")).split(",").map(Number))].sort(
  (a, b) => a - b
)
const rows = Number(options.rows ?? (options.quick ? "20000" : "200000"))
const extraClones = Number(options.clones ?? (options.quick ? "3" : "5"))
const samples = Number(options.samples ?? (options.quick ? "2" : "5"))
const isCount = (n) => Number.isInteger(n) && n > 0
if (
  !checkpoints.every(isCount) ||
  !isCount(rows) ||
  !isCount(samples) ||
  !(Number.isInteger(extraClones) && extraClones >= 0)
) {
  console.error(usage)
  process.exit(2)
}
const maxWorlds = checkpoints[checkpoints.length - 1]
const adminUrl = options["admin-url"]

// the command users run: dist/berth, the launcher of dist/berth.cjs
const cli = fileURLToPath(new URL("../dist/berth", import.meta.url))
if (!existsSync(cli)) {
  console.error(`${cli} is missing: run \`npm run build\` first`)
  process.exit(1)
}

// ---------------------------------------------------------------------------------------------------------------
// Small helpers

/** A password in a URL never reaches a message. */
const redact = (text) => String(text).replace(/(\/\/[^:/@\s]*):[^@/\s]*@/g, "$1:***@")
/** SQL quoting: the names are made here and are [a-z0-9_], but they are quoted all the same. */
const ident = (name) => `"${name.replaceAll('"', '""')}"`
const literal = (text) => `'${text.replaceAll("'", "''")}'`
const log = (line) => process.stderr.write(`${line}\n`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const mib = (kib) => kib / 1024
const fmtS = (ms) => (ms === undefined ? "—" : (ms / 1000).toFixed(2))
const fmtMiB = (kib) => (kib === undefined ? "—" : mib(kib).toFixed(1))

const suffix = Math.random().toString(36).slice(2, 8).padEnd(6, "0")
const project = `bw${suffix}`
const base = mkdtempSync(join(tmpdir(), "berth-bench-worlds-"))
// the clusters' folders belong to `postgres`, which must be able to reach them through this one
chmodSync(base, 0o711)
const repo = join(base, "repo")
const home = join(base, "home")
const inherited = options["clean-env"] ? { PATH: process.env.PATH, HOME: process.env.HOME } : process.env
const env = {
  ...inherited,
  BERTH_HOME: home,
  XDG_CACHE_HOME: join(base, "cache"),
  NO_COLOR: "1",
  POSTGRES_ADMIN_URL: adminUrl,
  // the bench's own berth.toml: allowed without asking
  BERTH_YES: "1"
}

/** Children running right now, so that an interrupt can wait for them (or, on a second one, stop them). */
const running = new Set()

/** Runs a command to its end; rejects on a non-zero exit. `ms` is its wall time, spawn to exit. */
const run = (command, args, { input, cwd, timeoutMs = 600_000, okCodes = [0] } = {}) =>
  new Promise((resolve, reject) => {
    const start = process.hrtime.bigint()
    const child = spawn(command, args, { cwd, env, stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] })
    running.add(child)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => {
      stdout += d
    })
    child.stderr.on("data", (d) => {
      stderr += d
    })
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    if (input !== undefined) child.stdin.end(input)
    child.on("error", (e) => {
      clearTimeout(timer)
      running.delete(child)
      reject(e)
    })
    child.on("close", (code, signal) => {
      const ms = Number(process.hrtime.bigint() - start) / 1e6
      clearTimeout(timer)
      running.delete(child)
      if (okCodes.includes(code)) resolve({ ms, stdout, stderr })
      else {
        const what = redact(`${command} ${args.join(" ")}`)
        reject(new Error(`${what} failed (${signal ?? `exit ${code}`}): ${redact(stderr.trim() || stdout.trim())}`))
      }
    })
  })

/** The same, synchronously, for cleanup (which must also work from a signal handler); never throws. */
const runSync = (command, args, timeoutMs = 60_000) =>
  spawnSync(command, args, { env, encoding: "utf8", timeout: timeoutMs, stdio: ["ignore", "pipe", "pipe"] })

const psqlArgs = (target, extra) => ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", ...target, ...extra]
const shared = ["-d", adminUrl]
/** One statement (or a script on stdin) on the shared server or a cluster; resolves to its rows as text. */
const psql = (target, sql, opts) => run("psql", psqlArgs(target, ["-c", sql]), opts)
const psqlScript = (target, script, opts) => run("psql", psqlArgs(target, ["-f", "-"]), { ...opts, input: script })

// ---------------------------------------------------------------------------------------------------------------
// Memory
//
// PSS (from /proc/<pid>/smaps_rollup) counts a page of PostgreSQL's shared memory only while a live process maps
// it: the buffers filled by a session that has ended (the one that loaded the rows) are resident yet in no one's PSS,
// until the checkpointer touches them. So "memory" here is each process's PSS without its shared-memory part
// (Pss_Shmem), plus the growth of the machine's resident shared memory (/proc/meminfo Shmem): every page once, whoever
// maps it. Plain PSS is reported beside it.

/** PSS and its shared-memory part, in KiB; undefined when the process is gone or unreadable. */
const smapsOf = (pid) => {
  // a read can come back short or fail while the process maps or unmaps memory: try again before giving up
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8")
      const pss = /^Pss:\s+(\d+) kB/m.exec(text)
      if (pss === null) continue
      // Pss_Shmem is there since Linux 5.7; before that the whole PSS is counted as the process's own
      const shmem = /^Pss_Shmem:\s+(\d+) kB/m.exec(text)
      return { pss: Number(pss[1]), shmem: shmem === null ? 0 : Number(shmem[1]) }
    } catch {
      if (!existsSync(`/proc/${pid}`)) return undefined
    }
  }
  return undefined
}
const pssKiB = (pid) => smapsOf(pid)?.pss

const childrenOf = (parent) => {
  const out = []
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      // the command name may hold spaces and parentheses: the fields after it start at the last ")"
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      if (ppid === parent) out.push(Number(entry))
    } catch {
      // gone
    }
  }
  return out
}

/**
 * A postmaster and its children (backends and background processes): their PSS, the part of it that is not shared
 * memory (`own`), and how many there were.
 */
const serverMemory = (postmaster) => {
  let pss = 0
  let own = 0
  const pids = [postmaster, ...childrenOf(postmaster)]
  for (const pid of pids) {
    const m = smapsOf(pid)
    if (m === undefined && pid === postmaster) return undefined
    pss += m?.pss ?? 0
    own += (m?.pss ?? 0) - (m?.shmem ?? 0)
  }
  return { pss, own, processes: pids.length }
}

/** The shared server is used by others too: the smallest of a few readings leaves out their passing sessions. */
const sharedServerMemory = async (postmaster) => {
  if (postmaster === undefined) return undefined
  let best
  for (let i = 0; i < 3; i++) {
    if (i > 0) await sleep(300)
    const reading = serverMemory(postmaster)
    if (reading !== undefined && (best === undefined || reading.pss < best.pss)) best = reading
  }
  return best
}

/**
 * Brings the shared server's buffer pool resident before its memory is first read. A server whose pool was never
 * filled grows by each page of it that any work touches for the first time — 9.32 MiB a world on a machine just
 * booted, 0.02 MiB on the same machine one run later (2026-12-07) — which is the pool's one-time cost, bounded by
 * shared_buffers, and not a world's. An unlogged table a tenth larger than the pool, read into it by pg_prewarm, in a
 * database of this run's own that is dropped at once (and by the cleanup, should the run stop here).
 */
const warmSharedBuffers = async (facts) => {
  const name = `${project}_warm`
  const force = facts.versionNum >= 130_000 ? " WITH (FORCE)" : ""
  const buffers = Number((await psql(shared, "SELECT setting FROM pg_settings WHERE name = 'shared_buffers'")).stdout)
  // about 35 rows of this shape to a page of 8 KiB
  const fillRows = Math.ceil(buffers * 1.1) * 35
  await psql(shared, `CREATE DATABASE ${ident(name)}`)
  try {
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    await psqlScript(
      ["-d", url.toString()],
      `CREATE EXTENSION pg_prewarm;
CREATE UNLOGGED TABLE fill AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, ${fillRows}) AS g;
SELECT pg_prewarm('fill', 'buffer');
`
    )
  } finally {
    await psql(shared, `DROP DATABASE IF EXISTS ${ident(name)}${force}`)
  }
}

const shmemKiB = () => {
  const m = /^Shmem:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"))
  return m === null ? undefined : Number(m[1])
}
const minus = (a, b) => (a === undefined || b === undefined ? undefined : a - b)
const plus = (...xs) => (xs.some((x) => x === undefined) ? undefined : xs.reduce((a, b) => a + b, 0))

const postmasterOf = (dataDir) => {
  try {
    return Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0])
  } catch {
    return undefined
  }
}

const folderKiB = (dir) => {
  const r = runSync("du", ["-sk", dir])
  return r.status === 0 ? Number(r.stdout.split("\t")[0]) : undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Cleanup: a stack of idempotent synchronous steps, run once, in reverse

const cleanups = []
let cleanedUp = false
const cleanup = () => {
  if (cleanedUp) return
  cleanedUp = true
  for (const step of cleanups.reverse()) {
    try {
      step()
    } catch (e) {
      log(`cleanup: ${redact(e instanceof Error ? e.message : e)}`)
    }
  }
  rmSync(base, { recursive: true, force: true })
}

let interrupted = false
const onSignal = (signal) => {
  if (interrupted) {
    // a second interrupt: stop what runs now and clean up at once
    for (const child of running) child.kill("SIGKILL")
    cleanup()
    process.exit(130)
  }
  interrupted = true
  log(`\n${signal}: cleaning up after the current step (again to stop at once)…`)
}
process.on("SIGINT", onSignal)
process.on("SIGTERM", onSignal)
process.on("SIGHUP", onSignal)
const checkInterrupt = () => {
  if (interrupted) throw new Error("interrupted")
}

// ---------------------------------------------------------------------------------------------------------------
// The schema and rows, the same for every setup

const schemaSql = `CREATE TABLE items (
  id bigint PRIMARY KEY,
  name text NOT NULL,
  score integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX items_score_idx ON items (score);
`
const seedSql = `INSERT INTO items (id, name, score)
SELECT g, 'item ' || g, (g * 7919) % 100000 FROM generate_series(1, ${rows}) AS g;
ANALYZE items;
`
mkdirSync(repo)
writeFileSync(join(repo, "schema.sql"), schemaSql)
writeFileSync(join(repo, "seed.sql"), seedSql)

// ---------------------------------------------------------------------------------------------------------------
// Machine facts

const serverFacts = async () => {
  const out = await psql(
    shared,
    "SELECT current_setting('server_version_num'), current_setting('server_version'), current_setting('data_directory', true), current_setting('autovacuum')"
  )
  const [num, version, dataDir, autovacuum] = out.stdout.trim().split("|")
  // autovacuum goes into pg_ctl's shell command line: only its two known values pass
  return {
    versionNum: Number(num),
    version,
    dataDir: dataDir || undefined,
    autovacuum: autovacuum === "off" ? "off" : "on"
  }
}

const findPgBin = (major) => {
  if (options["pg-bin"] !== undefined) return options["pg-bin"]
  const root = "/usr/lib/postgresql"
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : []
  // the shared server's own major version first, so both setups run the same PostgreSQL
  const pick = versions.includes(String(major)) ? String(major) : versions[0]
  if (pick !== undefined) return join(root, pick, "bin")
  const r = runSync("pg_config", ["--bindir"])
  if (r.status === 0 && existsSync(join(r.stdout.trim(), "initdb"))) return r.stdout.trim()
  throw new Error("cannot find initdb: pass --pg-bin DIR")
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

// ---------------------------------------------------------------------------------------------------------------
// "a server each"

const asRoot = process.getuid?.() === 0
/** initdb and pg_ctl refuse to run as root: as root they run as `postgres`. */
const asPostgres = (command, args) =>
  asRoot ? ["runuser", ["-u", "postgres", "--", command, ...args]] : [command, args]

const serversEach = async (pgBin, facts) => {
  const clusters = []
  cleanups.push(() => {
    for (const c of clusters) {
      const [cmd, args] = asPostgres(join(pgBin, "pg_ctl"), ["-D", c.data, "-m", "immediate", "-w", "stop"])
      const r = runSync(cmd, args)
      const pid = postmasterOf(c.data)
      // pg_ctl could not stop it (or it was still starting): end our own postmaster by its pid
      if (r.status !== 0 && pid !== undefined) {
        try {
          process.kill(pid, "SIGQUIT")
        } catch {}
      }
      rmSync(c.dir, { recursive: true, force: true })
    }
  })
  const owner = asRoot
    ? { uid: Number(runSync("id", ["-u", "postgres"]).stdout), gid: Number(runSync("id", ["-g", "postgres"]).stdout) }
    : undefined
  if (base.includes("'")) throw new Error(`${base}: a quote in the temporary folder's path`)
  const worlds = []
  const readings = []
  const shmemBefore = shmemKiB()
  for (let i = 1; i <= maxWorlds; i++) {
    checkInterrupt()
    const dir = join(base, `server-${i}`)
    mkdirSync(dir, { mode: 0o700 })
    if (owner !== undefined) chownSync(dir, owner.uid, owner.gid)
    const cluster = { dir, data: join(dir, "data"), port: await freePort() }
    clusters.push(cluster)
    const target = ["-h", dir, "-p", String(cluster.port), "-U", "postgres"]
    const [initCmd, initArgs] = asPostgres(join(pgBin, "initdb"), [
      "-D",
      cluster.data,
      "-U",
      "postgres",
      "-A",
      "trust",
      "-E",
      "UTF8",
      "--no-instructions"
    ])
    const init = await run(initCmd, initArgs)
    checkInterrupt()
    // the same autovacuum setting as the shared server, so the two setups differ only in the number of servers
    // pg_ctl hands these to a shell: the folder (made here, no quotes in it) is single-quoted
    const serverOptions = `-k '${dir}' -p ${cluster.port} -c listen_addresses='' -c autovacuum=${facts.autovacuum}`
    const [ctlCmd, ctlArgs] = asPostgres(join(pgBin, "pg_ctl"), [
      "-D",
      cluster.data,
      "-l",
      join(dir, "server.log"),
      "-o",
      serverOptions,
      "-w",
      "-t",
      "60",
      "start"
    ])
    const start = await run(ctlCmd, ctlArgs)
    checkInterrupt()
    const create = await psql([...target, "-d", "postgres"], "CREATE DATABASE app")
    const migrate = await psqlScript([...target, "-d", "app"], schemaSql)
    const seed = await psqlScript([...target, "-d", "app"], seedSql)
    const world = {
      initMs: init.ms,
      startMs: start.ms,
      loadMs: create.ms + migrate.ms + seed.ms,
      ms: init.ms + start.ms + create.ms + migrate.ms + seed.ms
    }
    const check = await psql(
      [...target, "-d", "app"],
      "SELECT count(*), pg_database_size(current_database()) FROM items"
    )
    const [count, size] = check.stdout.trim().split("|").map(Number)
    if (count !== rows) throw new Error(`server ${i}: ${count} rows instead of ${rows}`)
    world.dbKiB = size / 1024
    worlds.push(world)
    log(
      `a server each: world ${i} in ${fmtS(world.ms)} s (initdb ${fmtS(init.ms)}, start ${fmtS(start.ms)}, load ${fmtS(world.loadMs)})`
    )
    if (checkpoints.includes(i)) {
      let total = { pss: 0, own: 0, processes: 0 }
      for (const c of clusters) {
        const pm = postmasterOf(c.data)
        const reading = pm === undefined ? undefined : serverMemory(pm)
        if (reading === undefined) {
          total = undefined
          break
        }
        total = {
          pss: total.pss + reading.pss,
          own: total.own + reading.own,
          processes: total.processes + reading.processes
        }
      }
      readings.push({
        n: i,
        pssKiB: total?.pss,
        memKiB: plus(total?.own, minus(shmemKiB(), shmemBefore)),
        processes: total?.processes,
        diskKiB: clusters.reduce((sum, c) => sum + (folderKiB(c.data) ?? 0), 0)
      })
    }
  }
  // stop and delete now, so that the clusters' memory and disk writes do not weigh on what comes next
  const stop = cleanups.pop()
  stop()
  return { worlds, readings }
}

// ---------------------------------------------------------------------------------------------------------------
// berth

const berth = (...args) => run(cli, args, { cwd: repo, timeoutMs: 600_000 })

const gitIn = (opts, ...args) =>
  run("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo, ...opts })
const git = (...args) => gitIn({}, ...args)

/** Every database of this run on the shared server: berth's worlds, its golden and the raw clones. */
const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

const dropOurDatabases = (facts) => {
  // the worlds, the golden, and the spare copy of the golden berth keeps for the next new world
  const ours = `datname LIKE ${literal(`${project}\\_%`)} OR datname LIKE ${literal(`golden\\_${project}\\_%`)} OR datname LIKE ${literal(`spare\\_${project}\\_%`)}`
  const force = facts.versionNum >= 130_000 ? " WITH (FORCE)" : ""
  // a statement sent before the daemon stopped (a CREATE DATABASE, say) runs on to its end on the server: drop until
  // nothing of this run is left and nothing of it is still running
  for (let round = 0; round < 40; round++) {
    const list = runSync(
      "psql",
      psqlArgs(shared, [
        "-c",
        `SELECT 'db', datname FROM pg_database WHERE ${ours} UNION ALL SELECT 'busy', pid::text FROM pg_stat_activity` +
          ` WHERE pid <> pg_backend_pid() AND state <> 'idle' AND query LIKE ${literal(`%${project}%`)}`
      ])
    )
    if (list.status !== 0) {
      log(`cleanup: cannot list this run's databases: ${redact(list.stderr.trim())}`)
      return
    }
    const found = list.stdout
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => line.split("|"))
    if (found.length === 0) return
    for (const [kind, name] of found) {
      if (kind !== "db") continue
      const r = runSync("psql", psqlArgs(shared, ["-c", `DROP DATABASE IF EXISTS ${ident(name)}${force}`]))
      if (r.status !== 0 && round === 39) log(`cleanup: cannot drop ${name}: ${redact(r.stderr.trim())}`)
    }
    if (found.some(([kind]) => kind === "busy")) sleepSync(250)
  }
  log(`cleanup: databases of this run (${project}_*) may be left on the shared server`)
}

const berthWorlds = async (facts) => {
  writeFileSync(
    join(repo, "berth.toml"),
    [
      "[project]",
      `name = "${project}"`,
      "",
      "[services.db]",
      'adapter = "postgres"',
      'admin_url = "${env.POSTGRES_ADMIN_URL}"',
      'clone_from = "golden"',
      'golden_inputs = ["schema.sql", "seed.sql"]',
      'migrate = "psql -X -q -v ON_ERROR_STOP=1 -d ${db.url} -f ${world.path}/schema.sql"',
      'seed = "psql -X -q -v ON_ERROR_STOP=1 -d ${db.url} -f ${world.path}/seed.sql"',
      ""
    ].join("\n")
  )
  await git("init", "-q", "-b", "main")
  await git("add", "-A")
  await git("commit", "-qm", "bench")

  let daemonPid
  cleanups.push(() => {
    runSync(cli, ["daemon", "stop"], 30_000)
    if (daemonPid !== undefined) {
      try {
        process.kill(daemonPid, "SIGKILL")
      } catch {}
    }
    dropOurDatabases(facts)
  })

  const sharedPostmaster = facts.dataDir === undefined ? undefined : postmasterOf(facts.dataDir)
  log("berth: the shared server's buffer pool made resident first (pg_prewarm)")
  await warmSharedBuffers(facts)
  const serverBefore = await sharedServerMemory(sharedPostmaster)
  const shmemBefore = shmemKiB()
  await berth("daemon", "start")
  daemonPid = JSON.parse((await berth("daemon", "status", "--json")).stdout).pid
  const daemonIdleKiB = pssKiB(daemonPid)

  const force = facts.versionNum >= 130_000 ? " WITH (FORCE)" : ""
  const strategy = facts.versionNum >= 150_000 ? " STRATEGY FILE_COPY" : ""
  let golden
  const raw = []
  let rawCount = 0
  /** One raw clone of the golden, timed through psql as a user would run it; the drop is not timed. */
  const rawClone = async () => {
    const name = `${project}_raw_${++rawCount}`
    const r = await psql(shared, `CREATE DATABASE ${ident(name)} TEMPLATE ${ident(golden)}${strategy}`)
    await psql(shared, `DROP DATABASE ${ident(name)}${force}`)
    raw.push(r.ms)
    return r.ms
  }
  /** `berth up` of a new world, timed, and its rows checked. */
  const upWorld = async (world) => {
    const up = await berth("up", world)
    const url = JSON.parse((await berth("env", world, "--json")).stdout).vars.DB_URL
    const check = await psql(["-d", url], "SELECT count(*), pg_database_size(current_database()) FROM items")
    const [count, size] = check.stdout.trim().split("|").map(Number)
    if (count !== rows) throw new Error(`berth world ${world}: ${count} rows instead of ${rows}`)
    return { ms: up.ms, dbKiB: size / 1024 }
  }

  const worlds = []
  const readings = []
  /** per checkpoint: every reading of its Nth world's `up`, and of the raw clone after each */
  const nth = []
  for (let i = 1; i <= maxWorlds; i++) {
    checkInterrupt()
    const world = await upWorld(`w${i}`)
    worlds.push(world)
    if (golden === undefined) {
      const found = await psql(
        shared,
        `SELECT datname FROM pg_database WHERE datname LIKE ${literal(`golden\\_${project}\\_%`)}`
      )
      golden = found.stdout.trim().split("\n")[0]
      if (!golden) throw new Error("berth's golden database is missing after the first up")
    }
    log(`berth: world ${i} in ${fmtS(world.ms)} s${i === 1 ? " (builds the golden)" : ""}`)
    const rawMs = await rawClone()
    if (checkpoints.includes(i)) {
      // memory first, with exactly the worlds counted
      const server = await sharedServerMemory(sharedPostmaster)
      readings.push({
        n: i,
        serverPssKiB: minus(server?.pss, serverBefore?.pss),
        // the shared server's growth: its processes' own memory and the machine's resident shared memory
        serverKiB: plus(minus(server?.own, serverBefore?.own), minus(shmemKiB(), shmemBefore)),
        daemonKiB: pssKiB(daemonPid)
      })
      // the first world builds the golden: a further first world would only copy it, so it is read once
      const reading = { n: i, berthMs: [world.ms], rawMs: [rawMs] }
      let latest = `w${i}`
      for (let k = 1; k < (i === 1 ? 1 : samples); k++) {
        checkInterrupt()
        await berth("remove", latest, "--force")
        latest = `w${i}-again${k}`
        const again = await upWorld(latest)
        reading.berthMs.push(again.ms)
        reading.rawMs.push(await rawClone())
        log(`berth: world ${i} again (after removing the latest) in ${fmtS(again.ms)} s`)
      }
      nth.push(reading)
    }
  }
  for (let k = 0; k < extraClones; k++) {
    checkInterrupt()
    await rawClone()
  }
  const goldenSize = await psql(shared, `SELECT pg_database_size(${literal(golden)})`)
  return {
    worlds,
    readings,
    nth,
    raw,
    golden,
    goldenKiB: Number(goldenSize.stdout.trim()) / 1024,
    serverBeforeKiB: serverBefore?.pss,
    daemonIdleKiB,
    force,
    strategy
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Where one more world's `up` spends its time: its parts, each timed on its own

const breakdown = async (b, runs) => {
  const steps = {
    node: [],
    roundTrip: [],
    lookups: [],
    worktree: [],
    psqlConnect: [],
    provision: [],
    comment: [],
    drop: [],
    clone: [],
    up: [],
    warmUp: [],
    raw: []
  }
  for (let k = 0; k < runs; k++) {
    checkInterrupt()
    steps.node.push((await run(process.execPath, ["-e", "0"])).ms)
    steps.roundTrip.push((await berth("env", "w1", "--json")).ms)
    const branch = `bench-wt-${k}`
    const path = join(base, "git-worktrees", branch)
    // the look-ups berth's daemon makes before it adds a new world's worktree (seen with strace), each a git process
    // of its own; the worktree itself is then one `worktree add -b` (git runs three more processes inside it)
    const lookups = [
      await git("rev-parse", "--show-toplevel", "--git-common-dir", "--symbolic-full-name", "HEAD"),
      await git("worktree", "list", "--porcelain", "-z")
    ]
    steps.lookups.push(lookups.reduce((t, r) => t + r.ms, 0))
    steps.worktree.push((await git("worktree", "add", "-q", "-b", branch, path)).ms)
    await git("worktree", "remove", "--force", path)
    await git("branch", "-q", "-D", branch)
    steps.psqlConnect.push((await psql(shared, "SELECT 1")).ms)
    // the statements berth's postgres adapter sends for a new world with clone_from = "golden", in its order:
    // provision makes the world's database (empty) and marks it; clone drops it, copies the golden and marks the copy
    const name = ident(`${project}_seq_${k}`)
    const mark = literal(`bench:${project}`)
    const timed = await psqlScript(
      shared,
      [
        "\\timing on",
        `CREATE DATABASE ${name};`,
        `COMMENT ON DATABASE ${name} IS ${mark};`,
        `DROP DATABASE IF EXISTS ${name}${b.force};`,
        `CREATE DATABASE ${name} TEMPLATE ${ident(b.golden)}${b.strategy};`,
        `COMMENT ON DATABASE ${name} IS ${mark};`,
        ""
      ].join("\n")
    )
    await psql(shared, `DROP DATABASE ${name}${b.force}`)
    const ms = [...timed.stdout.matchAll(/^Time: ([\d.]+) ms/gm)].map((m) => Number(m[1]))
    if (ms.length !== 5) throw new Error(`unexpected psql timing output: ${timed.stdout}`)
    steps.provision.push(ms[0])
    steps.comment.push(ms[1] + ms[4])
    steps.drop.push(ms[2])
    steps.clone.push(ms[3])
    // and the real thing beside them, with a raw clone through psql
    const world = `parts-${k}`
    steps.up.push((await berth("up", world)).ms)
    // the same world again after `down`: everything but making the slice (its database is found and kept)
    await berth("down", world)
    steps.warmUp.push((await berth("up", world)).ms)
    const raw = `${project}_partsraw_${k}`
    steps.raw.push((await psql(shared, `CREATE DATABASE ${ident(raw)} TEMPLATE ${ident(b.golden)}${b.strategy}`)).ms)
    await psql(shared, `DROP DATABASE ${ident(raw)}${b.force}`)
  }
  steps.sum = steps.up.map(
    (_, k) =>
      steps.roundTrip[k] +
      steps.lookups[k] +
      steps.worktree[k] +
      steps.provision[k] +
      steps.drop[k] +
      steps.clone[k] +
      steps.comment[k]
  )
  return Object.fromEntries(Object.entries(steps).map(([k, v]) => [k, { medianMs: median(v), p90Ms: p90(v) }]))
}

// ---------------------------------------------------------------------------------------------------------------
// Report

const report = ({ facts, pgBin, servers, b, parts }) => {
  const rawMedian = median(b.raw)
  const lastN = maxWorlds
  // the goal compares the Nth world with the raw clones taken beside it, both as medians of their readings
  const lastReading = b.nth.find((r) => r.n === lastN)
  const berthNth = median(lastReading.berthMs)
  const rawNth = median(lastReading.rawMs)
  const later = b.worlds.slice(1).map((w) => w.ms)
  const range = (xs) => `${fmtS(Math.min(...xs))}–${fmtS(Math.max(...xs))}`
  // memory per world once the golden exists: the growth from the first reading to the last, per world added
  const first = b.readings[0]
  const last = b.readings[b.readings.length - 1]
  const growth = (key) =>
    last.n > first.n && first[key] !== undefined && last[key] !== undefined
      ? (last[key] - first[key]) / (last.n - first.n)
      : undefined
  const perWorldServerKiB = growth("serverKiB")
  const perWorldDaemonKiB = growth("daemonKiB")
  const goals = {
    nthWorldSeconds: berthNth / 1000,
    nthWorldSamples: lastReading.berthMs.length,
    nthWorldRangeSeconds: [Math.min(...lastReading.berthMs) / 1000, Math.max(...lastReading.berthMs) / 1000],
    rawCloneNthSeconds: rawNth / 1000,
    rawCloneNthRangeSeconds: [Math.min(...lastReading.rawMs) / 1000, Math.max(...lastReading.rawMs) / 1000],
    rawCloneMedianSeconds: rawMedian / 1000,
    ratio: berthNth / rawNth,
    laterWorldsMedianRatio: later.length > 0 ? median(later) / rawMedian : undefined,
    timeMet: lastN > 1 ? berthNth <= 1.3 * rawNth : undefined,
    // with a single world there is no copy of the golden to judge
    serverMiBPerWorld: perWorldServerKiB === undefined ? undefined : mib(perWorldServerKiB),
    daemonMiBPerWorld: perWorldDaemonKiB === undefined ? undefined : mib(perWorldDaemonKiB),
    memoryMet: perWorldServerKiB === undefined ? undefined : mib(perWorldServerKiB) <= 3
  }
  const machine = {
    cores: availableParallelism(),
    cpu: cpus()[0]?.model.trim(),
    memoryGiB: Number((totalmem() / 2 ** 30).toFixed(1)),
    node: process.version,
    postgres: facts.version,
    pgBin,
    rows,
    worlds: checkpoints,
    cleanEnv: options["clean-env"] === true
  }
  const tables = checkpoints.map((n) => {
    const prev = checkpoints[checkpoints.indexOf(n) - 1] ?? 0
    const s = servers.readings.find((r) => r.n === n)
    const sPrev = servers.readings.find((r) => r.n === prev)
    const br = b.readings.find((r) => r.n === n)
    const brPrev = b.readings.find((r) => r.n === prev)
    const sum = (ws) => ws.reduce((t, w) => t + w.ms, 0)
    const perWorld = (now, before) => {
      const growth = minus(now, prev === 0 ? 0 : before)
      return growth === undefined ? undefined : growth / (n - prev)
    }
    const berthMem = (r) => plus(r?.serverKiB, r?.daemonKiB)
    const berthPss = (r) => plus(r?.serverPssKiB, r?.daemonKiB)
    const reading = b.nth.find((r) => r.n === n)
    return {
      n,
      serverEach: {
        totalMs: sum(servers.worlds.slice(0, n)),
        nthMs: servers.worlds[n - 1].ms,
        memKiB: s?.memKiB,
        memPerWorldKiB: perWorld(s?.memKiB, sPrev?.memKiB),
        pssKiB: s?.pssKiB,
        processes: s?.processes,
        dbKiB: servers.worlds[n - 1].dbKiB,
        diskKiB: s?.diskKiB
      },
      berth: {
        totalMs: sum(b.worlds.slice(0, n)),
        nthMs: median(reading.berthMs),
        nthSamplesMs: reading.berthMs,
        rawMs: reading.rawMs,
        memKiB: berthMem(br),
        serverKiB: br?.serverKiB,
        daemonKiB: br?.daemonKiB,
        memPerWorldKiB: perWorld(berthMem(br), berthMem(brPrev)),
        pssKiB: berthPss(br),
        dbKiB: b.worlds[n - 1].dbKiB,
        diskKiB: b.worlds[n - 1].dbKiB * n + b.goldenKiB
      }
    }
  })
  if (options.json) {
    console.log(JSON.stringify({ machine, tables, rawCloneMs: b.raw, goals, breakdown: parts }, null, 2))
    return
  }
  console.log(
    `${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB} GiB; PostgreSQL ${facts.version} (${pgBin}); Node ${process.version}` +
      `${machine.cleanEnv ? "; --clean-env" : ""}`
  )
  console.log(
    `${rows.toLocaleString("en")} rows per world (a table, its primary key and one more index). Memory: the PSS of` +
      " the processes without their shared-memory part, plus the growth of the machine's resident shared memory" +
      " (buffers filled by a session that has ended are in no process's PSS); for berth, the shared server's growth" +
      ' since before the first world plus the daemon. "Per world": the growth since the previous N, per world added.' +
      " PSS: plain PSS, for comparison.\n"
  )
  for (const t of tables) {
    console.log(`### N = ${t.n}\n`)
    console.log(
      `| setup | total s | world ${t.n} s | memory MiB | memory per world MiB | PSS MiB | database MiB | on disk, all worlds MiB |`
    )
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    const se = t.serverEach
    console.log(
      `| a server each (initdb + pg_ctl + load) | ${fmtS(se.totalMs)} | ${fmtS(se.nthMs)} | ${fmtMiB(se.memKiB)} | ${fmtMiB(se.memPerWorldKiB)} | ${fmtMiB(se.pssKiB)} (${se.processes ?? "?"} processes) | ${fmtMiB(se.dbKiB)} | ${fmtMiB(se.diskKiB)} |`
    )
    const be = t.berth
    const note =
      t.n === 1 ? " (builds the golden)" : ` (median of ${be.nthSamplesMs.length}: ${range(be.nthSamplesMs)})`
    console.log(
      `| berth (shared server + golden) | ${fmtS(be.totalMs)} | ${fmtS(be.nthMs)}${note} | ${fmtMiB(be.memKiB)} (server ${fmtMiB(be.serverKiB)} + daemon ${fmtMiB(be.daemonKiB)}) | ${fmtMiB(be.memPerWorldKiB)} | ${fmtMiB(be.pssKiB)} | ${fmtMiB(be.dbKiB)} | ${fmtMiB(be.diskKiB)} (with the golden) |`
    )
    console.log(
      `| raw CREATE DATABASE … TEMPLATE, after each of them | — | ${fmtS(median(be.rawMs))} (median of ${be.rawMs.length}: ${range(be.rawMs)}) | — | — | — | ${fmtMiB(b.goldenKiB)} | — |\n`
    )
  }
  if (last.n > first.n) {
    const verdict = (met) => (met ? "met" : "NOT met")
    console.log(
      `Goal: berth's world ${lastN} ≤ 1.3× a raw template clone — medians of ${lastReading.berthMs.length}:` +
        ` ${fmtS(berthNth)} s (${range(lastReading.berthMs)}) vs ${fmtS(rawNth)} s (${range(lastReading.rawMs)})` +
        ` = ${goals.ratio.toFixed(2)}×: ${verdict(goals.timeMet)} (every raw clone of the run: median` +
        ` ${fmtS(rawMedian)} s, p90 ${fmtS(p90(b.raw))} s; the first reading of worlds 2–${lastN}:` +
        ` ${fmtS(median(later))} s = ${goals.laterWorldsMedianRatio.toFixed(2)}×)`
    )
    console.log(
      `Goal: ≤ 3 MiB of server memory per world (worlds ${first.n + 1}–${lastN}) — ` +
        (goals.serverMiBPerWorld === undefined
          ? "not measured (the shared server's memory is unreadable: run as root)"
          : `${goals.serverMiBPerWorld.toFixed(2)} MiB: ${verdict(goals.memoryMet)}`) +
        (goals.daemonMiBPerWorld === undefined ? "" : `; the daemon: ${goals.daemonMiBPerWorld.toFixed(2)} MiB`)
    )
  }
  if (last.n > first.n) {
    // the summary lines, in the form the docs quote (median and range, the machine, the day and the command)
    const verdict = (met) => (met ? "met" : "not met")
    console.log(
      `\n${summaryLine({
        what: `berth's world ${lastN} of ${rows.toLocaleString("en")} rows`,
        values: lastReading.berthMs.map((x) => x / 1000),
        unit: "s",
        digits: 2,
        before: startedOn,
        goal:
          `a raw template clone ${fmtS(rawNth)} s (range ${range(lastReading.rawMs)} s), ${goals.ratio.toFixed(2)}× it;` +
          ` goal ≤ 1.3×: ${verdict(goals.timeMet)}`
      })}`
    )
    if (goals.serverMiBPerWorld !== undefined) {
      console.log(
        summaryLine({
          what: `the shared server's memory per world (worlds ${first.n + 1}–${lastN})`,
          values: [goals.serverMiBPerWorld],
          unit: "MiB",
          digits: 2,
          before: startedOn,
          goal: `goal ≤ 3 MiB: ${verdict(goals.memoryMet)}`
        })
      )
    }
  }
  console.log(
    `\nThe shared server's PSS before the first world: ${fmtMiB(b.serverBeforeKiB)} MiB; the idle daemon: ${fmtMiB(b.daemonIdleKiB)} MiB; the golden: ${fmtMiB(b.goldenKiB)} MiB on disk.`
  )
  const sw = servers.worlds
  console.log(
    `A server each, median per world: initdb ${fmtS(median(sw.map((w) => w.initMs)))} s, pg_ctl start ${fmtS(median(sw.map((w) => w.startMs)))} s, create + load ${fmtS(median(sw.map((w) => w.loadMs)))} s.`
  )
  const p = parts
  const ms = (x) => x.medianMs.toFixed(1)
  console.log(`\n### Where a berth world's time goes (medians of ${partsRuns} runs, each part timed alone)\n`)
  console.log("| part | median ms | p90 ms |")
  console.log("| --- | ---: | ---: |")
  const rowsOf = [
    ["node -e 0 (a Node process start: the CLI pays it)", p.node],
    ["berth env w1 --json (CLI + one daemon round trip)", p.roundTrip],
    ["git: the 2 look-ups berth runs first (rev-parse, worktree list)", p.lookups],
    ["git worktree add (the world's worktree)", p.worktree],
    ["psql -c 'SELECT 1' (psql start + connect)", p.psqlConnect],
    ["server: CREATE DATABASE (provision: the empty database)", p.provision],
    ["server: DROP DATABASE (clone: the empty one goes first)", p.drop],
    [`server: CREATE DATABASE … TEMPLATE golden${b.strategy}`, p.clone],
    ["server: COMMENT ON DATABASE × 2 (owner marks)", p.comment],
    ["sum of the parts above but node and psql (round trip, git, server statements)", p.sum],
    ["**berth up <new world>**", p.up],
    ["berth up <that world> again after down (its database kept: no copy)", p.warmUp],
    ["**raw clone through psql**", p.raw]
  ]
  for (const [label, x] of rowsOf) console.log(`| ${label} | ${ms(x)} | ${x.p90Ms.toFixed(1)} |`)
}

// ---------------------------------------------------------------------------------------------------------------

const partsRuns = options.quick ? 3 : 5
/** the machine as the run began: its load average then, for the summary lines */
const startedOn = machineNow()
let failed = false
try {
  const facts = await serverFacts()
  const pgBin = findPgBin(Math.floor(facts.versionNum / 10_000))
  log(`bench/worlds: ${checkpoints.join(",")} worlds of ${rows} rows; PostgreSQL ${facts.version}; ${base}`)
  const servers = await serversEach(pgBin, facts)
  const b = await berthWorlds(facts)
  const parts = await breakdown(b, partsRuns)
  report({ facts, pgBin, servers, b, parts })
} catch (e) {
  failed = true
  console.error(redact(e instanceof Error ? e.message : e))
} finally {
  cleanup()
}
process.exit(interrupted ? 130 : failed ? 1 : 0)
