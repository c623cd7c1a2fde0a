/**
 * Where a world's slices are recorded besides this machine's registry. A world of this machine alone has nothing
 * more: its slices carry this installation's owner mark. A world that runs anywhere can move to another machine, so
 * its slices carry the cluster's mark, which every member treats as its own, and are recorded in the cluster's
 * shared tables under the generation of the world that made them: a machine that finds its world's slice ready on
 * the server it reaches uses it as it is (the world's data moves with it), and a machine that lost the world (its
 * generation is no longer the row's) neither makes, overwrites nor drops it. The cluster session installs the
 * ledger while this machine is a member (cluster/slices.ts); without one, every world's slices are its own.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { DiskFull, InternalError } from "../../domain/errors.js"

/** The cluster's hold on one world's slices, for this machine's generation of the world. */
export interface SharedSlices {
  /** the owner mark of the world's slices: the cluster's, the same on every member */
  readonly owner: string
  /**
   * Claims a slice (its name and server) for this generation: "ready" when the same slice was made already (use it
   * as it is), "moved" when one of its name was made under another server, which may be the same server written
   * another way (use what is there as it is; make it only where there is none), "provisioning" when it is this
   * machine's to make, undefined when this machine no longer holds the world.
   */
  readonly claim: (
    service: string,
    name: string,
    server: string
  ) => Effect.Effect<"ready" | "moved" | "provisioning" | undefined, InternalError | DiskFull>
  /** the claimed slice is made and filled; false when this machine no longer holds the world */
  readonly ready: (service: string) => Effect.Effect<boolean, InternalError | DiskFull>
  /** whether this machine may still overwrite or drop the world's slices (read right before it does) */
  readonly holds: Effect.Effect<boolean, InternalError | DiskFull>
  /**
   * Whether this machine may drop its copy of a slice (name and server): while it holds the world, or when the
   * cluster's record names another slice (or none) for the world — never the one another machine runs the world on,
   * nor one of its name on a server written another way
   */
  readonly mayDrop: (service: string, name: string, server: string) => Effect.Effect<boolean, InternalError | DiskFull>
  /** the slice was dropped: its record goes; false when this machine no longer holds the world */
  readonly dropped: (service: string) => Effect.Effect<boolean, InternalError | DiskFull>
}

/**
 * The slices that worlds which ran anywhere left on their servers when they were removed while the machine that made
 * them was away (or could not drop them): any member that reaches such a server drops them in its gc.
 */
export interface SliceOrphans {
  /** the cluster's owner mark, which these slices carry */
  readonly owner: string
  /** each by name and server (a hash, as `SharedSlices.claim` takes it); `claimed`: a world has taken the name since */
  readonly list: Effect.Effect<
    ReadonlyArray<{ readonly name: string; readonly server: string; readonly claimed: boolean }>,
    InternalError | DiskFull
  >
  /** the orphan is dropped, or a world claimed its name: its record goes */
  readonly cleared: (name: string, server: string) => Effect.Effect<void, InternalError | DiskFull>
}

export interface SliceLedgerService {
  /** the cluster's hold on the slices of world `project`/`slug`, when it runs anywhere */
  readonly of: (project: string, slug: string) => Effect.Effect<Option.Option<SharedSlices>>
  /** the cluster's orphaned slices, while this machine is a member */
  readonly orphans: Effect.Effect<Option.Option<SliceOrphans>>
  /** what `of` and `orphans` answer from now on (the cluster session installs them, and puts back none when it ends) */
  readonly install: (
    of: (project: string, slug: string) => Effect.Effect<Option.Option<SharedSlices>>,
    orphans?: SliceOrphans
  ) => Effect.Effect<void>
}

export class SliceLedger extends Context.Tag("berth/SliceLedger")<SliceLedger, SliceLedgerService>() {}

const none = (_project: string, _slug: string) => Effect.succeedNone

export const SliceLedgerLive = Layer.sync(SliceLedger, () => {
  let current: SliceLedgerService["of"] = none
  let orphans: SliceOrphans | undefined
  return {
    of: (project, slug) => Effect.suspend(() => current(project, slug)),
    orphans: Effect.sync(() => Option.fromNullable(orphans)),
    install: (of, withOrphans) =>
      Effect.sync(() => {
        current = of
        orphans = withOrphans
      })
  }
})
