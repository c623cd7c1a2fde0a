/**
 * Worlds that run anywhere, end to end: three test hosts (network namespaces, each with its own berth daemon and
 * BERTH_HOME) in one cluster; a branch pushed to a shared remote is brought up `--anywhere` from h1, runs on one of the
 * machines, answers through every machine's proxy, moves when its machine's daemon is killed, is handed over when its
 * machine leaves, and is taken down and removed from any machine.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { clusterOwner, remoteWorldId } from "../../src/domain/cluster.js"
import { ownerOf } from "../../src/services/slices/Slices.js"
import { eventually, isAlive, type Sandbox, sandbox, serverScript } from "../e2e/harness.js"
import {
  endedAt,
  formCluster,
  git,
  type Host,
  hostsUnavailable,
  placement,
  sampleCopies,
  shop,
  startedAt,
  type StatusWorld,
  type TestNetwork,
  testNetwork
} from "./hosts.js"

const unavailable = hostsUnavailable()
const PROXY_PORT = 17365

/**
 * feat-a's berth.toml: a database of its own on the one PostgreSQL server every machine reaches (`server`: host and
 * port, over the bridge), which moves with the world (the api shows its address in its environment).
 */
const shopWithData = (server: string) => `${shop}env = { DATABASE_URL = "\${db.url}" }
depends_on = ["db"]

[services.db]
adapter = "postgres"
admin_url = "postgres://postgres@${server}/postgres"
migrate = "psql \\"$DB_URL\\" -qc 'CREATE TABLE notes (body text)'"
clone_from = "golden"
`

/** Runs one statement as PostgreSQL's admin over its socket (the server every test host reaches over the bridge). */
const psql = (statement: string, database = "postgres") =>
  execFileSync("psql", ["-h", "/var/run/postgresql", "-U", "postgres", "-d", database, "-qAtc", statement], {
    encoding: "utf8"
  }).trim()

const databaseOf = (url: string) => new URL(url).pathname.slice(1)

/** Runs one statement in the database a postgres url names. */
const inDatabase = (url: string, statement: string) => psql(statement, databaseOf(url))

const databaseExists = (name: string) => psql("SELECT datname FROM pg_database").split("\n").includes(name)

/** Drops every database of the server marked as one of `owners`' slices (what a failed test may have left). */
const dropMarked = (owners: ReadonlyArray<string>) => {
  const marked = psql("SELECT datname || ' ' || coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database")
    .split("\n")
    .map((line) => line.split(" "))
    .filter(([, mark]) => owners.some((o) => mark?.startsWith(`berth:${o}:`)))
  for (const [name] of marked) psql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
}

/** Eight more worlds, with feat-a and feat-b the ten the cluster spreads over its machines. */
const EXTRA = ["feat-e", "feat-f", "feat-g", "feat-h", "feat-i", "feat-j", "feat-k", "feat-l"]

/** One request to each host name through `host`'s proxy, in one process: status and the world that answered. */
const viaProxyAll = (host: Host, hostnames: ReadonlyArray<string>) => {
  const script = `
const http = require("node:http")
const one = (name) => new Promise((resolve) => {
  http.get({ host: "127.0.0.1", port: ${PROXY_PORT}, path: "/", headers: { host: name + ":${PROXY_PORT}" } }, (r) => {
    let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => { let world = null; try { world = JSON.parse(b).world } catch {} resolve({ name, status: r.statusCode, world }) })
  }).on("error", (e) => resolve({ name, status: 0, world: e.message }))
})
;(async () => { const out = []; for (const n of ${JSON.stringify(hostnames)}) out.push(await one(n)); console.log(JSON.stringify(out)) })()`
  return JSON.parse(host.exec("node", ["-e", script])) as ReadonlyArray<{
    name: string
    status: number
    world: string | null
  }>
}

const viaProxy = (host: Host, hostname: string) => {
  const script = `require("node:http").get({ host: "127.0.0.1", port: ${PROXY_PORT}, path: "/", headers: { host: "${hostname}:${PROXY_PORT}" } }, (r) => { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(JSON.stringify({ status: r.statusCode, body: b }))) }).on("error", (e) => console.log(JSON.stringify({ status: 0, body: e.message })))`
  return JSON.parse(host.exec("node", ["-e", script])) as { status: number; body: string }
}

