/**
 * Errors that cross a process boundary (daemon RPC, MCP, `--json` output) are `Schema.TaggedError`s, defined here so
 * the CLI, the daemon and embedders share one vocabulary. Each has a `message` a person can act on.
 */
import * as Schema from "effect/Schema"
import { formatDiagnostic } from "./config/diagnostic.js"
import { formatBytes } from "./disk.js"
import { HISTORY_LOG, SETUP_LOG } from "./log-names.js"
import { closestName } from "./names.js"
import { shellQuote } from "./tokens.js"
import { howItLeaves } from "./paths.js"

export const DiagnosticSchema = Schema.Struct({
  severity: Schema.Literal("error", "warning"),
  file: Schema.String,
  line: Schema.Number,
  column: Schema.Number,
  path: Schema.String,
  message: Schema.String,
  hint: Schema.optional(Schema.String)
})

export class ConfigNotFound extends Schema.TaggedError<ConfigNotFound>()("ConfigNotFound", {
  searched: Schema.String
}) {
  override get message(): string {
    return `no berth.toml in ${this.searched} or any folder above it\n  hint: run \`berth init\` to write one`
  }
}

export class ConfigUnreadable extends Schema.TaggedError<ConfigUnreadable>()("ConfigUnreadable", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot read ${this.file}: ${this.reason}`
  }
}

export class ConfigInvalid extends Schema.TaggedError<ConfigInvalid>()("ConfigInvalid", {
  file: Schema.String,
  diagnostics: Schema.Array(DiagnosticSchema)
}) {
  override get message(): string {
    const n = this.diagnostics.filter((d) => d.severity === "error").length
    return [...this.diagnostics.map(formatDiagnostic), `${this.file}: ${n} error${n === 1 ? "" : "s"}`].join("\n")
  }
}

export class InitRefused extends Schema.TaggedError<InitRefused>()("InitRefused", {
  file: Schema.String
}) {
  override get message(): string {
    return `${this.file} already exists\n  hint: pass --force to overwrite it`
  }
}

export class InitFailed extends Schema.TaggedError<InitFailed>()("InitFailed", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot write a config from ${this.file}: ${this.reason}`
  }
}

/**
 * A berth.toml whose content the user has not allowed to run commands (new on this machine, or changed since): what
 * it would run, and how to allow it. Nothing of it ran.
 */
export class ConfigNotAllowed extends Schema.TaggedError<ConfigNotAllowed>()("ConfigNotAllowed", {
  file: Schema.String,
  /** the sha256 of the file's content: what `berth allow` records */
  digest: Schema.String,
  commands: Schema.Array(Schema.Struct({ field: Schema.String, command: Schema.String }))
}) {
  override get message(): string {
    const folder = this.file.replace(/\/berth\.toml$/, "")
    return [
      `${this.file} may not run commands here yet: it is new to berth, or changed since it was allowed. It would run:`,
      ...this.commands.map((c) => `    ${c.field}: ${c.command}`),
      `  hint: read them, then \`berth allow ${shellQuote(folder)}\` (at a terminal, up asks; --yes, or BERTH_YES=1 for CI and agents, allows it at once)`
    ].join("\n")
  }
}

export type ConfigError = ConfigNotFound | ConfigUnreadable | ConfigInvalid

export class NotARepository extends Schema.TaggedError<NotARepository>()("NotARepository", {
  path: Schema.String
}) {
  override get message(): string {
    return `${this.path} is not inside a git repository\n  hint: berth worlds are git worktrees: run berth inside a repository`
  }
}

