/**
 * The validated configuration a world is built from: camelCase, defaults applied, services in declaration order.
 * Produced only by `parseConfig`; everything downstream can trust it.
 */
import type { Graph } from "../graph.js"

export type RestartPolicy = "no" | "on-failure" | "always"

export interface HealthCheck {
  readonly kind: "http" | "tcp" | "cmd" | "log"
  /** the path for http, the command for cmd, the pattern for log; empty for tcp */
  readonly target: string
  readonly timeoutMs: number
  readonly intervalMs: number
}

export interface ProcessService {
  readonly _tag: "Process"
  readonly name: string
  readonly cmd: string
  readonly dir: string | undefined
  readonly url: string | undefined
  readonly ports: ReadonlyArray<string>
  readonly dependsOn: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly envFiles: ReadonlyArray<string>
  readonly setup: string | undefined
  readonly health: HealthCheck | undefined
  readonly restart: RestartPolicy
  /** restarts allowed within a minute before the service is marked failed */
  readonly maxRestarts: number
  /** the first restart's delay; each next one doubles, up to 30 s */
  readonly restartBackoffMs: number
  readonly stopGraceMs: number
  readonly groups: ReadonlyArray<string>
  /** a dev server berth recognises in `cmd` gets its port, strict-port and host flags (`domain/frameworks.ts`) */
  readonly inject: boolean
}

export interface SliceService {
  readonly _tag: "Slice"
  readonly name: string
  readonly adapter: string
  readonly adminUrl: string | undefined
  readonly migrate: string | undefined
  readonly seed: string | undefined
  readonly cloneFrom: "golden" | undefined
  /** `clone_from = "<name>"`: each new slice is a copy of that database, already on the server (the user's own) */
  readonly cloneSource?: string | undefined
  readonly goldenInputs: ReadonlyArray<string>
  /** adapter-specific keys, as written */
  readonly options: Readonly<Record<string, unknown>>
  readonly dependsOn: ReadonlyArray<string>
  readonly groups: ReadonlyArray<string>
}

export type Service = ProcessService | SliceService

export interface ServiceOverride {
  readonly cmd: string | undefined
  readonly env: Readonly<Record<string, string>>
  readonly ports: ReadonlyArray<string> | undefined
}

export interface Override {
  /** a worktree/branch glob: `*` matches any run of characters (slashes included), `?` one character */
  readonly pattern: string
  readonly services: ReadonlyMap<string, ServiceOverride>
}

export interface ProjectConfig {
  /** undefined when not written: the repository folder's name is used */
  readonly name: string | undefined
  readonly domain: string
  readonly worktrees: string | undefined
  readonly setup: string | undefined
  readonly https: boolean
  /** suspend a world whose routes saw no request for this long (ms); undefined: never */
  readonly idleSuspendMs: number | undefined
  /** copied from the main checkout into each new worktree before `setup`, never over a file it has */
  readonly copy: ReadonlyArray<string>
  /** the same, as symlinks to the main checkout's */
  readonly link: ReadonlyArray<string>
}

export interface Config {
  readonly file: string
  readonly project: ProjectConfig
  readonly services: ReadonlyArray<Service>
  readonly agents: { readonly verify: ReadonlyArray<string> }
  readonly overrides: ReadonlyArray<Override>
  /** start order, stop order and parallel layers, computed once */
  readonly graph: Graph
}

export const defaults = {
  domain: "localhost",
  restart: "no" as RestartPolicy,
  maxRestarts: 5,
  restartBackoffMs: 500,
  stopGraceMs: 10_000,
  healthTimeoutMs: 60_000,
  healthIntervalMs: 100
} as const

/** A service gets a port only when it asks for one: a `url` or named `ports`. */
export const hasPort = (service: ProcessService): boolean => service.url !== undefined || service.ports.length > 0

export const processes = (config: Config): ReadonlyArray<ProcessService> =>
  config.services.filter((s): s is ProcessService => s._tag === "Process")

export const slices = (config: Config): ReadonlyArray<SliceService> =>
  config.services.filter((s): s is SliceService => s._tag === "Slice")

const globToRegExp = (glob: string): RegExp =>
  new RegExp(
    `^${glob
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replaceAll("*", ".*")
      .replaceAll("?", ".")}$`
  )

export const overrideMatches = (pattern: string, world: string): boolean => globToRegExp(pattern).test(world)

/**
 * The config as one world sees it: every matching override applied in file order (later ones win). `cmd` and
 * `ports` are replaced, `env` is merged.
 */
export const forWorld = (config: Config, world: string): Config => {
  const matching = config.overrides.filter((o) => overrideMatches(o.pattern, world))
  if (matching.length === 0) return config
  const services = config.services.map((service): Service => {
    if (service._tag !== "Process") return service
    let result = service
    for (const override of matching) {
      const o = override.services.get(service.name)
      if (o === undefined) continue
      result = {
        ...result,
        cmd: o.cmd ?? result.cmd,
        env: { ...result.env, ...o.env },
        ports: o.ports ?? result.ports
      }
    }
    return result
  })
  return { ...config, services }
}
