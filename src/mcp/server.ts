/**
 * `berth mcp`: an MCP server over stdio (@effect/ai's McpServer) whose tools are thin clients of the daemon, as the
 * CLI's commands are. Each call acts on the world of the server's working folder unless it names another, is written
 * into that world's event history (kind `agent`, secrets masked), and fails as a structured result (`ToolFailure`).
 * While `up`, `reload` or `reset` waits — in line for room, or for its services' health — the client gets progress
 * notifications when it asked for them (a `progressToken`).
 */
import { existsSync, realpathSync } from "node:fs"
import { join } from "node:path"
import * as McpSchema from "@effect/ai/McpSchema"
import * as McpServer from "@effect/ai/McpServer"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import type * as Tool from "@effect/ai/Tool"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { caFor, send } from "../cli/commands/curl.js"
import { SCHEMA_VERSION } from "../cli/documents.js"
import type { WorldStatus } from "../daemon/api.js"
import type { DaemonClient } from "../daemon/client.js"
import {
  argumentProblems,
  refusedArguments,
  splitHint,
  type ToolInput,
  toolCallEvent,
  toolHint,
  worldAt
} from "../domain/agents.js"
import { definedEnv } from "../domain/environment.js"
import { NoServiceUrl, WorldNotFound } from "../domain/errors.js"
import { ConfigFiles } from "../services/ConfigFiles.js"
import { version } from "../version.js"
import { DaemonSession } from "./daemon.js"
import { runCommand } from "./run.js"
import { onItsWay, waitingLine } from "./progress.js"
import { BerthTools, outputSchemaOf, ToolFailure } from "./tools.js"
import { runVerify, verifyCommands, worldContext } from "./world.js"

const EXEC_TIMEOUT_MS = 600_000
const VERIFY_TIMEOUT_MS = 1_800_000
const TAIL_LINES = 200
const BODY_LIMIT = 64 * 1024

/** The progress token of the tool call being handled, when its client asked for progress. */
const ProgressToken = FiberRef.unsafeMake<string | number | undefined>(undefined)

const INTERNAL_HINT = "retry once; report it with the daemon's log (berth daemon status names it)"

/** A failed call's result: the failure as structured content, and the same JSON as its text. */
const failed = (failure: ToolFailure): McpSchema.CallToolResult => {
  // plain data: exactly the fields of the one shape, whatever built it
  const content = { tag: failure.tag, message: failure.message, hint: failure.hint, logTail: failure.logTail }
  return new McpSchema.CallToolResult({
    isError: true,
    structuredContent: content,
    content: [{ type: "text", text: JSON.stringify(content) }]
  })
}

/**
 * Every failing call is told in one shape: a handler's `ToolFailure` as it is, and anything the toolkit failed with
 * on its own (a result it could not encode: berth's fault) as an InternalError.
 */
const uniformFailure = (result: McpSchema.CallToolResult): McpSchema.CallToolResult => {
  if (result.isError !== true) return result
  const content = result.structuredContent as Record<string, unknown> | undefined
  if (typeof content?.tag === "string" && typeof content.message === "string") {
    return failed(
      new ToolFailure({
        tag: content.tag,
        message: content.message,
        hint: typeof content.hint === "string" ? content.hint : null,
        logTail: Array.isArray(content.logTail) ? content.logTail.filter((l) => typeof l === "string") : []
      })
    )
  }
  const error = content as { readonly description?: unknown; readonly cause?: { readonly message?: unknown } }
  return failed(
    new ToolFailure({
      tag: "InternalError",
      message: `berth hit an internal error: ${[error?.description, error?.cause?.message].filter((t) => typeof t === "string" && t !== "").join("\n")}`,
      hint: INTERNAL_HINT,
      logTail: []
    })
  )
}

/**
 * Arguments a tool does not take, or values it cannot take, are refused before anything runs, with a message that
 * names each argument and what it must be, or the closest one the tool takes (McpServer's own decoding quotes
 * Effect's tree, and drops unknown arguments without a word).
 */
