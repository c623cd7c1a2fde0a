/**
 * Chaos: random up/down/reload/remove of six worlds of one project (three processes, one slow to stop, and a
 * PostgreSQL slice copied from a golden of 200k rows), some at once, with the daemon killed (-9) at random moments —
 * right before an `up`, during a `down`, during a provision — and stopped gracefully twice, once restarted from a CLI
 * whose environment is empty but PATH, HOME and BERTH_HOME. At checkpoints and at the end it checks what must hold
 * whatever happened: every world settles where it was asked to be, no process runs that no service owns (and none at
 * all after `down --all`), no database is leaked or unmarked, no port is leased twice, and a world that was up before
 * a daemon restart is up after it with the same processes and its data. Once, BERTH_HOME (a small tmpfs) fills up
 * mid-run while commands keep coming: each is answered or told DiskFull, and once space is back every world converges
 * with nothing lost or leaked.
 *
 * The run is seeded: BERTH_CHAOS_SEED=<seed> replays its sequence of operations (timings still vary). A failure
 * prints the seed, every broken invariant and the operation log; the log is also written to the temp folder.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { killAll, portBlock, type Sandbox, sandbox, serverScript } from "../e2e/harness.js"
import { fillDisk, freeDisk, mountTmpfs, unmount } from "../e2e/tmpfs.js"
import { ownerOf } from "../../src/services/slices/Slices.js"
import {
  databasesOf,
  dropDatabasesOf,
  failureOf,
  isAlive,
  isDaemon,
  PG_ADMIN,
  type ProcInfo,
  pgQuery,
  processesOfHome,
  type Ran,
  runExact,
  seeded,
  seedFrom,
  sleep
} from "./helpers.js"

const SEED = seedFrom("BERTH_CHAOS_SEED")
const WORLDS = ["w0", "w1", "w2", "w3", "w4", "w5"] as const
/**
 * the suite runs a short sequence (every special moment, then random steps up to this many); BERTH_CHAOS_OPS=300 (and
 * a seed) makes a long one
 */
const MIN_OPS = Number(process.env.BERTH_CHAOS_OPS ?? 30)
const BIG_ROWS = 200_000
/** how long a world may take to settle after anything (a stop takes ~1.5 s, adoption a few reconciler passes) */
const SETTLE_MS = 20_000
/** how long a world may sit, settled but not where it was asked to be, before that counts (reconciler passes: 3 s) */
const STABLE_MS = 8_000
const OP_TIMEOUT_MS = 60_000
/** no new step starts after this; the final checks and the cleanup fit in the rest of the test's time */
const HARD_STOP_MS = 210_000
const TEST_TIMEOUT_MS = 320_000
/** BERTH_HOME's disk: room for the state and the logs of a run, small enough to fill at once */
const HOME_DISK = "64m"
/** how long commands keep coming while the disk is full */
const DISK_FULL_MS = 8_000

/** unique per run, so that databases and routes never meet another run's (or another test file's) */
const project = `chaos${Date.now().toString(36)}${(process.pid % 1296).toString(36)}`

const files: Readonly<Record<string, string>> = {
  "server.mjs": serverScript,
  "berth.toml": `[project]
name = "${project}"

[services.db]
adapter = "postgres"
admin_url = "\${env.PG_ADMIN}"
clone_from = "golden"
migrate = "sh migrate.sh \${db.url}"
seed = "sh seed.sh \${db.url}"

[services.api]
cmd = "exec sh start.sh api node server.mjs"
url = "api"
env = { DB_URL = "\${db.url}" }
health = { http = "/healthz" }

[services.web]
cmd = "exec sh start.sh web node server.mjs"
url = "web"
depends_on = ["api"]
env = { DB_URL = "\${db.url}" }
health = { http = "/healthz" }

# slow to stop: SIGTERM is trapped, and it leaves 1.5 s later
[services.worker]
cmd = "exec sh start.sh worker sh worker.sh"
env = { DB_URL = "\${db.url}" }
stop_grace = "6s"
`,
  "migrate.sh": `psql -qX -v ON_ERROR_STOP=1 "$1" -c 'CREATE TABLE big (id int PRIMARY KEY, payload text); CREATE TABLE markers (id serial PRIMARY KEY, service text NOT NULL, pid int NOT NULL, world text NOT NULL, at timestamptz NOT NULL DEFAULT now())'
`,
  "seed.sh": `psql -qX -v ON_ERROR_STOP=1 "$1" -c 'INSERT INTO big SELECT g, repeat(md5(g::text), 2) FROM generate_series(1, ${BIG_ROWS}) g'
`,
  // every process says in its world's database that it started, then becomes the service ($$ stays its pid)
  "start.sh": `svc=$1
shift
psql -qAtX -v ON_ERROR_STOP=1 "$DB_URL" -c "INSERT INTO markers (service, pid, world) VALUES ('$svc', $$, '$BERTH_WORLD')" >/dev/null || exit 3
exec "$@"
`,
  "worker.sh": `trap 'sleep 1.5; exit 0' TERM
while :; do sleep 0.3; done
`
}

interface ServiceJson {
  readonly name: string
  readonly kind: string
  readonly state: string
  readonly pid: number | null
  readonly port: number | null
  readonly ports: Readonly<Record<string, number>>
  readonly url: string | null
  readonly reason: string | null
  readonly logTail: ReadonlyArray<string>
}

interface WorldJson {
  readonly project: string
  readonly name: string
  readonly slug: string
  readonly desired: string
  readonly state: string
  readonly reason: string | null
  readonly services: ReadonlyArray<ServiceJson>
}

