/**
 * The daemon's API: every request, reply and failure as `effect/Schema`, shared by the daemon, the CLI and
 * embedders. Transport: @effect/rpc over a unix socket with newline-delimited JSON, which is also simple enough for
 * the CLI's lean path to speak without loading Effect (see `cli/fast.ts`).
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import * as Schema from "effect/Schema"
import { CommandFailure, Env, ProjectFailures } from "../actors/protocol.js"
import {
  ClusterRefused,
  ClusterUnavailable,
  InternalError,
  DiskFull,
  InvalidRequest,
  MachineCannotRun,
  MachineUnreachable,
  NoMachineAvailable,
  NotOnOrigin,
  WorldKeptHere,
  WorldNotFound,
  WorldNotReady,
  WorktreeDirty
} from "../domain/errors.js"

export const ServiceStatus = Schema.Struct({
  name: Schema.String,
  kind: Schema.Literal("process", "slice"),
  state: Schema.String,
  pid: Schema.NullOr(Schema.Number),
  port: Schema.NullOr(Schema.Number),
  ports: Schema.Record({ key: Schema.String, value: Schema.Number }),
  url: Schema.NullOr(Schema.String),
  restarts: Schema.Number,
  reason: Schema.NullOr(Schema.String),
  logTail: Schema.Array(Schema.String),
  /** the command as berth started it: tokens resolved, a dev server's flags added, secrets masked (null: a slice) */
  command: Schema.NullOr(Schema.String)
})
export type ServiceStatus = typeof ServiceStatus.Type

export const WorldEvent = Schema.Struct({
  service: Schema.NullOr(Schema.String),
  kind: Schema.String,
  message: Schema.String,
  at: Schema.Number
})
export type WorldEvent = typeof WorldEvent.Type

export const WorldStatus = Schema.Struct({
  project: Schema.String,
  name: Schema.String,
  slug: Schema.String,
  path: Schema.String,
  branch: Schema.NullOr(Schema.String),
  main: Schema.Boolean,
  desired: Schema.String,
  state: Schema.String,
  reason: Schema.NullOr(Schema.String),
  services: Schema.Array(ServiceStatus),
  /** the world's latest events, newest first (a clone that fell back, a golden being built or waited for, …) */
  events: Schema.Array(WorldEvent),
  /** set when berth.toml's project name is another repository's too: what this repository's worlds are called */
  projectNote: Schema.optional(Schema.String),
  /** set while the world runs a berth.toml older than the one in its worktree: the edit waits for `berth reload` */
  configNote: Schema.optional(Schema.String),
  /** set while the world waits in line for the gate: its place (1 is next) and what it waits for */
  queue: Schema.optional(Schema.Struct({ position: Schema.Number, waitingFor: Schema.String })),
  /** set while the project's setup runs for the starting world: the last line it printed (secrets masked) */
  setupTail: Schema.optional(Schema.String),
  /** in a cluster: the machine the world runs on, when it is another machine than the one that answered */
  machine: Schema.optional(Schema.String),
  /** in a cluster: set for a world that runs anywhere (`up --anywhere`), which moves when its machine is gone */
  placement: Schema.optional(Schema.Literal("anywhere"))
})
export type WorldStatus = typeof WorldStatus.Type

/** `berth env`: the world's variables, and the command each process was last started with (secrets masked). */
export const EnvReply = Schema.Struct({
  world: Schema.String,
  vars: Schema.Record({ key: Schema.String, value: Schema.String }),
  commands: Schema.Record({ key: Schema.String, value: Schema.String })
})

/** Which world: by name, or the worktree that `cwd` is in. */
const worldRef = {
  cwd: Schema.String,
  world: Schema.optional(Schema.String)
}

const clientEnv = Env