const refusal = (
  request: { readonly name: string; readonly arguments?: Readonly<Record<string, unknown>> | undefined },
  tools: ReadonlyArray<McpSchema.Tool>
): ToolFailure | undefined => {
  const tool = (BerthTools.tools as Readonly<Record<string, Tool.Any>>)[request.name]
  if (tool === undefined) return undefined
  const args = request.arguments ?? {}
  // each schema says additionalProperties: false, and a misspelt `world` must never act on the server's own world
  const decoded = Schema.decodeUnknownEither(tool.parametersSchema as Schema.Schema<unknown, unknown>)(args, {
    errors: "all",
    onExcessProperty: "error"
  })
  const problems = Either.isLeft(decoded) ? argumentProblems(decoded.left.issue) : []
  if (problems.length === 0) return undefined
  const input = (tools.find((t) => t.name === request.name)?.inputSchema ?? {}) as ToolInput
  const { hint, message } = refusedArguments(request.name, input, problems, args)
  return new ToolFailure({ tag: "InvalidParams", message, hint, logTail: [] })
}

/**
 * McpServer hands a tool's handler only the call's arguments; the call's `_meta.progressToken` is kept here, around
 * the call, so that a handler can report progress on it.
 */
const McpServerWithProgress = Layer.scoped(
  McpServer.McpServer,
  Effect.map(McpServer.McpServer.make, (server) =>
    McpServer.McpServer.of({
      ...server,
      callTool: (request) => {
        const refused = refusal(request, server.tools)
        if (refused !== undefined) return Effect.succeed(failed(refused))
        return server
          .callTool(request)
          .pipe(Effect.map(uniformFailure), Effect.locally(ProgressToken, request._meta?.progressToken))
      }
    })
  )
)

const hasTag = (e: unknown): e is { readonly _tag: string; readonly message: string } =>
  typeof e === "object" && e !== null && typeof (e as { _tag?: unknown })._tag === "string" && "message" in e

/** Any failure of a handler as the structured result an agent gets. */
const toFailure = (
  cause: Cause.Cause<unknown>,
  asked: { readonly tool: string; readonly world?: string | undefined }
): ToolFailure => {
  if (Cause.isInterruptedOnly(cause)) {
    return new ToolFailure({ tag: "Interrupted", message: "the call was cancelled", hint: null, logTail: [] })
  }
  const failed = Option.getOrElse(Cause.failureOption(cause), () => Cause.squash(cause))
  // a world not found is told for the tool that asked: only up makes one, and no world named means this worktree's
  const error =
    failed instanceof WorldNotFound && failed.current === undefined
      ? new WorldNotFound({
          ...failed,
          command: asked.tool === "up" ? "up" : undefined,
          current: asked.world === undefined
        })
      : failed
  if (error instanceof ToolFailure) return error
  if (hasTag(error)) {
    const { hint, message } = splitHint(error.message)
    const logTail = (error as { readonly logTail?: unknown }).logTail
    return new ToolFailure({
      tag: error._tag === "RpcClientError" ? "DaemonUnavailable" : error._tag,
      message,
      hint: hint ?? null,
      logTail: Array.isArray(logTail) ? logTail.filter((l): l is string => typeof l === "string") : []
    })
  }
  return new ToolFailure({
    tag: "InternalError",
    message: `berth hit an internal error: ${error instanceof Error ? error.message : String(error)}`,
    hint: INTERNAL_HINT,
    logTail: []
  })
}

/** What a finished call is told as in the world's history. */
const outcomeOf = (exit: Exit.Exit<unknown, ToolFailure>): string => {
  if (Exit.isFailure(exit)) {
    const failure = Cause.failureOption(exit.cause)
    return failure._tag === "Some" ? `failed: ${failure.value.tag}` : "cancelled"
  }
  const value = exit.value as {
    readonly exitCode?: unknown
    readonly ok?: unknown
    readonly state?: unknown
    readonly worlds?: ReadonlyArray<WorldStatus>
  }
  if (typeof value.ok === "boolean") return value.ok ? "ok" : "failed"
  if (typeof value.exitCode === "number") return `exit ${value.exitCode}`
  if (typeof value.state === "string") return value.state
  if (Array.isArray(value.worlds)) return value.worlds.map((w) => `${w.name} ${w.state}`).join(", ") || "no worlds"
  return "ok"
}

