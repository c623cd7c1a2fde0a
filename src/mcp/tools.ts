/**
 * The tools berth's MCP server offers: each with Effect Schemas for its input and output and with its hints set
 * explicitly (an unannotated tool is advertised as destructive and open-world). Every tool acts on the world of the
 * server's working folder unless it is given another world's name. `remove` is not offered: an agent never destroys
 * a worktree.
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Context from "effect/Context"
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import { documents } from "../cli/json.js"
import { LogLine, WorldStatus } from "../daemon/api.js"
import { VerifyReport } from "./world.js"

/**
 * How a tool call failed, as data an agent can act on: every failing call's structured content, exactly these fields
 * (the CLI's JSON error has the same `tag`, `message` and `hint`).
 */
export class ToolFailure extends Schema.Class<ToolFailure>("ToolFailure")({
  /** berth's error tag: WorldNotFound, StartFailed, ConfigInvalid, DaemonUnavailable, DiskFull, InvalidParams, … */
  tag: Schema.String,
  message: Schema.String,
  /** what to do about it, or null when berth has no advice */
  hint: Schema.NullOr(Schema.String),
  /** the last lines of the failing service's log (a failed start), else empty */
  logTail: Schema.Array(Schema.String)
}) {}

const world = Schema.optional(
  Schema.String.annotations({
    description:
      "another world's name (its branch); by default the tools act on the world whose worktree the server runs in"
  })
)

interface Hints {
  readonly title: string
  readonly readOnly: boolean
  readonly destructive: boolean
  readonly idempotent: boolean
  readonly openWorld: boolean
}

const hints = (h: Hints) =>
  Context.empty().pipe(
    Context.add(Tool.Title, h.title),
    Context.add(Tool.Readonly, h.readOnly),
    Context.add(Tool.Destructive, h.destructive),
    Context.add(Tool.Idempotent, h.idempotent),
    Context.add(Tool.OpenWorld, h.openWorld)
  )

export const Up = Tool.make("up", {
  description:
    "Start the world: its worktree (created for a new branch), ports, private data slices, services and routes. Waits until every service is healthy (or the start fails, with the failing service's log), reporting progress while it waits in line for room or starts. Starting a running world changes nothing.",
  parameters: {
    world,
    services: Schema.optional(
      Schema.Array(Schema.String).annotations({ description: "only these services and their dependencies" })
    ),
    groups: Schema.optional(
      Schema.Array(Schema.String).annotations({
        description: "only the services of these groups and their dependencies"
      })
    ),
    wait: Schema.optional(
      Schema.Boolean.annotations({ description: "false: answer at once, while the world is still in line or starting" })
    ),
    from: Schema.optional(
      Schema.String.annotations({
        description:
          "make a new world whose data slices are copies of this existing world's, data included, as they are now (its services stop around the copy and start again)"
      })
    )
  },
  success: WorldStatus,
  failure: ToolFailure
}).annotateContext(
  hints({ title: "Start a world", readOnly: false, destructive: false, idempotent: true, openWorld: false })
)

export const Down = Tool.make("down", {
  description: "Stop the world's processes. Its files, ports and data stay, so the next up is quick.",
  parameters: { world },
  success: Schema.Struct({ worlds: Schema.Array(WorldStatus) }),
  failure: ToolFailure
}).annotateContext(
  hints({ title: "Stop a world", readOnly: false, destructive: true, idempotent: true, openWorld: false })
)

export const Reload = Tool.make("reload", {
  description:
    "Stop the world's processes and start them again on the same ports and data (after a config change); with groups, only the services of those groups and what depends on them. Waits until every service is healthy again (or the start fails, with the failing service's log), reporting progress as up does.",
  parameters: {
    world,
    groups: Schema.optional(
      Schema.Array(Schema.String).annotations({
        description: "only the services of these groups and what depends on them (the rest keep running)"
      })
    ),
    wait: Schema.optional(
      Schema.Boolean.annotations({
        description:
          "false: answer at once, while the world is still in line or starting (a whole-world reload; with groups the answer always comes once they are ready)"
      })
    )
  },
  success: WorldStatus,
  failure: ToolFailure
}).annotateContext(
  hints({ title: "Restart a world", readOnly: false, destructive: true, idempotent: false, openWorld: false })
)

export const Reset = Tool.make("reset", {
  description:
    "Put the world's data slices (all, or those named) back to their golden copy — or a fresh migrate + seed where there is none — stopping its processes first and starting them again after, reporting progress while they start. Ports and files stay; whatever the world wrote into those slices is gone.",
  parameters: {
    world,
    slices: Schema.optional(
      Schema.Array(Schema.String).annotations({ description: "only these slice services (default: every slice)" })
    )
  },
  success: WorldStatus,
  failure: ToolFailure
}).annotateContext(
  hints({ title: "Reset a world's data", readOnly: false, destructive: true, idempotent: true, openWorld: false })
)

export const Status = Tool.make("status", {
  description:
    "The world's state and its services: state, pid, port, URL, restarts, the reason and last log lines of a failed one, and the world's recent events. With project: true, every world of the project.",
  parameters: {
    world,
    project: Schema.optional(Schema.Boolean.annotations({ description: "every world of this project" }))
  },
  success: Schema.Struct({ worlds: Schema.Array(WorldStatus) }),
  failure: ToolFailure
}).annotateContext(
  hints({ title: "World status", readOnly: true, destructive: false, idempotent: true, openWorld: false })
)