export class InvalidWorldName extends Schema.TaggedError<InvalidWorldName>()("InvalidWorldName", {
  name: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${JSON.stringify(this.name)} cannot name a world: ${this.reason}\n  hint: use a valid git branch name`
  }
}

export class WorldNotFound extends Schema.TaggedError<WorldNotFound>()("WorldNotFound", {
  project: Schema.String,
  name: Schema.String,
  known: Schema.Array(Schema.String),
  /** the berth command that asked (`down`, `env`, …), when known: only `up` makes a world, so only it offers to */
  command: Schema.optional(Schema.String),
  /** no name was given: the world of the worktree the command ran in */
  current: Schema.optional(Schema.Boolean)
}) {
  override get message(): string {
    // a world asked for by its id alone (one removed meanwhile, an address of the cluster's) has no project to name
    if (this.project === "") return `there is no world ${JSON.stringify(this.name)}\n  hint: ${worldNotFoundHint(this)}`
    const known = this.known.length === 0 ? "it has none yet" : `its worlds: ${this.known.join(", ")}`
    return `project ${this.project} has no world ${JSON.stringify(this.name)}; ${known}\n  hint: ${worldNotFoundHint(this)}`
  }
}

/**
 * What to do about a world that does not exist. A typo of a world that exists is far likelier than a new branch: the
 * closest name comes first. Only `up` offers to make the world named: `down nosuch` meant one that exists.
 */
const worldNotFoundHint = (e: {
  readonly name: string
  readonly known: ReadonlyArray<string>
  readonly command?: string | undefined
  readonly current?: boolean | undefined
}): string => {
  const near = closestName(e.name, e.known)
  if (e.command === "up") {
    return near === undefined
      ? `berth up ${shellQuote(e.name)}`
      : `did you mean ${near}? (berth up ${shellQuote(e.name)} makes a new world)`
  }
  if (e.current === true) return "this worktree's world was never brought up: berth up starts it"
  if (near !== undefined)
    return `did you mean ${near}?${e.command === undefined ? "" : ` berth ${e.command} ${shellQuote(near)}`}`
  return e.known.length > 0
    ? "use one of them (berth status shows each with its state)"
    : "berth status lists the worlds of every project"
}

export class WorktreeDirty extends Schema.TaggedError<WorktreeDirty>()("WorktreeDirty", {
  world: Schema.String,
  path: Schema.String,
  files: Schema.Array(Schema.String)
}) {
  override get message(): string {
    const shown = this.files.slice(0, 20).map((f) => `    ${f}`)
    const more = this.files.length > 20 ? [`    … and ${this.files.length - 20} more`] : []
    return [
      `world ${this.world} has uncommitted or untracked changes in ${this.path}:`,
      ...shown,
      ...more,
      "  hint: commit or stash them, or pass --force to discard them"
    ].join("\n")
  }
}

/**
 * A path berth would write or run in (an env_file, a service's dir, what `[project] copy`/`link` bring, what
 * golden_inputs read) lands outside the worktree: through a link the repository holds, or by `..`.
 */
export class PathOutsideWorktree extends Schema.TaggedError<PathOutsideWorktree>()("PathOutsideWorktree", {
  world: Schema.String,
  /** the config field that names it: `services.web.env_file`, `[project] copy`, … */
  field: Schema.String,
  /** as written in berth.toml */
  path: Schema.String,
  /** where it lands, every link followed */
  resolved: Schema.String,
  /** the link that leads out, relative to the worktree; absent when `..` or an absolute path does */
  link: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const what =
      this.link === undefined
        ? `name a path inside the worktree in ${this.field}`
        : `make ${this.link} a file or folder of the worktree's own rather than a link out of it, or name another path in ${this.field}`
    return `world ${this.world}: ${this.field} ${JSON.stringify(this.path)} ${howItLeaves(this.path, this)}, outside the worktree; berth writes and runs only inside it\n  hint: ${what}`
  }
}

export class MainCheckout extends Schema.TaggedError<MainCheckout>()("MainCheckout", {
  world: Schema.String,
  path: Schema.String
}) {
  override get message(): string {
    return `world ${this.world} is the main checkout (${this.path}); berth never deletes its files\n  hint: berth down ${this.world} stops it`
  }
}

export class StartFailed extends Schema.TaggedError<StartFailed>()("StartFailed", {
  world: Schema.String,
  service: Schema.String,
  reason: Schema.String,
  logTail: Schema.Array(Schema.String)
}) {
  override get message(): string {
    const tail = this.logTail.length === 0 ? ["    (no output)"] : this.logTail.map((l) => `    ${l}`)
    return [
      `world ${this.world}: ${this.service} ${this.reason}; nothing that this up started is left running`,
      `  from ${this.service}'s log:`,
      ...tail,
      `  hint: berth logs ${shellQuote(this.world)} -s ${shellQuote(this.service)} shows the whole log`
    ].join("\n")
  }
}

