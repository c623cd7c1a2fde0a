/**
 * Port planning: every (project, world, service, port name) prefers a stable port derived from a hash, probes
 * linearly from there on collision, and keeps its lease across runs. Pure hashes alone collide and count-based
 * slots get reused after removals; hashed preference plus persisted leases fixes both (DESIGN §5). Whether a port
 * is really bindable is checked by the caller: this module only decides.
 */
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import { fnv1a32 } from "./hash.js"

/** Inclusive on both ends. */
export interface PortRange {
  readonly from: number
  readonly to: number
}

export const defaultPortRange: PortRange = { from: 4000, to: 5999 }

/** Below 1024 binding needs privileges; above 65535 there are no ports. */
const MIN_PORT = 1024
const MAX_PORT = 65_535

/**
 * Ports browsers (and Node's fetch) refuse to connect to: the Fetch standard's "bad port" list, which Chromium
 * (`kRestrictedPorts`), Firefox and WebKit share, including the later additions 4190, 6679 (2024) and 0 (2025).
 * A dev server on one of these works with curl and fails in the browser with ERR_UNSAFE_PORT.
 */
export const blockedPorts: ReadonlySet<number> = new Set([
  0, 1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110,
  111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532,
  540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061,
  6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080
])

/** Number of ports in the range, blocked ones included. */
export const rangeSize = (range: PortRange): number => range.to - range.from + 1

/** Ports of the range a service may actually get. */
export const usablePorts = (range: PortRange): number => {
  let count = rangeSize(range)
  for (const port of blockedPorts) if (port >= range.from && port <= range.to) count--
  return count
}

export const formatPortRange = (range: PortRange): string => `${range.from}-${range.to}`

const RANGE = /^\s*(\d+)\s*-\s*(\d+)\s*$/

/** Parses a user's `FROM-TO` setting; the message says what is wrong and what a valid value looks like. */
export const parsePortRange = (input: string): Either.Either<PortRange, string> => {
  const match = RANGE.exec(input)
  if (match === null) return Either.left(`invalid port range "${input}": expected FROM-TO, e.g. 4000-5999`)
  const range = { from: Number(match[1]), to: Number(match[2]) }
  if (range.from < MIN_PORT) {
    return Either.left(`invalid port range "${input}": ${range.from} is below ${MIN_PORT} (privileged ports)`)
  }
  if (range.to > MAX_PORT) return Either.left(`invalid port range "${input}": ${range.to} is above ${MAX_PORT}`)
  if (range.from >= range.to) {
    return Either.left(`invalid port range "${input}": the first port must be lower than the last`)
  }
  if (usablePorts(range) === 0) {
    return Either.left(`invalid port range "${input}": every port in it is one browsers refuse to connect to`)
  }
  return Either.right(range)
}

export interface PortOwner {
  readonly project: string
  readonly world: string
  readonly service: string
  /** `""` for the service's main port, else the name from `ports = [...]`. */
  readonly name: string
}

/** Escapes `%` and `/` so any four strings give a distinct key (a branch may well contain a slash). */
const keyPart = (s: string): string => s.replaceAll("%", "%25").replaceAll("/", "%2F")

/** The lease key of a port and the string hashed for its preference: `project/world/service/name`. */
export const portKey = (owner: PortOwner): string =>
  [owner.project, owner.world, owner.service, owner.name].map(keyPart).join("/")

/** Where probing for `key` begins. */
export const preferredPort = (key: string, range: PortRange): number => range.from + (fnv1a32(key) % rangeSize(range))

/** The preferred port, then upward, wrapping to `from`: each port of the range once, blocked ones skipped. */
export function* candidatePorts(key: string, range: PortRange): Generator<number, void, undefined> {
  const size = rangeSize(range)
  const offset = preferredPort(key, range) - range.from
  for (let i = 0; i < size; i++) {
    const port = range.from + ((offset + i) % size)
    if (!blockedPorts.has(port)) yield port
  }
}

export interface RangeExhausted {
  readonly _tag: "RangeExhausted"
  readonly range: PortRange
  /** Distinct keys asked for. */
  readonly wanted: number
  /** Ports of the range that were neither blocked nor taken when planning began. */
  readonly available: number
}

export const RangeExhausted = Data.tagged<RangeExhausted>("RangeExhausted")

/**
 * Gives every key a port. A key's existing lease is kept when it still lies in the range, is not blocked and no
 * other key of this plan holds it, even when it is in `taken` (which usually lists every lease, ours included);
 * the caller re-checks that it is still bindable. Leases are honoured before fresh keys probe, so a fresh key can
 * never grab a port that a later key already holds. Fresh keys then take their first candidate that is neither in
 * `taken` nor already chosen, in request order, which keeps the plan deterministic.
 */
export const planPorts = (
  requests: ReadonlyArray<string>,
  range: PortRange,
  taken: ReadonlySet<number>,
  existing: ReadonlyMap<string, number>
): Either.Either<ReadonlyMap<string, number>, RangeExhausted> => {
  const keys = [...new Set(requests)]
  const chosen = new Map<string, number>()
  const used = new Set<number>()
  for (const key of keys) {
    const lease = existing.get(key)
    if (lease === undefined || lease < range.from || lease > range.to || blockedPorts.has(lease) || used.has(lease)) {
      continue
    }
    chosen.set(key, lease)
    used.add(lease)
  }
  for (const key of keys) {
    if (chosen.has(key)) continue
    let found: number | undefined
    for (const port of candidatePorts(key, range)) {
      if (!taken.has(port) && !used.has(port)) {
        found = port
        break
      }
    }
    if (found === undefined) {
      let available = 0
      for (const port of candidatePorts(key, range)) if (!taken.has(port)) available++
      return Either.left(RangeExhausted({ range, wanted: keys.length, available }))
    }
    chosen.set(key, found)
    used.add(found)
  }
  // report in request order, whichever pass chose the port
  return Either.right(new Map(keys.map((key) => [key, chosen.get(key)!])))
}
