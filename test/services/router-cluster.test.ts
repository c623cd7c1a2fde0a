/**
 * The Router as the daemon drives it in a cluster: the routes of worlds other machines run, and this machine's
 * cluster listener. The Router runs over a BERTH_HOME of its own (no worlds), its HTTP proxy on a free port; the
 * "other machine" is a bare proxy whose cluster listener is on 127.0.0.2.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { ConfigFilesLive } from "../../src/services/ConfigFiles.js"
import { Home } from "../../src/services/Home.js"
import { ProxyError } from "../../src/services/proxy/Proxy.js"
import { Router } from "../../src/services/proxy/Router.js"
import { RegistryLive } from "../../src/services/Registry.js"
import { type Backend, request, type StartedProxy, startBackend, startProxy, target } from "./proxy-helpers.js"

// read by the Router when it starts: HTTP on any free port, no HTTPS
process.env.BERTH_PROXY_PORT = "0"
process.env.BERTH_HTTPS_PORT = "off"

const home = mkdtempSync(join(tmpdir(), "berth-router-cluster-"))
const HERE = "127.0.0.7"
const THERE = "127.0.0.2"
const web = "web.w1.demo.localhost"

const runtime = ManagedRuntime.make(
  Router.Default.pipe(
    Layer.provideMerge(RegistryLive),
    Layer.provideMerge(ConfigFilesLive),
    Layer.provideMerge(NodeContext.layer),
    Layer.provideMerge(Home.layerAt(home))
  )
)
const run = <A, E>(effect: Effect.Effect<A, E, Router>) => runtime.runPromise(effect)

let backend: Backend
let other: StartedProxy
let otherCluster: number
let port: number

beforeAll(async () => {
  backend = await startBackend((req, res) => res.end(JSON.stringify({ host: req.headers.host })))
  other = await startProxy([target("demo", "w1", "web", backend.port)], {
    cluster: { host: THERE, port: 0, peers: [HERE] }
  })
  otherCluster = other.handle.cluster()!.port
  port = (await run(Effect.flatMap(Router, (r) => r.info))).http.port!
})

afterAll(async () => {
  await runtime.dispose()
  await other?.close()
  await backend?.close()
  rmSync(home, { recursive: true, force: true })
})

describe("the Router in a cluster", () => {
  it("listens for peers only where it is told, and forwards a remote world's requests there", async () => {
    const info = await run(Effect.flatMap(Router, (r) => r.setClusterListener({ host: HERE, port: 0, peers: [THERE] })))
    expect(info).toMatchObject({ host: HERE, peers: [THERE], refused: 0 })
    await run(
      Effect.flatMap(Router, (r) =>
        r.setRemoteTargets([
          target("demo", "w1", "web", undefined, { remote: { machine: "b", address: THERE, port: otherCluster } })
        ])
      )
    )
    const answer = await request(port, `${web}:${port}`)
    expect(answer.status).toBe(200)
    expect(JSON.parse(answer.body.toString())).toEqual({ host: `${web}:${port}` })
    // remote hosts are routed names like any other (the hosts file, certificates)
    expect(await run(Effect.flatMap(Router, (r) => SubscriptionRef.get(r.hostNames)))).toContain(web)
  })

  it("keeps its cluster listener when a move fails, and stops it when asked", async () => {
    const before = await run(Effect.flatMap(Router, (r) => r.clusterInfo))
    const failed = await run(
      Effect.flip(Effect.flatMap(Router, (r) => r.setClusterListener({ host: "0.0.0.0", port: 0, peers: [] })))
    )
    expect(failed).toBeInstanceOf(ProxyError)
    expect(await run(Effect.flatMap(Router, (r) => r.clusterInfo))).toEqual(before)
    expect(await run(Effect.flatMap(Router, (r) => r.setClusterListener(undefined)))).toBeUndefined()
    expect(await run(Effect.flatMap(Router, (r) => r.clusterInfo))).toBeUndefined()
    // without its cluster address, this machine's dials leave from 127.0.0.1, which the other machine does not
    // know: it closes the connection, and the client gets a 503 that says so at once
    const answer = await request(port, web)
    expect(answer.status).toBe(503)
    expect(answer.headers["retry-after"]).toBe("2")
    expect(other.handle.cluster()!.refused).toBeGreaterThan(0)
  })

  it("drops the remote routes when given none", async () => {
    await run(Effect.flatMap(Router, (r) => r.setRemoteTargets([])))
    expect((await request(port, web)).status).toBe(404)
  })
})