const daemonPid = (host: Host) => Number(readFileSync(join(host.home, "daemon.pid"), "utf8").trim().split(/\s+/)[0])

/**
 * One action through a host's web dashboard (berth.localhost on its proxy), as the dashboard's own page sends it: the
 * token read from the page, the page's origin. `world` is the dashboard's id (another machine's worlds are negative).
 */
const dashboardAction = (h: Host, world: number, action: string) => {
  const origin = `http://berth.localhost:${PROXY_PORT}`
  const script = `
const http = require("node:http")
const ask = (method, path, headers, body) => new Promise((resolve) => {
  const req = http.request({ host: "127.0.0.1", port: ${PROXY_PORT}, method, path, headers: { host: "berth.localhost:${PROXY_PORT}", ...headers } }, (r) => {
    let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => resolve({ status: r.statusCode, body: b }))
  })
  req.on("error", (e) => resolve({ status: 0, body: e.message }))
  req.end(body)
})
;(async () => {
  const page = await ask("GET", "/", {})
  const token = (/data-token="([^"]+)"/.exec(page.body) || [])[1] || ""
  const body = JSON.stringify({ world: ${world}, action: ${JSON.stringify(action)} })
  const r = await ask("POST", "/actions", { origin: ${JSON.stringify(origin)}, "x-berth-token": token, "content-type": "application/json" }, body)
  console.log(JSON.stringify(r))
})()`
  return JSON.parse(h.exec("node", ["-e", script])) as { status: number; body: string }
}