// ---------------------------------------------------------------------------------------------------------------
// What each world command can fail with: the engine's own union for it (`CommandFailure` in actors/protocol.ts), and
// what the daemon adds — a request it refuses as malformed (`InvalidRequest`: a cwd that is no absolute path, an
// environment too large to pass on), and, in a cluster, a world another machine runs (`MachineUnreachable`, and
// what that machine answers).

/** What the daemon adds to a world command: a request it refuses as malformed (checked before any handler runs). */
const Refused = [InvalidRequest] as const

/** What another machine of the cluster answers of its world (the `WorldQuery` entity, `cluster/queries.ts`). */
export const QueryFailure = {
  status: Schema.Union(...ProjectFailures, WorldNotFound),
  env: CommandFailure.env,
  logs: CommandFailure.logs
} as const

/**
 * What the machine that runs a world that runs anywhere answers when asked to make it as wanted (the `Anywhere`
 * entity's `Ensure`, `cluster/anywhere.ts`): it starts it there (and waits until it runs), stops it, or removes it —
 * whichever the cluster's record says now, so a `down` may hear of a start asked for meanwhile.
 */
export const EnsureFailure = Schema.Union(
  ...CommandFailure.up.members,
  WorldNotReady,
  WorktreeDirty,
  MachineCannotRun,
  ...Refused
)

/**
 * What a command for a world that runs anywhere adds on the machine it was asked on: no cluster (or no connection to
 * it), a branch other machines cannot clone, a world this machine keeps as its own, no machine free to run it.
 */
const AnywhereFailures = [ClusterRefused, ClusterUnavailable, NotOnOrigin, WorldKeptHere, NoMachineAvailable] as const

/**
 * A world command that can reach another machine's world: that machine is silent (what it answers of the world is
 * in the command's own union).
 */
const Remote = [MachineUnreachable] as const

export const UpError = Schema.Union(...EnsureFailure.members, ...AnywhereFailures, ...Remote)
/**
 * this machine's `down` fails only as naming the world does (`CommandFailure.down`); a world that runs anywhere is
 * stopped by its machine's `Ensure`
 */
export const DownError = Schema.Union(...EnsureFailure.members, ...AnywhereFailures, ...Remote)
export const ReloadError = Schema.Union(...CommandFailure.reload.members, ...Refused, ...Remote)
export const ResetError = Schema.Union(...CommandFailure.reset.members, ...Refused)
export const StopServicesError = Schema.Union(...CommandFailure.stopServices.members, ...Refused)
export const RestartServicesError = Schema.Union(...CommandFailure.restartServices.members, ...Refused)
/** this machine's `remove` fails as `CommandFailure.remove` says; one that runs anywhere is removed by `Ensure` */
export const RemoveError = Schema.Union(...EnsureFailure.members, ...AnywhereFailures, ...Refused)
export const StatusError = Schema.Union(...ProjectFailures, ...Refused)
export const EnvError = Schema.Union(...CommandFailure.env.members, ...Refused, ...Remote)
export const LogsError = Schema.Union(...CommandFailure.logs.members, ...Refused, ...Remote)
export const WatchError = Schema.Union(...ProjectFailures, ...Refused)
export const GoldenRebuildError = Schema.Union(...CommandFailure.rebuildGolden.members, ...Refused)
export const GcError = Schema.Union(InternalError, DiskFull, ...Refused)
export const ProjectError = Schema.Union(...ProjectFailures, ...Refused)
export const RecordEventError = Schema.Union(...CommandFailure.recordEvent.members, ...Refused)

const PortChoice = Schema.Union(Schema.Number, Schema.Literal("auto", "off"))

const ListenerInfo = Schema.Struct({
  wanted: PortChoice,
  port: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String)
})

export const ProxySettings = Schema.Struct({
  http: ListenerInfo,
  https: ListenerInfo,
  httpsUrls: Schema.Boolean,
  caPath: Schema.String
})
export type ProxySettings = typeof ProxySettings.Type

