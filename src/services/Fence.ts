/**
 * May this world's processes start on this machine now? For a world pinned to its machine, always. For a world that
 * runs anywhere, only while this machine's hold on it in the cluster is known good (`domain/fence.ts`): a daemon that
 * thaws after a freeze must not start again what the cluster has meanwhile started elsewhere. The cluster session
 * installs the rule while this machine is a member; without a cluster the fence is always open.
 *
 * And once they run: a world that runs anywhere has each service's process group held (`cluster/holder.ts`), so that
 * it ends with the daemon even when nothing else of berth is left on the machine to stop it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"

export interface FenceService {
  /** waits until `worldId`'s processes may start here (forever, if they never may: interrupt it) */
  readonly hold: (worldId: number) => Effect.Effect<void>
  /** the rule `hold` follows from now on */
  readonly install: (rule: (worldId: number) => Effect.Effect<void>) => Effect.Effect<void>
  /** ties a service's process group of world `worldId` to the daemon, for as long as the scope lasts (if the rule says so) */
  readonly tie: (worldId: number, pgid: number) => Effect.Effect<void, never, Scope.Scope>
  /** the rule `tie` follows from now on */
  readonly installTie: (
    rule: (worldId: number, pgid: number) => Effect.Effect<void, never, Scope.Scope>
  ) => Effect.Effect<void>
}

export class Fence extends Context.Tag("berth/Fence")<Fence, FenceService>() {}

const open = (_worldId: number) => Effect.void
const loose = (_worldId: number, _pgid: number) => Effect.void

export const FenceLive = Layer.sync(Fence, () => {
  let rule: (worldId: number) => Effect.Effect<void> = open
  let tieRule: (worldId: number, pgid: number) => Effect.Effect<void, never, Scope.Scope> = loose
  return {
    hold: (worldId) => Effect.suspend(() => rule(worldId)),
    install: (next) =>
      Effect.sync(() => {
        rule = next
      }),
    tie: (worldId, pgid) => Effect.suspend(() => tieRule(worldId, pgid)),
    installTie: (next) =>
      Effect.sync(() => {
        tieRule = next
      })
  }
})