export class PortUnavailable extends Schema.TaggedError<PortUnavailable>()("PortUnavailable", {
  port: Schema.Number,
  world: Schema.String,
  service: Schema.String,
  holder: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const by = this.holder === undefined ? "another process" : this.holder
    return `port ${this.port}, leased to ${this.world}/${this.service}, is taken by ${by}\n  hint: stop that process, or berth remove ${this.world} to give the world new ports`
  }
}

export class PortRangeExhausted extends Schema.TaggedError<PortRangeExhausted>()("PortRangeExhausted", {
  from: Schema.Number,
  to: Schema.Number,
  wanted: Schema.Number
}) {
  override get message(): string {
    return `no free port left in ${this.from}-${this.to} for ${this.wanted} more\n  hint: berth port --range A-B widens it, or berth remove unused worlds`
  }
}

export class DaemonUnavailable extends Schema.TaggedError<DaemonUnavailable>()("DaemonUnavailable", {
  reason: Schema.String,
  log: Schema.optional(Schema.String)
}) {
  override get message(): string {
    return `cannot reach the berth daemon: ${this.reason}${this.log === undefined ? "" : `\n  hint: see ${this.log}`}`
  }
}

const quoted = (names: ReadonlyArray<string>) => names.map((n) => JSON.stringify(n)).join(", ")
const inWorld = (world: string | null) => (world === null ? "" : `world ${world}: `)

/** A command named a service the world's berth.toml does not have (or named none where one is needed). */
export class UnknownService extends Schema.TaggedError<UnknownService>()("UnknownService", {
  world: Schema.NullOr(Schema.String),
  /** what was named and is not there; empty: nothing was named */
  names: Schema.Array(Schema.String),
  file: Schema.String,
  known: Schema.Array(Schema.String)
}) {
  override get message(): string {
    const what = this.names.length === 0 ? "name a service" : `no service ${quoted(this.names)}`
    return `${inWorld(this.world)}${what} in ${this.file}; services: ${this.known.join(", ")}`
  }
}

/** A command named a group no service of the world's berth.toml is in. */
export class UnknownGroup extends Schema.TaggedError<UnknownGroup>()("UnknownGroup", {
  world: Schema.NullOr(Schema.String),
  names: Schema.Array(Schema.String),
  file: Schema.String,
  known: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `${inWorld(this.world)}no service is in group ${quoted(this.names)} in ${this.file}; groups: ${this.known.join(", ") || "none"}`
  }
}

/** A command named a slice the world's berth.toml does not have (with `golden`: no slice that clones a golden). */
export class UnknownSlice extends Schema.TaggedError<UnknownSlice>()("UnknownSlice", {
  world: Schema.String,
  names: Schema.Array(Schema.String),
  file: Schema.String,
  known: Schema.Array(Schema.String),
  golden: Schema.optional(Schema.Boolean)
}) {
  override get message(): string {
    if (this.golden === true) {
      const those = this.known.length === 0 ? "" : `; those are: ${this.known.join(", ")}`
      return `world ${this.world}: ${quoted(this.names)} is not a slice service with clone_from = "golden" in ${this.file}${those}`
    }
    if (this.known.length === 0) return `world ${this.world} has no slices (${this.file})`
    return `world ${this.world}: no slice ${quoted(this.names)} in ${this.file}; slices: ${this.known.join(", ")}`
  }
}

/** A command that acts on running services, asked of a world that does not run. */
export class WorldNotRunning extends Schema.TaggedError<WorldNotRunning>()("WorldNotRunning", {
  world: Schema.String
}) {
  override get message(): string {
    return `world ${this.world} is not running\n  hint: berth up ${shellQuote(this.world)} starts it`
  }
}

/** The world's start was stopped (a down, a remove, a suspension, a reload) before every service was ready. */
export class StartInterrupted extends Schema.TaggedError<StartInterrupted>()("StartInterrupted", {
  world: Schema.String
}) {
  override get message(): string {
    return `world ${this.world} was stopped before it was ready`
  }
}

