/**
 * What every adapter implements. A slice is one world's private piece of a shared server (a database, a Redis DB, a
 * vhost) or of an embedded store (a SQLite file, a directory). Adapters are called by the daemon's Slices service;
 * every verb is idempotent, and an adapter only ever drops what it created (ownership is recorded in the registry and,
 * where the server allows, marked on the server too).
 *
 * Creation is atomic with its mark: the daemon may be killed at any point, so nothing unmarked is ever left under a
 * slice's name. What a crash does leave half-made (under a name of its own, or with an intent recorded first) must be
 * recognisable as this installation's: `list` returns it, under a name `teardown` accepts, `teardown` of the slice
 * removes it, and it never stands in the way of a later `provision` or `clone` of the slice.
 */
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"

export interface Slice {
  /** the adapter name as written (`mariadb`), not its family */
  readonly adapter: string
  readonly project: string
  readonly world: string
  readonly service: string
  /** a safe identifier for the slice (`<project>_<world slug>_<service>`), unique per server */
  readonly name: string
  /**
   * which berth installation (BERTH_HOME) made it: part of the server-side mark, so that `list` (and so gc) only ever
   * sees this installation's slices on a server that several share
   */
  readonly owner: string
  /** where embedded adapters keep their slices: a folder under BERTH_HOME, created 0700 */
  readonly storage: string
  /** the resolved `admin_url`, when the service has one (never logged) */
  readonly adminUrl: string | undefined
  /** the adapter-specific keys of the service's table */
  readonly options: Readonly<Record<string, unknown>>
}

export interface Capabilities {
  /** can copy a slice server-side (`clone`) */
  readonly clone: boolean
}

/** What went wrong, as callers act on it (the SDK, which stands alone, lists the same). */
export const adapterErrorKinds = [
  "unreachable",
  "authentication",
  "grant",
  "taken",
  "not-owned",
  "invalid",
  "failed"
] as const

export type AdapterErrorKind = (typeof adapterErrorKinds)[number]

export class AdapterError extends Data.TaggedError("AdapterError")<{
  readonly adapter: string
  readonly kind: AdapterErrorKind
  readonly message: string
}> {}

/** where `list` looks, and whose slices it returns */
export type ListScope = Pick<Slice, "storage" | "adminUrl" | "options" | "owner">

export interface Adapter {
  readonly capabilities: Capabilities
  /** creates the slice if it does not exist; true when it was created now */
  readonly provision: (slice: Slice) => Effect.Effect<boolean, AdapterError>
  /** the address behind `${SLICE.url}` */
  readonly resolve: (slice: Slice) => Effect.Effect<string, AdapterError>
  /** drops the slice if it exists (and is ours) */
  readonly teardown: (slice: Slice) => Effect.Effect<void, AdapterError>
  /**
   * gives slice `from` the name of `to` (which must not exist), marking it as `to`; optional. berth keeps a spare
   * copy of a golden made ahead of time and renames it into the next new world, where the server can do that cheaply
   */
  readonly rename?: (from: Slice, to: Slice) => Effect.Effect<void, AdapterError>
  /** makes `to` a copy of `from`; `to` may exist (owned) and is then replaced; only when `capabilities.clone` */
  readonly clone: (from: Slice, to: Slice) => Effect.Effect<void, AdapterError>
  /**
   * makes `to` (which may exist, owned, and is then replaced) a copy of `source`, a database already on the server
   * that is not berth's — the user's own, seeded by hand: only read, never marked, changed or dropped; optional (the
   * PostgreSQL and MySQL adapters). Fails with kind "invalid" when the server has no such database
   */
  readonly copyExisting?: (source: string, to: Slice) => Effect.Effect<void, AdapterError>
  /** the names of the slices this adapter owns in `scope`, half-made ones included (for gc, which tears them down) */
  readonly list: (scope: ListScope) => Effect.Effect<ReadonlyArray<string>, AdapterError>
  /**
   * whose `slice.name` is on its server now: "ours" (marked by `slice.owner`, half-made ones included), "foreign"
   * (anyone else's: another berth installation's, or not berth's at all) or "missing"; optional. Where a new slice's
   * name is "foreign", berth names that slice (and a golden) apart for this installation instead of failing: two
   * installations (two users, or two BERTH_HOMEs) with the same project can share one server
   */
  readonly standing?: (slice: Slice) => Effect.Effect<"missing" | "ours" | "foreign", AdapterError>
  /**
   * for an adapter served by an executable (`adapters/external`): which one serves it now, and in which protocol —
   * berth's own, or binky's through the compatibility layer; undefined while there is none. The world's events say it.
   */
  readonly served?: Effect.Effect<{ readonly executable: string; readonly protocol: "berth" | "binky" } | undefined>
  /**
   * for an adapter served by an executable: fails (kind "invalid", saying what to install) while none serves it, so
   * that berth records nothing for an adapter that does not exist (a mistyped name)
   */
  readonly present?: Effect.Effect<void, AdapterError>
}
