/**
 * The cluster's side of the `SliceLedger` (services/slices/SliceLedger.ts): the slices of a world that runs anywhere
 * carry the cluster's mark and are recorded in `berth_slices` under the generation of the world that claimed them, so
 * that the machine the world moves to uses them as they are when it reaches the same server, and a machine the
 * cluster gave up on writes nothing to them. Every write is fenced in its own statement by the world's row.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InternalError } from "../domain/errors.js"
import type { SharedSlices, SliceLedgerService, SliceOrphans } from "../services/slices/SliceLedger.js"
import type { AnywhereRow, Store } from "./store.js"

const internal = (e: { readonly message: string }) => new InternalError({ reason: e.message })

/**
 * What this machine knows of a world's place in the cluster: its row as last read (or as given), "gone" for a world
 * this machine ran anywhere whose row is gone (removed meanwhile), undefined for a world of this machine alone.
 */
export type Known = AnywhereRow | "gone" | undefined

/**
 * The ledger of this member. A world given to another machine (or gone) gets generation -1 here, which no row has:
 * every fenced write of it is refused, and only a copy that is not the world's slice may be dropped.
 */
export const sharedSlicesOf =
  (
    store: Store,
    machine: string,
    owner: string,
    known: (project: string, slug: string) => Effect.Effect<Known>
  ): SliceLedgerService["of"] =>
  (project, slug) =>
    Effect.map(known(project, slug), (r) => {
      if (r === undefined) return Option.none<SharedSlices>()
      const generation = r !== "gone" && r.owner === machine ? r.generation : -1
      const claim = { project, slug, machine, generation }
      return Option.some<SharedSlices>({
        owner,
        claim: (service, name, server) =>
          store.claimSlice({ ...claim, service, name, server }).pipe(Effect.mapError(internal)),
        ready: (service) => store.settleSlice({ ...claim, service }, "ready").pipe(Effect.mapError(internal)),
        holds: store.holds(project, slug, machine, generation).pipe(Effect.mapError(internal)),
        mayDrop: (service, name, server) =>
          store.mayDropSlice({ ...claim, service, name, server }).pipe(Effect.mapError(internal)),
        dropped: (service) => store.settleSlice({ ...claim, service }, "dropped").pipe(Effect.mapError(internal))
      })
    })

/** The cluster's orphaned slices, as this member's gc sees them (see `SliceOrphans`). */
export const sliceOrphansOf = (store: Store, owner: string): SliceOrphans => ({
  owner,
  list: store.sliceOrphans.pipe(Effect.mapError(internal)),
  cleared: (name, server) => store.clearOrphan(name, server).pipe(Effect.mapError(internal))
})
