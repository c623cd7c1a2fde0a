/**
 * The world commands: thin clients of the daemon. Each sends one request and prints the answer, for people or
 * (with --json) for programs.
 */
import { resolve } from "node:path"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { DaemonClient } from "../../daemon/client.js"
import { Home } from "../../services/Home.js"
import * as Layer from "effect/Layer"
import type { WorldStatus } from "../../daemon/api.js"
import { definedEnv } from "../../domain/environment.js"
import { DaemonUnavailable } from "../../domain/errors.js"
import { json, printJson } from "../output.js"
import { queueLine, renderDown, renderEnv, renderStatus, renderWorld, worldOf } from "../render.js"

const worldName = Args.text({ name: "name" }).pipe(
  Args.withDescription("the world: a branch name (default: the worktree you are in)"),
  Args.optional
)

/** Only the commands that talk to the daemon build its client (and so start it). */
export const DaemonClientLive = DaemonClient.Default.pipe(Layer.provideMerge(Home.layer))
export const withDaemon = <Name extends string, R, E, A>(self: Command.Command<Name, R, E, A>) =>
  Command.provide(self, DaemonClientLive)

const clientEnv = () => definedEnv(process.env)

const printWorld = (json: boolean) => (world: WorldStatus) =>
  json ? printJson(world) : Console.log(renderWorld(world).join("\n"))

/** A transport failure (the daemon died mid-request) is told as such, not as a protocol error. */
export const viaDaemon = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.catchIf(
      (e): e is E & { readonly _tag: "RpcClientError" } =>
        typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "RpcClientError",
      (e) => new DaemonUnavailable({ reason: String((e as { message?: unknown }).message ?? "connection lost") })
    )
  )

const ref = (name: Option.Option<string>) => ({ cwd: process.cwd(), world: Option.getOrUndefined(name) })

const services = Options.text("service").pipe(
  Options.withAlias("s"),
  Options.withDescription("only this service and its dependencies (repeatable)"),
  Options.repeated
)
const groups = Options.text("group").pipe(
  Options.withAlias("g"),
  Options.withDescription("only the services of this group and their dependencies (repeatable)"),
  Options.repeated
)

const noWait = Options.boolean("no-wait").pipe(
  Options.withDescription("answer at once, even while the world waits in line for room or is still starting")
)

export const up = Command.make(
  "up",
  { name: worldName, services, groups, noWait, json },
  ({ groups, json, name, noWait, services }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const request = { ...ref(name), env: clientEnv(), services, groups }
        if (noWait) return yield* printWorld(json)(yield* client.Up({ ...request, wait: false }))
        // the up that waits stays in flight (Ctrl-C ends it, and that takes the world out of the line) while the
        // world's place in line is shown: one live line on a terminal, a line per change when piped
        const waiting = yield* Effect.fork(client.Up(request))
        const tty = process.stderr.isTTY === true
        let said: string | undefined
        const show = Effect.gen(function* () {
          const { worlds } = yield* client.Status({ cwd: request.cwd })
          const line = queueLine(worldOf(worlds, name._tag === "Some" ? name.value : undefined, request.cwd))
          if (line === undefined || line === said || json) return
          said = line
          yield* Effect.sync(() => process.stderr.write(tty ? `\r\u001b[2K${line}` : `${line}\n`))
        }).pipe(Effect.ignore)
        const progress = yield* Effect.fork(
          Effect.zipRight(Effect.sleep("300 millis"), Effect.forever(Effect.zipRight(show, Effect.sleep("1 second"))))
        )
        const world = yield* Fiber.join(waiting).pipe(Effect.ensuring(Fiber.interrupt(progress)))
        if (tty && said !== undefined) process.stderr.write("\r\u001b[2K")
        yield* printWorld(json)(world)
      })
    )
).pipe(Command.withDescription("Start a world: its worktree, ports, services and routes"), withDaemon)

export const down = Command.make(
  "down",
  {
    name: worldName,
    all: Options.boolean("all").pipe(Options.withDescription("every world of this project")),
    json
  },
  ({ all, json, name }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const worlds = yield* client.Down({ ...ref(name), all })
        if (json) return yield* printJson({ worlds })
        yield* Console.log(renderDown(worlds))
      })
    )
).pipe(Command.withDescription("Stop a world's processes; keep its files, ports and data"), withDaemon)

export const reload = Command.make("reload", { name: worldName, json }, ({ json, name }) =>
  viaDaemon(
    Effect.gen(function* () {
      const client = yield* DaemonClient
      yield* printWorld(json)(yield* client.Reload({ ...ref(name), env: clientEnv() }))
    })
  )
).pipe(Command.withDescription("Stop a world, then start it again on the same ports and data"), withDaemon)

export const remove = Command.make(
  "remove",
  {
    name: worldName,
    force: Options.boolean("force").pipe(Options.withDescription("discard uncommitted and untracked changes")),
    json
  },
  ({ force, json, name }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const removed = yield* client.Remove({ ...ref(name), force })
        if (json) return yield* printJson(removed)
        yield* Console.log(`removed ${removed.name} (${removed.path})`)
      })
    )
).pipe(Command.withDescription("Destroy a world: stop it, release its ports, remove its worktree"), withDaemon)

export const status = Command.make(
  "status",
  {
    path: Args.directory({ name: "path" }).pipe(
      Args.withDescription("only the project this folder belongs to (e.g. .)"),
      Args.optional
    ),
    json
  },
  ({ json, path }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        // the daemon runs in another folder: a relative path means one under the CLI's
        const { worlds } = yield* client.Status({ cwd: Option.getOrUndefined(Option.map(path, (p) => resolve(p))) })
        if (json) return yield* printJson({ worlds })
        yield* Console.log(renderStatus(worlds))
      })
    )
).pipe(Command.withDescription("Every world of every project, with its services"), withDaemon)

export const env = Command.make(
  "env",
  {
    name: worldName,
    dotenv: Options.boolean("dotenv").pipe(Options.withDescription('KEY="value" lines for a .env file')),
    shell: Options.boolean("shell").pipe(Options.withDescription("export lines for eval in a shell")),
    json
  },
  ({ dotenv, json, name, shell }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const { vars } = yield* client.Env(ref(name))
        if (json) return yield* printJson(vars)
        yield* Console.log(renderEnv(vars, shell ? "shell" : dotenv ? "dotenv" : "plain"))
      })
    )
).pipe(Command.withDescription("A world's coordinates: <SERVICE>_URL, <SERVICE>_PORT, <SLICE>_URL"), withDaemon)

export const logs = Command.make(
  "logs",
  {
    name: worldName,
    service: Options.text("service").pipe(Options.withAlias("s"), Options.optional),
    follow: Options.boolean("follow").pipe(Options.withAlias("f"), Options.withDescription("keep printing new lines")),
    lines: Options.integer("lines").pipe(Options.withAlias("n"), Options.withDefault(50)),
    json
  },
  ({ follow, json, lines, name, service }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const only = Option.getOrUndefined(service)
        yield* client
          .Logs({ ...ref(name), service: only, follow, lines })
          .pipe(
            Stream.runForEach((l) =>
              json
                ? Console.log(JSON.stringify(l))
                : Console.log(only === undefined ? `${l.service} | ${l.line}` : l.line)
            )
          )
      })
    )
).pipe(Command.withDescription("A world's service logs"), withDaemon)