/** A wait for a world to run ended without it running: it was stopped, failed or was removed first. */
export class WorldNotReady extends Schema.TaggedError<WorldNotReady>()("WorldNotReady", {
  world: Schema.String,
  /** the state it ended in: `stopped`, `failed`, `removed` */
  state: Schema.String,
  reason: Schema.NullOr(Schema.String)
}) {
  override get message(): string {
    const name = shellQuote(this.world)
    const hint =
      this.state === "failed"
        ? `berth status shows why; berth up ${name} tries again`
        : this.state === "removed"
          ? `berth up ${name} makes it again`
          : `berth up ${name} starts it`
    return `world ${this.world} is ${this.state}${this.reason === null ? "" : `: ${this.reason}`}\n  hint: ${hint}`
  }
}

/** `berth up <name> --from <world>` makes a new world: one of that name exists already. */
export class WorldExists extends Schema.TaggedError<WorldExists>()("WorldExists", {
  world: Schema.String,
  /** the world whose slices it would copy */
  from: Schema.String
}) {
  override get message(): string {
    return `world ${this.world} exists already: --from makes a new world\n  hint: give a new world's name (berth up <name> --from ${this.from}), or berth remove ${this.world} first`
  }
}

/** `berth logs -s <name>` named a log the world does not have. */
export class UnknownLog extends Schema.TaggedError<UnknownLog>()("UnknownLog", {
  world: Schema.String,
  name: Schema.String,
  /** the world's logs: its services', its slices', its setup's */
  known: Schema.Array(Schema.String),
  /** `berth` reads the world's history (no service has that name) */
  history: Schema.Boolean
}) {
  override get message(): string {
    const told = this.known.map((n) => (n === SETUP_LOG ? `${n} (the project's setup)` : n))
    if (this.history) told.push(`and ${HISTORY_LOG} (the world's history: berth's events and agents' tool calls)`)
    const close = closestName(this.name, this.history ? [...this.known, HISTORY_LOG] : this.known)
    return `world ${this.world} has no log ${JSON.stringify(this.name)}; its logs: ${told.join(", ")}${close === undefined ? "" : `\n  hint: did you mean ${JSON.stringify(close)}?`}`
  }
}

/** A request to a service over HTTP (`berth curl`, the MCP curl tool) named one with no url or port. */
export class NoServiceUrl extends Schema.TaggedError<NoServiceUrl>()("NoServiceUrl", {
  world: Schema.String,
  service: Schema.String,
  /** the world's services that have one */
  reachable: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `world ${this.world} has no service ${JSON.stringify(this.service)} with a url or port; those are: ${this.reachable.join(", ") || "none"}`
  }
}

/** A variable a slice's admin_url needs is not set: berth would act on the wrong server. */
export class UnsetVariable extends Schema.TaggedError<UnsetVariable>()("UnsetVariable", {
  world: Schema.String,
  slice: Schema.String,
  variables: Schema.Array(Schema.String),
  /** the berth.toml that names it, when the one who noticed knows it */
  file: Schema.optional(Schema.String)
}) {
  override get message(): string {
    return `world ${this.world}: slice ${this.slice}: ${this.variables.map((t) => `${t} is not set`).join(", ")} (admin_url${this.file === undefined ? "" : ` in ${this.file}`})`
  }
}

/** Something that is not a worktree of the repository stands where the world's worktree goes. */
export class FolderInTheWay extends Schema.TaggedError<FolderInTheWay>()("FolderInTheWay", {
  world: Schema.String,
  path: Schema.String,
  mainRoot: Schema.String
}) {
  override get message(): string {
    return `world ${this.world}: ${this.path} is not a worktree of ${this.mainRoot}, though it stands where the world's worktree goes; berth takes no folder it did not make for a world\n  hint: move that folder away and run berth up ${shellQuote(this.world)} again, or name another branch`
  }
}

