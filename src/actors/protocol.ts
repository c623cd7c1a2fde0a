/**
 * What a world's actor is told: one Schema'd request per command, each with its success and failure schemas. In this
 * daemon the requests go through the actor's mailbox as they are; the same classes become `@effect/cluster` entity
 * messages unchanged (`Rpc.fromTaggedRequest`, see `WorldRpcs`), so a world can move to another machine without a
 * second protocol.
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import type * as Request from "effect/Request"
import * as Schema from "effect/Schema"
import {
  ConfigInvalid,
  ConfigNotAllowed,
  ConfigNotFound,
  ConfigUnreadable,
  DiskFull,
  DriverMissing,
  FolderInTheWay,
  GitCommandFailed,
  GoldenInputsFailed,
  InternalError,
  InvalidWorldName,
  NotARepository,
  PathOutsideWorktree,
  PortRangeExhausted,
  SliceCopyUnsupported,
  SliceServerFailed,
  StartFailed,
  StartInterrupted,
  UnknownGroup,
  UnknownLog,
  UnknownService,
  UnknownSlice,
  UnsetVariable,
  WorldExists,
  WorldMovedAway,
  WorldNotFound,
  WorldNotReady,
  WorldNotRunning,
  WorktreeDirty,
  WorktreeFileFailed,
  WorktreeMissing
} from "../domain/errors.js"
import { worldStates } from "../domain/world-state.js"

/** Which services an `up` starts: none named means all of them. */
export const Selection = Schema.Struct({
  services: Schema.Array(Schema.String),
  groups: Schema.Array(Schema.String)
})
export type Selection = typeof Selection.Type

/** The environment of the command that asked: a world keeps it for everything it does later. */
export const Env = Schema.Record({ key: Schema.String, value: Schema.String })

// ---------------------------------------------------------------------------------------------------------------
// What each command can fail with, as the code that serves it says (the compiler holds each request's handler in
// WorldActor.ts to its union): a few shared parts, spread into one union per request.

/**
 * What any request to a world's actor can fail with: the world is gone (removed meanwhile), berth's own fault (a
 * defect is answered as an InternalError), a full disk.
 */
export const ActorFailures = [WorldNotFound, InternalError, DiskFull] as const

/** Reading a berth.toml. */
export const ConfigFailures = [ConfigNotFound, ConfigUnreadable, ConfigInvalid] as const

/**
 * Getting a start ready, before anything changes: the worktree made (git, a folder in the way, a file of it), the
 * config read and allowed to run, the services selected, the paths they run in and write, the admin_urls' variables.
 */
const PrepareFailures = [
  ...ActorFailures,
  ...ConfigFailures,
  ConfigNotAllowed,
  FolderInTheWay,
  GitCommandFailed,
  WorktreeMissing,
  WorktreeFileFailed,
  PathOutsideWorktree,
  UnknownService,
  UnknownGroup,
  UnsetVariable
] as const

/** Making and filling a world's slices (migrate and seed are run as a start's commands are: `StartFailed`). */
const SliceFailures = [
  SliceServerFailed,
  SliceCopyUnsupported,
  WorldMovedAway,
  GoldenInputsFailed,
  DriverMissing,
  StartFailed
] as const

/** A start: getting ready, then its ports, its slices and its services, each until it is ready. */
const StartFailures = [...PrepareFailures, ...SliceFailures, PortRangeExhausted] as const

/** How a start that an `up` waits for can end other than running: its own failure, or stopped before it was ready. */
export const StartOutcome = Schema.Union(...StartFailures, StartInterrupted)
export type StartError = typeof StartOutcome.Type

export const UpFailure = Schema.Union(...StartFailures)
export const DownFailure = Schema.Union(...ActorFailures)
export const ReloadFailure = Schema.Union(...StartFailures)
export const RemoveFailure = Schema.Union(
  ...ActorFailures,
  WorktreeDirty,
  SliceServerFailed,
  DriverMissing,
  GitCommandFailed
)
export const VanishedFailure = Schema.Union(...ActorFailures, SliceServerFailed, DriverMissing, GitCommandFailed)
export const RebuildGoldenFailure = Schema.Union(
  ...ActorFailures,
  ...ConfigFailures,
  ConfigNotAllowed,
  PathOutsideWorktree,
  UnknownSlice,
  UnsetVariable,
  ...SliceFailures
)
/** a world suspended for memory queues to resume at once, one woken by a request too: what a start checks first */
export const SuspendFailure = Schema.Union(...PrepareFailures)
export const WakeFailure = Schema.Union(...PrepareFailures)
export const WithdrawFailure = Schema.Union(...ActorFailures)
export const ResetFailure = Schema.Union(...PrepareFailures, ...SliceFailures, UnknownSlice)
export const CopySlicesFailure = Schema.Union(
  ...PrepareFailures,
  SliceServerFailed,
  SliceCopyUnsupported,
  DriverMissing
)
export const StopServicesFailure = Schema.Union(...ActorFailures, UnknownService, UnknownGroup, WorldNotRunning)
export const RestartServicesFailure = Schema.Union(...StartFailures, WorldNotRunning)
export const ServicesChangedFailure = Schema.Union(...ActorFailures)

