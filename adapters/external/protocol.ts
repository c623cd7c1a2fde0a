/**
 * The wire format between berth and an external adapter (`berth-adapter-<name> <verb>`), as `effect/Schema`. The SDK
 * (`src/adapter-sdk`) declares the same shapes as plain types with a hand-written check, so that it bundles without
 * Effect; every schema here is annotated with the SDK's type, and since a Schema's type is invariant, the compiler
 * rejects any difference between the two.
 */
import * as Schema from "effect/Schema"
import type * as Sdk from "../../src/adapter-sdk/index.js"
import { adapterErrorKinds } from "../contract.js"

export const PROTOCOL_VERSION: typeof Sdk.PROTOCOL_VERSION = 1

export const Verb: Schema.Schema<Sdk.Verb> = Schema.Literal(
  "capabilities",
  "provision",
  "resolve",
  "teardown",
  "clone",
  "list",
  "standing"
)
export type Verb = Sdk.Verb

export const AdapterErrorKind: Schema.Schema<Sdk.AdapterErrorKind> = Schema.Literal(...adapterErrorKinds)

const Config: Schema.Schema<Sdk.Config> = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const Slice: Schema.Schema<Sdk.Slice> = Schema.Struct({
  adapter: Schema.String,
  project: Schema.String,
  world: Schema.String,
  service: Schema.String,
  name: Schema.String,
  owner: Schema.String,
  storage: Schema.String,
  adminUrl: Schema.optionalWith(Schema.String, { exact: true }),
  options: Config
})

export type Slice = Sdk.Slice

export const Scope: Schema.Schema<Sdk.Scope> = Schema.Struct({
  adapter: Schema.String,
  owner: Schema.String,
  storage: Schema.String,
  adminUrl: Schema.optionalWith(Schema.String, { exact: true }),
  options: Config
})

export type Scope = Sdk.Scope

const Protocol = Schema.Literal(1)

export const Request: Schema.Schema<Sdk.Request> = Schema.Union(
  Schema.Struct({ protocol: Protocol, verb: Schema.Literal("capabilities"), config: Config }),
  Schema.Struct({
    protocol: Protocol,
    verb: Schema.Literal("provision", "resolve", "teardown", "standing"),
    slice: Slice,
    config: Config
  }),
  Schema.Struct({ protocol: Protocol, verb: Schema.Literal("clone"), from: Slice, slice: Slice, config: Config }),
  Schema.Struct({ protocol: Protocol, verb: Schema.Literal("list"), scope: Scope, config: Config })
)
export type Request = Sdk.Request

export const FailureReply: Schema.Schema<Sdk.FailureReply> = Schema.Struct({
  ok: Schema.Literal(false),
  error: Schema.String,
  kind: Schema.optionalWith(AdapterErrorKind, { exact: true })
})

export const CapabilitiesReply: Schema.Schema<Sdk.CapabilitiesReply> = Schema.Struct({
  ok: Schema.Literal(true),
  clone: Schema.Boolean,
  // absent in the replies of adapters written before it
  standing: Schema.optionalWith(Schema.Boolean, { exact: true })
})

export const ProvisionReply: Schema.Schema<Sdk.ProvisionReply> = Schema.Struct({
  ok: Schema.Literal(true),
  created: Schema.Boolean
})

export const ResolveReply: Schema.Schema<Sdk.ResolveReply> = Schema.Struct({
  ok: Schema.Literal(true),
  url: Schema.NonEmptyString
})

export const DoneReply: Schema.Schema<Sdk.DoneReply> = Schema.Struct({ ok: Schema.Literal(true) })

export const ListReply: Schema.Schema<Sdk.ListReply> = Schema.Struct({
  ok: Schema.Literal(true),
  names: Schema.Array(Schema.String)
})

export const StandingReply: Schema.Schema<Sdk.StandingReply> = Schema.Struct({
  ok: Schema.Literal(true),
  standing: Schema.Literal("missing", "ours", "foreign")
})