/** What to do about a slice server's failure, by its kind (as the adapter classed it). */
const sliceServerHint: Readonly<Record<string, string>> = {
  unreachable: "check that the server runs and that the slice's admin_url (or the adapter's default) points at it",
  authentication: "check the user and password the slice's admin_url gives",
  grant: "the admin_url's user needs the right to create and drop databases there"
}

/**
 * A slice's server refused or failed what berth asked (make, find, copy or drop a slice): which world, slice and
 * adapter, and the kind of failure the adapter classed it as (`unreachable`, `authentication`, `grant`, `taken`,
 * `not-owned`, `invalid`, `failed`).
 */
export class SliceServerFailed extends Schema.TaggedError<SliceServerFailed>()("SliceServerFailed", {
  world: Schema.String,
  slice: Schema.String,
  adapter: Schema.String,
  kind: Schema.String,
  reason: Schema.String,
  /** what to do, when berth knows better than the kind's usual advice (a `clone_from` database the server lacks) */
  hint: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const hint = this.hint ?? sliceServerHint[this.kind]
    return `world ${this.world}: slice ${this.slice} (${this.adapter}): ${this.reason}${hint === undefined ? "" : `\n  hint: ${hint}`}`
  }
}

/**
 * A slice's adapter cannot copy what berth was asked to copy: a database already on its server (`clone_from =
 * "<database>"`, named in `database`), or a world's slice into the new world `to` (`berth up <to> --from <world>`).
 */
export class SliceCopyUnsupported extends Schema.TaggedError<SliceCopyUnsupported>()("SliceCopyUnsupported", {
  world: Schema.String,
  slice: Schema.String,
  adapter: Schema.String,
  /** the database `clone_from` names */
  database: Schema.optional(Schema.String),
  /** the new world of `berth up <to> --from <world>` */
  to: Schema.optional(Schema.String)
}) {
  override get message(): string {
    if (this.database !== undefined) {
      return `world ${this.world}: slice ${this.slice}: the ${this.adapter} adapter cannot copy a database already on its server (clone_from = ${JSON.stringify(this.database)})\n  hint: clone_from = "<database>" works with postgres and mysql; use clone_from = "golden" or remove it`
    }
    return `world ${this.world}: slice ${this.slice} (${this.adapter}) cannot be copied: the ${this.adapter} adapter cannot clone a slice\n  hint: berth up ${shellQuote(this.to ?? "<name>")} without --from gives the new world its own slices, migrated and seeded`
  }
}

/**
 * The cluster gave a world that runs anywhere to another machine while this one was making its slices: this machine
 * leaves them to that one and touches nothing more.
 */
export class WorldMovedAway extends Schema.TaggedError<WorldMovedAway>()("WorldMovedAway", {
  world: Schema.String,
  slice: Schema.String
}) {
  override get message(): string {
    return `world ${this.world}: slice ${this.slice}: the cluster has given the world to another machine meanwhile; its slices are left to that machine\n  hint: berth status shows the machine it runs on now`
  }
}

/** The files a slice's `golden_inputs` name could not be read (too many of them, or one unreadable). */
export class GoldenInputsFailed extends Schema.TaggedError<GoldenInputsFailed>()("GoldenInputsFailed", {
  world: Schema.String,
  slice: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `world ${this.world}: slice ${this.slice}: ${this.reason}\n  hint: services.${this.slice}.golden_inputs in berth.toml names the few files its golden is built from (migrations, seeds)`
  }
}

