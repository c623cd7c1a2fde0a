/**
 * The ownership protocol every server adapter follows, written once: lock the name → look at what the server holds
 * under it → create it with this installation's mark → settle a race lost to someone outside berth's lock. And its
 * mirror for teardown: lock → look → drop only what is ours. Each adapter supplies the steps in its server's terms
 * (a database comment, a meta table, a KV bucket); the decisions — when a name is reused, refused or dropped — live
 * here, so they cannot drift apart between adapters.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { AdapterError } from "./contract.js"

/**
 * What a name on a server is to this installation, whatever the adapter's finer states:
 * `ours` (marked by this owner), `unfinished` (this owner's, cut short by a crash before its mark: made again),
 * `foreign` (unmarked, or another installation's: never reused, dropped or listed), `missing`.
 */
export type Standing = "missing" | "ours" | "unfinished" | "foreign"

/** `Adapter.standing` from the protocol's reading: a half-made slice of this owner's is its own (provision ends it). */
export const ownerStanding = (standing: Standing): "missing" | "ours" | "foreign" =>
  standing === "unfinished" ? "ours" : standing

export interface Claim<S, E> {
  /** serialises berth's verbs on this name (a server-side lock that ends with the connection); none where the create decides alone */
  readonly lock: Effect.Effect<void, E | AdapterError>
  /** what the server holds under the name now */
  readonly look: Effect.Effect<S, E>
  readonly standing: (state: S) => Standing
  /** drops what a crash left `unfinished`, so that `create` starts from nothing */
  readonly clear: Effect.Effect<void, E>
  /** makes the slice with its mark; false when the name was taken first (by someone outside berth's lock) */
  readonly create: Effect.Effect<boolean, E | AdapterError>
  /** how long to keep looking for the winner's mark after a lost race (default: one look) */
  readonly settle?: Schedule.Schedule<unknown, S>
  /** the error for a name that is not ours to reuse */
  readonly taken: (state: S) => AdapterError
  /** the error for a name that appeared and vanished (or stayed unfinished) while the race settled */
  readonly vanished: (state: S) => AdapterError
}

/** Looks until the standing is no longer one a racing creator passes through on its way to its mark. */
const settled = <S, E>(claim: Claim<S, E>): Effect.Effect<S, E> => {
  if (claim.settle === undefined) return claim.look
  const unsettled = (state: S) => {
    const standing = claim.standing(state)
    return standing === "foreign" || standing === "unfinished"
  }
  return Effect.repeat(claim.look, Schedule.passthrough(Schedule.whileInput(claim.settle, unsettled)))
}

/** Creates the slice unless it exists already as ours: true when it was created now. */
export const provisionOwned = <S, E>(claim: Claim<S, E>): Effect.Effect<boolean, E | AdapterError> =>
  Effect.gen(function* () {
    yield* claim.lock
    const before = yield* claim.look
    const standing = claim.standing(before)
    if (standing === "ours") return false
    if (standing === "foreign") return yield* Effect.fail(claim.taken(before))
    if (standing === "unfinished") yield* claim.clear
    if (yield* claim.create) return true
    const after = yield* settled(claim)
    const now = claim.standing(after)
    if (now === "ours") return false
    return yield* Effect.fail(now === "foreign" ? claim.taken(after) : claim.vanished(after))
  })

export interface Release<S, E> {
  readonly lock: Effect.Effect<void, E | AdapterError>
  readonly look: Effect.Effect<S, E>
  readonly standing: (state: S) => Standing
  /** drops an owned (or unfinished) slice */
  readonly drop: Effect.Effect<void, E>
  /** the error for a name that is not ours to drop */
  readonly notOwned: (state: S) => AdapterError
  /** runs after the drop, and when the name was missing: clears marks a crash left behind */
  readonly after?: Effect.Effect<void, E>
}

/** Drops the slice if it exists and is ours; a missing one is fine, a foreign one is refused. */
export const teardownOwned = <S, E>(release: Release<S, E>): Effect.Effect<void, E | AdapterError> =>
  Effect.gen(function* () {
    yield* release.lock
    const state = yield* release.look
    const standing = release.standing(state)
    if (standing === "foreign") return yield* Effect.fail(release.notOwned(state))
    if (standing !== "missing") yield* release.drop
    if (release.after !== undefined) yield* release.after
  })

/**
 * A schedule of fixed pauses, one per retry: `pauses(100, 250)` retries twice, after 100 ms and then 250 ms. The
 * adapters' retry policies are all of this shape.
 */
export const pauses = (first: number, ...rest: ReadonlyArray<number>): Schedule.Schedule<Duration.Duration> =>
  Schedule.fromDelays(Duration.millis(first), ...rest.map((ms) => Duration.millis(ms)))
