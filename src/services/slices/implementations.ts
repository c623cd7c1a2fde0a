/**
 * Which code serves an adapter name: a built-in implementation by family (valkey → redis, mariadb → mysql), else an
 * external `berth-adapter-<name>` executable found when a verb runs — on the world's own PATH first (`searchPath`,
 * from the environment it was brought up with: an adapter installed after the daemon started is found), then the
 * daemon's. One instance per name and search path, so that its capabilities are asked once. The adapters whose client
 * berth does not install (`src/domain/drivers.ts`) are loaded only once their client resolves: one the user adds later
 * is found without a restart of the daemon.
 */
import { createRequire } from "node:module"
import * as Effect from "effect/Effect"
import { externalAdapter } from "../../../adapters/external/index.js"
import { type Adapter, implementations } from "../../../adapters/index.js"
import { builtinAdapters, isValidAdapterName } from "../../domain/adapters.js"
import { drivers, installCommand } from "../../domain/drivers.js"
import { DriverMissing, InternalError } from "../../domain/errors.js"

const externals = new Map<string, Adapter>()

/**
 * The client `family` needs, when it is missing. Resolved as berth's own code will load it, before that code runs:
 * a bundled module whose load failed would stay failed in this process.
 */
const missingDriver = (adapter: string, family: string): DriverMissing | undefined => {
  const driver = drivers.get(family)
  if (driver === undefined) return undefined
  try {
    createRequire(import.meta.url).resolve(driver.packageName)
    return undefined
  } catch {
    return new DriverMissing({ adapter, packageName: driver.packageName, install: installCommand(driver) })
  }
}

export const implementation = (
  adapter: string,
  searchPath?: string
): Effect.Effect<Adapter, InternalError | DriverMissing> => {
  const family = builtinAdapters.get(adapter)?.family ?? adapter
  const builtin = implementations.get(family)
  if (builtin !== undefined) {
    const missing = missingDriver(adapter, family)
    return missing === undefined ? Effect.promise(builtin) : Effect.fail(missing)
  }
  if (!isValidAdapterName(adapter)) {
    // berth.toml's check refuses such a name: only a damaged record of berth's own can hold one
    return Effect.fail(
      new InternalError({
        reason: `a slice's record names the adapter ${JSON.stringify(adapter)}, which is no valid name`
      })
    )
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
