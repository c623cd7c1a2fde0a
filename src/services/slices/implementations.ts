/**
 * Which code serves an adapter name: a built-in implementation by family (valkey → redis, mariadb → mysql), else an
 * external `berth-adapter-<name>` executable found when a verb runs — on the world's own PATH first (`searchPath`,
 * from the environment it was brought up with: an adapter installed after the daemon started is found), then the
 * daemon's. One instance per name and search path, so that its capabilities are asked once.
 */
import * as Effect from "effect/Effect"
import { externalAdapter } from "../../../adapters/external/index.js"
import { type Adapter, implementations } from "../../../adapters/index.js"
import { builtinAdapters, isValidAdapterName } from "../../domain/adapters.js"
import { InvalidRequest } from "../../domain/errors.js"

const externals = new Map<string, Adapter>()

export const implementation = (adapter: string, searchPath?: string): Effect.Effect<Adapter, InvalidRequest> => {
  const family = builtinAdapters.get(adapter)?.family ?? adapter
  const builtin = implementations.get(family)
  if (builtin !== undefined) return Effect.promise(builtin)
  if (!isValidAdapterName(adapter)) {
    return Effect.fail(new InvalidRequest({ reason: `adapter name ${JSON.stringify(adapter)} is not valid` }))
  }
  const path = [searchPath, process.env.PATH].filter((p) => p !== undefined && p !== "").join(":")
  const key = `${adapter}\u0000${path}`
  let external = externals.get(key)
  if (external === undefined) {
    if (externals.size > 200) externals.clear()
    external = externalAdapter(adapter, { path })
    externals.set(key, external)
  }
  return Effect.succeed(external)
}