describe.skipIf(unavailable !== undefined)(
  `worlds that run anywhere${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`,
  () => {
    let net: TestNetwork
    let repo: Sandbox
    /** where h2 and h3 run their commands: no repository of their own, as a machine that only lends its room */
    let elsewhere: string
    const host = (i: number) => net.hosts[i - 1] as Host
    const berth = (h: Host, args: ReadonlyArray<string>, timeoutMs?: number) =>
      h.run(h.name === "h1" ? repo.dir : elsewhere, args, timeoutMs)
    const { statusOf, pidOn, runner, placed, steady } = placement(() => net.hosts, berth)

    beforeAll(async () => {
      net = testNetwork(3, { BERTH_PROXY_PORT: String(PROXY_PORT) }, { network: true })
      repo = sandbox({ "server.mjs": serverScript, "berth.toml": shop }, "shop")
      // the shared remote every machine clones from
      const origin = join(net.base, "origin.git")
      git(net.base, "init", "-q", "--bare", origin)
      git(repo.dir, "remote", "add", "origin", origin)
      const branches = ["feat-a", "feat-b", "feat-c", "feat-d", ...EXTRA]
      for (const branch of branches) git(repo.dir, "branch", branch)
      git(repo.dir, "checkout", "-q", "feat-a")
      writeFileSync(join(repo.dir, "berth.toml"), shopWithData(new URL(net.url).host))
      git(repo.dir, "commit", "-qam", "feat-a keeps notes in a database")
      git(repo.dir, "checkout", "-q", "main")
      git(repo.dir, "push", "-q", "origin", "main", ...branches)
      elsewhere = join(net.base, "elsewhere")
      mkdirSync(elsewhere, { recursive: true })
      await formCluster(net, berth)
    }, 120_000)
    afterAll(() => {
      // every database this cluster's machines made on the shared server, whatever a failed test left: by owner mark
      if (net !== undefined) {
        const id = execFileSync("psql", [net.url, "-qAtc", "SELECT value FROM berth_meta WHERE key = 'id'"], {
          encoding: "utf8"
        }).trim()
        dropMarked([clusterOwner(id), ...net.hosts.map((h) => ownerOf(h.home))])
      }
      net?.cleanup()
      repo?.cleanup()
    })

    it("refuses a branch that is not on origin, with the push to make", async () => {
      repo.git("branch", "not-pushed")
      const r = await berth(host(1), ["up", "not-pushed", "--anywhere"], 60_000)
      expect(r.code).toBe(1)
      expect(r.stderr).toContain("is not on origin")
      expect(r.stderr).toContain("git push -u origin not-pushed")
      const tagOf = (out: { stdout: string; stderr: string }) =>
        (JSON.parse(out.stdout || out.stderr) as { error: { tag: string } }).error.tag
      expect(tagOf(await berth(host(1), ["up", "not-pushed", "--anywhere", "--json"], 60_000))).toBe("NotOnOrigin")
      // a world this machine has as its own stays its own
      const kept = await berth(host(1), ["up", "kept", "--no-wait"], 60_000)
      expect(kept.code, kept.stderr).toBe(0)
      const again = await berth(host(1), ["up", "kept", "--anywhere", "--json"], 60_000)
      expect([again.code, tagOf(again)]).toEqual([1, "WorldKeptHere"])
      expect((await berth(host(1), ["remove", "kept", "--force"], 60_000)).code).toBe(0)
    }, 120_000)

    it("runs a pushed branch on some machine, listed and served from every machine", async () => {
      for (const name of ["feat-a", "feat-b"]) {
        const r = await berth(host(1), ["up", name, "--anywhere", "--json"], 90_000)
        expect(r.code, r.stderr).toBe(0)
        const w = (JSON.parse(r.stdout) as { world: StatusWorld }).world
        expect(w.state).toBe("running")
        expect(w.machine).toMatch(/^h[123]$/)
      }
      for (const h of net.hosts) {
        const ws = await eventually(
          () => statusOf(h),
          (ws) => ["feat-a", "feat-b"].every((n) => ws.some((w) => w.name === n && w.state === "running"))
        )
        for (const n of ["feat-a", "feat-b"]) expect(ws.find((w) => w.name === n)?.placement).toBe("anywhere")
        for (const n of ["feat-a", "feat-b"]) {
          const r = await eventually(
            async () => viaProxy(h, `api.${n}.shop.localhost`),
            (r) => r.status === 200
          )
          expect(r.status, r.body).toBe(200)
          expect((JSON.parse(r.body) as { world: string }).world).toBe(n)
        }
      }
      // a second up of a running world is the same world: nothing restarts
      const { machine, owner, pid } = await placed("feat-a")
      const again = await berth(host(1), ["up", "feat-a", "--json"], 60_000)
      expect(again.code, again.stderr).toBe(0)
      expect((JSON.parse(again.stdout) as { world: StatusWorld }).world.machine).toBe(machine)
      expect(await pidOn(owner, "feat-a")).toBe(pid)
    })

    it("spreads ten worlds that run anywhere over the machines, each served through every machine's proxy", async () => {
      for (const name of EXTRA) {
        const r = await berth(host(1), ["up", name, "--anywhere", "--no-wait", "--json"], 60_000)
        expect(r.code, r.stderr).toBe(0)
      }
      const ten = ["feat-a", "feat-b", ...EXTRA]
      const ws = await eventually(
        () => statusOf(host(1)),
        (ws) => ten.every((n) => ws.some((w) => w.name === n && w.state === "running")),
        90_000
      )
      const per = net.hosts.map((h) => ten.filter((n) => (ws.find((w) => w.name === n)?.machine ?? "h1") === h.name))
      // the least busy machine takes the next one (a burst counts what was just placed): 4, 3 and 3 as a rule; a
      // heartbeat that catches a world admitted before it is marked may count it twice for a second
      const counts = per.map((p) => p.length)
      expect(Math.max(...counts) - Math.min(...counts), JSON.stringify(per)).toBeLessThanOrEqual(2)
      expect(Math.min(...counts), JSON.stringify(per)).toBeGreaterThanOrEqual(2)
      for (const h of net.hosts) {
        const answers = await eventually(
          async () =>
            viaProxyAll(
              h,
              ten.map((n) => `api.${n}.shop.localhost`)
            ),
          (rs) => rs.every((r) => r.status === 200)
        )
        for (const r of answers) expect(r, h.name).toEqual({ name: r.name, status: 200, world: r.name.split(".")[1] })
      }
      // back to the two worlds the rest of this file uses
      for (const name of EXTRA) {
        const r = await berth(host(1), ["remove", name, "--force"], 60_000)
        expect(r.code, r.stderr).toBe(0)
      }
      await eventually(
        () => statusOf(host(1)),
        (ws) => !ws.some((w) => EXTRA.includes(w.name))
      )
    }, 180_000)

    it("moves a world whose machine's daemon is killed: its copy there stops before the world starts elsewhere, and its data moves with it", async () => {
      const { machine, owner, pid } = await placed("feat-a")
      const url = (body: string) => (JSON.parse(body) as { env: Record<string, string> }).env.DATABASE_URL ?? ""
      const before = url(viaProxy(owner, "api.feat-a.shop.localhost").body)
      expect(before).toMatch(/^postgres:/)
      inDatabase(before, `INSERT INTO notes VALUES ('written on ${machine}')`)
      // watched from a machine that stays up: a command on the killed one would start its daemon again
      const observer = net.hosts.find((h) => h.name !== machine) as Host
      const sampler = sampleCopies(
        "feat-a",
        net.hosts.map((h) => h.home)
      )
      const killedAt = Date.now()
      process.kill(daemonPid(owner), "SIGKILL")
      // the watchdog beside the dead daemon stops its copy once the daemon's hold has run out
      const stoppedAt = await endedAt(pid, 30_000)
      const moved = await placed("feat-a", machine, 45_000, observer)
      expect(moved.machine).not.toBe(machine)
      expect(startedAt(moved.pid)).toBeGreaterThan(stoppedAt)
      // bounded (the lock expiry is 6 s; bench/cluster.mjs measures the time): generous for a loaded test machine
      expect(Date.now() - killedAt).toBeLessThan(30_000)
      const served = await eventually(
        async () => viaProxy(observer, "api.feat-a.shop.localhost"),
        (r) => r.status === 200 && (JSON.parse(r.body) as { world: string }).world === "feat-a"
      )
      expect(served.status).toBe(200)
      // the same database, with what was written in it before the move (not a fresh copy of the golden)
      const after = url(served.body)
      expect(databaseOf(after)).toBe(databaseOf(before))
      expect(inDatabase(after, "SELECT body FROM notes")).toBe(`written on ${machine}`)
      // the machine comes back (any command starts its daemon): one copy, wherever the cluster has it now
      const back = await berth(owner, ["cluster", "status", "--json"])
      expect(back.code, back.stderr).toBe(0)
      await steady("feat-a")
      expect(sampler.stop(), "copies of feat-a that ran at once").toBe(1)
    }, 120_000)

    it("fences a frozen machine: its copy stops before the world starts elsewhere, and nothing starts twice when it thaws", async () => {
      const { machine, owner, pid } = await placed("feat-a")
      const observer = net.hosts.find((h) => h.name !== machine) as Host
      const daemon = daemonPid(owner)
      const sampler = sampleCopies(
        "feat-a",
        net.hosts.map((h) => h.home)
      )
      process.kill(daemon, "SIGSTOP")
      try {
        const stoppedAt = await endedAt(pid, 30_000)
        const moved = await placed("feat-a", machine, 45_000, observer)
        expect(startedAt(moved.pid)).toBeGreaterThan(stoppedAt)
      } finally {
        process.kill(daemon, "SIGCONT")
      }
      // thawed, the daemon finds its hold gone: it starts nothing of the world again (it may take it back later,
      // as a machine that joins does, but only once the other copy has stopped)
      await new Promise((r) => setTimeout(r, 4_000))
      await steady("feat-a")
      expect(isAlive(daemon), "the thawed daemon lives on").toBe(true)
      expect(sampler.stop(), "copies of feat-a that ran at once").toBe(1)
      const log = readFileSync(join(owner.home, "daemon.log"), "utf8")
      expect(log).toContain("berth fence: stopped the processes of worlds")
    }, 150_000)

    it("fences a machine cut off from the network: its copy stops before the world starts elsewhere", async () => {
      const { machine, owner, pid } = await placed("feat-a")
      const observer = net.hosts.find((h) => h.name !== machine) as Host
      const sampler = sampleCopies(
        "feat-a",
        net.hosts.map((h) => h.home)
      )
      // its link down: no other machine, no client and no database reaches it, nor it them
      execFileSync("ip", ["link", "set", owner.link, "down"])
      try {
        const stoppedAt = await endedAt(pid, 30_000)
        const moved = await placed("feat-a", machine, 45_000, observer)
        expect(startedAt(moved.pid)).toBeGreaterThan(stoppedAt)
      } finally {
        execFileSync("ip", ["link", "set", owner.link, "up"])
      }
      // back on the network, it runs no second copy
      await new Promise((r) => setTimeout(r, 4_000))
      await steady("feat-a")
      expect(sampler.stop(), "copies of feat-a that ran at once").toBe(1)
    }, 150_000)

    it("hands a leaving machine's worlds over to the others", async () => {
      const { machine, owner, pid } = await placed("feat-b")
      const left = await berth(owner, ["cluster", "leave"], 60_000)
      expect(left.code, left.stderr).toBe(0)
      // stopped there, running elsewhere
      expect(isAlive(pid)).toBe(false)
      // watched from a machine that stays in the cluster: the one that left sees only its own worlds
      const observer = net.hosts.find((h) => h.name !== machine) as Host
      const moved = await runner("feat-b", machine, 30_000, observer)
      expect(moved.machine).not.toBe(machine)
      const back = await berth(owner, ["cluster", "join", net.url, "--name", machine, "--address", owner.address])
      expect(back.code, back.stderr).toBe(0)
      // a machine that joins takes some shards over: wait until both worlds stay where they are
      for (const name of ["feat-a", "feat-b"]) await steady(name)
    }, 180_000)

    it("stops a world that runs anywhere on daemon stop (rather than leave it running) and runs it elsewhere", async () => {
      const { machine, owner, pid } = await placed("feat-a")
      const observer = net.hosts.find((h) => h.name !== machine) as Host
      const stop = await berth(owner, ["daemon", "stop"], 60_000)
      expect(stop.code, stop.stderr).toBe(0)
      // unlike a pinned world's processes, which a stopping daemon leaves running for the next one
      expect(
        await eventually(
          async () => isAlive(pid),
          (alive) => !alive
        )
      ).toBe(false)
      const moved = await runner("feat-a", machine, 30_000, observer)
      expect(moved.machine).not.toBe(machine)
      // the machine comes back (any command starts its daemon); one copy runs
      expect((await berth(owner, ["cluster", "status", "--json"])).code).toBe(0)
      await runner("feat-a", undefined, 30_000, observer)
    }, 120_000)

    it("places a world that runs anywhere on a machine with room, never on one whose gate is full, and moves one that waits to a machine that gains room", async () => {
      // h1 and h2 full: one world at a time, and each has one of its own (running, or waiting in line behind the
      // worlds that run anywhere there already)
      const clone = join(net.base, "h2-shop")
      git(net.base, "clone", "-q", "-b", "main", join(net.base, "origin.git"), clone)
      const full: ReadonlyArray<readonly [Host, string]> = [
        [host(1), repo.dir],
        [host(2), clone]
      ]
      try {
        for (const [h, cwd] of full) {
          const reserve = await h.run(cwd, ["reserve", "--max-parallel", "1"])
          expect(reserve.code, reserve.stderr).toBe(0)
          const up = await h.run(cwd, ["up", "--no-wait", "--json"], 60_000)
          expect(up.code, up.stderr).toBe(0)
        }
        // the placer reads each machine's room from its heartbeat (every second)
        await new Promise((r) => setTimeout(r, 2_500))
        const r = await berth(host(1), ["up", "feat-c", "--anywhere", "--json"], 90_000)
        expect(r.code, r.stderr).toBe(0)
        const w = (JSON.parse(r.stdout) as { world: StatusWorld }).world
        expect(w.state).toBe("running")
        expect(w.machine).toBe("h3")

        // every machine full: the next one waits in a line; when a machine gains room, it moves there and runs
        const h3full = await host(3).run(elsewhere, ["reserve", "--max-parallel", "1"])
        expect(h3full.code, h3full.stderr).toBe(0)
        await new Promise((r) => setTimeout(r, 2_500))
        const waits = await berth(host(1), ["up", "feat-d", "--anywhere", "--no-wait", "--json"], 60_000)
        expect(waits.code, waits.stderr).toBe(0)
        const queued = (
          await eventually(
            () => statusOf(host(1)),
            (ws) => ws.some((x) => x.name === "feat-d" && x.state === "queued")
          )
        ).find((x) => x.name === "feat-d")
        expect(queued?.state).toBe("queued")
        // room on another machine than the one it waits on
        const waitsOn = queued?.machine ?? "h1"
        const [roomy, cwd] = waitsOn === "h2" ? [host(1), repo.dir] : [host(2), clone]
        const freed = await roomy.run(cwd, ["reserve", "--max-parallel", "20"])
        expect(freed.code, freed.stderr).toBe(0)
        const moved = await runner("feat-d", undefined, 45_000)
        expect(moved.machine).toBe(roomy.name)
      } finally {
        for (const [h, cwd] of [...full, [host(3), elsewhere] as const]) {
          await h.run(cwd, ["reserve", "--max-parallel", "20"])
          if (h !== host(3)) await h.run(cwd, ["down", "--json"], 60_000)
        }
      }
      for (const name of ["feat-c", "feat-d"]) {
        const removed = await berth(host(1), ["remove", name, "--force"], 60_000)
        expect(removed.code, removed.stderr).toBe(0)
      }
    }, 180_000)

    it("acts from the web dashboard on other machines' worlds: a pinned one there, one that runs anywhere through the cluster", async () => {
      // a world of h2's own, acted on from h1's dashboard
      const clone = join(net.base, "h2-shop")
      const up = await host(2).run(clone, ["up", "--json"], 60_000)
      expect(up.code, up.stderr).toBe(0)
      const seen = await eventually(
        () => statusOf(host(1)),
        (ws) => ws.some((w) => w.name === "main" && w.machine === "h2" && w.state === "running")
      )
      const theirs = seen.find((w) => w.name === "main" && w.machine === "h2") as StatusWorld
      const mainId = remoteWorldId("h2", theirs.project, theirs.slug)
      const down = dashboardAction(host(1), mainId, "down")
      expect(down.status, down.body).toBe(200)
      const mains = await eventually(
        async () => (await statusOf(host(2))).filter((w) => w.name === "main" && w.machine === undefined),
        (ws) => ws[0]?.state === "stopped"
      )
      expect(mains[0]?.state).toBe("stopped")
      // up needs the world's own environment, which its machine keeps: refused with where to act
      const refused = dashboardAction(host(1), mainId, "up")
      expect(refused.status).toBe(422)
      expect(refused.body).toContain("runs on machine h2")

      // a world that runs anywhere: down sticks (the placer does not start it again), up brings it back
      const { machine } = await placed("feat-a")
      const viewer = net.hosts.find((h) => h.name !== machine) as Host
      const listed = (await statusOf(viewer)).find((w) => w.name === "feat-a") as StatusWorld
      const id = remoteWorldId(machine, listed.project, listed.slug)
      const stop = dashboardAction(viewer, id, "down")
      expect(stop.status, stop.body).toBe(200)
      await eventually(
        () => statusOf(viewer),
        (ws) => ws.some((w) => w.name === "feat-a" && w.state === "stopped")
      )
      await new Promise((r) => setTimeout(r, 3_000))
      expect((await statusOf(viewer)).find((w) => w.name === "feat-a")?.state).toBe("stopped")
      // its stopped copy is still listed where it ran, and the dashboard acts on it there
      const again = dashboardAction(viewer, id, "up")
      expect(again.status, again.body).toBe(200)
      await runner("feat-a", undefined, 45_000)
    }, 150_000)

    it("takes a world down and removes it from any machine", async () => {
      const { owner, pid } = await placed("feat-a")
      const body = viaProxy(owner, "api.feat-a.shop.localhost").body
      const database = databaseOf((JSON.parse(body) as { env: Record<string, string> }).env.DATABASE_URL ?? "")
      expect(databaseExists(database)).toBe(true)
      const down = await berth(host(1), ["down", "feat-a", "--json"], 60_000)
      expect(down.code, down.stderr).toBe(0)
      expect(
        await eventually(
          async () => isAlive(pid),
          (alive) => !alive
        )
      ).toBe(false)
      // it stays down: the cluster's reconciler does not start it again
      await new Promise((r) => setTimeout(r, 5_000))
      const ws = await statusOf(host(1))
      expect(ws.find((w) => w.name === "feat-a")?.state).toBe("stopped")
      const removed = await berth(host(1), ["remove", "feat-a", "--force"], 60_000)
      expect(removed.code, removed.stderr).toBe(0)
      const gone = await eventually(
        () => statusOf(host(1)),
        (ws) => !ws.some((w) => w.name === "feat-a")
      )
      expect(gone.some((w) => w.name === "feat-a")).toBe(false)
      for (const h of net.hosts) {
        const ws = await eventually(
          () => statusOf(h),
          (ws) => !ws.some((w) => w.name === "feat-a")
        )
        expect(ws.some((w) => w.name === "feat-a")).toBe(false)
      }
      for (const h of net.hosts) {
        const left = await eventually(
          async () => existsSync(join(h.home, "anywhere", "shop.worktrees", "feat-a")),
          (there) => !there
        )
        expect(left, `${h.name} (owner ${owner.name}) keeps its clone`).toBe(false)
      }
      // its database goes with it, whichever machine made it
      expect(
        await eventually(
          async () => databaseExists(database),
          (there) => !there
        )
      ).toBe(false)
    })

    it("drops the database of a world removed while its machine was away, from another machine's gc", async () => {
      const up = await berth(host(1), ["up", "feat-a", "--anywhere", "--json"], 90_000)
      expect(up.code, up.stderr).toBe(0)
      // it runs on a first machine, then moves to a second one when the first one's daemon dies: both have used the
      // world's database server since
      const first = await steady("feat-a")
      const observer = net.hosts.find((h) => h.name !== first.machine) as Host
      process.kill(daemonPid(first.owner), "SIGKILL")
      await endedAt(first.pid, 30_000)
      const moved = await placed("feat-a", first.machine, 45_000, observer)
      const { machine, owner, pid } = moved
      const body = viaProxy(owner, "api.feat-a.shop.localhost").body
      const database = databaseOf((JSON.parse(body) as { env: Record<string, string> }).env.DATABASE_URL ?? "")
      expect(databaseExists(database)).toBe(true)
      // the first machine comes back (any command starts its daemon) and lets go of its stopped copy
      expect((await berth(first.owner, ["status", "--json"])).code).toBe(0)
      await steady("feat-a")
      const viewer = net.hosts.find((h) => h.name !== machine) as Host
      const listed = (await statusOf(viewer)).find((w) => w.name === "feat-a") as StatusWorld
      // the second machine goes away (and stays away: no command runs there again) ...
      process.kill(daemonPid(owner), "SIGKILL")
      await endedAt(pid, 30_000)
      // ... and the world is removed meanwhile, from a machine that stays (its dashboard: no checkout needed)
      const removed = dashboardAction(viewer, remoteWorldId(machine, listed.project, listed.slug), "remove")
      expect(removed.status, removed.body).toBe(200)
      // gone from every listing, though its machine, silent, never said so
      for (const h of net.hosts.filter((x) => x.name !== machine)) {
        const ws = await eventually(
          () => statusOf(h),
          (ws) => !ws.some((w) => w.name === "feat-a"),
          30_000
        )
        expect(ws.map((w) => `${w.name}@${w.machine ?? h.name}: ${w.state}`)).not.toContainEqual(
          expect.stringMatching(/^feat-a@/)
        )
      }
      // the machine that made the database is not there to drop it: a member that has used its server does
      const others = net.hosts.filter((h) => h.name !== machine)
      const swept: Array<string> = []
      const dropped = await eventually(
        async () => {
          for (const h of others) {
            const gc = await berth(h, ["gc", "--json"], 60_000)
            expect(gc.code, gc.stderr).toBe(0)
            const entries = (JSON.parse(gc.stdout) as { entries: Array<{ reason: string; name: string }> }).entries
            for (const e of entries) swept.push(`${h.name}: ${e.reason} ${e.name}`)
          }
          return databaseExists(database)
        },
        (there) => !there,
        30_000
      )
      expect(dropped).toBe(false)
      expect(
        swept.some((line) => line.endsWith(`left by a removed world ${database}`)),
        swept.join("\n")
      ).toBe(true)
    }, 150_000)
  }
)
