/**
 * What a world's commands do to its slices while it stays: `reset` (back to their golden, or a fresh migrate + seed),
 * copied into a new world (`up --from`), and a golden rebuilt. A world that runs stops first and starts again after,
 * on the same ports and with its permit; each checks first that it could start again, so one that cannot stops
 * nothing.
 */
import * as Effect from "effect/Effect"
import * as Model from "../../domain/config/model.js"
import { coordinates, groupPorts } from "../../domain/coordinates.js"
import { UnknownSlice } from "../../domain/errors.js"
import type { ConfigFilesService } from "../../services/ConfigFiles.js"
import type { RouterService } from "../../services/proxy/Router.js"
import type { RegistryService } from "../../services/Registry.js"
import type { SlicesService } from "../../services/slices/Slices.js"
import type * as Protocol from "../protocol.js"
import type { Generations } from "./generation.js"
import type { Launch } from "./launch.js"
import type { ReadRow, Run } from "./life.js"
import { loadConfig, sliceWorld } from "./plan.js"
import type { Prepare } from "./prepare.js"

export const makeSliceCommands = (deps: {
  readonly worldId: number
  readonly row: ReadRow
  readonly registry: RegistryService
  readonly configs: ConfigFilesService
  readonly slices: SlicesService
  readonly router: RouterService
  /** what runs of the world now */
  readonly currentRun: Effect.Effect<Run>
  /** the world's selection, as its last `up` (or `stop -s`) left it */
  readonly selection: () => Protocol.Selection
  /** what the world's later commands run with: its own environment, the caller's until it has one */
  readonly envFor: (caller: Readonly<Record<string, string>>) => Readonly<Record<string, string>>
  readonly prepare: Pick<Prepare, "prepare" | "mayRun" | "sliceInit" | "provisionSlices">
  readonly stopRun: Generations["stopRun"]
  readonly launchStart: Launch["launchStart"]
}) => {
  const { worldId, row, registry, configs, slices, router, currentRun, envFor, stopRun, launchStart } = deps
  const { prepare, mayRun, sliceInit, provisionSlices } = deps.prepare

  /**
   * Slices back to their golden (or a fresh migrate + seed): the world's processes stop first and start again
   * after, on the same ports; a world that is down gets its slices refilled now, so `env` shows them at once.
   */
  const reset = (names: ReadonlyArray<string>, callerEnv: Readonly<Record<string, string>>) =>
    Effect.gen(function* () {
      const w = yield* row
      // the world's own environment (from its up), as for everything done to it later; the caller's only when it
      // never had one
      const env = envFor(callerEnv)
      const { config } = yield* loadConfig(configs, w)
      const all = Model.slices(config).map((s) => s.name)
      const unknown = names.filter((n) => !all.includes(n))
      if (all.length === 0 || unknown.length > 0) {
        return yield* new UnknownSlice({ world: w.name, names: unknown, file: config.file, known: all })
      }
      const chosen = names.length === 0 ? all : [...new Set(names)]
      const wasUp = (yield* currentRun)._tag !== "Idle"
      // what the new start needs is checked first: a reset that could not start again stops nothing
      const ready = yield* prepare(deps.selection(), env)
      yield* stopRun
      yield* slices.teardown(sliceWorld(worldId, w), { only: new Set(chosen) })
      yield* registry.addEvent({ worldId, service: null, kind: "reset", message: `reset ${chosen.join(", ")}` })
      if (wasUp) {
        // it keeps its permit: the same world, started again
        return yield* launchStart(ready, { since: Date.now(), resuming: false })
      }
      const portMap = groupPorts(yield* registry.leases(worldId))
      yield* provisionSlices(ready.w, ready.config, ready.userEnv, ready.lookup, (urls) =>
        coordinates(ready.config, portMap, urls, ready.routing)
      )
    })

  /**
   * `berth up <to> --from <this>`: this world's slices, data included, copied into the new world `to`. Its processes
   * stop first (PostgreSQL copies a database only while nobody is connected to it; elsewhere the copy is then
   * consistent) and start again after, whether the copy worked or not; the world's events say so.
   */
  const copySlices = (
    to: { readonly id: number; readonly name: string; readonly slug: string; readonly path: string },
    callerEnv: Readonly<Record<string, string>>
  ) =>
    Effect.gen(function* () {
      const w = yield* row
      const env = envFor(callerEnv)
      const wasUp = (yield* currentRun)._tag !== "Idle"
      // a copy that cannot be made, or after which the world could not start again, stops nothing
      yield* slices.canCopy(sliceWorld(worldId, w), to.name, env.PATH)
      const ready = wasUp ? yield* prepare(deps.selection(), env) : undefined
      if (ready !== undefined) yield* stopRun
      const copied = yield* Effect.either(
        slices.copyWorld(sliceWorld(worldId, w), { ...to, project: w.projectName }, env.PATH)
      )
      yield* registry.addEvent({
        worldId,
        service: null,
        kind: "slices_copied",
        message:
          ready === undefined
            ? `its slices were ${copied._tag === "Right" ? "copied" : "not copied"} into world ${to.name}`
            : `stopped its services while its slices were ${copied._tag === "Right" ? "copied" : "being copied (the copy failed)"} into world ${to.name}, and started them again`
      })
      if (ready !== undefined) {
        // it keeps its permit: the same world, started again
        yield* launchStart(ready, { since: Date.now(), resuming: false })
      }
      if (copied._tag === "Left") return yield* copied.left
    })

  const rebuildGolden = (name: string, callerEnv: Readonly<Record<string, string>>) =>
    Effect.gen(function* () {
      const w = yield* row
      const userEnv = envFor(callerEnv)
      const { loaded, config, dotenv } = yield* loadConfig(configs, w)
      // a golden's migrate and seed are the config's commands too
      yield* mayRun(loaded, { ...userEnv, ...callerEnv })
      const service = Model.slices(config).find((s) => s.name === name)
      if (service === undefined || service.cloneFrom !== "golden") {
        const goldens = Model.slices(config)
          .filter((s) => s.cloneFrom === "golden")
          .map((s) => s.name)
        return yield* new UnknownSlice({
          world: w.name,
          names: [name],
          file: config.file,
          known: goldens,
          golden: true
        })
      }
      const portMap = groupPorts(yield* registry.leases(worldId))
      const lookup = (key: string) => userEnv[key] ?? dotenv.get(key)
      yield* slices.rebuildGolden(
        sliceWorld(worldId, w),
        service,
        lookup,
        sliceInit(w, config, userEnv, lookup, (urls) =>
          coordinates(config, portMap, urls, router.routing(config, w.projectName, w.slug))
        )
      )
    })

  return { reset, copySlices, rebuildGolden }
}
