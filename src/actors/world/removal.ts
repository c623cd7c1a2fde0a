/**
 * A world's end: `remove` (refused while its worktree holds the user's work, unless forced) and `forget`, which the
 * reconciler's teardown of a vanished worktree and a removal a crash cut short come to too — everything stopped, its
 * ports released, its slices dropped, its worktree, row and logs gone.
 */
import { existsSync, rmSync } from "node:fs"
import { dirname } from "node:path"
import * as Effect from "effect/Effect"
import { WorktreeDirty } from "../../domain/errors.js"
import { WorldEvent } from "../../domain/world-state.js"
import type { ConfigFilesService } from "../../services/ConfigFiles.js"
import type { GitService } from "../../services/Git.js"
import type { HomePaths } from "../../services/Home.js"
import type { PortsService } from "../../services/Ports.js"
import type { RegistryService, WorldRow } from "../../services/Registry.js"
import type { SlicesService } from "../../services/slices/Slices.js"
import type { WorktreeFilesService } from "../../services/worktree/WorktreeFiles.js"
import type { Generations } from "./generation.js"
import type { Apply, ReadRow } from "./life.js"
import { loadConfig, sliceWorld } from "./plan.js"
import { SETUP_LOG } from "./prepare.js"

export const makeRemoval = (deps: {
  readonly worldId: number
  readonly row: ReadRow
  readonly registry: RegistryService
  readonly configs: ConfigFilesService
  readonly git: GitService
  readonly ports: PortsService
  readonly slices: SlicesService
  readonly home: HomePaths
  readonly worktreeFiles: WorktreeFilesService
  readonly apply: Apply
  readonly halt: Generations["halt"]
}) => {
  const { worldId, row, registry, configs, git, ports, slices, home, worktreeFiles, apply, halt } = deps

  /**
   * What `env_file` wrote, taken back where the files stay (the main checkout): a file berth made goes. Only files
   * that land inside the worktree: one a link leads out to is not berth's to touch.
   */
  const retractEnvFiles = (w: WorldRow) =>
    Effect.flatMap(Effect.either(loadConfig(configs, w)), (loaded) =>
      loaded._tag === "Left" ? Effect.void : worktreeFiles.retractEnv(w, loaded.right.config)
    )

  const forget = (removeFiles: boolean, force: boolean) =>
    Effect.gen(function* () {
      const w = yield* row
      // a removal a crash cuts short is finished by the next daemon, whatever started it
      yield* registry.setDesired(worldId, "removed")
      yield* apply(WorldEvent.Remove())
      yield* halt
      yield* ports.release(worldId)
      // slices are dropped as the registry recorded them; one whose server is down now stays recorded for gc when the
      // world goes anyway (forced, or its worktree vanished)
      const left = yield* slices.teardown(sliceWorld(worldId, w), { keepOnFailure: force })
      if (left.length > 0) {
        yield* registry.addEvent({
          worldId: null,
          service: null,
          kind: "slices_left",
          message: `world ${w.name}: slices ${left.join(", ")} could not be dropped now; \`berth gc\` will`
        })
      }
      if (removeFiles && !w.isMain) {
        const removed = yield* worktreeFiles.remove(w, force)
        if (!removed && existsSync(w.path)) {
          // a folder that is no worktree of this repository stood at the world's path: not berth's to delete
          yield* registry.addEvent({
            worldId: null,
            service: null,
            kind: "folder_kept",
            message: `world ${w.name}: ${w.path} is not a worktree of ${w.mainRoot}; it was left as it is`
          })
        }
      } else if (!w.isMain && w.path !== "" && !existsSync(w.path)) {
        // its folder was deleted outside berth: git's record of it goes too (only a prune: nothing is there)
        yield* worktreeFiles.remove(w, true).pipe(Effect.ignore)
      }
      yield* apply(WorldEvent.Removed())
      yield* registry.deleteWorld(worldId)
      // its logs go with it: nothing of a removed world is shown again, nor kept on disk
      yield* Effect.sync(() => rmSync(dirname(home.serviceLog(worldId, SETUP_LOG)), { recursive: true, force: true }))
    })

  const remove = (force: boolean) =>
    Effect.gen(function* () {
      const w = yield* row
      // a folder that is no worktree of this repository has no changes of the world's: remove leaves it (`forget`)
      if (!force && existsSync(w.path) && !w.isMain && (yield* git.isWorktreeOf(w.mainRoot, w.path))) {
        const loaded = yield* Effect.either(loadConfig(configs, w))
        const changes = yield* worktreeFiles.userChanges(w, loaded._tag === "Left" ? undefined : loaded.right.config)
        if (changes.length > 0) return yield* new WorktreeDirty({ world: w.name, path: w.path, files: changes })
      }
      yield* registry.setDesired(worldId, "removed")
      // the main checkout's files stay: only what env_file wrote into them is taken back. A worktree's are taken
      // back too, so that git finds it as clean as the check above did
      if (w.isMain || !force) yield* retractEnvFiles(w)
      yield* forget(true, force)
    })

  return { forget, remove }
}

export type Removal = ReturnType<typeof makeRemoval>
