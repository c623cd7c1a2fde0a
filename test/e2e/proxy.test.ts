import { execFileSync } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync } from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { createCaCertificate } from "../../src/services/proxy/ca.js"
import { FALLBACK_HTTP_PORT, FALLBACK_HTTPS_PORT } from "../../src/services/proxy/Router.js"
import { portBlock, type Sandbox, sandbox, sandboxes, varsFrom } from "./harness.js"

const boxes = sandboxes()
const cleanups: Array<Sandbox> = []
afterAll(() => {
  boxes.cleanup()
  for (const box of cleanups) box.cleanup()
})

/** `api` answers who it is; `web` asks its world's api through `${api.url}` (a route, resolved by berth's hook). */
const app = `
import http from "node:http"
const port = Number(process.env.PORT)
const who = { service: process.env.BERTH_SERVICE, world: process.env.BERTH_WORLD }
http.createServer(async (req, res) => {
  if (process.env.BERTH_SERVICE === "web" && req.url === "/via-api") {
    try {
      const answer = await (await fetch(process.env.API_URL + "/who")).json()
      res.setHeader("content-type", "application/json")
      return res.end(JSON.stringify({ ...who, api: answer, apiUrl: process.env.API_URL }))
    } catch (e) {
      res.statusCode = 500
      return res.end(String(e && e.cause ? e.cause : e))
    }
  }
  let body = ""
  for await (const chunk of req) body += chunk
  res.setHeader("content-type", "application/json")
  res.end(JSON.stringify({ ...who, method: req.method, body, tag: req.headers["x-tag"] ?? null, host: req.headers.host, forwardedHost: req.headers["x-forwarded-host"],
    forwardedProto: req.headers["x-forwarded-proto"], extraCa: process.env.NODE_EXTRA_CA_CERTS ?? null }))
}).listen(port, "127.0.0.1")
`

const config = (https = false) => `
[project]
name = "shop"
https = ${https}

[services.api]
cmd = "node app.mjs"
url = "api"
health = { http = "/" }

[services.web]
cmd = "node app.mjs"
url = "web"
depends_on = ["api"]
health = { http = "/" }
env = { API_URL = "\${api.url}" }
`

interface Settings {
  readonly proxy: {
    readonly http: { readonly port: number | null }
    readonly https: { readonly port: number | null }
    readonly caPath: string
  }
}

const settingsOf = async (box: Sandbox) => JSON.parse((await box.run(["port", "--json"])).stdout) as Settings

const up = async (box: Sandbox, name: string) => {
  const r = await box.run(["up", name, "--json"], { timeoutMs: 60_000 })
  expect(r.code, r.stderr).toBe(0)
}

/** A plain request to the proxy on loopback with a Host header: no name resolution needed. */
const viaProxy = (port: number, host: string, path = "/", accept = "*/*") =>
  new Promise<{ status: number; body: string; type: string }>((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path, headers: { host, accept } }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => {
        body += c
      })
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, type: String(res.headers["content-type"]) }))
    })
    req.on("error", reject)
    req.end()
  })

/** Holds `port` on 127.0.0.1 as another program would. */
const hold = (port: number) =>
  new Promise<net.Server>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve(server))
  })

const isFree = (port: number) =>
  hold(port).then(
    (server) => new Promise<boolean>((resolve) => server.close(() => resolve(true))),
    () => false
  )

describe("berth trust", () => {
  it("plans the system store and each NSS database it finds, without running anything on --dry-run", async () => {
    const box = await boxes.project({ "berth.toml": config() })
    const home = join(box.home, "user")
    const nssdb = join(home, ".pki", "nssdb")
    mkdirSync(nssdb, { recursive: true })
    execFileSync("certutil", ["-N", "--empty-password", "-d", `sql:${nssdb}`])
    const r = await box.run(["trust", "--dry-run", "--json"], { env: { HOME: home } })
    expect(r.code, r.stderr).toBe(0)
    const { ca, plan } = JSON.parse(r.stdout) as {
      ca: { certPath: string; commonName: string }
      plan: { action: string; steps: Array<{ store: string; argv: Array<string> }> }
    }
    expect(ca.certPath).toBe(join(box.home, "ca", "ca.crt"))
    expect(ca.commonName).toMatch(/^berth local CA/)
    expect(plan.action).toBe("install")
    const nss = plan.steps.find((s) => s.argv[0] === "certutil")
    expect(nss?.argv).toEqual(expect.arrayContaining(["-A", `sql:${nssdb}`, "-i", ca.certPath]))
    // nothing was added
    expect(execFileSync("certutil", ["-L", "-d", `sql:${nssdb}`], { encoding: "utf8" })).not.toMatch(/berth/)
    const text = await box.run(["trust", "--remove", "--dry-run"], { env: { HOME: home } })
    expect(text.stdout).toMatch(/certutil -D/)
  })
})