type OpKind = "up" | "down" | "reload" | "remove"

interface Violation {
  readonly id: string
  readonly invariant: string
  readonly detail: string
}

/** what one running world looked like before a daemon restart */
interface Snapshot {
  readonly world: string
  readonly pids: Readonly<Record<string, number>>
  readonly markers: number
}

const TRANSITIONAL_WORLD: ReadonlySet<string> = new Set(["queued", "starting", "stopping", "suspending", "removing"])
const TRANSITIONAL_SERVICE: ReadonlySet<string> = new Set(["pending", "starting", "stopping", "restarting"])
const LIVE_SERVICE: ReadonlySet<string> = new Set([
  "starting",
  "running",
  "healthy",
  "unhealthy",
  "stopping",
  "restarting"
])

const processServices = (w: WorldJson) => w.services.filter((s) => s.kind === "process")
const transitional = (w: WorldJson) =>
  TRANSITIONAL_WORLD.has(w.state) || processServices(w).some((s) => TRANSITIONAL_SERVICE.has(s.state))
const atDesired = (w: WorldJson) =>
  w.desired === "up"
    ? w.state === "running" && processServices(w).every((s) => s.state === "healthy" || s.state === "running")
    : w.desired === "down"
      ? w.state === "stopped" && processServices(w).every((s) => !LIVE_SERVICE.has(s.state))
      : true

const describeWorld = (w: WorldJson) => {
  const services = w.services
    .map((s) => `${s.name}=${s.state}${s.pid === null ? "" : `@${s.pid}`}${s.port === null ? "" : `:${s.port}`}`)
    .join(" ")
  return `${w.name}[${w.desired}→${w.state}${w.reason === null ? "" : ` "${w.reason}"`}: ${services}]`
}

const failureNotes = (w: WorldJson) =>
  w.services
    .filter((s) => s.reason !== null || (s.kind === "process" && !LIVE_SERVICE.has(s.state) && s.logTail.length > 0))
    .map((s) => ` ${w.name}/${s.name}: ${s.reason ?? ""} ${s.logTail.slice(-3).join(" | ")}`)
    .join(";")

const databaseOf = (url: string) => decodeURIComponent(new URL(url).pathname.slice(1))

let box: Sandbox | undefined

afterAll(async () => {
  if (box === undefined) return
  const home = box.home
  const env = cliEnv(home)
  // stop what can be stopped politely, then make sure: every process of this home, every database of this project
  await runExact(["down", "--all"], { cwd: box.dir, env, timeoutMs: 60_000 })
  await runExact(["daemon", "stop"], { cwd: box.dir, env, timeoutMs: 30_000 })
  killAll(home)
  await sleep(200)
  killAll(home)
  await dropDatabasesOf(project, ownerOf(home))
  unmount(home)
  box.cleanup()
}, 150_000)

/**
 * What a run that broke an invariant leaves to read, since its home goes with the test: the daemon's log and the
 * services' logs beside the operation log (`<tmp>/berth-chaos-<seed>.home`), and the end of the daemon's log on stdout,
 * where CI keeps it.
 */
const keepEvidence = (home: string, seed: string) => {
  const kept = join(tmpdir(), `berth-chaos-${seed}.home`)
  try {
    rmSync(kept, { recursive: true, force: true })
    mkdirSync(kept, { recursive: true })
    for (const part of ["daemon.log", "logs"]) {
      if (existsSync(join(home, part))) cpSync(join(home, part), join(kept, part), { recursive: true })
    }
    const tail = readFileSync(join(home, "daemon.log"), "utf8").split("\n").slice(-60)
    console.log(`the daemon's log (all of it, and the services' logs, in ${kept}) ends:\n${tail.join("\n")}`)
  } catch (e) {
    console.log(`the daemon's log could not be kept: ${e}`)
  }
}

const cliEnv = (home: string): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v
  return { ...env, BERTH_HOME: home, NO_COLOR: "1", BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off", PG_ADMIN }
}

