/**
 * The files a golden is built from: every file under the worktree that a `golden_inputs` glob matches, with a hash of
 * its content. Only the folders a glob can reach are walked; `.git` and `node_modules` only when a glob names them.
 */
import { createHash } from "node:crypto"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { escapesWorktree, globBase, globToRegExp } from "../../domain/golden.js"
import { InvalidRequest } from "../../domain/errors.js"

const SKIPPED = new Set([".git", "node_modules"])
/** a glob matching more than this many files is almost certainly a mistake (`**` over the whole repository) */
const MAX_FILES = 20_000

const walk = (root: string, from: string, out: Array<string>, named: ReadonlySet<string>): void => {
  let entries: ReadonlyArray<import("node:fs").Dirent>
  try {
    entries = readdirSync(join(root, from), { withFileTypes: true })
  } catch {
    return
  }
  for (const entry of entries) {
    const path = from === "" ? entry.name : `${from}/${entry.name}`
    if (entry.isDirectory()) {
      if (SKIPPED.has(entry.name) && !named.has(entry.name)) continue
      walk(root, path, out, named)
    } else if (entry.isFile()) out.push(path)
    if (out.length > MAX_FILES) return
  }
}

/** `[relative path, sha256]` of each matched file, sorted by path. */
export const goldenInputs = (worktree: string, globs: ReadonlyArray<string>) =>
  Effect.try({
    try: (): ReadonlyArray<readonly [string, string]> => {
      if (globs.length === 0) return []
      const bad = globs.find(escapesWorktree)
      if (bad !== undefined) throw new Error(`golden_inputs ${JSON.stringify(bad)} reaches outside the worktree`)
      const patterns = globs.map(globToRegExp)
      const named = new Set(globs.flatMap((g) => g.split("/")).filter((segment) => SKIPPED.has(segment)))
      const files = new Set<string>()
      for (const base of new Set(globs.map(globBase))) {
        const found: Array<string> = []
        const start = base === "" ? "" : base
        try {
          if (start !== "" && !statSync(join(worktree, start)).isDirectory()) continue
        } catch {
          continue
        }
        walk(worktree, start, found, named)
        if (found.length > MAX_FILES) {
          throw new Error(
            `golden_inputs match more than ${MAX_FILES} files under ${join(worktree, start)}; narrow them`
          )
        }
        for (const file of found) if (patterns.some((p) => p.test(file))) files.add(file)
      }
      // paths are `/`-separated already: the walk builds them that way
      return [...files].sort().map(
        (file) =>
          [
            file,
            createHash("sha256")
              .update(readFileSync(join(worktree, file)))
              .digest("hex")
          ] as const
      )
    },
    catch: (e) => new InvalidRequest({ reason: e instanceof Error ? e.message : String(e) })
  })
