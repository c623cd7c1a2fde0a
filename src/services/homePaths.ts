/**
 * Where BERTH_HOME's files are. Plain string functions with no import at all, because the CLI's lean path needs the
 * socket path before anything loads (even node:path, which the bundle would otherwise load for `--version` too);
 * the `Home` service wraps them. POSIX paths only, as berth is.
 */
const join = (...parts: ReadonlyArray<string>): string => parts.join("/").replace(/\/{2,}/g, "/")

export interface HomePaths {
  readonly root: string
  readonly socket: string
  readonly database: string
  readonly pidFile: string
  readonly daemonLog: string
  /** a cluster member's lease on its worlds that run anywhere, for its watchdog (`domain/fence.ts`) */
  readonly fenceFile: string
  /** what the watchdog last fenced (`domain/fence.ts`): the daemon counts those copies as stopped when it thaws */
  readonly fencedFile: string
  readonly logs: string
  /** the berth.toml contents allowed to run commands */
  readonly consentFile: string
  /** the log file of one service of one world */
  readonly serviceLog: (worldId: number, service: string) => string
}

export const homePaths = (root: string): HomePaths => ({
  root,
  socket: join(root, "daemon.sock"),
  database: join(root, "state.db"),
  pidFile: join(root, "daemon.pid"),
  daemonLog: join(root, "daemon.log"),
  fenceFile: join(root, "fence.json"),
  fencedFile: join(root, "fenced.json"),
  logs: join(root, "logs"),
  consentFile: join(root, "allowed"),
  serviceLog: (worldId, service) => join(root, "logs", String(worldId), `${service}.log`)
})

/** BERTH_HOME from the environment, else ~/.berth. */
export const resolveHome = (env: NodeJS.ProcessEnv = process.env): string => {
  const home = env.BERTH_HOME !== undefined && env.BERTH_HOME !== "" ? env.BERTH_HOME : join(env.HOME ?? "/", ".berth")
  const absolute = home.startsWith("/") ? home : join(process.cwd(), home)
  return absolute.length > 1 ? absolute.replace(/\/$/, "") : absolute
}
