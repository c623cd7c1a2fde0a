/**
 * Files of a checkout named by globs: what `golden_inputs` hashes and what `[project] copy`/`link` bring from the
 * main checkout into a new worktree. Only the folders a glob can reach are walked; `.git` and `node_modules` only when
 * a glob names them. No link is followed out of a checkout: the walk never enters a link, and a glob's fixed folder
 * (and every path brought) is resolved by `paths.ts` first.
 */
import { cpSync, lstatSync, mkdirSync, readdirSync, symlinkSync } from "node:fs"
import { dirname, join } from "node:path"
import { escapesWorktree, globBase, globToRegExp } from "../../domain/golden.js"
import { landing, landInside } from "./paths.js"

const SKIPPED = new Set([".git", "node_modules"])
/** a glob matching more than this many files is almost certainly a mistake (`**` over the whole repository) */
export const MAX_FILES = 20_000

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

/**
 * The `/`-separated paths under `root` of the files the globs match, sorted; throws (naming `what`) when one glob's
 * folder holds more than `MAX_FILES` files, and `LandsOutside` (naming `field`) when a glob's fixed folder is reached
 * through a link out of `root`.
 */
export const matchingFiles = (
  root: string,
  globs: ReadonlyArray<string>,
  what: string,
  field: string = what
): ReadonlyArray<string> => {
  if (globs.length === 0) return []
  const patterns = globs.map(globToRegExp)
  const named = new Set(globs.flatMap((g) => g.split("/")).filter((segment) => SKIPPED.has(segment)))
  const files = new Set<string>()
  for (const glob of globs) {
    const start = globBase(glob)
    if (start !== "") landInside(field, root, start)
  }
  for (const start of new Set(globs.map(globBase))) {
    const found: Array<string> = []
    // the folder landed inside (above): the walk may read it through its links
    walk(root, start, found, named)
    if (found.length > MAX_FILES) {
      throw new Error(`${what} match more than ${MAX_FILES} files under ${join(root, start)}; narrow them`)
    }
    for (const file of found) if (patterns.some((p) => p.test(file))) files.add(file)
  }
  return [...files].sort()
}

export interface Brought {
  readonly copied: ReadonlyArray<string>
  readonly linked: ReadonlyArray<string>
}

/** A pattern without glob characters names one path, a file or a whole folder (`node_modules`, `.env`). */
const isLiteral = (pattern: string) => !/[*?{}[\]]/.test(pattern)

const exists = (path: string) => {
  try {
    lstatSync(path)
    return true
  } catch {
    return false
  }
}

/** What `patterns` name in `root`: literal paths that exist there, and the files the globs match. */
const named = (root: string, patterns: ReadonlyArray<string>, field: string): ReadonlyArray<string> => {
  const literal = patterns.filter(isLiteral).map((p) => p.replace(/^\.\//, "").replace(/\/+$/, ""))
  return [
    ...new Set([
      ...literal.filter((p) => p !== "" && exists(landInside(field, root, p, { followLast: false }))),
      ...matchingFiles(
        root,
        patterns.filter((p) => !isLiteral(p)),
        field
      )
    ])
  ].sort()
}

/**
 * `[project] copy` and `link`: what the main checkout has that a new worktree lacks (gitignored files: `.env`,
 * local config), copied or symlinked into it before its `setup`. A path the worktree already has is never touched.
 * Patterns that leave the checkout are refused by `check` and skipped here. Every path is resolved in both checkouts
 * before anything is written: one that reaches through a link out of either (a branch may commit `cfg -> /elsewhere`)
 * throws `LandsOutside`, and nothing is brought. A path that is itself a link is brought as the link, never read
 * through.
 */
export const bringIntoWorktree = (
  mainRoot: string,
  worktree: string,
  patterns: { readonly copy: ReadonlyArray<string>; readonly link: ReadonlyArray<string> }
): Brought => {
  const inside = (list: ReadonlyArray<string>) => list.filter((p) => !escapesWorktree(p))
  const plan = (field: string, list: ReadonlyArray<string>) =>
    named(mainRoot, inside(list), field).flatMap((path) => {
      const target = landInside(field, worktree, path, { followLast: false })
      return exists(target) ? [] : [{ path, source: join(mainRoot, path) }]
    })
  const copies = plan("[project] copy", patterns.copy)
  const links = plan("[project] link", patterns.link).filter((l) => !copies.some((c) => c.path === l.path))
  // resolved again as each is written: one brought just now may hold the next (a linked folder holds its files)
  const write = (list: typeof copies, bring: (source: string, target: string) => void) =>
    list.flatMap(({ path, source }) => {
      const now = landing(worktree, path, { followLast: false })
      if (!now.inside || exists(now.resolved)) return []
      mkdirSync(dirname(now.resolved), { recursive: true })
      bring(source, now.resolved)
      return [path]
    })
  const copied = write(copies, (source, target) =>
    cpSync(source, target, { recursive: true, errorOnExist: false, force: false, verbatimSymlinks: true })
  )
  const linked = write(links, (source, target) => symlinkSync(source, target))
  return { copied, linked }
}
