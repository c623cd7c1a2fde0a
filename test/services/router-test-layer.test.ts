/**
 * `RouterWithoutListeners`, the Router's test layer: its routes are kept and answered from, and no proxy port is
 * bound, whatever the environment asks for.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ConfigFilesLive } from "../../src/services/ConfigFiles.js"
import { Home } from "../../src/services/Home.js"
import { Router, RouterWithoutListeners } from "../../src/services/proxy/Router.js"
import { RegistryLive } from "../../src/services/Registry.js"

describe("RouterWithoutListeners", () => {
  it("binds no port though the environment asks for one, and still answers what it knows", async () => {
    const home = mkdtempSync(join(tmpdir(), "berth-router-quiet-"))
    try {
      const program = Effect.gen(function* () {
        const router = yield* Router
        const info = yield* router.info
        expect(info.http.port).toBeUndefined()
        expect(info.https.port).toBeUndefined()
        expect(yield* router.lastAnswer(1, "web")).toBeUndefined()
        expect(yield* router.requests).toEqual(new Map())
      })
      const layer = RouterWithoutListeners.pipe(
        Layer.provideMerge(RegistryLive),
        Layer.provideMerge(ConfigFilesLive),
        Layer.provideMerge(NodeContext.layer),
        Layer.provideMerge(Home.layerAt(home))
      )
      // what the daemon would read from its environment: a port for each listener
      const asked = ConfigProvider.fromMap(
        new Map([
          ["BERTH_PROXY_PORT", "0"],
          ["BERTH_HTTPS_PORT", "0"]
        ])
      )
      await Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(layer), Effect.withConfigProvider(asked)))
    } finally {
      rmSync(home, { recursive: true, force: true })
    }
  })
})
