/**
 * A ready service in use is not probed as well: a request the proxy passed on and the service answered is that
 * look's liveness pass. The service writes down every request it gets, with its user agent; while requests come
 * through the proxy, none of berth's probes (`berth-health`) reach it, and once they stop, the probes come back.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { eventually, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

const counting = `import { appendFileSync } from "node:fs"
import { createServer } from "node:http"
createServer((req, res) => {
  appendFileSync("requests.log", (req.headers["user-agent"] ?? "") + " " + req.url + "\\n")
  res.end("ok")
}).listen(Number(process.env.PORT), "127.0.0.1")
`

const toml = `[services.web]
cmd = "node counting.mjs"
url = "web"
health = { http = "/healthz", interval = "1s" }
`

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("liveness and the proxy's traffic", () => {
  it("does not probe a service while requests through the proxy find it answering, and probes it again after", async () => {
    const box = await boxes.project({ "berth.toml": toml, "counting.mjs": counting }, { proxy: true })
    const up = await box.run(["up", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const requests = () => readFileSync(join(box.dir, "requests.log"), "utf8").trim().split("\n")
    const probes = (lines: ReadonlyArray<string>) => lines.filter((l) => l.startsWith("berth-health")).length
    // the first request through the proxy, then one every 300 ms for 6 s: six liveness intervals of 1 s
    const first = await box.run(["curl", "main", "web", "/first"])
    expect(first.code, first.stderr).toBe(0)
    const atFirst = requests().findIndex((l) => l.endsWith(" /first"))
    expect(atFirst).toBeGreaterThanOrEqual(0)
    for (const until = Date.now() + 6_000; Date.now() < until; ) {
      expect((await box.run(["curl", "main", "web", "/busy"])).code).toBe(0)
      await sleep(300)
    }
    expect(probes(requests().slice(atFirst))).toBe(0)
    // no more traffic: the next looks ask the service again
    const quiet = await eventually(
      async () => probes(requests().slice(atFirst)),
      (n) => n > 0,
      10_000
    )
    expect(quiet).toBeGreaterThan(0)
  })
})
