/**
 * Which services of a world an `up` starts: the pure decision behind `berth up -s/-g`. A selection names services and
 * groups; none named means all. What is named brings what it depends on; what is named and unknown is refused.
 */
import * as Either from "effect/Either"
import { UnknownGroup, UnknownService } from "./errors.js"
import { closure, type Graph } from "./graph.js"

export interface Selection {
  readonly services: ReadonlyArray<string>
  readonly groups: ReadonlyArray<string>
}

/** No service and no group named: every service. */
export const selectsAll = (s: Selection): boolean => s.services.length === 0 && s.groups.length === 0

/**
 * The services a selection starts, in start order: the named ones, those of the named groups, and everything they
 * depend on; all of them when none is named. An unknown service or a group no service is in is refused.
 */
export const selectedServices = (
  config: {
    readonly services: ReadonlyArray<{ readonly name: string; readonly groups: ReadonlyArray<string> }>
    readonly graph: Graph
    readonly file: string
  },
  sel: Selection
): Either.Either<ReadonlyArray<string>, UnknownService | UnknownGroup> => {
  if (selectsAll(sel)) return Either.right(config.graph.order)
  const known = config.services.map((s) => s.name)
  const unknown = sel.services.filter((s) => !known.includes(s))
  if (unknown.length > 0) {
    return Either.left(new UnknownService({ world: null, names: unknown, file: config.file, known }))
  }
  const empty = sel.groups.filter((g) => !config.services.some((s) => s.groups.includes(g)))
  if (empty.length > 0) {
    const groups = [...new Set(config.services.flatMap((s) => s.groups))].sort()
    return Either.left(new UnknownGroup({ world: null, names: empty, file: config.file, known: groups }))
  }
  const inGroups = config.services.filter((s) => s.groups.some((g) => sel.groups.includes(g))).map((s) => s.name)
  return Either.right(closure(config.graph, [...sel.services, ...inGroups]))
}

/** The union of two selections: an `up -s b` after `up -s a` runs both; one that selects all absorbs the other. */
export const widen = (a: Selection, b: Selection): Selection =>
  selectsAll(a)
    ? a
    : selectsAll(b)
      ? b
      : { services: [...new Set([...a.services, ...b.services])], groups: [...new Set([...a.groups, ...b.groups])] }

/** `a` starts everything `b` names: `widen(a, b)` would start no more than `a`. */
export const covers = (a: Selection, b: Selection): boolean =>
  selectsAll(a) ||
  (!selectsAll(b) && b.services.every((s) => a.services.includes(s)) && b.groups.every((g) => a.groups.includes(g)))
