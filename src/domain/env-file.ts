/**
 * `env_file`: a service's resolved environment written into a dotenv file of its folder before it starts, for tools
 * that read `.env` themselves (Prisma, Next.js, Docker Compose). berth owns one marked block of the file and the keys
 * in it; every other line is the user's and stays as written. Pure text in, text out.
 */

const BEGIN = "# >>> berth"
const END = "# <<< berth"
/** In the first line of a file berth made itself: `remove` deletes such a file rather than only its block. */
const CREATED = "(berth created this file)"
/** A user's line that sets a key berth manages, set aside while berth's block stands; `remove` puts it back. */
const HIDDEN = "# berth set this aside while its block stands: "

const KEY = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=/

/** A value as dotenv readers take it back: bare when it is plain, else double-quoted with escapes. */
export const dotenvValue = (value: string): string =>
  /^[A-Za-z0-9_./:@%+,=-]*$/.test(value)
    ? value
    : `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\$/g, "\\$")}"`

interface Parts {
  /** the user's lines, the block taken out */
  readonly outside: ReadonlyArray<string>
  /** where the block stood among them (the end when there was none) */
  readonly at: number
  readonly created: boolean
  readonly hadBlock: boolean
}

const split = (text: string): Parts => {
  const lines = text === "" ? [] : text.replace(/\n$/, "").split("\n")
  const outside: Array<string> = []
  let at = -1
  let inBlock = false
  let created = false
  for (const line of lines) {
    if (!inBlock && line.startsWith(BEGIN)) {
      inBlock = true
      // a file edited by hand may hold two blocks: berth's goes where the first stood
      if (at === -1) at = outside.length
      created = created || line.includes(CREATED)
      continue
    }
    if (inBlock) {
      if (line.startsWith(END)) inBlock = false
      continue
    }
    outside.push(line)
  }
  return { outside, at: at === -1 ? outside.length : at, created, hadBlock: at !== -1 }
}

/**
 * The file's new text: `vars` in berth's block (where the old block stood, else at the end), a user's line that sets
 * one of those keys set aside as a comment (put back by `withoutEnvBlock`), everything else kept. `existing`
 * undefined: there was no file, and the block says berth created it.
 */
export const renderEnvFile = (
  existing: string | undefined,
  vars: Readonly<Record<string, string>>,
  world: string
): string => {
  const parts = split(existing ?? "")
  const created = existing === undefined || parts.created
  const managed = new Set(Object.keys(vars))
  const at = parts.at
  // set aside, never deleted: dotenv readers disagree on which of two settings wins
  const kept = parts.outside.map((line) => {
    const key = KEY.exec(line)?.[1]
    return key !== undefined && managed.has(key) ? `${HIDDEN}${line}` : line
  })
  const block = [
    `${BEGIN}: world ${world.replace(/\n/g, " ")}, written at every start${created ? ` ${CREATED}` : ""}`,
    ...Object.entries(vars)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${dotenvValue(v)}`),
    END
  ]
  return `${[...kept.slice(0, at), ...block, ...kept.slice(at)].join("\n")}\n`
}

/** What `remove` leaves: nothing when berth created the file, else the user's lines without berth's block. */
export const withoutEnvBlock = (text: string): string | undefined => {
  const parts = split(text)
  if (parts.created) return undefined
  const lines = parts.outside.map((line) => (line.startsWith(HIDDEN) ? line.slice(HIDDEN.length) : line))
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`
}

/** Is this a file berth made itself (so it is berth's, not the user's, when git lists it as untracked)? */
export const createdByBerth = (text: string): boolean => split(text).created
