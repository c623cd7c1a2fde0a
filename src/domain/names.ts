/**
 * Pure naming rules: world slugs (DNS labels in host names), project labels, identifiers for data slices,
 * env-var keys and "did you mean" suggestions. Everything here is deterministic so a world keeps its names.
 */
import { shortHash } from "./hash.js"

/** RFC 1035 limit for one label of a host name. */
export const MAX_DNS_LABEL = 63

const HASH_LENGTH = 6
const IDENTIFIER_HASH_LENGTH = 8

const COMBINING_MARKS = /\p{M}+/gu
const NON_SLUG_RUN = /[^a-z0-9]+/g
const EDGE_DASHES = /^-+|-+$/g
const TRAILING_DASHES = /-+$/
const DNS_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

/** Branch names carry accents, slashes and worse; reduce them to `[a-z0-9-]` so they can sit in a host name. */
export const slugify = (input: string): string => {
  const slug = input
    .normalize("NFKD")
    .replace(COMBINING_MARKS, "")
    .toLowerCase()
    .replace(NON_SLUG_RUN, "-")
    .replace(EDGE_DASHES, "")
  return slug === "" ? "x" : slug
}

/** `slug` shortened so that `-<hash>` still fits in `max`; never ends with `-` (a slug never starts with one). */
const withSuffix = (slug: string, suffix: string, max: number): string =>
  `${slug.slice(0, max - suffix.length - 1).replace(TRAILING_DASHES, "")}-${suffix}`

/** The slug a name wants; long names keep a readable prefix plus a hash of the full name so they stay distinct. */
export const baseSlug = (name: string): string => {
  const slug = slugify(name)
  return slug.length <= MAX_DNS_LABEL ? slug : withSuffix(slug, shortHash(name, HASH_LENGTH), MAX_DNS_LABEL)
}

/**
 * The slug for `name` given the slugs already handed out (`taken`: slug → name holding it).
 * Distinct names that slugify alike (`a/fix`, `A_Fix`) get hashed suffixes; deterministic so that re-running
 * with the same `taken` map gives the same answer.
 */
export const assignSlug = (name: string, taken: ReadonlyMap<string, string>): string => {
  const isFree = (slug: string): boolean => {
    const holder = taken.get(slug)
    return holder === undefined || holder === name
  }
  const base = baseSlug(name)
  if (isFree(base)) return base
  for (let attempt = 0; ; attempt++) {
    const seed = attempt === 0 ? name : `${name}#${attempt}`
    const candidate = withSuffix(base, shortHash(seed, HASH_LENGTH), MAX_DNS_LABEL)
    if (isFree(candidate)) return candidate
  }
}

/** The project part of host names (`web.<slug>.<project>.localhost`): same rules as a world's base slug. */
export const projectLabel = (name: string): string => baseSlug(name)

/**
 * The label of a repository's project given the labels other repositories hold: its name's label when free, else
 * that plus a short hash of the repository (its git common dir), so two clones named alike never share a host, a
 * slice or a golden. Deterministic for the same inputs.
 */
export const assignProjectLabel = (name: string, repository: string, taken: ReadonlySet<string>): string => {
  const base = projectLabel(name)
  if (!taken.has(base)) return base
  for (let attempt = 0; ; attempt++) {
    const candidate = withSuffix(
      base,
      shortHash(attempt === 0 ? repository : `${repository}#${attempt}`, 4),
      MAX_DNS_LABEL
    )
    if (!taken.has(candidate)) return candidate
  }
}

/** Whether `s` can be used as one label of a host name (lower-case only, as we generate them). */
export const isDnsLabel = (s: string): boolean => DNS_LABEL.test(s)

const NON_IDENTIFIER_RUN = /[^a-z0-9]+/g
const UNDERSCORE_RUN = /_{2,}/g
const EDGE_UNDERSCORES = /^_+|_+$/g
const TRAILING_UNDERSCORES = /_+$/

/**
 * A name for a database, vhost, schema, … made from e.g. `[project, worldSlug, service]`. Backends differ in what
 * they accept, so this stays in the common subset `^[a-z][a-z0-9_]*$`; over-long names keep a prefix plus a hash of
 * the whole so they stay distinct. `maxLength` is assumed to be at least 16 (Postgres allows 63, MySQL 64).
 */
export const sliceIdentifier = (parts: ReadonlyArray<string>, maxLength: number): string => {
  const joined = parts
    .map((part) => part.toLowerCase().replace(NON_IDENTIFIER_RUN, "_"))
    .join("_")
    .replace(UNDERSCORE_RUN, "_")
    .replace(EDGE_UNDERSCORES, "")
  const identifier = joined === "" ? "b" : /^[a-z]/.test(joined) ? joined : `b_${joined}`
  if (identifier.length <= maxLength) return identifier
  const suffix = shortHash(identifier, IDENTIFIER_HASH_LENGTH)
  // the head always keeps its leading letter, even for a (disallowed) tiny maxLength
  const head = identifier.slice(0, Math.max(1, maxLength - suffix.length - 1)).replace(TRAILING_UNDERSCORES, "")
  return `${head}_${suffix}`
}

/** `my-api` → `MY_API`: how a service name appears in the env vars handed to other services. */
export const envKey = (name: string): string => {
  const key = name.toUpperCase().replace(/[^A-Z0-9_]/gu, "_")
  if (key === "") return "_"
  return /^[0-9]/.test(key) ? `_${key}` : key
}

/** Optimal string alignment distance (Damerau–Levenshtein where a transposed pair is not edited again). */
const osaDistance = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): number => {
  const width = b.length + 1
  // three rolling rows: two back (for transpositions), previous and current
  let twoBack: Array<number> = new Array<number>(width).fill(0)
  let previous: Array<number> = Array.from({ length: width }, (_, j) => j)
  let current: Array<number> = new Array<number>(width).fill(0)
  for (let i = 1; i <= a.length; i++) {
    current[0] = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, twoBack[j - 2]! + 1)
      }
      current[j] = best
    }
    const recycled = twoBack
    twoBack = previous
    previous = current
    current = recycled
  }
  return previous[b.length]!
}

/** Code points, so an emoji counts as one edit rather than two. */
const chars = (s: string): ReadonlyArray<string> => Array.from(s.toLowerCase())

/** The candidate the user most likely meant, for "did you mean …?" hints; `undefined` when nothing is close. */
export const closestName = (input: string, candidates: Iterable<string>): string | undefined => {
  const wanted = chars(input)
  const limit = Math.max(2, Math.floor(input.length / 3))
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of candidates) {
    const distance = osaDistance(wanted, chars(candidate))
    if (distance <= limit && distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return best
}