describe("chaos", () => {
  it(
    `keeps its invariants under random operations, crashes and restarts (seed ${SEED})`,
    async () => {
      const rnd = seeded(SEED)
      const started = Date.now()
      const elapsed = () => Date.now() - started
      const log: Array<string> = []
      const note = (line: string) => {
        log.push(`[${(elapsed() / 1000).toFixed(1).padStart(6)}s] ${line}`)
      }
      const violations: Array<Violation> = []
      /** what was already reported (an orphan seen at every checkpoint is one finding), and how often it was seen */
      const reported = new Map<string, number>()
      const violate = (invariant: string, detail: string, key?: string) => {
        const id = `${invariant}\u0000${key ?? detail}`
        const seen = reported.get(id)
        reported.set(id, (seen ?? 0) + 1)
        if (seen !== undefined) return
        violations.push({ id, invariant, detail })
        note(`VIOLATION ${invariant}: ${detail}`)
      }
      /** a finding not reported yet: worth a second look before it is (what is known is not waited for again) */
      const isNew = (invariant: string, key: string) => !reported.has(`${invariant}\u0000${key}`)

      const block = portBlock()
      box = sandbox(files, "app", {})
      const { dir, home } = box
      // BERTH_HOME on a disk of its own, for the disk-full phase; without one (not root) that phase is skipped
      const noDisk = mountTmpfs(home, HOME_DISK)
      const env = cliEnv(home)
      /** the installation's mark on the server: what its databases are recognised by, whatever their names */
      const owner = ownerOf(home)
      const berth = (args: ReadonlyArray<string>, timeoutMs = 30_000) => runExact(args, { cwd: dir, env, timeoutMs })
      note(`seed ${SEED}, project ${project}, home ${home}, ports ${block}`)
      if (noDisk !== undefined) note(`the disk-full phase is skipped: ${noDisk}`)

      const setup = [
        await berth(["port", "--range", block]),
        await berth(["port", "--proxy", "off", "--https", "off"]),
        // admission is not what this test is about: no world waits or is suspended for the machine's sake
        await berth(["reserve", "--ram", "0", "--disk", "0"]),
        // the daemon `port` started has this test's environment; start it again knowing PG_ADMIN like every later one
        await berth(["daemon", "stop"]),
        await berth(["daemon", "start"])
      ]
      for (const r of setup) expect(r.code, r.stderr).toBe(0)

      // ---------------------------------------------------------------------------------------------------------
      // observing

      /**
       * What the test knows of each world between looks at `status`: its state (absent: no such world). Operations
       * keep it up to date from their own output; one whose outcome is unclear (a kill came, two at once on one
       * world) makes it stale, and the next batch looks again.
       */
      const model = new Map<string, string>()
      let modelFresh = false

      const status = async (): Promise<ReadonlyArray<WorldJson> | undefined> => {
        const r = await berth(["status", "--json"])
        if (r.code !== 0) {
          note(`status failed: ${r.timedOut ? "timed out" : failureOf(r.stderr).message}`)
          return undefined
        }
        const worlds = (JSON.parse(r.stdout) as { worlds: ReadonlyArray<WorldJson> }).worlds.filter(
          (w) => w.project === project
        )
        model.clear()
        // a world whose removal a kill cut short is still listed while the next daemon finishes it: it may be gone by
        // the time the next command reaches it
        for (const w of worlds) model.set(w.name, w.desired === "removed" ? "removing" : w.state)
        modelFresh = true
        return worlds
      }

      /** what an operation's own output says of the worlds it touched */
      const learn = (kind: OpKind, world: string, r: Ran, clear: boolean) => {
        if (!clear || r.timedOut) {
          modelFresh = false
          return
        }
        if (r.code !== 0) {
          if (failureOf(r.stderr).tag === "WorldNotFound") model.delete(world)
          else modelFresh = false
          return
        }
        if (kind === "remove") {
          model.delete(world)
          return
        }
        try {
          // up and reload print { world }, down { worlds }
          const out = JSON.parse(r.stdout) as { worlds?: ReadonlyArray<WorldJson>; world?: WorldJson }
          for (const w of out.worlds ?? (out.world === undefined ? [] : [out.world])) {
            if (typeof w.name === "string" && typeof w.state === "string") model.set(w.name, w.state)
          }
        } catch {
          modelFresh = false
        }
      }

      /** worlds already reported stuck: later waits do not wait for them again (their ops are skipped too) */
      const stuck = new Set<string>()

      /**
       * Waits (bounded) until every world is out of transitional states and where it was asked to be: SETTLE_MS at
       * most, STABLE_MS once nothing is transitional and nothing changes any more.
       */
      const settle = async (label: string): Promise<ReadonlyArray<WorldJson>> => {
        const until = Date.now() + SETTLE_MS
        let worlds: ReadonlyArray<WorldJson> | undefined
        let signature = ""
        let unchangedSince = Date.now()
        for (;;) {
          worlds = await status()
          const pending = (worlds ?? []).filter((w) => !stuck.has(w.name) && (transitional(w) || !atDesired(w)))
          if (worlds !== undefined && pending.length === 0) break
          const now = JSON.stringify(pending.map(describeWorld))
          if (now !== signature) {
            signature = now
            unchangedSince = Date.now()
          }
          const resting = worlds !== undefined && !pending.some(transitional) && Date.now() - unchangedSince > STABLE_MS
          if (Date.now() > until || resting) {
            if (worlds === undefined) {
              violate("the daemon answers", `${label}: status failed for ${SETTLE_MS / 1000} s`)
              return []
            }
            for (const w of pending) {
              stuck.add(w.name)
              if (transitional(w)) {
                violate("every world settles", `${label}: after ${SETTLE_MS / 1000} s ${describeWorld(w)}`)
              } else {
                violate(
                  "a settled world is where it was asked to be",
                  `${label}: ${describeWorld(w)}${failureNotes(w)}`
                )
              }
            }
            break
          }
          await sleep(500)
        }
        // a stuck world that came right is no longer stuck
        for (const w of worlds) if (stuck.has(w.name) && !transitional(w) && atDesired(w)) stuck.delete(w.name)
        return worlds
      }

      const steadyProcesses = async (): Promise<Array<ProcInfo>> => {
        const first = processesOfHome(home)
        await sleep(300)
        return processesOfHome(home).filter((p) => first.some((q) => q.pid === p.pid && q.startTime === p.startTime))
      }

      const checkPorts = (label: string, worlds: ReadonlyArray<WorldJson>) => {
        const holders = new Map<number, Array<string>>()
        for (const w of worlds) {
          for (const s of w.services) {
            const ports = [...(s.port === null ? [] : [s.port]), ...Object.values(s.ports)]
            for (const port of new Set(ports)) holders.set(port, [...(holders.get(port) ?? []), `${w.name}/${s.name}`])
          }
        }
        for (const [port, who] of holders) {
          if (who.length > 1) violate("no port is leased twice", `${label}: port ${port} → ${who.join(", ")}`)
        }
      }

      const checkProcesses = async (label: string, worlds: ReadonlyArray<WorldJson>) => {
        const procs = await steadyProcesses()
        const daemons = procs.filter(isDaemon)
        if (daemons.length > 1) {
          violate("one daemon per home", `${label}: ${daemons.map((d) => d.pid).join(", ")}`)
        }
        const others = procs.filter((p) => !isDaemon(p))
        const owners = new Map<number, string>()
        for (const w of worlds) {
          for (const s of processServices(w)) {
            if (s.pid !== null && LIVE_SERVICE.has(s.state)) owners.set(s.pid, `${w.name}/${s.name} (${s.state})`)
          }
        }
        const groups = new Map<number, Array<ProcInfo>>()
        for (const p of others) groups.set(p.pgid, [...(groups.get(p.pgid) ?? []), p])
        for (const [pgid, members] of groups) {
          if (owners.has(pgid)) continue
          const who = members
            .map(
              (m) => `${m.pid} ${m.env.BERTH_WORLD ?? "?"}/${m.env.BERTH_SERVICE ?? "?"} "${m.cmdline.slice(0, 50)}"`
            )
            .join(", ")
          violate(
            "no orphan process",
            `${label}: group ${pgid} (${who}) belongs to no service status shows`,
            `${pgid} ${members[0]?.startTime}`
          )
        }
        for (const [pid, who] of owners) {
          if (groups.has(pid)) continue
          violate("status tells the truth", `${label}: ${who} pid ${pid} is not running`, `${pid}`)
        }
        const copies = new Map<string, Set<number>>()
        for (const p of others) {
          if (p.env.BERTH_SERVICE === undefined) continue
          const key = `${p.env.BERTH_WORLD}/${p.env.BERTH_SERVICE}`
          copies.set(key, new Set([...(copies.get(key) ?? []), p.pgid]))
        }
        for (const [key, pgids] of copies) {
          if (pgids.size > 1) {
            violate("one copy of each service", `${label}: ${key} runs as groups ${[...pgids]}`, `${key} ${[...pgids]}`)
          }
        }
      }

      /**
       * databases of this project vs what the worlds own; retried, as a spare may be in the making and what a crash left
       * half-made goes with the new daemon's first sweep, seconds after it starts
       */
      const checkDatabases = async (label: string, worlds: ReadonlyArray<WorldJson>) => {
        const owned = new Map<string, string>()
        for (const w of worlds) {
          for (const s of w.services) if (s.kind === "slice" && s.url !== null) owned.set(databaseOf(s.url), w.name)
        }
        let problems: Array<string> = []
        for (let attempt = 0; attempt < 8; attempt++) {
          if (attempt > 0) await sleep(1_000)
          problems = []
          const dbs = await databasesOf(project, owner)
          for (const db of dbs) {
            // a pending name (`berth_new_<owner>_…`) is the installation's by its shape, and marked only once made
            const pending = db.name.startsWith(`berth_new_${owner}_`)
            if (!pending && (db.mark === null || !db.mark.startsWith(`berth:${owner}:`))) {
              problems.push(`${db.name} is unmarked (mark: ${db.mark})`)
            }
            if (owned.has(db.name)) continue
            if (db.name.startsWith("golden_") || db.name.startsWith("spare_")) continue
            problems.push(`${db.name} belongs to no world${pending ? " (a pending name: a provision cut short)" : ""}`)
          }
          const goldens = dbs.filter((d) => d.name.startsWith("golden_"))
          if (goldens.length > 1) problems.push(`${goldens.length} goldens: ${goldens.map((d) => d.name)}`)
          const spares = dbs.filter((d) => d.name.startsWith("spare_"))
          if (spares.length > 1) problems.push(`${spares.length} spares: ${spares.map((d) => d.name)}`)
          for (const w of worlds) {
            const db = w.services.find((s) => s.kind === "slice")
            if (db?.state !== "ready" || db.url === null) continue
            if (!dbs.some((d) => d.name === databaseOf(db.url!))) problems.push(`${w.name}'s ready database is gone`)
          }
          if (!problems.some((p) => isNew("no leaked or unmarked database", p))) break
        }
        for (const p of problems) violate("no leaked or unmarked database", `${label}: ${p}`, p)
        let what: Array<string> = []
        for (let attempt = 0; attempt < 6; attempt++) {
          if (attempt > 0) await sleep(1_000)
          const gc = await berth(["gc", "--dry-run", "--json"])
          if (gc.code !== 0) {
            violate("gc --dry-run answers", `${label}: ${failureOf(gc.stderr).message}`)
            return
          }
          what = (JSON.parse(gc.stdout) as { entries: ReadonlyArray<{ reason?: string; name?: string }> }).entries.map(
            (e) => `${e.reason}: ${e.name}`
          )
          if (what.length === 0 || !isNew("gc finds nothing to drop", what.join(", "))) break
        }
        if (what.length > 0) violate("gc finds nothing to drop", `${label}: ${what.join(", ")}`, what.join(", "))
      }

      const dbUrlOf = (w: WorldJson) => w.services.find((s) => s.kind === "slice")?.url ?? null

      /** each running world's database holds the golden's rows, and the last marker of each service is its pid */
      const checkData = async (label: string, worlds: ReadonlyArray<WorldJson>) => {
        for (const w of worlds) {
          const url = dbUrlOf(w)
          if (w.state !== "running" || url === null) continue
          try {
            const [big] = await pgQuery<{ n: number }>(url, "SELECT count(*)::int AS n FROM big")
            if (big?.n !== BIG_ROWS) {
              violate("data survives", `${label}: ${w.name} has ${big?.n} rows of ${BIG_ROWS}`, `${w.name} ${big?.n}`)
            }
            const markers = await pgQuery<{ service: string; pid: number }>(
              url,
              "SELECT service, pid FROM markers ORDER BY id"
            )
            for (const s of processServices(w)) {
              const last = markers.filter((m) => m.service === s.name).at(-1)
              if (s.pid !== null && last?.pid !== s.pid) {
                violate(
                  "the process status shows is the last one started",
                  `${label}: ${w.name}/${s.name} pid ${s.pid}, last started ${last?.pid} (${markers.filter((m) => m.service === s.name).length} starts)`,
                  `${w.name}/${s.name} ${s.pid}`
                )
              }
            }
          } catch (e) {
            violate("data survives", `${label}: ${w.name}'s database: ${(e as Error).message}`, `${w.name} ${url}`)
          }
        }
      }

      const checkpoint = async (label: string, worlds: ReadonlyArray<WorldJson>) => {
        note(`checkpoint ${label}: ${worlds.map(describeWorld).join(" ")}`)
        checkPorts(label, worlds)
        await checkProcesses(label, worlds)
        await checkDatabases(label, worlds)
        await checkData(label, worlds)
      }

      const snapshot = async (worlds: ReadonlyArray<WorldJson>): Promise<Array<Snapshot>> => {
        const out: Array<Snapshot> = []
        for (const w of worlds) {
          const url = dbUrlOf(w)
          if (w.state !== "running" || url === null) continue
          const pids: Record<string, number> = {}
          for (const s of processServices(w)) if (s.pid !== null) pids[s.name] = s.pid
          const [row] = await pgQuery<{ n: number }>(url, "SELECT count(*)::int AS n FROM markers").catch(() => [])
          out.push({ world: w.name, pids, markers: row?.n ?? -1 })
        }
        return out
      }

      /** A world up before a daemon restart is up after it: the same processes (adopted, not started again), its data. */
      const checkSurvivors = async (
        label: string,
        before: ReadonlyArray<Snapshot>,
        after: ReadonlyArray<WorldJson>
      ) => {
        for (const snap of before) {
          const w = after.find((x) => x.name === snap.world)
          const invariant = "a world up before a daemon restart is up after it, same pids, same data"
          if (w === undefined) {
            violate(invariant, `${label}: ${snap.world} is gone`)
            continue
          }
          const pids: Record<string, number | null> = {}
          for (const s of processServices(w)) pids[s.name] = s.pid
          const changed = Object.entries(snap.pids).filter(([name, pid]) => pids[name] !== pid)
          if (w.state !== "running" || changed.length > 0) {
            const what = changed.map(([name, pid]) => `${name} ${pid}→${pids[name]}`).join(", ")
            violate(invariant, `${label}: ${describeWorld(w)}${what === "" ? "" : `; pids ${what}`}`)
          }
          const url = dbUrlOf(w)
          if (url === null) continue
          const [row] = await pgQuery<{ n: number }>(url, "SELECT count(*)::int AS n FROM markers").catch(() => [])
          if (row === undefined || row.n < snap.markers) {
            violate(invariant, `${label}: ${snap.world}'s markers ${snap.markers} → ${row?.n ?? "unreadable"}`)
          } else if (row.n > snap.markers) {
            note(`${snap.world}: ${row.n - snap.markers} process start(s) during the restart`)
          }
        }
      }

      // ---------------------------------------------------------------------------------------------------------
      // acting

      let ops = 0
      /** bumped by every kill and stop: an operation it overlapped may fail */
      let epoch = 0

      const killDaemon = (why: string) => {
        epoch++
        const daemons = processesOfHome(home).filter(isDaemon)
        if (daemons.length === 0) return note(`kill -9: no daemon is running (${why})`)
        for (const d of daemons) {
          try {
            process.kill(d.pid, "SIGKILL")
          } catch {
            // gone already
          }
        }
        note(`KILL -9 daemon ${daemons.map((d) => d.pid).join(",")} (${why})`)
      }

      /**
       * One operation. `exists` is whether the world existed when it was chosen (undefined: not checked, e.g. two
       * operations on one world at once); one that no kill overlapped must then succeed, or say WorldNotFound.
       */
      const op = async (kind: OpKind, world: string, exists: boolean | undefined): Promise<Ran> => {
        const n = ++ops
        const e0 = epoch
        note(`#${n} ▶ ${kind} ${world}`)
        const args = kind === "remove" ? ["remove", world, "--force", "--json"] : [kind, world, "--json"]
        const r = await berth(args, OP_TIMEOUT_MS)
        const disturbed = epoch !== e0
        learn(kind, world, r, !disturbed && exists !== undefined)
        const failure = r.code === 0 ? undefined : failureOf(r.stderr)
        const outcome = r.timedOut ? "TIMED OUT" : failure === undefined ? "ok" : `${failure.tag}`
        note(
          `#${n} ◀ ${kind} ${world}: ${outcome} (${r.ms} ms)${disturbed ? " [the daemon was killed meanwhile]" : ""}`
        )
        if (r.timedOut) {
          violate("no command hangs", `#${n} ${kind} ${world} still running after ${OP_TIMEOUT_MS / 1000} s`)
        } else if (!disturbed && exists !== undefined) {
          const mustSucceed = kind === "up" || exists
          if (mustSucceed && failure !== undefined) {
            violate(
              "commands succeed on a quiet daemon",
              `#${n} ${kind} ${world}: ${failure.tag}: ${failure.message.slice(0, 400)}`
            )
          } else if (!mustSucceed && failure?.tag !== "WorldNotFound") {
            violate("commands on unknown worlds say WorldNotFound", `#${n} ${kind} ${world}: ${outcome}`)
          }
        }
        return r
      }

      /** waits until `probe` names something (or `timeoutMs` passes) */
      const watchFor = async (probe: () => Promise<string | undefined>, timeoutMs: number) => {
        const until = Date.now() + timeoutMs
        while (Date.now() < until) {
          const seen = await probe()
          if (seen !== undefined) return seen
          await sleep(15)
        }
        return undefined
      }

      const oneShotRunning = async () => {
        const p = processesOfHome(home).find((x) => x.env.BERTH_ONESHOT !== undefined)
        return p === undefined ? undefined : `one-off ${p.pid} "${p.cmdline.slice(0, 60)}"`
      }
      const copyRunning = async () => {
        const rows = await pgQuery<{ query: string }>(
          PG_ADMIN,
          "SELECT query FROM pg_stat_activity WHERE state = 'active' AND strpos(query, $1) > 0 AND (query ILIKE 'CREATE DATABASE%' OR query ILIKE 'ALTER DATABASE%' OR query ILIKE 'DROP DATABASE%')",
          [project]
        ).catch(() => [])
        return rows[0] === undefined ? undefined : `"${rows[0].query.slice(0, 90)}"`
      }

      const runningWorlds = (worlds: ReadonlyArray<WorldJson>) =>
        worlds.filter((w) => w.state === "running" && !stuck.has(w.name)).map((w) => w.name)

      /** Kills the daemon while `world` is provisioned: its golden being built, or a copy or rename on the server. */
      const killDuringProvision = async (world: string, golden: boolean) => {
        let worlds = await settle(`before provisioning ${world}`)
        if (worlds.some((w) => w.name === world)) {
          await op("remove", world, true)
          worlds = await settle(`after removing ${world}`)
        }
        const before = await snapshot(worlds)
        const up = op("up", world, false)
        const seen = golden
          ? await watchFor(oneShotRunning, 30_000)
          : await watchFor(async () => (await copyRunning()) ?? (await oneShotRunning()), 8_000)
        if (golden) await sleep(rnd.int(100, 600))
        killDaemon(`during the provision of ${world}: ${seen ?? "no provision seen in time"}`)
        await up
        const after = await settle(`after a kill during the provision of ${world}`)
        await checkSurvivors(`kill -9 during the provision of ${world}`, before, after)
        await checkpoint(`after a kill during the provision of ${world}`, after)
      }

      /** Brings worlds up until `n` run, so that a restart has something to adopt. */
      const ensureRunning = async (n: number, label: string) => {
        const worlds = await settle(`before ${label}`)
        const running = runningWorlds(worlds)
        if (running.length >= n) return worlds
        const more = rnd
          .shuffle(WORLDS.filter((w) => !running.includes(w) && !stuck.has(w)))
          .slice(0, n - running.length)
        const known = new Set(worlds.map((x) => x.name))
        await Promise.all(more.map((w) => op("up", w, known.has(w))))
        return settle(`after bringing worlds up for ${label}`)
      }

      /** Kills the daemon, then at once asks for `up` of every running world: the new daemon has not adopted yet. */
      const killBeforeUp = async () => {
        const worlds = await ensureRunning(3, "kill-then-up")
        const before = await snapshot(worlds)
        const targets = runningWorlds(worlds)
        const extra = WORLDS.filter((w) => !targets.includes(w) && !stuck.has(w))
        if (extra.length > 0 && rnd.chance(0.5)) targets.push(rnd.pick(extra))
        killDaemon(`right before up of ${targets.join(", ")}`)
        await Promise.all(targets.map((w) => op("up", w, true)))
        const after = await settle("after kill-then-up")
        await checkSurvivors("kill -9 right before up", before, after)
        await checkpoint("after kill-then-up", after)
      }

      /** Kills the daemon while it stops a world (its worker takes 1.5 s to leave). */
      const killDuringDown = async () => {
        let worlds = await settle("before kill-during-down")
        let running = runningWorlds(worlds)
        if (running.length === 0) {
          const w = rnd.pick(WORLDS.filter((x) => !stuck.has(x)))
          const exists = worlds.some((x) => x.name === w)
          await op("up", w, exists)
          worlds = await settle(`after up ${w}`)
          running = runningWorlds(worlds)
          if (running.length === 0) return note("kill during down skipped: no world is running")
        }
        const target = rnd.pick(running)
        const delay = rnd.int(300, 1_300)
        const before = (await snapshot(worlds)).filter((s) => s.world !== target)
        const victim = worlds.find((w) => w.name === target)!
        const down = op("down", target, true)
        await sleep(delay)
        const alive = processServices(victim).filter((s) => s.pid !== null && isAlive(s.pid))
        killDaemon(
          `during down ${target}, ${delay} ms in; still alive: ${alive.map((s) => s.name).join(", ") || "none"}`
        )
        await down
        const after = await settle(`after a kill during down ${target}`)
        await checkSurvivors(`kill -9 during down ${target}`, before, after)
        await checkpoint(`after a kill during down ${target}`, after)
      }

      /** `berth daemon stop`, then a daemon started by a CLI with the test's environment or an empty one. */
      const gracefulStop = async (emptyEnv: boolean) => {
        const label = emptyEnv ? "daemon stop + start with an empty environment" : "daemon stop + start"
        const worlds = await ensureRunning(3, label)
        const before = await snapshot(worlds)
        epoch++
        const stop = await berth(["daemon", "stop", "--json"])
        note(`daemon stop: ${stop.code === 0 ? stop.stdout.replace(/\s+/g, " ") : failureOf(stop.stderr).message}`)
        if (stop.code !== 0) violate("daemon stop works", failureOf(stop.stderr).message)
        const gone = await watchFor(async () => (processesOfHome(home).some(isDaemon) ? undefined : "gone"), 10_000)
        if (gone === undefined) violate("daemon stop works", "the daemon is still running 10 s later")
        // the README: `stop` leaves services running, the next daemon adopts them
        for (const snap of before) {
          const dead = Object.entries(snap.pids).filter(([, pid]) => !isAlive(pid))
          if (dead.length > 0) {
            violate(
              "daemon stop leaves services running",
              `${snap.world}: ${dead.map(([name, pid]) => `${name} (${pid})`).join(", ")} died with the daemon`
            )
          }
        }
        const start = emptyEnv
          ? await runExact(["daemon", "start", "--json"], {
              cwd: dir,
              env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", BERTH_HOME: home },
              timeoutMs: 30_000
            })
          : await berth(["daemon", "start", "--json"])
        note(
          `daemon start${emptyEnv ? " (empty environment)" : ""}: ${(start.code === 0 ? start.stdout : start.stderr).replace(/\s+/g, " ")}`
        )
        if (start.code !== 0) violate("daemon start works", start.stderr.slice(0, 400))
        const after = await settle(`after ${label}`)
        await checkSurvivors(label, before, after)
        await checkpoint(`after ${label}`, after)
      }

      /**
       * BERTH_HOME's disk fills up while commands keep coming: each is answered, or told DiskFull (never an internal
       * error, a hang or Node's words). Then space comes back: every world converges — a world wanted up whose start
       * the full disk cut short is `failed` with the reason, or running; `up` brings it back — with no orphan process and
       * no leaked slice or lease.
       */
      const diskFull = async () => {
        if (noDisk !== undefined) return note(`disk full: skipped (${noDisk})`)
        const worlds = await ensureRunning(2, "the disk fills up")
        const names = worlds.map((w) => w.name).filter((w) => !stuck.has(w))
        epoch++
        modelFresh = false
        fillDisk(home)
        note("DISK FULL")
        const until = Date.now() + DISK_FULL_MS
        try {
          while (Date.now() < until && names.length > 0) {
            const kind = rnd.pick(["up", "down", "reload", "status"] as const)
            const world = rnd.pick(names)
            const args = kind === "status" ? ["status", "--json"] : [kind, world, "--json"]
            const r = await berth(args, OP_TIMEOUT_MS)
            const failure = r.code === 0 ? undefined : failureOf(r.stderr)
            note(`disk full: ${args.join(" ")}: ${r.timedOut ? "TIMED OUT" : (failure?.tag ?? "ok")} (${r.ms} ms)`)
            if (r.timedOut) violate("no command hangs", `disk full: ${args.join(" ")}`)
            else if (failure !== undefined && failure.tag !== "DiskFull") {
              violate(
                "a full disk is told as DiskFull",
                `${args.join(" ")}: ${failure.tag}: ${failure.message.slice(0, 300)}`
              )
            }
          }
        } finally {
          freeDisk(home)
          note("disk space back")
        }
        // what the full disk cut short is told (no world left mid-way), and started again the way a user would
        // converged: nothing mid-way, and every live service shown with a process that runs (the rows the full disk
        // kept from being written follow on the reconciler's next pass)
        const untrue = (w: WorldJson) =>
          transitional(w) ||
          processServices(w).some((x) => LIVE_SERVICE.has(x.state) && (x.pid === null || !isAlive(x.pid)))
        const quietUntil = Date.now() + SETTLE_MS
        let now = await status()
        while (Date.now() < quietUntil && (now === undefined || now.some(untrue))) {
          await sleep(500)
          now = await status()
        }
        for (const w of (now ?? []).filter(untrue)) {
          violate("every world converges once space is back", `after ${SETTLE_MS / 1000} s ${describeWorld(w)}`)
        }
        const failed = (now ?? []).filter((w) => w.desired === "up" && w.state === "failed")
        if (failed.length > 0) {
          note(`failed while the disk was full: ${failed.map(describeWorld).join(" ")}`)
          await Promise.all(failed.map((w) => op("up", w.name, true)))
        }
        await checkpoint("after the disk was full", await settle("after the disk was full"))
      }

      /** Two to six operations at once, on distinct worlds (now and then two on one), a kill sometimes among them. */
      const randomBatch = async (step: number) => {
        if (!modelFresh) await status()
        const size = rnd.pick([2, 3, 3, 4, 5, 6])
        const chosen = rnd.shuffle(WORLDS.filter((w) => !stuck.has(w))).slice(0, size)
        const planned: Array<{ kind: OpKind; world: string; exists: boolean | undefined }> = chosen.map((world) => {
          const state = model.get(world)
          const weights: ReadonlyArray<readonly [OpKind, number]> =
            state === undefined
              ? [
                  ["up", 75],
                  ["down", 9],
                  ["reload", 8],
                  ["remove", 8]
                ]
              : state === "running"
                ? [
                    ["up", 25],
                    ["down", 30],
                    ["reload", 25],
                    ["remove", 20]
                  ]
                : [
                    ["up", 50],
                    ["down", 15],
                    ["reload", 15],
                    ["remove", 20]
                  ]
          let roll = rnd.int(1, 100)
          let kind: OpKind = "up"
          for (const [candidate, weight] of weights) {
            kind = candidate
            roll -= weight
            if (roll <= 0) break
          }
          return { kind, world, exists: state === "removing" ? undefined : state !== undefined }
        })
        if (planned.length > 0 && rnd.chance(0.08)) {
          // two operations on one world at once: no outcome is asserted, only what must hold afterwards
          const first = planned[0]!
          planned[0] = { ...first, exists: undefined }
          planned.push({
            kind: rnd.pick(["up", "down", "reload", "remove"] as const),
            world: first.world,
            exists: undefined
          })
        }
        const killAt = rnd.chance(0.15) ? rnd.int(0, 1_500) : undefined
        note(
          `step ${step}: ${planned.map((p) => `${p.kind} ${p.world}`).join(" + ")}${killAt === undefined ? "" : `, kill -9 at ${killAt} ms`}`
        )
        const killer =
          killAt === undefined ? Promise.resolve() : sleep(killAt).then(() => killDaemon(`random, step ${step}`))
        await Promise.all([...planned.map((p) => op(p.kind, p.world, p.exists)), killer])
      }

      // ---------------------------------------------------------------------------------------------------------
      // the run

      try {
        // the very first up builds the golden (200k rows): the daemon dies while its seed runs
        await killDuringProvision("w0", true)
        // the others at once: first ups of a project whose golden is there (or being rebuilt)
        const first = new Set(((await status()) ?? []).map((w) => w.name))
        await Promise.all(WORLDS.slice(1).map((w) => op("up", w, first.has(w))))
        await checkpoint("after the first ups", await settle("after the first ups"))

        const specials = rnd.shuffle([
          () => killBeforeUp(),
          () => killDuringDown(),
          () => killDuringProvision(rnd.pick(WORLDS.filter((w) => !stuck.has(w))), false),
          () => gracefulStop(false),
          () => diskFull(),
          () => killBeforeUp(),
          () => killDuringDown(),
          () => gracefulStop(true)
        ])
        let step = 0
        let sinceCheckpoint = 0
        // a special event after every two to four random batches
        let nextSpecial = rnd.int(2, 4)
        while (elapsed() < HARD_STOP_MS && (specials.length > 0 || ops < MIN_OPS)) {
          step++
          // after 90 s, what is left of the special events comes first
          if (specials.length > 0 && (step >= nextSpecial || elapsed() > 90_000)) {
            await specials.shift()!()
            nextSpecial = step + rnd.int(2, 4)
            sinceCheckpoint = 0
            continue
          }
          await randomBatch(step)
          if (++sinceCheckpoint >= 6) {
            await checkpoint(`after step ${step}`, await settle(`after step ${step}`))
            sinceCheckpoint = 0
          }
        }
        if (specials.length > 0) violate("the run did everything it plans", `${specials.length} special events left`)
        if (ops < MIN_OPS) violate("the run did everything it plans", `${ops} operations, fewer than ${MIN_OPS}`)

        // the end: everything settles and checks out; down --all leaves no process at all; remove leaves no database
        await checkpoint("final", await settle("final"))
        const down = await berth(["down", "--all", "--json"], OP_TIMEOUT_MS)
        note(`down --all: ${down.code === 0 ? "ok" : failureOf(down.stderr).message}`)
        if (down.code !== 0) violate("commands succeed on a quiet daemon", `down --all: ${down.stderr.slice(0, 300)}`)
        const stopped = await settle("after down --all")
        await checkpoint("after down --all", stopped)
        const left = (await steadyProcesses()).filter((p) => !isDaemon(p))
        for (const p of left) {
          violate(
            "no process is left after down --all",
            `${p.pid} (group ${p.pgid}) ${p.env.BERTH_WORLD ?? "?"}/${p.env.BERTH_SERVICE ?? "?"} "${p.cmdline.slice(0, 60)}"`
          )
        }
        await Promise.all(stopped.map((w) => op("remove", w.name, true)))
        const removed = await settle("after removing every world")
        if (removed.length > 0) violate("remove removes", removed.map(describeWorld).join(" "))
        await checkpoint("after removing every world", removed)
      } catch (e) {
        // not a broken invariant but the test itself stopped: the seed and the log say where
        console.log(`chaos run with seed ${SEED} stopped: ${e}\noperation log:\n${log.join("\n")}`)
        throw e
      } finally {
        note(`done: ${ops} operations, ${violations.length} violations`)
        const file = join(tmpdir(), `berth-chaos-${SEED}.log`)
        writeFileSync(file, `${log.join("\n")}\n`)
        console.log(`chaos: seed ${SEED}, ${ops} operations in ${(elapsed() / 1000).toFixed(0)} s; log in ${file}`)
        if (violations.length > 0) keepEvidence(home, `${SEED}`)
      }

      const byInvariant = new Map<string, Array<string>>()
      for (const v of violations) {
        const seen = reported.get(v.id) ?? 1
        const detail = seen > 1 ? `${v.detail} (seen at ${seen} checks)` : v.detail
        byInvariant.set(v.invariant, [...(byInvariant.get(v.invariant) ?? []), detail])
      }
      const report = [
        `chaos run with seed ${SEED} broke ${byInvariant.size} invariant(s); replay with BERTH_CHAOS_SEED=${SEED}`,
        ...[...byInvariant].flatMap(([invariant, details]) => [
          `- ${invariant} (${details.length}×)`,
          ...details.slice(0, 6).map((d) => `    ${d}`)
        ]),
        "operation log:",
        ...log
      ].join("\n")
      if (violations.length > 0) console.log(report)
      expect([...byInvariant.keys()], report).toEqual([])
    },
    TEST_TIMEOUT_MS
  )
})
