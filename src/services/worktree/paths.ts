/**
 * `domain/paths.ts` on this machine's disk: where a path under a checkout lands, a refusal when it leaves, and
 * writes that never follow a link in their last part. Every path berth writes or runs in goes through here.
 */
import {
  closeSync,
  constants,
  fstatSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readlinkSync,
  readSync,
  realpathSync,
  unlinkSync,
  writeSync
} from "node:fs"
import { resolve } from "node:path"
import * as Data from "effect/Data"
import { PathOutsideWorktree } from "../../domain/errors.js"
import { type Entry, type Landing, land } from "../../domain/paths.js"

/** A path that lands outside its checkout; the world actor makes it `PathOutsideWorktree` with the world's name. */
export class LandsOutside extends Data.TaggedError("LandsOutside")<{
  /** the config field: `services.web.env_file`, `[project] copy`, … */
  readonly field: string
  /** as written */
  readonly path: string
  readonly landing: Landing
}> {
  override get message(): string {
    return `${this.field} ${JSON.stringify(this.path)} lands at ${this.landing.resolved}, outside the checkout`
  }
}

/** The refusal a user sees: `LandsOutside` with the world's name, as it crosses the daemon's RPC. */
export const outsideWorktree = (world: string, e: LandsOutside): PathOutsideWorktree =>
  new PathOutsideWorktree({
    world,
    field: e.field,
    path: e.path,
    resolved: e.landing.resolved,
    ...(e.landing.link === undefined ? {} : { link: e.landing.link })
  })

/** What `path` is on disk, without following it. Unreadable counts as missing: a write there fails anyway. */
export const entryAt = (path: string): Entry => {
  try {
    const stat = lstatSync(path)
    if (stat.isSymbolicLink()) return { kind: "link", target: readlinkSync(path) }
    return stat.isDirectory() ? { kind: "folder" } : { kind: "file" }
  } catch {
    return { kind: "missing" }
  }
}

/** The root as the kernel knows it: a root reached through a link of the user's own (a `/tmp` link) is fine. */
const realRoot = (root: string): string => {
  try {
    return realpathSync(root)
  } catch {
    return resolve(root)
  }
}

/** Where `path` (relative to `root`) lands on this disk. */
export const landing = (root: string, path: string, options?: { readonly followLast?: boolean }): Landing =>
  land(realRoot(root), path, entryAt, options)

/** Where `path` lands under `root`, absolute; throws `LandsOutside` (naming `field`) when it leaves. */
export const landInside = (
  field: string,
  root: string,
  path: string,
  options?: { readonly followLast?: boolean }
): string => {
  const l = landing(root, path, options)
  if (!l.inside) throw new LandsOutside({ field, path, landing: l })
  return l.resolved
}

/**
 * Rewrites the file at `path` (a resolved path: no link on its way) as `update` says — `undefined` deletes it — never
 * through a link in its last part (`O_NOFOLLOW`: a link put there since it was resolved fails the write). Returns
 * false when there was no file and `create` is off.
 */
export const rewriteFile = (
  path: string,
  update: (existing: string | undefined) => string | undefined,
  options: { readonly create: boolean; readonly mode?: number }
): boolean => {
  let fd: number
  let existed = true
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_NOFOLLOW)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT" || !options.create) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return false
      throw e
    }
    existed = false
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, options.mode)
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw new Error(`${path} is not a file`)
    const buffer = Buffer.alloc(stat.size)
    let read = 0
    while (read < stat.size) {
      const n = readSync(fd, buffer, read, stat.size - read, read)
      if (n === 0) break
      read += n
    }
    const text = existed ? buffer.subarray(0, read).toString("utf8") : undefined
    const next = update(text)
    if (existed && next === text) return true
    if (next === undefined) {
      unlinkSync(path)
      return true
    }
    const bytes = Buffer.from(next, "utf8")
    ftruncateSync(fd, 0)
    let written = 0
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written, written)
    return true
  } finally {
    closeSync(fd)
  }
}
