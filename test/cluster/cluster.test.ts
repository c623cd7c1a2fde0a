/**
 * berth across machines, end to end: three test hosts (network namespaces, each with its own berth daemon and
 * BERTH_HOME) form one cluster on a fresh PostgreSQL database, each runs a world of the same project, and every host
 * sees and commands every world. Then one host's daemon dies (`kill -9`) and comes back, and one leaves.
 */
import { execFileSync, spawn } from "node:child_process"
import { readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { berthBin, eventually, isAlive, type Sandbox, sandbox, serverScript } from "../e2e/harness.js"
import { type Host, hostsUnavailable, shop, type TestNetwork, testNetwork } from "./hosts.js"

const unavailable = hostsUnavailable()
const PROXY_PORT = 17355

/** A request to a world's URL through the proxy of `host`, as a browser on that machine would make it. */
const viaProxy = (host: Host, hostname: string, accept = "*/*") => {
  const script = `require("node:http").get({ host: "127.0.0.1", port: ${PROXY_PORT}, path: "/", headers: { host: "${hostname}:${PROXY_PORT}", accept: "${accept}" } }, (r) => { let b = ""; r.on("data", (d) => (b += d)); r.on("end", () => console.log(JSON.stringify({ status: r.statusCode, retryAfter: r.headers["retry-after"] ?? null, body: b }))) }).on("error", (e) => console.log(JSON.stringify({ status: 0, body: e.message })))`
  return JSON.parse(host.exec("node", ["-e", script])) as { status: number; retryAfter: string | null; body: string }
}

interface ClusterJson {
  readonly state: string
  readonly name: string | null
  readonly slot: number | null
  readonly machines: ReadonlyArray<{
    readonly name: string
    readonly state: string
    readonly worlds: number
    readonly self: boolean
    readonly address: string
  }>
}

interface StatusWorld {
  readonly name: string
  readonly state: string
  readonly machine?: string
  readonly services: ReadonlyArray<{ readonly name: string; readonly pid: number | null; readonly state: string }>
}

describe.skipIf(unavailable !== undefined)(
  `a cluster of three machines${unavailable === undefined ? "" : ` (skipped: ${unavailable})`}`,
  () => {
    let net: TestNetwork
    const repos: Array<Sandbox> = []
    const repoOf = (host: Host) => repos[Number(host.name.slice(1)) - 1] as Sandbox
    const berth = (host: Host, args: ReadonlyArray<string>, timeoutMs?: number) =>
      host.run(repoOf(host).dir, args, timeoutMs)
    const clusterOf = async (host: Host): Promise<ClusterJson> => {
      const r = await berth(host, ["cluster", "status", "--json"])
      expect(r.code, r.stderr).toBe(0)
      return JSON.parse(r.stdout) as ClusterJson
    }
    const statusOf = async (host: Host): Promise<ReadonlyArray<StatusWorld>> => {
      const r = await berth(host, ["status", "--json"])
      expect(r.code, r.stderr).toBe(0)
      return (JSON.parse(r.stdout) as { worlds: ReadonlyArray<StatusWorld> }).worlds
    }
    const host = (i: number) => net.hosts[i - 1] as Host

    beforeAll(() => {
      // every host's proxy on one port: each has a loopback of its own
      net = testNetwork(3, { BERTH_PROXY_PORT: String(PROXY_PORT) })
      // the test server, printing a line per request (what a followed log shows)
      const logging = serverScript.replace(
        "createServer((req, res) => {",
        "createServer((req, res) => {\n  console.log(req.method, req.url)"
      )
      for (let i = 0; i < 3; i++) repos.push(sandbox({ "server.mjs": logging, "berth.toml": shop }, "shop"))
    })
    afterAll(() => {
      net?.cleanup()
      for (const r of repos) r.cleanup()
    })

    it("forms from one init and two joins, every machine in its own slot", async () => {
      const init = await berth(host(1), [
        "cluster",
        "init",
        net.url,
        "--name",
        "h1",
        "--address",
        host(1).address,
        "--json"
      ])
      expect(init.code, init.stderr).toBe(0)
      expect((JSON.parse(init.stdout) as ClusterJson).slot).toBe(1)
      for (const i of [2, 3]) {
        const r = await berth(host(i), ["cluster", "join", net.url, "--name", `h${i}`, "--address", host(i).address])
        expect(r.code, r.stderr).toBe(0)
        expect(r.stdout).toContain(`this machine: h${i} (slot ${i})`)
      }
      // every machine sees all three, up
      for (const h of net.hosts) {
        const c = await eventually(
          () => clusterOf(h),
          (c) => c.machines.length === 3 && c.machines.every((m) => m.state === "up")
        )
        expect(c.machines.map((m) => m.name)).toEqual(["h1", "h2", "h3"])
        expect(c.machines.find((m) => m.self)?.name).toBe(h.name)
      }
      // the membership (its database address may carry a password) is kept in the owner-only state database
      expect(statSync(join(host(1).home, "state.db")).mode & 0o777).toBe(0o600)
    })

    it("refuses a second machine under a name that is taken, and a database with no cluster", async () => {
      const taken = await berth(host(3), ["cluster", "leave"])
      expect(taken.code, taken.stderr).toBe(0)
      const again = await berth(host(3), ["cluster", "join", net.url, "--name", "h2", "--address", host(3).address])
      expect(again.code).toBe(1)
      expect(again.stderr).toContain("another machine is already in the cluster as h2")
      expect(again.stderr).toContain("hint:")
      const nowhere = await berth(host(3), [
        "cluster",
        "join",
        net.url.replace(/berth_cluster_test_\w+/, "postgres"),
        "--name",
        "h3",
        "--address",
        host(3).address
      ])
      expect(nowhere.code).toBe(1)
      expect(nowhere.stderr).toContain("holds no berth cluster")
      expect(nowhere.stderr).toContain("berth cluster init")
      const back = await berth(host(3), ["cluster", "join", net.url, "--name", "h3", "--address", host(3).address])
      expect(back.code, back.stderr).toBe(0)
    })

    it("lists every machine's worlds on every machine, and runs a command on the machine that has the world", async () => {
      for (const i of [1, 2, 3]) {
        const r = await berth(host(i), ["up", `feature-${i}`, "--json"], 60_000)
        expect(r.code, r.stderr).toBe(0)
      }
      for (const h of net.hosts) {
        const worlds = await eventually(
          () => statusOf(h),
          (ws) =>
            ["feature-1", "feature-2", "feature-3"].every((n) => ws.some((w) => w.name === n && w.state === "running"))
        )
        for (const i of [1, 2, 3]) {
          const w = worlds.find((x) => x.name === `feature-${i}`)
          expect(w?.machine).toBe(h.name === `h${i}` ? undefined : `h${i}`)
        }
      }
      // every world's URL works from every machine: the proxy there forwards to the world's own machine, Host kept
      for (const h of net.hosts) {
        for (const i of [1, 2, 3]) {
          const r = await eventually(
            async () => viaProxy(h, `api.feature-${i}.shop.localhost`),
            (r) => r.status === 200
          )
          expect(r.status, r.body).toBe(200)
          expect((JSON.parse(r.body) as { world: string }).world).toBe(`feature-${i}`)
        }
      }
      const plain = await berth(host(1), ["status"])
      expect(plain.stdout).toMatch(/feature-2\s+running\s+on h2/)

      // every clone's main checkout is a world `main`: on each machine its name means that machine's own
      for (const h of net.hosts) {
        const r = await berth(h, ["up", "--json"], 60_000)
        expect(r.code, r.stderr).toBe(0)
      }
      for (const h of net.hosts) {
        await eventually(
          () => statusOf(host(1)),
          (ws) => ws.some((w) => w.name === "main" && (w.machine ?? "h1") === h.name)
        )
      }
      for (const h of net.hosts) {
        const r = viaProxy(h, "api.main.shop.localhost")
        expect(r.status, r.body).toBe(200)
        expect((JSON.parse(r.body) as { env: { BERTH_HOME: string } }).env.BERTH_HOME).toBe(h.home)
      }

      // from h1, down a world of h2: it stops on h2
      const pidBefore = (await statusOf(host(2))).find((w) => w.name === "feature-2")?.services[0]?.pid
      expect(pidBefore).toBeTypeOf("number")
      const down = await berth(host(1), ["down", "feature-2", "--json"], 60_000)
      expect(down.code, down.stderr).toBe(0)
      const onH2 = (await statusOf(host(2))).find((w) => w.name === "feature-2")
      expect(onH2?.state).toBe("stopped")
      expect(isAlive(pidBefore as number)).toBe(false)

      // and up again, from h3
      const up = await berth(host(3), ["up", "feature-2", "--json"], 60_000)
      expect(up.code, up.stderr).toBe(0)
      const world = (JSON.parse(up.stdout) as { world: StatusWorld }).world
      expect(world.machine).toBe("h2")
      expect(world.state).toBe("running")
      expect((await statusOf(host(2))).find((w) => w.name === "feature-2")?.state).toBe("running")
    })

    it("reads a world's environment and its logs from another machine, and follows them", async () => {
      const env = await berth(host(1), ["env", "feature-2", "--json"])
      expect(env.code, env.stderr).toBe(0)
      const reply = JSON.parse(env.stdout) as { world: string; vars: Record<string, string> }
      expect(reply.world).toBe("feature-2")
      // the port h2 leased for the world's api, which only h2 knows
      const onH2 = (await statusOf(host(2))).find((w) => w.name === "feature-2")
      const port = (onH2?.services[0] as { port?: number } | undefined)?.port as number
      expect(Object.values(reply.vars)).toContain(String(port))

      // the service prints a line per request; a follow started on h1 sees a request made on h2
      const follow = spawn("ip", ["netns", "exec", host(1).ns, berthBin, "logs", "feature-2", "-s", "api", "-f"], {
        cwd: repoOf(host(1)).dir,
        env: { ...process.env, BERTH_HOME: host(1).home, NO_COLOR: "1" },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let seen = ""
      follow.stdout.on("data", (d: Buffer) => {
        seen += d.toString()
      })
      try {
        await eventually(
          async () => {
            host(2).exec("node", ["-e", `fetch("http://127.0.0.1:${port}/followed").then((r) => r.text())`])
            return seen
          },
          (text) => text.includes("GET /followed"),
          20_000
        )
        expect(seen).toContain("GET /followed")
      } finally {
        follow.kill("SIGINT")
      }
      const tail = await berth(host(3), ["logs", "feature-2", "-s", "api"])
      expect(tail.code, tail.stderr).toBe(0)
      expect(tail.stdout).toContain("GET /followed")
    })

    it("shows a dead machine's worlds unreachable, refuses commands for them clearly, and takes the machine back", async () => {
      const pidfile = readFileSync(join(host(3).home, "daemon.pid"), "utf8").trim()
      const daemon = Number(pidfile.split(/\s+/)[0])
      const service = (await statusOf(host(3))).find((w) => w.name === "feature-3")?.services[0]?.pid as number
      process.kill(daemon, "SIGKILL")
      const seen = await eventually(
        () => statusOf(host(1)),
        (ws) => ws.find((w) => w.name === "feature-3")?.state === "unreachable",
        20_000
      )
      expect(seen.find((w) => w.name === "feature-3")?.machine).toBe("h3")
      const c = await clusterOf(host(1))
      expect(c.machines.find((m) => m.name === "h3")?.state).toBe("unreachable")
      // its URL answers from the other machines: not there now, try again soon
      const waiting = viaProxy(host(1), "api.feature-3.shop.localhost", "text/html")
      expect(waiting.status).toBe(503)
      expect(waiting.retryAfter).not.toBeNull()
      expect(waiting.body).toContain("h3")
      const refused = await berth(host(1), ["down", "feature-3"])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain("runs on machine h3, which was last heard from")
      // the world's own process never noticed
      expect(isAlive(service)).toBe(true)

      // the daemon comes back (any command starts it), rejoins on its own, and its world is running again
      const back = await berth(host(3), ["cluster", "status", "--json"])
      expect(back.code, back.stderr).toBe(0)
      const seenAgain = await eventually(
        () => statusOf(host(1)),
        (ws) => ws.find((w) => w.name === "feature-3")?.state === "running",
        20_000
      )
      expect(seenAgain.find((w) => w.name === "feature-3")?.machine).toBe("h3")
      expect(isAlive(service)).toBe(true)
      const served = await eventually(
        async () => viaProxy(host(1), "api.feature-3.shop.localhost"),
        (r) => r.status === 200
      )
      expect(served.status, served.body).toBe(200)
    })

    it("calls another machine's service through this machine's proxy with berth curl", async () => {
      const r = await berth(host(1), ["curl", "feature-2", "api", "/from-h1", "--json"])
      expect(r.code, r.stderr).toBe(0)
      const answer = JSON.parse(r.stdout) as { url: string; status: number; body: string }
      expect(answer.status).toBe(200)
      // the URL is this machine's: its own proxy's port, the world's host name
      expect(answer.url).toBe(`http://api.feature-2.shop.localhost:${PROXY_PORT}/from-h1`)
      expect((JSON.parse(answer.body) as { world: string }).world).toBe("feature-2")
    })

    it("takes a frozen machine (SIGSTOP) for unreachable and back once it runs again", async () => {
      const daemon = Number(
        readFileSync(join(host(3).home, "daemon.pid"), "utf8")
          .trim()
          .split(/\s+/)[0]
      )
      process.kill(daemon, "SIGSTOP")
      try {
        const seen = await eventually(
          () => statusOf(host(1)),
          (ws) => ws.find((w) => w.name === "feature-3")?.state === "unreachable",
          20_000
        )
        expect(seen.find((w) => w.name === "feature-3")?.state).toBe("unreachable")
        const r = viaProxy(host(1), "api.feature-3.shop.localhost")
        expect(r.status).toBe(503)
      } finally {
        process.kill(daemon, "SIGCONT")
      }
      const back = await eventually(
        () => statusOf(host(1)),
        (ws) => ws.find((w) => w.name === "feature-3")?.state === "running",
        20_000
      )
      expect(back.find((w) => w.name === "feature-3")?.state).toBe("running")
    })

    it("answers for a machine cut off the network at once, and serves it again once its link is back", async () => {
      execFileSync("ip", ["link", "set", host(2).link, "down"])
      try {
        // its URL: 503 within the proxy's 2 s connect limit, never a hang
        const started = Date.now()
        const r = viaProxy(host(1), "api.feature-2.shop.localhost")
        expect(r.status).toBe(503)
        expect(Date.now() - started).toBeLessThan(15_000)
        // a command for its world is refused with the machine named
        const refused = await berth(host(1), ["down", "feature-2"], 60_000)
        expect(refused.code).toBe(1)
        expect(refused.stderr).toContain("runs on machine h2")
      } finally {
        execFileSync("ip", ["link", "set", host(2).link, "up"])
      }
      const served = await eventually(
        async () => viaProxy(host(1), "api.feature-2.shop.localhost"),
        (r) => r.status === 200
      )
      expect(served.status).toBe(200)
      // the world never stopped on its own machine
      expect((await statusOf(host(2))).find((w) => w.name === "feature-2")?.state).toBe("running")
    })

    it("lets a machine leave: the others stop listing it, its worlds keep running where they are", async () => {
      const before = (await statusOf(host(2))).find((w) => w.name === "feature-2")?.services[0]?.pid as number
      const left = await berth(host(2), ["cluster", "leave", "--json"])
      expect(left.code, left.stderr).toBe(0)
      expect((JSON.parse(left.stdout) as ClusterJson).state).toBe("solo")
      const c = await eventually(
        () => clusterOf(host(1)),
        (c) => !c.machines.some((m) => m.name === "h2")
      )
      expect(c.machines.map((m) => m.name)).toEqual(["h1", "h3"])
      const worlds = await eventually(
        () => statusOf(host(1)),
        (ws) => !ws.some((w) => w.name === "feature-2")
      )
      expect(worlds.some((w) => w.name === "feature-2")).toBe(false)
      expect(isAlive(before)).toBe(true)
      expect((await statusOf(host(2))).find((w) => w.name === "feature-2")?.state).toBe("running")
    })
  }
)