export const Settings = Schema.Struct({
  portRange: Schema.Struct({ from: Schema.Number, to: Schema.Number }),
  proxy: ProxySettings
})
export type Settings = typeof Settings.Type

export const GcReport = Schema.Struct({
  entries: Schema.Array(
    Schema.Struct({
      reason: Schema.String,
      adapter: Schema.String,
      where: Schema.String,
      name: Schema.String,
      outcome: Schema.Literal("dropped", "would drop", "failed"),
      error: Schema.optional(Schema.String)
    })
  ),
  unreachable: Schema.Array(Schema.Struct({ adapter: Schema.String, where: Schema.String, error: Schema.String })),
  /** records of an adapter nothing serves (a mistyped name) forgotten: a slice's (`name`) or a server's */
  forgotten: Schema.optional(
    Schema.Array(
      Schema.Struct({
        adapter: Schema.String,
        where: Schema.String,
        name: Schema.optional(Schema.String),
        outcome: Schema.Literal("forgotten", "would forget"),
        reason: Schema.String
      })
    )
  )
})
export type GcReport = typeof GcReport.Type

export const LogLine = Schema.Struct({ service: Schema.String, line: Schema.String })

/**
 * What thin clients get from the `…Plain` endpoints: the outcome as data with failures already rendered as text, so
 * a client needs no error classes (and no Effect) to report them exactly as the full CLI would.
 */
export const PlainFailure = Schema.TaggedStruct("Failure", {
  tag: Schema.String,
  message: Schema.String
})
export type PlainFailure = typeof PlainFailure.Type

const plain = <S extends Schema.Schema.Any>(value: S) =>
  Schema.Union(Schema.TaggedStruct("Success", { value }), PlainFailure)

const upPayload = {
  ...worldRef,
  env: clientEnv,
  services: Schema.Array(Schema.String),
  groups: Schema.Array(Schema.String),
  /** false: answer at once (the world may still be in line or starting) */
  wait: Schema.optional(Schema.Boolean),
  /** in a cluster: the branch (pushed to origin) runs on whichever machine has room, and moves when it is gone */
  anywhere: Schema.optional(Schema.Boolean),
  /** a new world whose slices are copies of this world's, data included, as they are now */
  from: Schema.optional(Schema.String)
}

/** One machine-global setting, where its value comes from. */
export const ConfigEntry = Schema.Struct({
  key: Schema.String,
  value: Schema.String,
  source: Schema.Literal("default", "set", "environment")
})

export const ConfigReport = Schema.Struct({ settings: Schema.Array(ConfigEntry) })
export type ConfigReport = typeof ConfigReport.Type

export const Metrics = Schema.Struct({
  worlds: Schema.Record({ key: Schema.String, value: Schema.Number }),
  running: Schema.Number,
  queue: Schema.Array(
    Schema.Struct({ project: Schema.String, world: Schema.String, position: Schema.Number, waitingFor: Schema.String })
  ),
  admission: Schema.Struct({
    admitted: Schema.Number,
    queued: Schema.Number,
    suspended: Schema.Number,
    resumed: Schema.Number,
    maxWaitMs: Schema.Number,
    meanWaitMs: Schema.Number
  }),
  readings: Schema.Struct({
    memTotalBytes: Schema.Number,
    memAvailableBytes: Schema.Number,
    memAvailablePercent: Schema.Number,
    disks: Schema.Array(Schema.Struct({ path: Schema.String, freeBytes: Schema.Number }))
  }),
  reserves: Schema.Struct({
    maxParallel: Schema.Number,
    ramPercent: Schema.Number,
    diskBytes: Schema.Number,
    resumeFactor: Schema.Number,
    recovering: Schema.Boolean
  }),
  proxy: Schema.Struct({ requests: Schema.Array(Schema.Struct({ route: Schema.String, count: Schema.Number })) })
})
export type Metrics = typeof Metrics.Type
const downPayload = { ...worldRef, all: Schema.Boolean }