export const Env = Tool.make("env", {
  description:
    "The world's coordinates as environment variables: <SERVICE>_URL and <SERVICE>_PORT for each service with a port, <SLICE>_URL for each data slice; and commands: the command each process was last started with (a dev server's port flags added, secrets masked).",
  parameters: { world },
  // what `berth env --json` prints, `schema` included
  success: documents.env,
  failure: ToolFailure
}).annotateContext(
  hints({ title: "World environment", readOnly: true, destructive: false, idempotent: true, openWorld: false })
)

export const Logs = Tool.make("logs", {
  description: "The last lines of the world's service logs (slices' migrate and seed output included).",
  parameters: {
    world,
    service: Schema.optional(
      Schema.String.annotations({
        description: "only this service's log; \"berth\" is the world's history (berth's events, agents' tool calls)"
      })
    ),
    lines: Schema.optional(
      Schema.Int.pipe(Schema.between(1, 1000)).annotations({ description: "lines per service, default 100" })
    )
  },
  success: Schema.Struct({ world: Schema.String, lines: Schema.Array(LogLine) }),
  failure: ToolFailure
}).annotateContext(
  hints({ title: "Service logs", readOnly: true, destructive: false, idempotent: true, openWorld: false })
)

export const Curl = Tool.make("curl", {
  description:
    "One HTTP request to a service of the world, through berth's proxy with the route's Host (as a browser reaches it). The body is cut after 64 KiB.",
  parameters: {
    world,
    service: Schema.String.annotations({ description: "a service with a url or a port" }),
    path: Schema.optional(Schema.String.annotations({ description: "the path and query, default /" })),
    method: Schema.optional(Schema.String.annotations({ description: "default GET, or POST with a body" })),
    headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    body: Schema.optional(Schema.String)
  },
  success: Schema.Struct({
    url: Schema.String,
    status: Schema.Number,
    headers: Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Array(Schema.String)) }),
    body: Schema.String,
    truncated: Schema.Boolean
  }),
  failure: ToolFailure
}).annotateContext(
  // a request may change the world's data (POST, DELETE), but reaches nothing beyond the world's own services
  hints({ title: "HTTP request to a service", readOnly: false, destructive: true, idempotent: false, openWorld: false })
)

export const Verify = Tool.make("verify", {
  description:
    "Run the world's [agents] verify commands (berth.toml) one after another in its worktree, with its environment; stops at the first failure. ok is false when one failed: it is the last in commands, with its exit code and last lines of output.",
  parameters: {
    world,
    timeoutSeconds: Schema.optional(
      Schema.Number.pipe(Schema.between(1, 7200)).annotations({ description: "per command, default 1800" })
    )
  },
  success: VerifyReport,
  failure: ToolFailure
}).annotateContext(
  hints({ title: "Verify the world", readOnly: false, destructive: false, idempotent: true, openWorld: false })
)

export const Exec = Tool.make("exec", {
  description:
    'Run a command (an argv array, no shell: use ["sh", "-c", "…"] for one) in the world\'s worktree with its environment. Returns the exit code and the last lines of stdout and stderr; after timeoutSeconds its whole process group is stopped and the exit code is 124.',
  parameters: {
    world,
    command: Schema.NonEmptyArray(Schema.String).annotations({ description: "the program and its arguments" }),
    timeoutSeconds: Schema.optional(
      Schema.Number.pipe(Schema.between(1, 7200)).annotations({ description: "default 600" })
    ),
    tailLines: Schema.optional(
      Schema.Int.pipe(Schema.between(1, 2000)).annotations({
        description: "lines of stdout and stderr kept, default 200"
      })
    )
  },
  success: Schema.Struct({
    exitCode: Schema.Number,
    timedOut: Schema.Boolean,
    durationMs: Schema.Number,
    stdoutTail: Schema.Array(Schema.String),
    stderrTail: Schema.Array(Schema.String)
  }),
  failure: ToolFailure
}).annotateContext(
  // any command: it may change anything and reach anything
  hints({ title: "Run a command in the world", readOnly: false, destructive: true, idempotent: false, openWorld: true })
)

export const BerthTools = Toolkit.make(Up, Down, Reload, Reset, Status, Env, Logs, Curl, Verify, Exec)

const jsonSchema = (ast: Tool.Any["successSchema"]["ast"], definitions: Record<string, JSONSchema.JsonSchema7>) =>
  JSONSchema.fromAST(ast, { definitions, topLevelReferenceStrategy: "skip" })

/**
 * What a tool's structured content is, as its `outputSchema`: its answer, or — on `isError` — the one failure shape.
 * The failure is part of it because MCP clients (the official SDK's among them) check whatever structured content
 * comes back against the declared schema, failures included.
 */
export const outputSchemaOf = (tool: Tool.Any): Record<string, unknown> => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {}
  const answer = jsonSchema(tool.successSchema.ast, definitions)
  const failure = jsonSchema(tool.failureSchema.ast, definitions)
  return {
    type: "object",
    description: `what ${tool.name} answers; on isError, the failure: { tag, message, hint, logTail }`,
    anyOf: [answer, failure],
    ...(Object.keys(definitions).length === 0 ? {} : { $defs: definitions })
  }
}
