/**
 * Where a path under a root lands once every link on the way is followed, and whether it stays under that root. A
 * repository can commit links (`.env -> ~/.bashrc`, `cfg -> /elsewhere`), so a check of the text alone lets berth
 * write or run outside the worktree; every path berth writes or runs in is resolved here first. Pure: the caller says
 * what each path on disk is (`lstat` and `readlink`, or a table in a test).
 */

/** What one path is on disk. */
export type Entry =
  | { readonly kind: "link"; readonly target: string }
  | { readonly kind: "folder" }
  | { readonly kind: "file" }
  | { readonly kind: "missing" }

export interface Landing {
  /** where the path lands: absolute, every link followed; a part that does not exist yet is taken as written */
  readonly resolved: string
  /** it stays under the root at every step: no link led out, no `..` climbed out */
  readonly inside: boolean
  /** the link that led out, relative to the root (absent when `..` or an absolute path left it) */
  readonly link?: string
  /** `resolved` relative to the root ("" for the root itself); set when inside */
  readonly relative?: string
}

/** Links followed at most, as Linux does (ELOOP): a loop lands nowhere inside. */
const MAX_LINKS = 40

/** Is `path` the root or under it (not a sibling that merely shares its prefix)? */
export const within = (root: string, path: string): boolean =>
  root === "/" || path === root || path.startsWith(`${root}/`)

const child = (folder: string, name: string) => (folder === "/" ? `/${name}` : `${folder}/${name}`)
const parent = (path: string) => (path.lastIndexOf("/") <= 0 ? "/" : path.slice(0, path.lastIndexOf("/")))
const below = (root: string, path: string) => (path === root ? "" : path.slice(root === "/" ? 1 : root.length + 1))

/**
 * Where `path` (relative to `root`, which must be absolute and free of links: a realpath) lands. Each of its parts
 * is settled in turn — a link followed to its end, `..` taken physically from where the walk stands — and must
 * settle under the root: a link whose end is outside (or a `..` above the root) makes the landing outside, however
 * the rest would come back. A part that does not exist ends the reading of the disk: the rest is taken as written
 * (what a write would create). `followLast: false` leaves a link in the last part unfollowed (what is copied or
 * linked is the link itself, never read through).
 */
export const land = (
  root: string,
  path: string,
  read: (absolute: string) => Entry,
  options: { readonly followLast?: boolean } = {}
): Landing => {
  let links = 0
  /** a part that does not exist was met: nothing further is on disk */
  let gone = false
  /** a walk that cannot end (a loop) */
  let looped = false

  /** The end of `text` read from `from`: each part settled, links followed to their ends. */
  const walk = (
    from: string,
    text: string,
    last: boolean,
    settled?: (at: string, viaLink: string | undefined) => void
  ): string => {
    let at = text.startsWith("/") ? "/" : from
    const parts = text.split("/").filter((p) => p !== "" && p !== ".")
    parts.forEach((part, i) => {
      const final = last && i === parts.length - 1
      let viaLink: string | undefined
      if (part === "..") at = parent(at)
      else {
        const next = child(at, part)
        const entry: Entry = gone || looped ? { kind: "missing" } : read(next)
        if (entry.kind === "link" && (!final || options.followLast !== false)) {
          viaLink = next
          if (++links > MAX_LINKS) {
            looped = true
            at = next
          } else at = walk(at, entry.target, false)
        } else {
          // a file with more parts below it cannot be entered: a write there fails, and nothing below it exists
          if (entry.kind === "missing" || (entry.kind === "file" && !final)) gone = true
          at = next
        }
      }
      settled?.(at, viaLink)
    })
    return at
  }

  let inside = !path.startsWith("/")
  let link: string | undefined
  const resolved = walk(root, path, true, (at, viaLink) => {
    if (!inside || (!looped && within(root, at))) return
    inside = false
    // the part just settled led out: a link (itself under the root, since every part before it was), or `..`
    if (viaLink !== undefined) link = below(root, viaLink)
  })
  return {
    resolved,
    inside,
    ...(link === undefined ? {} : { link }),
    ...(inside ? { relative: below(root, resolved) } : {})
  }
}

/**
 * How a path that lands outside got there, for a message: `is a link to X` (the path itself is the link), `goes
 * through the link L to X` (a folder on its way is), or `leads to X` (`..` or an absolute path). `path` is as written;
 * it may be relative to a folder below the root (an env_file in its service's dir).
 */
export const howItLeaves = (
  path: string,
  landing: { readonly resolved: string; readonly link?: string | undefined }
): string => {
  const written = path
    .split("/")
    .filter((p) => p !== "" && p !== ".")
    .join("/")
  if (landing.link === undefined) return `leads to ${landing.resolved}`
  if (landing.link === written || landing.link.endsWith(`/${written}`)) return `is a link to ${landing.resolved}`
  return `goes through the link ${landing.link} to ${landing.resolved}`
}