/** A folder git checks out: a main checkout has a `.git` folder, a worktree a `.git` file. */
const isCheckout = (dir: string) => existsSync(join(dir, ".git"))

const folderOf = (cwd: string) => {
  try {
    return realpathSync(cwd)
  } catch {
    return cwd
  }
}

const Handlers = (cwd: string) =>
  BerthTools.toLayer(
    Effect.gen(function* () {
      const session = yield* DaemonSession
      const server = yield* McpServer.McpServer
      const files = yield* ConfigFiles
      const env = definedEnv(process.env)
      const ref = (world: string | undefined) => ({ cwd, world })

      let sent = 0
      const progress = (message: string) =>
        Effect.flatMap(FiberRef.get(ProgressToken), (token) => {
          if (token === undefined) return Effect.void
          sent += 1
          return server.notifications["notifications/progress"]({ progressToken: token, progress: sent, message })
        }).pipe(Effect.ignore)

      /** Runs a tool's work: failures become ToolFailure, and the call is written into the world's history. */
      const tool =
        (name: string) =>
        <P extends { readonly world?: string | undefined }, A>(work: (params: P) => Effect.Effect<A, unknown>) =>
        (params: P): Effect.Effect<A, ToolFailure> =>
          work(params).pipe(
            Effect.catchAllCause((cause) => {
              const failure = toFailure(cause, { tool: name, world: params.world })
              // berth's hints name CLI commands; an agent here has the tools
              return Effect.fail(new ToolFailure({ ...failure, hint: toolHint(failure.hint, params.world) }))
            }),
            Effect.onExit((exit) =>
              session
                .use((client) =>
                  client.RecordEvent({
                    ...ref(params.world),
                    kind: "agent",
                    message: toolCallEvent(name, params, outcomeOf(exit), env)
                  })
                )
                // the history is a record, never a reason for a call to fail or hang
                .pipe(Effect.timeout("5 seconds"), Effect.ignore)
            )
          )

      const worldOf = (world: string | undefined) => session.use((client) => worldContext(client, ref(world)))

      /**
       * Runs a request that answers once the world runs (up, reload, reset), telling the client meanwhile what the
       * world waits for — only while it is on its way up: never the state it is leaving (stopping, stopped).
       */
      const reporting = <A, E>(client: DaemonClient, world: string | undefined, answer: Effect.Effect<A, E>) =>
        Effect.gen(function* () {
          const waiting = yield* Effect.fork(answer)
          let said: string | undefined
          const report = Effect.gen(function* () {
            const { worlds } = yield* client.Status({ cwd })
            const w =
              world === undefined
                ? worldAt(worlds, folderOf(cwd), isCheckout)
                : worlds.find((x) => x.name === world || x.slug === world)
            if (w === undefined || !onItsWay(w)) return
            const line = waitingLine(w)
            if (line === said) return
            said = line
            yield* progress(line)
          }).pipe(Effect.ignore)
          const reporter = yield* Effect.fork(
            Effect.zipRight(
              Effect.sleep("300 millis"),
              Effect.forever(Effect.zipRight(report, Effect.sleep("1 second")))
            )
          )
          return yield* Fiber.join(waiting).pipe(Effect.ensuring(Fiber.interrupt(reporter)))
        })

      return {
        up: tool("up")((p) =>
          session.use((client) =>
            Effect.gen(function* () {
              const request = {
                ...ref(p.world),
                env,
                services: p.services ?? [],
                groups: p.groups ?? [],
                wait: p.wait ?? true,
                ...(p.from === undefined ? {} : { from: p.from })
              }
              if (!request.wait) return yield* client.Up(request)
              return yield* reporting(client, p.world, client.Up(request))
            })
          )
        ),
        down: tool("down")((p) =>
          session.use((client) => Effect.map(client.Down({ ...ref(p.world), all: false }), (worlds) => ({ worlds })))
        ),
        reload: tool("reload")((p) =>
          session.use((client) =>
            Effect.gen(function* () {
              if (p.groups !== undefined && p.groups.length > 0) {
                const groups = p.groups
                return yield* reporting(
                  client,
                  p.world,
                  client.RestartServices({ ...ref(p.world), services: [], groups })
                )
              }
              if (p.wait === false) return yield* client.Reload({ ...ref(p.world), env, wait: false })
              return yield* reporting(client, p.world, client.Reload({ ...ref(p.world), env }))
            })
          )
        ),
        reset: tool("reset")((p) =>
          session.use((client) =>
            reporting(client, p.world, client.Reset({ ...ref(p.world), env, slices: p.slices ?? [] }))
          )
        ),
        status: tool("status")((p) =>
          session.use((client) =>
            Effect.gen(function* () {
              const { worlds } = yield* client.Status({ cwd })
              if (p.project === true && p.world === undefined) return { worlds }
              const w =
                p.world === undefined
                  ? worldAt(worlds, folderOf(cwd), isCheckout)
                  : worlds.find((x) => x.name === p.world || x.slug === p.world)
              if (w !== undefined) return { worlds: [w] }
              // the daemon resolves the world as for every other tool; where there is none, it names the world and the
              // project's others, with its usual hint
              const { world } = yield* client.Env(ref(p.world))
              const resolved = worlds.find((x) => x.name === world)
              if (resolved !== undefined) return { worlds: [resolved] }
              // gone between the two questions (removed meanwhile): none of that name now
              const { label } = yield* client.Project({ cwd })
              return yield* new WorldNotFound({ project: label, name: world, known: worlds.map((x) => x.name) })
            })
          )
        ),
        env: tool("env")((p) =>
          session.use((client) =>
            Effect.map(client.Env(ref(p.world)), (reply) => ({ schema: SCHEMA_VERSION, ...reply }))
          )
        ),
        logs: tool("logs")((p) =>
          session.use((client) =>
            Effect.gen(function* () {
              const { world } = yield* client.Env(ref(p.world))
              const lines = yield* client
                .Logs({ ...ref(p.world), service: p.service, follow: false, lines: p.lines ?? 100 })
                .pipe(Stream.runCollect)
              return { world, lines: [...lines] }
            })
          )
        ),
        curl: tool("curl")((p) =>
          session.use((client) =>
            Effect.gen(function* () {
              const { world } = yield* client.Env(ref(p.world))
              const { worlds } = yield* client.Status({ cwd })
              const w = worlds.find((x) => x.name === world)
              const s = w?.services.find((x) => x.name === p.service)
              if (s === undefined || s.kind !== "process" || s.url === null) {
                const reachable = (w?.services ?? [])
                  .filter((x) => x.kind === "process" && x.url !== null)
                  .map((x) => x.name)
                return yield* new NoServiceUrl({ world, service: p.service, reachable })
              }
              const target = new URL(p.path ?? "/", s.url)
              const ca = yield* caFor(target, (yield* client.GetSettings()).proxy.caPath)
              const body = p.body === undefined ? undefined : Buffer.from(p.body)
              const answer = yield* send(target, {
                method: p.method ?? (body === undefined ? "GET" : "POST"),
                headers: Object.fromEntries(Object.entries(p.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
                body,
                include: false,
                ca,
                collect: true
              })
              const text = answer.body ?? ""
              return {
                url: target.href,
                status: answer.status,
                headers: answer.headers,
                body: text.length > BODY_LIMIT ? text.slice(0, BODY_LIMIT) : text,
                truncated: text.length > BODY_LIMIT
              }
            })
          )
        ),
        verify: tool("verify")((p) =>
          Effect.gen(function* () {
            const world = yield* worldOf(p.world)
            const commands = yield* verifyCommands(world).pipe(Effect.provideService(ConfigFiles, files))
            const { report } = yield* runVerify(world, commands, {
              output: { tailLines: 50 },
              timeoutMs: p.timeoutSeconds === undefined ? VERIFY_TIMEOUT_MS : p.timeoutSeconds * 1000,
              onStart: (index, command) => progress(`${index + 1}/${commands.length}: ${command}`)
            })
            return report
          })
        ),
        exec: tool("exec")((p) =>
          Effect.gen(function* () {
            const world = yield* worldOf(p.world)
            const result = yield* runCommand({
              argv: p.command,
              cwd: world.path,
              env: world.env,
              timeoutMs: p.timeoutSeconds === undefined ? EXEC_TIMEOUT_MS : p.timeoutSeconds * 1000,
              output: { tailLines: p.tailLines ?? TAIL_LINES }
            })
            return {
              exitCode: result.exitCode,
              timedOut: result.timedOut,
              durationMs: result.durationMs,
              stdoutTail: result.stdoutTail,
              stderrTail: result.stderrTail
            }
          })
        )
      }
    })
  )

const outputSchemas: ReadonlyMap<string, Record<string, unknown>> = new Map(
  Object.values(BerthTools.tools as Readonly<Record<string, Tool.Any>>).map((t) => [t.name, outputSchemaOf(t)])
)

/**
 * McpServer lists a tool with its input schema only (its Tool has no outputSchema field, and encoding drops what it
 * does not know), so each tool's `outputSchema` is added to the `tools/list` answers on their way out.
 */
const DeclaredOutput = Layer.effect(
  RpcServer.Protocol,
  Effect.map(RpcServer.Protocol, (protocol) => {
    const listings = new Set<string>()
    const key = (clientId: number, requestId: string) => `${clientId}/${requestId}`
    const withOutput = (value: unknown): unknown => {
      const tools = (value as { readonly tools?: unknown } | null)?.tools
      if (!Array.isArray(tools)) return value
      return {
        ...(value as object),
        tools: tools.map((t: { readonly name?: unknown }) => {
          const schema = typeof t?.name === "string" ? outputSchemas.get(t.name) : undefined
          return schema === undefined ? t : { ...t, outputSchema: schema }
        })
      }
    }
    return RpcServer.Protocol.of({
      ...protocol,
      run: (f) =>
        protocol.run((clientId, message) => {
          if (message._tag === "Request" && message.tag === "tools/list") listings.add(key(clientId, message.id))
          return f(clientId, message)
        }),
      send: (clientId, response, transferables) => {
        if (response._tag !== "Exit" || !listings.delete(key(clientId, response.requestId))) {
          return protocol.send(clientId, response, transferables)
        }
        const exit = response.exit
        return protocol.send(
          clientId,
          exit._tag === "Success" ? { ...response, exit: { ...exit, value: withOutput(exit.value) } } : response,
          transferables
        )
      }
    })
  })
)

/** The server on this process's stdin and stdout; nothing else may write to stdout meanwhile. */
const ServerLive = (cwd: string) =>
  Layer.mergeAll(
    Layer.scopedDiscard(Effect.forkScoped(McpServer.run({ name: "berth", version }))),
    Layer.effectDiscard(McpServer.registerToolkit(BerthTools)).pipe(Layer.provide(Handlers(cwd)))
  ).pipe(
    Layer.provide(McpServerWithProgress),
    Layer.provide(DeclaredOutput),
    Layer.provide(RpcServer.layerProtocolStdio({ stdin: NodeStream.stdin, stdout: NodeSink.stdout })),
    Layer.provide(RpcSerialization.layerNdJsonRpc()),
    Layer.provide(DaemonSession.layer)
  )

/**
 * Serves until the client closes stdin (the protocol then ends the server's fiber, which is a normal end here). Logs
 * go to stderr: stdout carries the protocol.
 */
export const serveMcp = (cwd: string) =>
  Effect.gen(function* () {
    const server = yield* Effect.fork(Layer.launch(ServerLive(cwd)))
    const exit = yield* Fiber.await(server)
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
  }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true, colors: false }))))
