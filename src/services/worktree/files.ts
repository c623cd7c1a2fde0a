/**
 * Files of a checkout named by globs: what `golden_inputs` hashes and what `[project] copy`/`link` bring from the
 * main checkout into a new worktree. Only the folders a glob can reach are walked; `.git` and `node_modules` only when
 * a glob names them.
 */
import { cpSync, lstatSync, mkdirSync, readdirSync, statSync, symlinkSync } from "node:fs"
import { dirname, join } from "node:path"
import { escapesWorktree, globBase, globToRegExp } from "../../domain/golden.js"

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
 * folder holds more than `MAX_FILES` files.
 */
export const matchingFiles = (root: string, globs: ReadonlyArray<string>, what: string): ReadonlyArray<string> => {
  if (globs.length === 0) return []
  const patterns = globs.map(globToRegExp)
  const named = new Set(globs.flatMap((g) => g.split("/")).filter((segment) => SKIPPED.has(segment)))
  const files = new Set<string>()
  for (const start of new Set(globs.map(globBase))) {
    const found: Array<string> = []
    try {
      if (start !== "" && !statSync(join(root, start)).isDirectory()) continue
    } catch {
      continue
    }
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
const named = (root: string, patterns: ReadonlyArray<string>, what: string): ReadonlyArray<string> => {
  const literal = patterns.filter(isLiteral).map((p) => p.replace(/^\.\//, "").replace(/\/+$/, ""))
  return [
    ...new Set([
      ...literal.filter((p) => p !== "" && exists(join(root, p))),
      ...matchingFiles(
        root,
        patterns.filter((p) => !isLiteral(p)),
        what
      )
    ])
  ].sort()
}

/**
 * `[project] copy` and `link`: what the main checkout has that a new worktree lacks (gitignored files: `.env`,
 * local config), copied or symlinked into it before its `setup`. A path the worktree already has is never touched.
 * Patterns that leave the checkout are refused by `check` and skipped here.
 */
export const bringIntoWorktree = (
  mainRoot: string,
  worktree: string,
  patterns: { readonly copy: ReadonlyArray<string>; readonly link: ReadonlyArray<string> }
): Brought => {
  const inside = (list: ReadonlyArray<string>) => list.filter((p) => !escapesWorktree(p))
  const copied: Array<string> = []
  const linked: Array<string> = []
  for (const path of named(mainRoot, inside(patterns.copy), "[project] copy")) {
    const target = join(worktree, path)
    if (exists(target)) continue
    mkdirSync(dirname(target), { recursive: true })
    cpSync(join(mainRoot, path), target, { recursive: true, errorOnExist: false, force: false, verbatimSymlinks: true })
    copied.push(path)
  }
  for (const path of named(mainRoot, inside(patterns.link), "[project] link")) {
    const target = join(worktree, path)
    if (exists(target)) continue
    mkdirSync(dirname(target), { recursive: true })
    symlinkSync(join(mainRoot, path), target)
    linked.push(path)
  }
  return { copied, linked }
}
