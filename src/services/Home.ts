/**
 * BERTH_HOME: where one daemon keeps its socket, state, logs and keys. Default `~/.berth`. Everything in it is
 * owner-only (folders 0700, files 0600): it holds logs that may carry a service's secrets and, later, the CA key.
 */
import { chmodSync, mkdirSync } from "node:fs"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type HomePaths, homePaths, resolveHome } from "./homePaths.js"

export { type HomePaths, homePaths, resolveHome }

export class Home extends Context.Tag("berth/Home")<Home, HomePaths>() {
  /** Creates the folders owner-only (and tightens them if they already existed looser). */
  static readonly layerAt = (root: string) =>
    Layer.effect(
      Home,
      Effect.sync(() => {
        const paths = homePaths(root)
        for (const dir of [paths.root, paths.logs]) {
          mkdirSync(dir, { recursive: true, mode: 0o700 })
          chmodSync(dir, 0o700)
        }
        return paths
      })
    )

  static readonly layer = Layer.suspend(() => Home.layerAt(resolveHome()))
}