// ---------------------------------------------------------------------------------------------------------------
// The state stream (`Watch`): a snapshot, then one message per observed change. What the messages mean, and how a
// watcher folds them into a view, is `domain/dashboard.ts`.

/** A world as the stream carries it: its status, and what acting on it needs (its id, a folder of its project). */
export class WatchedWorld extends Schema.Class<WatchedWorld>("WatchedWorld")({
  id: Schema.Number,
  mainRoot: Schema.String,
  selection: Schema.Struct({ services: Schema.Array(Schema.String), groups: Schema.Array(Schema.String) }),
  status: WorldStatus
}) {}

export class LineEntry extends Schema.Class<LineEntry>("LineEntry")({
  worldId: Schema.Number,
  project: Schema.String,
  world: Schema.String,
  position: Schema.Number,
  waitingFor: Schema.String
}) {}

/** The machine's readings and the reserves they are held against. */
export class MachineReadings extends Schema.Class<MachineReadings>("MachineReadings")({
  memTotalBytes: Schema.Number,
  memAvailableBytes: Schema.Number,
  memAvailablePercent: Schema.Number,
  disks: Schema.Array(Schema.Struct({ path: Schema.String, freeBytes: Schema.Number })),
  running: Schema.Number,
  reserves: Schema.Struct({
    maxParallel: Schema.Number,
    ramPercent: Schema.Number,
    diskBytes: Schema.Number,
    resumeFactor: Schema.Number,
    recovering: Schema.Boolean
  })
}) {}

/** A world's processes (every process of its services' groups) summed: CPU as percent of one core, resident memory. */
export class WorldUsage extends Schema.Class<WorldUsage>("WorldUsage")({
  worldId: Schema.Number,
  cpuPercent: Schema.NullOr(Schema.Number),
  rssBytes: Schema.Number,
  processes: Schema.Number
}) {}

export class WatchSnapshot extends Schema.TaggedClass<WatchSnapshot>()("Snapshot", {
  worlds: Schema.Array(WatchedWorld),
  line: Schema.Array(LineEntry),
  machine: MachineReadings,
  usage: Schema.Array(WorldUsage),
  /** the web dashboard's address, when the proxy listens */
  dashboard: Schema.NullOr(Schema.String),
  at: Schema.Number
}) {}

/** A world appeared or its status changed (its state, a service's, its place in line, a new event): sent whole. */
export class WorldChanged extends Schema.TaggedClass<WorldChanged>()("WorldChanged", { world: WatchedWorld }) {}

export class WorldGone extends Schema.TaggedClass<WorldGone>()("WorldGone", { id: Schema.Number }) {}

export class LineChanged extends Schema.TaggedClass<LineChanged>()("LineChanged", { line: Schema.Array(LineEntry) }) {}

/** Every few seconds while someone watches: the machine, and each world's CPU and memory. */
export class Readings extends Schema.TaggedClass<Readings>()("Readings", {
  machine: MachineReadings,
  usage: Schema.Array(WorldUsage)
}) {}

export class EventAdded extends Schema.TaggedClass<EventAdded>()("EventAdded", {
  worldId: Schema.Number,
  world: Schema.String,
  event: WorldEvent
}) {}

export const WatchMessage = Schema.Union(WatchSnapshot, WorldChanged, WorldGone, LineChanged, Readings, EventAdded)
export type WatchMessage = typeof WatchMessage.Type

