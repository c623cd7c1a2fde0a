/**
 * BERTH_HOME: where one daemon keeps its socket, state, logs and keys. Default `~/.berth`. Everything in it is
 * owner-only (folders 0700, files 0600): it holds logs that may carry a service's secrets and, later, the CA key.
 */
import { chmodSync, mkdirSync } from "node:fs"
import { homedir } from "node:os"
import { join, resolve } from "node:path"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface HomePaths {
  readonly root: string
  readonly socket: string
  readonly database: string
  readonly pidFile: string
  readonly daemonLog: string
  readonly logs: string
  /** the log file of one service of one world */
  readonly serviceLog: (worldId: number, service: string) => string
}

export const homePaths = (root: string): HomePaths => ({
  root,
  socket: join(root, "daemon.sock"),
  database: join(root, "state.db"),
  pidFile: join(root, "daemon.pid"),
  daemonLog: join(root, "daemon.log"),
  logs: join(root, "logs"),
  serviceLog: (worldId, service) => join(root, "logs", String(worldId), `${service}.log`)
})

/** BERTH_HOME from the environment, else ~/.berth. */
export const resolveHome = (env: NodeJS.ProcessEnv = process.env): string =>
  resolve(env.BERTH_HOME !== undefined && env.BERTH_HOME !== "" ? env.BERTH_HOME : join(homedir(), ".berth"))

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