describe("berth's CA", () => {
  it("is made again with name constraints when the daemon starts and finds one without", async () => {
    const box = sandbox({ "berth.toml": config() })
    cleanups.push(box)
    const dir = join(box.home, "ca")
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    // a CA as berth made them before it constrained them
    execFileSync("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      join(dir, "ca.key"),
      "-out",
      join(dir, "ca.crt"),
      "-days",
      "3650",
      "-subj",
      "/O=berth/CN=berth local CA (old)",
      "-addext",
      "basicConstraints=critical,CA:TRUE,pathlen:0"
    ])
    const old = readFileSync(join(dir, "ca.crt"), "utf8")
    // the harness starts the daemon with HTTPS off: the old key still goes
    const r = await box.run(["daemon", "status", "--json"])
    expect(r.code, r.stderr).toBe(0)
    expect((await box.run(["port"])).code).toBe(0)
    const now = readFileSync(join(dir, "ca.crt"), "utf8")
    expect(now).not.toBe(old)
    const text = execFileSync("openssl", ["x509", "-text", "-noout", "-in", join(dir, "ca.crt")], { encoding: "utf8" })
    expect(text).toMatch(/X509v3 Name Constraints: critical\s+Permitted:\s+DNS:localhost/)
    const retired = readdirSync(dir).filter((f) => f.startsWith("retired-"))
    expect(retired).toHaveLength(1)
    expect(readFileSync(join(dir, retired[0]!), "utf8")).toBe(old)
    const log = (JSON.parse(r.stdout) as { log: string }).log
    expect(readFileSync(log, "utf8")).toMatch(/berth's CA was made again[^\n]*berth trust/)
  })
})

