/**
 * Errors that cross a process boundary (daemon RPC, MCP, `--json` output) are `Schema.TaggedError`s, defined here so
 * the CLI, the daemon and embedders share one vocabulary. Each has a `message` a person can act on.
 */
import * as Schema from "effect/Schema"
import { formatDiagnostic } from "./config/diagnostic.js"
import { formatBytes } from "./disk.js"
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

/** A variable a slice's admin_url needs is not set: berth would act on the wrong server. */
export class UnsetVariable extends Schema.TaggedError<UnsetVariable>()("UnsetVariable", {
  world: Schema.String,
  slice: Schema.String,
  variables: Schema.Array(Schema.String),
  file: Schema.String
}) {
  override get message(): string {
    return `world ${this.world}: slice ${this.slice}: ${this.variables.map((t) => `${t} is not set`).join(", ")} (admin_url in ${this.file})`
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
  reason: Schema.String
}) {
  override get message(): string {
    const hint = sliceServerHint[this.kind]
    return `world ${this.world}: slice ${this.slice} (${this.adapter}): ${this.reason}${hint === undefined ? "" : `\n  hint: ${hint}`}`
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