/** Bring the world up with this selection and environment; answered once its start is under way (or queued). */
export class Up extends Schema.TaggedRequest<Up>()("Up", {
  failure: UpFailure,
  success: Schema.Void,
  payload: { selection: Selection, env: Env }
}) {}

export class Down extends Schema.TaggedRequest<Down>()("Down", {
  failure: DownFailure,
  success: Schema.Void,
  payload: {}
}) {}

/** Stop and start again with the config as it is now (checked first: a reload that cannot start stops nothing). */
export class Reload extends Schema.TaggedRequest<Reload>()("Reload", {
  failure: ReloadFailure,
  success: Schema.Void,
  payload: { env: Env }
}) {}

export class Remove extends Schema.TaggedRequest<Remove>()("Remove", {
  failure: RemoveFailure,
  success: Schema.Void,
  payload: { force: Schema.Boolean }
}) {}

/** The worktree folder was deleted outside berth: stop everything and forget the world. */
export class Vanished extends Schema.TaggedRequest<Vanished>()("Vanished", {
  failure: VanishedFailure,
  success: Schema.Void,
  payload: {}
}) {}

/** Build the golden of one slice service again, from this world's worktree and environment. */
export class RebuildGolden extends Schema.TaggedRequest<RebuildGolden>()("RebuildGolden", {
  failure: RebuildGoldenFailure,
  success: Schema.Void,
  payload: { service: Schema.String, env: Env }
}) {}

/**
 * Memory is short (or the world idled): stop the processes, keep ports, slices, files and routes. `requeue`: back in
 * line at once (pressure); otherwise it waits for a request to wake it (idleness).
 */
export class Suspend extends Schema.TaggedRequest<Suspend>()("Suspend", {
  failure: SuspendFailure,
  success: Schema.Void,
  payload: { reason: Schema.String, requeue: Schema.Boolean }
}) {}

/** A request reached a suspended world's URL: queue its resume now. */
export class Wake extends Schema.TaggedRequest<Wake>()("Wake", {
  failure: WakeFailure,
  success: Schema.Void,
  payload: {}
}) {}

/** The `up` waiting for this world gave up (Ctrl-C): leave the line if it is still waiting there. */
export class Withdraw extends Schema.TaggedRequest<Withdraw>()("Withdraw", {
  failure: WithdrawFailure,
  success: Schema.Void,
  payload: {}
}) {}

/**
 * Put slices (none named: all of them) back to their golden — or to a fresh migrate + seed — with the world's
 * processes stopped around it and started again; ports and files stay.
 */
export class Reset extends Schema.TaggedRequest<Reset>()("Reset", {
  failure: ResetFailure,
  success: Schema.Void,
  payload: { slices: Schema.Array(Schema.String), env: Env }
}) {}

/**
 * Copy this world's slices, data included, into the new world `to` (`berth up <to> --from <this>`): its processes
 * stop around the copy (PostgreSQL copies a database only while nobody is connected to it) and start again.
 */
export class CopySlices extends Schema.TaggedRequest<CopySlices>()("CopySlices", {
  failure: CopySlicesFailure,
  success: Schema.Void,
  payload: {
    to: Schema.Struct({ id: Schema.Number, name: Schema.String, slug: Schema.String, path: Schema.String }),
    env: Env
  }
}) {}

/** Stop these services of a running world and everything that depends on them; the rest keeps running. */
export class StopServices extends Schema.TaggedRequest<StopServices>()("StopServices", {
  failure: StopServicesFailure,
  success: Schema.Void,
  payload: { services: Schema.Array(Schema.String) }
}) {}

/** Stop, then start again, these services — and those of these groups — and what depends on them, of a running world. */
export class RestartServices extends Schema.TaggedRequest<RestartServices>()("RestartServices", {
  failure: RestartServicesFailure,
  success: Schema.Void,
  payload: { services: Schema.Array(Schema.String), groups: Schema.optional(Schema.Array(Schema.String)) }
}) {}

/**
 * A service of the world entered or left `failed`: the world's own state follows (`degraded` while one is failed).
 * Sent by the world's service watchers to its own mailbox, so that the state keeps one writer.
 */
export class ServicesChanged extends Schema.TaggedRequest<ServicesChanged>()("ServicesChanged", {
  failure: ServicesChangedFailure,
  success: Schema.Void,
  payload: {}
}) {}