/** git refused or failed what berth asked of it for a world (its worktree made or removed). */
export class GitCommandFailed extends Schema.TaggedError<GitCommandFailed>()("GitCommandFailed", {
  /** git's own error, with berth's hint when it has one */
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** berth could not read or write a file of a world's worktree (an `env_file`, what `[project] copy` brings). */
export class WorktreeFileFailed extends Schema.TaggedError<WorktreeFileFailed>()("WorktreeFileFailed", {
  world: Schema.String,
  /** what berth was doing, naming the config field and the file: `services.web.env_file /…/.env` */
  what: Schema.String,
  /** the system's own error */
  reason: Schema.String
}) {
  override get message(): string {
    return `world ${this.world}: ${this.what}: ${this.reason}\n  hint: check that the path is a file (or folder) berth may write, as berth.toml names it`
  }
}

/**
 * The world's folder is not on this machine's disk: a worktree never made yet (`path` empty, or not there), or the
 * main checkout, moved or deleted.
 */
export class WorktreeMissing extends Schema.TaggedError<WorktreeMissing>()("WorktreeMissing", {
  world: Schema.String,
  /** where it should be; empty when it was never made */
  path: Schema.String,
  /** the world is the repository's main checkout */
  main: Schema.optional(Schema.Boolean)
}) {
  override get message(): string {
    if (this.main === true) {
      return `world ${this.world} is the main checkout ${this.path}, which is missing\n  hint: put the repository back there, or berth remove ${shellQuote(this.world)} forgets the world`
    }
    return `world ${this.world} has no worktree yet\n  hint: berth up ${shellQuote(this.world)} makes it`
  }
}

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** Something berth itself got wrong (a database error, a bug): reported, never a crash. */
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", {
  reason: Schema.String
}) {
  override get message(): string {
    return `berth hit an internal error: ${this.reason}\n  hint: the daemon's log (berth daemon status shows where) has details`
  }
}

/**
 * berth could not write (its state database, a log, a file of its own) because the disk is full: where, how much is
 * free now, and what to do about it. Nothing half-written is kept: the command can be run again once there is room.
 */
export class DiskFull extends Schema.TaggedError<DiskFull>()("DiskFull", {
  /** what berth could not write, or the folder it writes in */
  path: Schema.String,
  /** free space on that disk when the write failed (bytes) */
  freeBytes: Schema.Number,
  /** BERTH_HOME: berth's state and logs */
  home: Schema.String
}) {
  override get message(): string {
    return `the disk is full: berth cannot write ${this.path} (${formatBytes(this.freeBytes)} free there)\n  hint: free space on that disk (\`berth gc\` drops slices and goldens no world uses), then run the command again; berth keeps its state and logs in ${this.home} (BERTH_HOME)`
  }
}

/** `berth exec --timeout` (or an agent's exec) ran out of time: berth stopped the command's whole process group. */
export class CommandTimedOut extends Schema.TaggedError<CommandTimedOut>()("CommandTimedOut", {
  command: Schema.String,
  timeoutMs: Schema.Number
}) {
  override get message(): string {
    return `\`${this.command}\` did not finish within ${formatMs(this.timeoutMs)}: berth stopped its process group (exit 124)\n  hint: give it more time with --timeout`
  }
}

/** The command of `berth exec` could not be started at all (not found, not executable). */
export class CommandNotStarted extends Schema.TaggedError<CommandNotStarted>()("CommandNotStarted", {
  command: Schema.String,
  /** errno's code: ENOENT, EACCES, … */
  code: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot run \`${this.command}\`: ${this.reason}${this.code === "ENOENT" ? "\n  hint: check the command's name and the PATH, or run it through a shell: -- sh -c '…'" : ""}`
  }
}

/** One of `[agents] verify`'s commands failed; the ones after it were not run. */
export class VerifyFailed extends Schema.TaggedError<VerifyFailed>()("VerifyFailed", {
  world: Schema.String,
  command: Schema.String,
  exitCode: Schema.Number,
  timedOut: Schema.Boolean
}) {
  override get message(): string {
    const how = this.timedOut ? "ran out of time (its process group was stopped)" : `exited with ${this.exitCode}`
    return `verify of world ${this.world} failed: \`${this.command}\` ${how}\n  hint: fix what it reports, then run berth verify again`
  }
}

const formatMs = (ms: number): string =>
  ms % 3_600_000 === 0
    ? `${ms / 3_600_000}h`
    : ms % 60_000 === 0
      ? `${ms / 60_000}m`
      : ms % 1000 === 0
        ? `${ms / 1000}s`
        : `${ms}ms`

/** berth cannot use the cluster's database (it is down, refuses berth's login, or the address is wrong). */
export class ClusterUnavailable extends Schema.TaggedError<ClusterUnavailable>()("ClusterUnavailable", {
  /** the database's address with any password hidden */
  url: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `cannot use the cluster's database ${this.url}: ${this.reason}\n  hint: check that PostgreSQL runs there and lets this machine log in (\`psql '${this.url}'\`)`
  }
}

