/**
 * A world's planning, which needs nothing of its actor's state: where its worktrees go, its config as it applies to
 * it (and its `.env`), the services an `up` starts, what its commands' tokens may name, who it is to its processes and
 * to its slices, and how a failed start is told.
 */
import { basename, dirname, join, resolve } from "node:path"
import * as Effect from "effect/Effect"
import * as Model from "../../domain/config/model.js"
import type { WorldIdentity } from "../../domain/coordinates.js"
import { definedEnv } from "../../domain/environment.js"
import { StartFailed } from "../../domain/errors.js"
import { selectedServices } from "../../domain/selection.js"
import type { ServiceCoordinates, TokenContext } from "../../domain/tokens.js"
import type { ConfigFilesService } from "../../services/ConfigFiles.js"
import type { WorldRow } from "../../services/Registry.js"
import type * as Protocol from "../protocol.js"

/** Default worktrees folder: beside the main checkout, `<repo>.worktrees`. */
export const worktreesFolder = (mainRoot: string, configured: string | undefined): string =>
  configured === undefined ? join(dirname(mainRoot), `${basename(mainRoot)}.worktrees`) : resolve(mainRoot, configured)

export const daemonEnv = () => definedEnv(process.env)

export const identity = (w: WorldRow): WorldIdentity => ({
  project: w.projectName,
  name: w.name,
  slug: w.slug,
  path: w.path
})

/** The world as its slices know it. */
export const sliceWorld = (worldId: number, w: WorldRow) => ({
  id: worldId,
  project: w.projectName,
  name: w.name,
  slug: w.slug,
  path: w.path
})

/**
 * The world's config, and its `.env`: the main checkout's overlaid by the worktree's own, since a gitignored `.env`
 * never reaches a new worktree.
 */
export const loadConfig = (configs: ConfigFilesService, w: WorldRow) =>
  Effect.gen(function* () {
    const loaded = yield* configs.load(w.path)
    const config = Model.forWorld(loaded.parsed.config, w.name)
    if (w.isMain || w.mainRoot === loaded.root) return { loaded, config, dotenv: loaded.dotenv }
    const main = yield* configs.dotenv(w.mainRoot)
    return { loaded, config, dotenv: new Map([...main, ...loaded.dotenv]) as ReadonlyMap<string, string> }
  })

/** The services an `up` starts: the selection and everything it depends on, or all of them. */
export const selected = (config: Model.Config, sel: Protocol.Selection) => selectedServices(config, sel)

/** What a world's commands may name: its services, its environment, the world and the project. */
export const tokenContext = (
  w: WorldRow,
  coords: ReadonlyMap<string, ServiceCoordinates>,
  lookup: (name: string) => string | undefined,
  self?: string
): TokenContext => ({
  ...(self === undefined ? {} : { self }),
  services: coords,
  env: lookup,
  world: { name: w.name, slug: w.slug, path: w.path },
  project: { name: w.projectName }
})

/** The first line of why a start failed, as the world's reason says it. */
export const failureReason = (e: Protocol.WorldError): string =>
  e instanceof StartFailed ? `${e.service}: ${e.reason}` : (e.message.split("\n")[0] ?? "")
