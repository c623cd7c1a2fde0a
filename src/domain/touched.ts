/**
 * Which worlds the registry's writes touched, by version: the registry records each write that changes what a route
 * points at (the worlds it touched, or "all" when it may change any route), and a reader that last looked at version
 * `v` asks what changed since. Readers keep their own version, so none steals another's news, and a reader whose
 * refresh failed simply asks again from the same version.
 *
 * What is kept is bounded: past `limit` worlds the record is cleared, and a reader from before that hears "all".
 */

/** What changed after a version: some worlds, or possibly every route. */
export type TouchedWorlds = ReadonlySet<number> | "all"

export interface Touched {
  /** the version the answer is up to: ask from this one next time */
  readonly version: number
  readonly worlds: TouchedWorlds
}

const NOTHING: ReadonlySet<number> = new Set()

export class TouchJournal {
  private current = 0
  /** world id → the version of the last write that touched it */
  private readonly at = new Map<number, number>()
  /** the version of the last write that may have changed every route */
  private allAt = 0
  /** readers from before this version are told "all": what they missed was cleared */
  private floor = 0

  constructor(private readonly limit: number = 4096) {}

  get version(): number {
    return this.current
  }

  /** Notes one write; answers the new version. */
  record(worlds: Iterable<number> | "all"): number {
    const version = ++this.current
    if (worlds === "all") this.allAt = version
    else for (const id of worlds) this.at.set(id, version)
    if (this.at.size > this.limit) {
      this.at.clear()
      this.floor = version
    }
    return version
  }

  /** What writes after `version` touched. A version this journal never gave (later than its own) reads as "all". */
  since(version: number): Touched {
    const current = this.current
    if (version === current) return { version: current, worlds: NOTHING }
    if (version > current || version < this.floor || this.allAt > version) return { version: current, worlds: "all" }
    const worlds = new Set<number>()
    for (const [id, at] of this.at) if (at > version) worlds.add(id)
    return { version: current, worlds }
  }
}
