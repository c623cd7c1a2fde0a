/**
 * Golden templates: the pure part. A golden slice is built once per (project, service) — provision, `migrate`, `seed`
 * — and every new world gets a server-side copy. What it was built from is its key: the adapter, the server, the two
 * commands and the content of every file matched by `golden_inputs`, so editing a migration file makes a new golden
 * instead of silently keeping a stale one.
 */
import { createHash } from "node:crypto"
import { sliceIdentifier } from "./names.js"

export interface GoldenRecipe {
  readonly adapter: string
  /** the resolved admin URL (or the storage folder for embedded adapters): another server needs another golden */
  readonly server: string
  readonly migrate: string | undefined
  readonly seed: string | undefined
  /** `[path relative to the worktree, sha256 of its content]`, in any order */
  readonly inputs: ReadonlyArray<readonly [string, string]>
}

/** A hex digest of everything the golden is made from; stable across runs and machines. */
export const goldenKey = (recipe: GoldenRecipe): string => {
  const inputs = [...recipe.inputs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  const canonical = JSON.stringify([
    1,
    recipe.adapter,
    recipe.server,
    recipe.migrate ?? null,
    recipe.seed ?? null,
    inputs
  ])
  return createHash("sha256").update(canonical).digest("hex")
}

/** The golden's slice name: it starts with `golden_`, which no world's slice name (`<project>_…`) can be mistaken for. */
export const goldenName = (project: string, service: string, key: string, maxLength: number): string =>
  sliceIdentifier(["golden", project, service, key.slice(0, 10)], maxLength)

// ---------------------------------------------------------------------------------------------------------------
// `golden_inputs` globs: `*` and `?` within one path segment, `**` across segments, `{a,b}` alternatives.

const escapeRegex = (c: string): string => (/[\\^$.*+?()[\]{}|/]/.test(c) ? `\\${c}` : c)

/** Compiles a glob over `/`-separated relative paths to an anchored regular expression. */
export const globToRegExp = (glob: string): RegExp => {
  let out = ""
  let i = 0
  let braces = 0
  const pattern = glob.replace(/^\.\//, "")
  while (i < pattern.length) {
    const c = pattern[i]!
    if (c === "*") {
      if (pattern[i + 1] === "*") {
        const before = i === 0 || pattern[i - 1] === "/"
        const after = pattern[i + 2] === "/" || i + 2 === pattern.length
        if (before && after) {
          // `**/` matches zero or more whole segments; a trailing `**` matches everything below
          out += pattern[i + 2] === "/" ? "(?:[^/]+/)*" : ".*"
          i += pattern[i + 2] === "/" ? 3 : 2
          continue
        }
      }
      out += "[^/]*"
      i += 1
      continue
    }
    if (c === "?") out += "[^/]"
    else if (c === "{") {
      out += "(?:"
      braces += 1
    } else if (c === "}" && braces > 0) {
      out += ")"
      braces -= 1
    } else if (c === "," && braces > 0) out += "|"
    else out += escapeRegex(c)
    i += 1
  }
  out += ")".repeat(braces)
  return new RegExp(`^${out}$`)
}

/** The folder a glob cannot match outside of (`migrations/**` → `migrations`), so a walk need not visit the rest. */
export const globBase = (glob: string): string => {
  const segments = glob.replace(/^\.\//, "").split("/")
  const fixed: Array<string> = []
  for (const segment of segments.slice(0, -1)) {
    if (/[*?{}[\]]/.test(segment)) break
    fixed.push(segment)
  }
  return fixed.join("/")
}

/** A glob that would read outside the worktree (absolute, or climbing with `..`). */
export const escapesWorktree = (glob: string): boolean =>
  glob.startsWith("/") || glob.split("/").some((segment) => segment === "..")
