/**
 * What a world's actor is told: one Schema'd request per command, each with its success and failure schemas. In this
 * daemon the requests go through the actor's mailbox as they are; the same classes become `@effect/cluster` entity
 * messages unchanged (`Rpc.fromTaggedRequest`, see `WorldRpcs`), so a world can move to another machine without a
 * second protocol.
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import * as Schema from "effect/Schema"
import {
  DiskFull,
  ConfigInvalid,
  ConfigNotAllowed,
  ConfigNotFound,
  ConfigUnreadable,
  DriverMissing,
  InternalError,
  InvalidRequest,
  MainCheckout,
  PathOutsideWorktree,
  PortRangeExhausted,
  StartFailed,
  WorktreeDirty,
  UnknownService,
  UnknownGroup,
  UnknownSlice,
  WorldNotRunning,
  StartInterrupted,
  UnsetVariable,
  FolderInTheWay,
  GitCommandFailed,
  SliceServerFailed,
  WorldNotFound
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

/** Everything a world's command can fail with. */
export const WorldFailure = Schema.Union(
  WorldNotFound,
  ConfigNotFound,
  ConfigUnreadable,
  ConfigInvalid,
  ConfigNotAllowed,
  StartFailed,
  WorktreeDirty,
  MainCheckout,
  PathOutsideWorktree,
  UnknownService,
  UnknownGroup,
  UnknownSlice,
  WorldNotRunning,
  StartInterrupted,
  UnsetVariable,
  FolderInTheWay,
  GitCommandFailed,
  SliceServerFailed,
  InvalidRequest,
  PortRangeExhausted,
  DriverMissing,
  InternalError,
  DiskFull
)
export type WorldError = typeof WorldFailure.Type

/** Bring the world up with this selection and environment; answered once its start is under way (or queued). */
export class Up extends Schema.TaggedRequest<Up>()("Up", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { selection: Selection, env: Env }
}) {}

export class Down extends Schema.TaggedRequest<Down>()("Down", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: {}
}) {}

/** Stop and start again with the config as it is now (checked first: a reload that cannot start stops nothing). */
export class Reload extends Schema.TaggedRequest<Reload>()("Reload", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { env: Env }
}) {}

export class Remove extends Schema.TaggedRequest<Remove>()("Remove", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { force: Schema.Boolean }
}) {}

/** The worktree folder was deleted outside berth: stop everything and forget the world. */
export class Vanished extends Schema.TaggedRequest<Vanished>()("Vanished", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: {}
}) {}

/** Build the golden of one slice service again, from this world's worktree and environment. */
export class RebuildGolden extends Schema.TaggedRequest<RebuildGolden>()("RebuildGolden", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { service: Schema.String, env: Env }
}) {}

/**
 * Memory is short (or the world idled): stop the processes, keep ports, slices, files and routes. `requeue`: back in
 * line at once (pressure); otherwise it waits for a request to wake it (idleness).
 */
export class Suspend extends Schema.TaggedRequest<Suspend>()("Suspend", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { reason: Schema.String, requeue: Schema.Boolean }
}) {}

/** A request reached a suspended world's URL: queue its resume now. */
export class Wake extends Schema.TaggedRequest<Wake>()("Wake", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: {}
}) {}

/** The `up` waiting for this world gave up (Ctrl-C): leave the line if it is still waiting there. */
export class Withdraw extends Schema.TaggedRequest<Withdraw>()("Withdraw", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: {}
}) {}

/**
 * Put slices (none named: all of them) back to their golden — or to a fresh migrate + seed — with the world's
 * processes stopped around it and started again; ports and files stay.
 */
export class Reset extends Schema.TaggedRequest<Reset>()("Reset", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { slices: Schema.Array(Schema.String), env: Env }
}) {}

/**
 * Copy this world's slices, data included, into the new world `to` (`berth up <to> --from <this>`): its processes
 * stop around the copy (PostgreSQL copies a database only while nobody is connected to it) and start again.
 */
export class CopySlices extends Schema.TaggedRequest<CopySlices>()("CopySlices", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: {
    to: Schema.Struct({ id: Schema.Number, name: Schema.String, slug: Schema.String, path: Schema.String }),
    env: Env
  }
}) {}

/** Stop these services of a running world and everything that depends on them; the rest keeps running. */
export class StopServices extends Schema.TaggedRequest<StopServices>()("StopServices", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { services: Schema.Array(Schema.String) }
}) {}

/** Stop, then start again, these services — and those of these groups — and what depends on them, of a running world. */
export class RestartServices extends Schema.TaggedRequest<RestartServices>()("RestartServices", {
  failure: WorldFailure,
  success: Schema.Void,
  payload: { services: Schema.Array(Schema.String), groups: Schema.optional(Schema.Array(Schema.String)) }
}) {}

/**
 * A service of the world entered or left `failed`: the world's own state follows (`degraded` while one is failed).
 * Sent by the world's service watchers to its own mailbox, so that the state keeps one writer.
 */
export class ServicesChanged extends Schema.TaggedRequest<ServicesChanged>()("ServicesChanged", {
  failure: WorldFailure,
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