describe("routes through the proxy", () => {
  it("routes two worlds side by side, each to its own services, and follows them as they change", async () => {
    const box = await boxes.project({ "berth.toml": config(), "app.mjs": app }, { proxy: true })
    await up(box, "one")
    await up(box, "two")
    const { proxy } = await settingsOf(box)
    const port = proxy.http.port!
    expect(port).toBe(Number(box.env.BERTH_PROXY_PORT))
    // ${api.url} is the route, with the proxy's port
    const env = varsFrom((await box.run(["env", "one", "--json"])).stdout)
    expect(env.API_URL).toBe(`http://api.one.shop.localhost:${port}`)
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: Array<{ name: string; services: Array<{ name: string; url: string | null }> }>
    }
    expect(status.worlds.find((w) => w.name === "two")?.services.find((s) => s.name === "web")?.url).toBe(
      `http://web.two.shop.localhost:${port}`
    )
    for (const world of ["one", "two"]) {
      const api = await viaProxy(port, `api.${world}.shop.localhost:${port}`)
      expect(JSON.parse(api.body)).toMatchObject({
        service: "api",
        world,
        forwardedHost: `api.${world}.shop.localhost:${port}`,
        forwardedProto: "http"
      })
      // web reaches its own world's api through the route, server-side
      const web = await box.run(["curl", world, "web", "/via-api"])
      expect(web.code, web.stderr).toBe(0)
      expect(JSON.parse(web.stdout)).toMatchObject({ service: "web", world, api: { service: "api", world } })
    }
    // an unknown host: a 404 listing the project's worlds (text for curl, HTML for browsers)
    const unknown = await viaProxy(port, `nope.one.shop.localhost:${port}`)
    expect(unknown.status).toBe(404)
    expect(unknown.body).toMatch(/web\.one\.shop\.localhost/)
    expect(unknown.body).toMatch(/api\.two\.shop\.localhost/)
    const html = await viaProxy(port, `nope.one.shop.localhost:${port}`, "/", "text/html")
    expect(html.type).toMatch(/text\/html/)
    // a stopped world says so
    expect((await box.run(["down", "two"])).code).toBe(0)
    const stopped = await viaProxy(port, `api.two.shop.localhost:${port}`)
    expect(stopped.status).toBe(502)
    expect(stopped.body).toMatch(/stopped/)
    expect((await viaProxy(port, `api.one.shop.localhost:${port}`)).status).toBe(200)
    // `berth curl -f` fails on an error status; -i prints the head
    const failing = await box.run(["curl", "two", "api", "-f"])
    expect(failing.code).toBe(1)
    const head = await box.run(["curl", "one", "api", "-i"])
    expect(head.stdout).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    // a method, a body (inline or @file) and headers go through
    box.write("payload.json", '{"from":"a file"}')
    const posted = await box.run([
      "curl",
      "one",
      "api",
      "/orders",
      "-X",
      "PUT",
      "-d",
      "@payload.json",
      "-H",
      "X-Tag: t1"
    ])
    expect(JSON.parse(posted.stdout)).toMatchObject({ method: "PUT", body: '{"from":"a file"}', tag: "t1" })
    const inline = await box.run(["curl", "one", "api", "-d", "x=1"])
    expect(JSON.parse(inline.stdout)).toMatchObject({ method: "POST", body: "x=1" })
    const asJson = JSON.parse((await box.run(["curl", "one", "api", "--json"])).stdout) as {
      status: number
      headers: Record<string, string>
      body: string
    }
    expect(asJson.status).toBe(200)
    expect(asJson.headers["content-type"]).toBe("application/json")
    expect(JSON.parse(asJson.body)).toMatchObject({ service: "api", world: "one" })
    const badHeader = await box.run(["curl", "one", "api", "-H", "nocolon"])
    expect(badHeader.code).toBe(1)
    expect(badHeader.stderr).toMatch(/expected "Name: value"/)
    const missingFile = await box.run(["curl", "one", "api", "-d", "@no-such-file.json"])
    expect(missingFile.code).toBe(1)
    expect(missingFile.stderr).toMatch(/^error: -d @no-such-file\.json: cannot read no-such-file\.json \(ENOENT\)\n$/)
    const noService = await box.run(["curl", "one", "nope"])
    expect(noService.stderr).toMatch(/no service "nope" with a url or port; those are: api, web/)
    // a removed world's routes are gone
    expect((await box.run(["remove", "two", "--force"])).code).toBe(0)
    expect((await viaProxy(port, `api.two.shop.localhost:${port}`)).status).toBe(404)
  })

  it("counts each request the proxy routes in berth metrics, keep-alive and fresh connections alike", async () => {
    const box = await boxes.project({ "berth.toml": config(), "app.mjs": app }, { proxy: true })
    await up(box, "one")
    const port = (await settingsOf(box)).proxy.http.port!
    // keep-alive and fresh connections alike (a connection's first request is counted once too)
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    for (let i = 0; i < 4; i++) {
      const answer = await new Promise<number>((resolve, reject) => {
        const req = http.request(
          { host: "127.0.0.1", port, agent, headers: { host: `api.one.shop.localhost:${port}` } },
          (res) => {
            res.resume()
            res.on("end", () => resolve(res.statusCode ?? 0))
          }
        )
        req.on("error", reject)
        req.end()
      })
      expect(answer).toBe(200)
    }
    agent.destroy()
    expect((await viaProxy(port, `web.one.shop.localhost:${port}`)).status).toBe(200)
    const counted = async () => {
      const metrics = JSON.parse((await box.run(["metrics", "--json"])).stdout) as {
        proxy: { requests: Array<{ route: string; count: number }> }
      }
      return Object.fromEntries(metrics.proxy.requests.map((r) => [r.route, r.count]))
    }
    // counts reach berth metrics as the proxy routes each request
    let seen: Record<string, number> = {}
    for (let i = 0; i < 50 && (seen["api.one.shop"] ?? 0) < 4; i++) {
      seen = await counted()
      await new Promise((r) => setTimeout(r, 100))
    }
    expect(seen).toMatchObject({ "api.one.shop": 4, "web.one.shop": 1 })
  })

  it("serves an HTTPS project over TLS verified against berth's CA, and its processes trust that CA", async () => {
    const box = await boxes.project({ "berth.toml": config(true), "app.mjs": app }, { proxy: true })
    await up(box, "secure")
    const { proxy } = await settingsOf(box)
    const env = varsFrom((await box.run(["env", "secure", "--json"])).stdout)
    expect(env.WEB_URL).toBe(`https://web.secure.shop.localhost:${proxy.https.port}`)
    // berth curl checks the certificate against the CA (no insecure flag exists)
    const direct = await box.run(["curl", "secure", "api"])
    expect(direct.code, direct.stderr).toBe(0)
    expect(JSON.parse(direct.stdout)).toMatchObject({ service: "api", forwardedProto: "https" })
    expect(JSON.parse(direct.stdout).extraCa).toBeTruthy()
    // and web's server-side fetch of https://api… verifies it too, through NODE_EXTRA_CA_CERTS
    const chained = await box.run(["curl", "secure", "web", "/via-api"])
    expect(chained.code, chained.stderr).toBe(0)
    expect(JSON.parse(chained.stdout)).toMatchObject({ api: { service: "api", world: "secure" } })
  })

  it("gives every process berth's CA when https urls are turned on machine-wide", async () => {
    // the project itself says nothing of https: `berth port --https-urls on` makes its URLs https
    const box = await boxes.project({ "berth.toml": config(false), "app.mjs": app }, { proxy: true })
    const on = await box.run(["port", "--https-urls", "on"])
    expect(on.code, on.stderr).toBe(0)
    // the user's own extra CAs are kept: Node reads one file, so berth's CA is joined to theirs
    const own = createCaCertificate()
    box.write("own-ca.pem", own.certPem)
    const r = await box.run(["up", "tls", "--json"], {
      env: { NODE_EXTRA_CA_CERTS: join(box.dir, "own-ca.pem") },
      timeoutMs: 60_000
    })
    expect(r.code, r.stderr).toBe(0)
    const { proxy } = await settingsOf(box)
    const env = varsFrom((await box.run(["env", "tls", "--json"])).stdout)
    expect(env.API_URL).toBe(`https://api.tls.shop.localhost:${proxy.https.port}`)
    // web's server-side fetch of https://api… verifies against berth's CA
    const chained = await box.run(["curl", "tls", "web", "/via-api"])
    expect(chained.code, chained.stderr).toBe(0)
    expect(JSON.parse(chained.stdout)).toMatchObject({ api: { service: "api", world: "tls" } })
    const extraCa = (JSON.parse(chained.stdout) as { api: { extraCa: string } }).api.extraCa
    const bundle = readFileSync(extraCa, "utf8")
    expect(bundle).toContain(own.certPem.trim())
    expect(bundle).toContain(readFileSync(proxy.caPath, "utf8").trim())
  })

  it("keeps HTTP serving when the HTTPS port is taken, and tells berth's own port from another program's", async () => {
    // the daemon starts with both listeners off (the harness's default); what `berth port` sets is what it gets
    const box = sandbox({ "berth.toml": config(), "app.mjs": app })
    cleanups.push(box)
    const [from, to] = portBlock().split("-").map(Number) as [number, number]
    expect((await box.run(["port", "--range", `${from}-${to - 3}`])).code).toBe(0)
    const httpPort = to - 1
    const httpsPort = to
    const spare = to - 2
    const holder = await hold(httpsPort)
    try {
      const set = await box.run(["port", "--proxy", String(httpPort), "--https", String(httpsPort)])
      expect(set.code).toBe(1)
      expect(set.stderr).toMatch(
        new RegExp(`port ${httpsPort} \\(127\\.0\\.0\\.1\\) for the HTTPS proxy is already in use by another program`)
      )
      // HTTP stands although HTTPS fell
      const settings = await settingsOf(box)
      expect(settings.proxy.http.port).toBe(httpPort)
      expect(settings.proxy.https.port).toBeNull()
      await up(box, "one")
      const env = varsFrom((await box.run(["env", "one", "--json"])).stdout)
      expect(env.API_URL).toBe(`http://api.one.shop.localhost:${httpPort}`)
      expect((await viaProxy(httpPort, "api.one.shop.localhost")).status).toBe(200)
      // asking again for the port berth itself holds succeeds, and changes nothing
      const again = await box.run(["port", "--proxy", String(httpPort)])
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).toMatch(new RegExp(`proxy \\(http\\): ${httpPort}\n`))
      expect((await viaProxy(httpPort, "api.one.shop.localhost")).status).toBe(200)
      // a port another program holds: exit 1, and HTTP stays where it was
      const other = await hold(spare)
      try {
        const moved = await box.run(["port", "--proxy", String(spare)])
        expect(moved.code).toBe(1)
        expect(moved.stderr).toMatch(/for the HTTP proxy is already in use by another program/)
        expect((await settingsOf(box)).proxy.http.port).toBe(httpPort)
        expect((await viaProxy(httpPort, "api.one.shop.localhost")).status).toBe(200)
      } finally {
        other.close()
      }
      // berth's own HTTP port is not a place for HTTPS, and the message says whose it is
      const clash = await box.run(["port", "--https", String(httpPort)])
      expect(clash.code).toBe(1)
      expect(clash.stderr).toMatch(/berth's own HTTP proxy/)
    } finally {
      holder.close()
    }
    // once the port is free, HTTPS comes up beside HTTP
    const https = await box.run(["port", "--https", String(httpsPort), "--json"])
    expect(https.code, https.stderr).toBe(0)
    expect((JSON.parse(https.stdout) as Settings).proxy.https.port).toBe(httpsPort)
    expect((await viaProxy(httpPort, "api.one.shop.localhost")).status).toBe(200)
    // auto: 443 where it can be bound, else the fallback 7356; HTTP is never part of that
    const fallbackFree = await isFree(FALLBACK_HTTPS_PORT)
    const held443 = await hold(443).catch(() => undefined)
    try {
      const auto = await box.run(["port", "--https", "auto", "--json"])
      if (fallbackFree) {
        expect(auto.code, auto.stderr).toBe(0)
        const port = (JSON.parse(auto.stdout) as Settings).proxy.https.port
        // with 443 held by this test (or not bindable at all), the fallback
        expect(port).toBe(FALLBACK_HTTPS_PORT)
      }
      expect((await settingsOf(box)).proxy.http.port).toBe(httpPort)
      expect((await viaProxy(httpPort, "api.one.shop.localhost")).status).toBe(200)
    } finally {
      held443?.close()
      await box.run(["port", "--https", "off"])
    }
  })

  it("moves the proxy when its ports are set, turns it off, and says so", async () => {
    // no pinned ports in the environment: the persisted settings decide
    const box = sandbox({ "berth.toml": config(), "app.mjs": app }, "app", {
      BERTH_PROXY_PORT: "",
      BERTH_HTTPS_PORT: ""
    })
    cleanups.push(box)
    const [from, to] = portBlock().split("-").map(Number) as [number, number]
    const set = await box.run([
      "port",
      "--range",
      `${from}-${to - 2}`,
      "--proxy",
      String(to - 1),
      "--https",
      String(to)
    ])
    expect(set.code, set.stderr).toBe(0)
    expect(set.stdout).toMatch(new RegExp(`proxy \\(http\\): ${to - 1}\n`))
    expect(set.stdout).toMatch(new RegExp(`proxy \\(https\\): ${to}\n`))
    await up(box, "one")
    const routed = varsFrom((await box.run(["env", "one", "--json"])).stdout)
    expect(routed.API_URL).toBe(`http://api.one.shop.localhost:${to - 1}`)
    expect((await viaProxy(to - 1, `api.one.shop.localhost`)).status).toBe(200)
    const bad = await box.run(["port", "--proxy", "nonsense"])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/expected a port \(1-65535\), auto or off/)
    // off: nothing listens, and URLs are direct again
    const off = await box.run(["port", "--proxy", "off"])
    expect(off.stdout).toMatch(/proxy \(http\): not listening \(off: turned off\)/)
    const direct = varsFrom((await box.run(["env", "one", "--json"])).stdout)
    expect(direct.API_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    // the settings survive a daemon restart
    await box.run(["daemon", "stop"])
    const after = await box.run(["port", "--json"])
    expect((JSON.parse(after.stdout) as Settings).proxy.http.port).toBeNull()
    expect((JSON.parse(after.stdout) as Settings).proxy.https.port).toBe(to)
    // auto: port 80 where the daemon may bind it, else the documented 7355
    const holder = net.createServer()
    const held = await new Promise<boolean>((resolve) => {
      holder.once("error", () => resolve(false))
      holder.listen(80, "127.0.0.1", () => resolve(true))
    })
    try {
      const auto = await box.run(["port", "--proxy", "auto", "--json"])
      const port = (JSON.parse(auto.stdout) as Settings).proxy.http.port
      // with 80 held by this test, the fallback; where the test could not hold it, one of the two
      if (held) expect(port).toBe(FALLBACK_HTTP_PORT)
      else expect([80, FALLBACK_HTTP_PORT]).toContain(port)
    } finally {
      holder.close()
      await box.run(["port", "--proxy", "off"])
    }
  })
})