export const WorldCommand = Schema.Union(
  Up,
  Down,
  Reload,
  Remove,
  Vanished,
  RebuildGolden,
  Suspend,
  Wake,
  Withdraw,
  Reset,
  CopySlices,
  StopServices,
  RestartServices,
  ServicesChanged
)
export type WorldCommand = typeof WorldCommand.Type

/** What the request `C` can fail with: its own union (which has the world gone, berth's own fault and a full disk). */
export type FailureOf<C extends WorldCommand> =
  | Request.Request.Error<C>
  | Schema.Schema.Type<(typeof ActorFailures)[number]>

/** What any request to a world's actor can fail with: every request's union in one. */
export const WorldFailure = Schema.Union(
  ...StartFailures,
  StartInterrupted,
  UnknownSlice,
  WorldNotRunning,
  WorktreeDirty
)
export type WorldError = typeof WorldFailure.Type

// ---------------------------------------------------------------------------------------------------------------
// What the engine's commands (`Worlds`, what the daemon serves and a program embeds) fail with: naming the world,
// then what its actor answers (and, for those that wait, how its start ended).

/** What naming a world adds to its actor's failures (which have the world not found, and the config's own). */
const NamingFailures = [NotARepository, InvalidWorldName] as const

/** Naming a world: its repository, its config, its name; and the world itself. */
export const ResolveFailures = [...ActorFailures, ...ConfigFailures, ...NamingFailures] as const

export type ResolveError = Schema.Schema.Type<(typeof ResolveFailures)[number]>

/** Reading a project's worlds: its repository and its config. */
export const ProjectFailures = [InternalError, DiskFull, ...ConfigFailures, NotARepository] as const
export type ProjectError = Schema.Schema.Type<(typeof ProjectFailures)[number]>

/**
 * What each of the engine's commands can fail with. Those that wait for a start add how it ended (`StartOutcome`,
 * whose start failures they have already); `waitReady` adds a world that ended otherwise than running.
 */
export const CommandFailure = {
  up: Schema.Union(...StartFailures, StartInterrupted, ...NamingFailures, WorldExists),
  waitReady: Schema.Union(...StartFailures, StartInterrupted, ...NamingFailures, WorldNotReady),
  down: Schema.Union(...ResolveFailures),
  reload: Schema.Union(...StartFailures, StartInterrupted, ...NamingFailures),
  remove: Schema.Union(...RemoveFailure.members, ...ConfigFailures, ...NamingFailures),
  reset: Schema.Union(...StartFailures, StartInterrupted, UnknownSlice, ...NamingFailures),
  stopServices: Schema.Union(...StopServicesFailure.members, ...ConfigFailures, ...NamingFailures),
  restartServices: Schema.Union(...RestartServicesFailure.members, ...NamingFailures),
  rebuildGolden: Schema.Union(...RebuildGoldenFailure.members, ...NamingFailures),
  env: Schema.Union(...ResolveFailures, PortRangeExhausted),
  logs: Schema.Union(...ResolveFailures, UnknownLog),
  recordEvent: Schema.Union(...ResolveFailures),
  project: Schema.Union(...ProjectFailures)
} as const

/** What the engine's command `K` can fail with. */
export type CommandError<K extends keyof typeof CommandFailure> = Schema.Schema.Type<(typeof CommandFailure)[K]>

const WorldStateSchema = Schema.Literal(...worldStates)

/** One move of a world's observed state: what `Worlds.changes` streams (and a cluster would publish). */
export const WorldChange = Schema.Struct({
  worldId: Schema.Number,
  project: Schema.String,
  world: Schema.String,
  from: WorldStateSchema,
  to: WorldStateSchema,
  /** the event that moved it (`Admit`, `Started`, `Suspend`, …) */
  event: Schema.String,
  reason: Schema.NullOr(Schema.String),
  /** epoch milliseconds */
  at: Schema.Number
})
export type WorldChange = typeof WorldChange.Type

/** The same protocol as RPCs: what an `@effect/cluster` entity for a world is made of. */
export const WorldRpcs = RpcGroup.make(
  Rpc.fromTaggedRequest(Up),
  Rpc.fromTaggedRequest(Down),
  Rpc.fromTaggedRequest(Reload),
  Rpc.fromTaggedRequest(Remove),
  Rpc.fromTaggedRequest(Vanished),
  Rpc.fromTaggedRequest(RebuildGolden),
  Rpc.fromTaggedRequest(Suspend),
  Rpc.fromTaggedRequest(Wake),
  Rpc.fromTaggedRequest(Withdraw),
  Rpc.fromTaggedRequest(Reset),
  Rpc.fromTaggedRequest(CopySlices),
  Rpc.fromTaggedRequest(StopServices),
  Rpc.fromTaggedRequest(RestartServices),
  Rpc.fromTaggedRequest(ServicesChanged)
)