/** One machine of the cluster, as `berth cluster status` shows it. */
export const ClusterMachine = Schema.Struct({
  name: Schema.String,
  slot: Schema.Number,
  /** the address its peers dial */
  address: Schema.String,
  runnerPort: Schema.Number,
  /** its proxy's HTTP port, when it listens on `address` */
  proxyPort: Schema.NullOr(Schema.Number),
  version: Schema.String,
  state: Schema.Literal("up", "unreachable"),
  /** milliseconds since its last heartbeat */
  lastSeenMs: Schema.Number,
  /** how many worlds it has */
  worlds: Schema.Number,
  /** the machine that answered */
  self: Schema.Boolean,
  /**
   * its room for one more world, as its last heartbeat said (what worlds that run anywhere are placed by): `admits`
   * when its gate would start one now; null from a machine of an older berth
   */
  room: Schema.optional(
    Schema.NullOr(
      Schema.Struct({
        admits: Schema.Boolean,
        running: Schema.Number,
        waiting: Schema.Number,
        /** of those running or waiting, the worlds that run anywhere */
        anywhere: Schema.optional(Schema.Number),
        draining: Schema.Boolean
      })
    )
  )
})
export type ClusterMachine = typeof ClusterMachine.Type

export const ClusterStatus = Schema.Struct({
  /** solo: not in a cluster; connecting/retrying: a member without a session now (see error); refused: stopped */
  state: Schema.Literal("solo", "connecting", "member", "retrying", "refused"),
  /** the cluster's database, password hidden */
  url: Schema.NullOr(Schema.String),
  name: Schema.NullOr(Schema.String),
  address: Schema.NullOr(Schema.String),
  runnerPort: Schema.NullOr(Schema.Number),
  slot: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String),
  machines: Schema.Array(ClusterMachine)
})
export type ClusterStatus = typeof ClusterStatus.Type

const ClusterFailure = Schema.Union(ClusterUnavailable, ClusterRefused, InternalError, DiskFull)

