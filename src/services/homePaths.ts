/**
 * Where BERTH_HOME's files are. Plain functions with no Effect import, because the CLI's lean path needs the socket
 * path before anything heavy loads; the `Home` service wraps them.
 */
import { homedir } from "node:os"
import { join, resolve } from "node:path"

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