/** A cluster command that cannot be carried out as asked: what stands in the way, and what to do instead. */
export class ClusterRefused extends Schema.TaggedError<ClusterRefused>()("ClusterRefused", {
  reason: Schema.String,
  hint: Schema.String
}) {
  override get message(): string {
    return `${this.reason}\n  hint: ${this.hint}`
  }
}

/** The world runs on another machine of the cluster, which has not been heard from lately. */
export class MachineUnreachable extends Schema.TaggedError<MachineUnreachable>()("MachineUnreachable", {
  world: Schema.String,
  machine: Schema.String,
  lastSeenSeconds: Schema.Number
}) {
  override get message(): string {
    return `world ${this.world} runs on machine ${this.machine}, which was last heard from ${this.lastSeenSeconds} s ago\n  hint: start berth on ${this.machine} again (\`berth cluster status\` shows every machine); the world stays there until it comes back`
  }
}

/** `up --anywhere` of a repository with no `origin`, or of a branch its origin lacks: other machines clone it there. */
export class NotOnOrigin extends Schema.TaggedError<NotOnOrigin>()("NotOnOrigin", {
  /** the repository's main checkout */
  path: Schema.String,
  branch: Schema.String,
  /** the origin's address; null when the repository has none */
  remote: Schema.NullOr(Schema.String)
}) {
  override get message(): string {
    return this.remote === null
      ? `${this.path} has no remote "origin": a world that runs anywhere is cloned from it by the machine that runs it\n  hint: add one every machine of the cluster can reach: git remote add origin <url>`
      : `branch ${this.branch} is not on origin (${this.remote}): the machine that runs the world clones it from there\n  hint: push it first: git push -u origin ${this.branch}`
  }
}

/** `up --anywhere` of a world this machine has as its own already: a world runs anywhere only if it was made so. */
export class WorldKeptHere extends Schema.TaggedError<WorldKeptHere>()("WorldKeptHere", {
  world: Schema.String
}) {
  override get message(): string {
    return `world ${this.world} already exists on this machine, which keeps it: a world runs anywhere only if it was made so\n  hint: take it off this machine first (berth remove ${this.world}), then berth up --anywhere ${this.world}`
  }
}

/** No machine of the cluster can run a world that runs anywhere now (none is up, or none has room). */
export class NoMachineAvailable extends Schema.TaggedError<NoMachineAvailable>()("NoMachineAvailable", {
  world: Schema.String,
  /** why the last machine that tried could not start it, when one tried */
  reason: Schema.NullOr(Schema.String)
}) {
  override get message(): string {
    return `world ${this.world}: no machine of the cluster can run it now${this.reason === null ? "" : ` (${this.reason})`}\n  hint: \`berth cluster status\` shows which machines are up; it starts as soon as one can take it`
  }
}

/**
 * The machine the cluster gave a world that runs anywhere cannot run it: it is stopping, its project of that name is
 * another repository, or it cannot check the branch out.
 */
export class MachineCannotRun extends Schema.TaggedError<MachineCannotRun>()("MachineCannotRun", {
  world: Schema.String,
  machine: Schema.String,
  reason: Schema.String,
  hint: Schema.optional(Schema.String)
}) {
  override get message(): string {
    return `world ${this.world} cannot run on ${this.machine}: ${this.reason}${this.hint === undefined ? "" : `\n  hint: ${this.hint}`}`
  }
}

/** A slice's adapter needs a client that is not installed with berth (`src/domain/drivers.ts`). */
export class DriverMissing extends Schema.TaggedError<DriverMissing>()("DriverMissing", {
  adapter: Schema.String,
  packageName: Schema.String,
  /** the command that installs it */
  install: Schema.String
}) {
  override get message(): string {
    return `the ${this.adapter} adapter needs the package ${this.packageName}, which is not installed (berth does not bring it: it is large, and few projects use it)\n  hint: ${this.install}, then run the command again`
  }
}