export class DaemonApi extends RpcGroup.make(
  Rpc.make("Ping", {
    success: Schema.Struct({ version: Schema.String, build: Schema.String, pid: Schema.Number, home: Schema.String })
  }),
  Rpc.make("Up", { payload: upPayload, success: WorldStatus, error: UpError }),
  Rpc.make("UpPlain", { payload: upPayload, success: plain(WorldStatus) }),
  Rpc.make("Down", { payload: downPayload, success: Schema.Array(WorldStatus), error: DownError }),
  Rpc.make("DownPlain", { payload: downPayload, success: plain(Schema.Array(WorldStatus)) }),
  Rpc.make("Reload", {
    payload: {
      ...worldRef,
      env: clientEnv,
      /** false: answer at once (the world may still be in line or starting); by default, once it runs or failed */
      wait: Schema.optional(Schema.Boolean)
    },
    success: WorldStatus,
    error: ReloadError
  }),
  Rpc.make("Reset", {
    payload: { ...worldRef, env: clientEnv, slices: Schema.Array(Schema.String) },
    success: WorldStatus,
    error: ResetError
  }),
  Rpc.make("StopServices", {
    payload: { ...worldRef, services: Schema.Array(Schema.String) },
    success: WorldStatus,
    error: StopServicesError
  }),
  Rpc.make("RestartServices", {
    payload: {
      ...worldRef,
      services: Schema.Array(Schema.String),
      /** the services of these groups too */
      groups: Schema.optional(Schema.Array(Schema.String))
    },
    success: WorldStatus,
    error: RestartServicesError
  }),
  Rpc.make("Remove", {
    payload: { ...worldRef, force: Schema.Boolean },
    success: Schema.Struct({ project: Schema.String, name: Schema.String, path: Schema.String }),
    error: RemoveError
  }),
  Rpc.make("Status", {
    payload: { cwd: Schema.optional(Schema.String) },
    success: Schema.Struct({ worlds: Schema.Array(WorldStatus) }),
    error: StatusError
  }),
  Rpc.make("Env", {
    payload: worldRef,
    success: EnvReply,
    error: EnvError
  }),
  Rpc.make("Logs", {
    payload: {
      ...worldRef,
      service: Schema.optional(Schema.String),
      follow: Schema.Boolean,
      lines: Schema.Number
    },
    success: LogLine,
    error: LogsError,
    stream: true
  }),
  /**
   * The state stream: a snapshot of every world (of the project `cwd` is in, when given), the line and the machine,
   * then one message per observed change; the dashboards and embedders read it, nobody polls.
   */
  Rpc.make("Watch", {
    payload: { cwd: Schema.optional(Schema.String) },
    success: WatchMessage,
    error: WatchError,
    stream: true
  }),
  Rpc.make("GoldenRebuild", {
    payload: { ...worldRef, service: Schema.String, env: clientEnv },
    success: WorldStatus,
    error: GoldenRebuildError
  }),
  Rpc.make("Gc", {
    // the caller's environment resolves `${env.…}` in admin URLs that a world's own environment does not
    payload: {
      dryRun: Schema.Boolean,
      env: Schema.optional(clientEnv),
      /** the goldens and spares of projects with no world left go now, without waiting for the grace */
      goldens: Schema.optional(Schema.Boolean)
    },
    success: GcReport,
    error: GcError
  }),
  Rpc.make("GetSettings", { success: Settings, error: Schema.Union(InternalError, DiskFull) }),
  Rpc.make("SetPortRange", {
    payload: { from: Schema.Number, to: Schema.Number },
    success: Settings,
    error: Schema.Union(InvalidRequest, InternalError, DiskFull)
  }),
  Rpc.make("SetProxy", {
    payload: {
      http: Schema.optional(PortChoice),
      https: Schema.optional(PortChoice),
      httpsUrls: Schema.optional(Schema.Boolean)
    },
    success: Settings,
    error: Schema.Union(InvalidRequest, InternalError, DiskFull)
  }),
  Rpc.make("Config", { success: ConfigReport, error: Schema.Union(InternalError, DiskFull) }),
  /** the hosts file the daemon keeps berth's block in (an absolute path), or null: none from now on */
  Rpc.make("KeepHosts", {
    payload: { file: Schema.NullOr(Schema.String) },
    success: Schema.Struct({ file: Schema.NullOr(Schema.String), names: Schema.Array(Schema.String) }),
    error: Schema.Union(InvalidRequest, InternalError, DiskFull)
  }),
  /** what berth calls the project `cwd` is in, and which other repositories declare the same name */
  Rpc.make("Project", {
    payload: { cwd: Schema.String },
    success: Schema.Struct({ name: Schema.String, label: Schema.String, others: Schema.Array(Schema.String) }),
    error: ProjectError
  }),
  Rpc.make("Reserve", {
    payload: {
      ramPercent: Schema.optional(Schema.Number),
      diskGb: Schema.optional(Schema.Number),
      maxParallel: Schema.optional(Schema.Number)
    },
    success: ConfigReport,
    error: Schema.Union(InvalidRequest, InternalError, DiskFull)
  }),
  Rpc.make("Metrics", { success: Metrics, error: Schema.Union(InternalError, DiskFull) }),
  /**
   * One line in a world's history from a client: an agent's MCP tool call (kind `agent`), shown by `status` with the
   * world's other events. `kind` is a short lower-case word; a long message is cut.
   */
  Rpc.make("RecordEvent", {
    payload: { ...worldRef, kind: Schema.String, message: Schema.String },
    error: RecordEventError
  }),
  /** join a cluster (`init`: make berth's tables in its database first) */
  Rpc.make("ClusterJoin", {
    payload: {
      url: Schema.String,
      name: Schema.optional(Schema.String),
      address: Schema.optional(Schema.String),
      runnerPort: Schema.optional(Schema.Number),
      init: Schema.Boolean,
      replace: Schema.Boolean
    },
    success: ClusterStatus,
    error: ClusterFailure
  }),
  Rpc.make("ClusterLeave", { success: ClusterStatus, error: ClusterFailure }),
  Rpc.make("ClusterStatus", { success: ClusterStatus, error: Schema.Union(InternalError, DiskFull) }),
  Rpc.make("Shutdown", {})
) {}
