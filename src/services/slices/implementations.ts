/**
 * Which code serves an adapter name: a built-in implementation by family (valkey → redis, mariadb → mysql), else an
 * external `berth-adapter-<name>` executable found on PATH when a verb runs (one instance per name, so that its
 * capabilities are asked once).
 */
import * as Effect from "effect/Effect"
import { externalAdapter } from "../../../adapters/external/index.js"
import { type Adapter, implementations } from "../../../adapters/index.js"
import { builtinAdapters, isValidAdapterName } from "../../domain/adapters.js"
import { InvalidRequest } from "../../domain/errors.js"

const externals = new Map<string, Adapter>()

export const implementation = (adapter: string): Effect.Effect<Adapter, InvalidRequest> => {
  const family = builtinAdapters.get(adapter)?.family ?? adapter
  const builtin = implementations.get(family)
  if (builtin !== undefined) return Effect.promise(builtin)
  if (!isValidAdapterName(adapter)) {
    return Effect.fail(new InvalidRequest({ reason: `adapter name ${JSON.stringify(adapter)} is not valid` }))
  }
  let external = externals.get(adapter)
  if (external === undefined) {
    external = externalAdapter(adapter)
    externals.set(adapter, external)
  }
  return Effect.succeed(external)
}
