/**
 * Marks: every process berth starts for a world's service carries, in its environment, which home, world and service
 * it belongs to and which life (one spawn) it is. The registry records a service's process only after the spawn, so a
 * daemon killed between the two leaves a process nothing records; its mark is how the next daemon finds it and stops
 * it before it starts the service again (a second copy would fight the first for its port and data).
 */

export const MARK_VARIABLE = "BERTH_MARK"

export interface Mark {
  /** one spawn: its forks and children share it, whatever group or session they move to */
  readonly life: string
  readonly world: number
  readonly service: string
  /** the BERTH_HOME whose daemon started it: another home's processes are never touched */
  readonly home: string
}

/** The home goes last: it is the one part that may hold spaces. */
export const formatMark = (mark: Mark): string => `${mark.life} ${mark.world} ${mark.service} ${mark.home}`

export const parseMark = (value: string): Mark | undefined => {
  const m = /^([0-9a-z]+) (\d+) (\S+) (\S.*)$/.exec(value)
  if (m === null) return undefined
  return { life: m[1]!, world: Number(m[2]), service: m[3]!, home: m[4]! }
}

/** The mark in a `/proc/<pid>/environ` text (entries separated by NUL), if it carries one. */
export const markIn = (environ: string): Mark | undefined => {
  const prefix = `${MARK_VARIABLE}=`
  for (const entry of environ.split("\u0000")) {
    if (entry.startsWith(prefix)) return parseMark(entry.slice(prefix.length))
  }
  return undefined
}

export interface MarkedProcess {
  readonly pid: number
  readonly pgid: number
  readonly mark: Mark
}

/**
 * The process groups a new daemon of `home` stops before it starts anything: those of its marked processes whose life
 * no recorded live group holds. A life is held when any of its processes is in a group the registry records as
 * running: then its forks that left for a group or session of their own belong to a watched service and are kept.
 * Everything else — a spawn the crash cut off from its record, a setup that was running, a fork that outlived its
 * service — is stray. Never a recorded group, whatever its members' marks say.
 */
export const strayGroups = (
  marked: ReadonlyArray<MarkedProcess>,
  home: string,
  recordedGroups: ReadonlySet<number>
): ReadonlyArray<number> => {
  const ours = marked.filter((p) => p.mark.home === home)
  const held = new Set(ours.filter((p) => recordedGroups.has(p.pgid)).map((p) => p.mark.life))
  // a group with any held process in it is kept whole
  const kept = new Set([...recordedGroups, ...ours.filter((p) => held.has(p.mark.life)).map((p) => p.pgid)])
  const stray = new Set(ours.filter((p) => !kept.has(p.pgid)).map((p) => p.pgid))
  return [...stray].sort((a, b) => a - b)
}

/** The process groups of these worlds of `home`, by their marks: what `down` stops when no daemon can. */
export const groupsOfWorlds = (
  marked: ReadonlyArray<MarkedProcess>,
  home: string,
  worlds: ReadonlySet<number>
): ReadonlyArray<number> =>
  [...new Set(marked.filter((p) => p.mark.home === home && worlds.has(p.mark.world)).map((p) => p.pgid))].sort(
    (a, b) => a - b
  )

export interface RecordedWorld {
  readonly id: number
  readonly project: number
  readonly name: string
  readonly slug: string
  readonly path: string
}

/**
 * The worlds a `down` names, from the state database alone (no daemon to ask): the world whose worktree holds `cwd`
 * (the deepest, as worktrees may nest), one of its project by name or slug, or with `all` every world of its project.
 */
export const worldsNamed = (
  worlds: ReadonlyArray<RecordedWorld>,
  ask: { readonly cwd: string; readonly name: string | undefined; readonly all: boolean }
): ReadonlyArray<RecordedWorld> => {
  const inside = (w: RecordedWorld) => w.path !== "" && (ask.cwd === w.path || ask.cwd.startsWith(`${w.path}/`))
  const here = worlds.filter(inside).sort((a, b) => b.path.length - a.path.length)[0]
  if (here === undefined) return []
  const project = worlds.filter((w) => w.project === here.project)
  if (ask.all) return project
  if (ask.name === undefined) return [here]
  return project.filter((w) => w.name === ask.name || w.slug === ask.name)
}
