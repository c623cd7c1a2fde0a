/**
 * The world commands: thin clients of the daemon. Each sends one request and prints the answer, for people or
 * (with --json) for programs.
 */
import { existsSync } from "node:fs"
import { resolve } from "node:path"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { DaemonClient, ensureDaemon } from "../../daemon/client.js"
import { PlatformLive } from "../../services/Platform.js"
import { ProcessesLive } from "../../services/Processes.js"
import { downWithoutDaemon } from "./offline.js"
import { Home } from "../../services/Home.js"
import * as Layer from "effect/Layer"
import type { WorldStatus } from "../../daemon/api.js"
import { definedEnv } from "../../domain/environment.js"
import { DaemonUnavailable, InvalidRequest, WorldNotFound } from "../../domain/errors.js"
import { printDocument, printDocumentLine } from "../json.js"
import { describeFailure, json, printError, UsageError } from "../output.js"
import {
  interruptedLine,
  progressLine,
  queueLine,
  renderDown,
  renderEnv,
  renderStatus,
  renderWorld,
  worldOf
} from "../render.js"
import { progressOf, waitingLine } from "../../mcp/progress.js"
import { consenting, yes } from "./consent.js"

const worldName = Args.text({ name: "name" }).pipe(
  Args.withDescription("the world: a branch name (default: the worktree you are in)"),
  Args.optional
)

/** Only the commands that talk to the daemon build its client (and so start it). */
export const DaemonClientLive = DaemonClient.Default.pipe(Layer.provideMerge(Home.layer))
export const withDaemon = <Name extends string, R, E, A>(self: Command.Command<Name, R, E, A>) =>
  Command.provide(self, DaemonClientLive)

const clientEnv = () => definedEnv(process.env)

const printWorld = (json: boolean, command: "up" | "reload") => (world: WorldStatus) =>
  json ? printDocument(command, { world }) : Console.log(renderWorld(world).join("\n"))

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

/**
 * A world that does not exist is told with the command that asked for it, and whether a name was given: only `up`
 * offers to make the world named (`down nosuch` meant one that exists; see WorldNotFound).
 */
export const askedBy =
  (command: string, name: string | undefined) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | WorldNotFound, R> =>
    Effect.mapError(effect, (e) =>
      e instanceof WorldNotFound
        ? new WorldNotFound({ project: e.project, name: e.name, known: e.known, command, current: name === undefined })
        : e
    )

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

/**
 * How a waiting up tells what it waits for: a live line on a terminal; piped, a line per change of its place in line
 * (`lines`: of anything it waits for); `events`: one `up-progress` document per change on stdout (NDJSON).
 */
type Telling = "quiet" | "queue" | "lines" | "events"

const progress = Options.boolean("progress").pipe(
  Options.withDescription(
    "tell every change of what it waits for (its place in line, a golden, each service not ready): with --json, one up-progress document per change (NDJSON) before the world's; piped, a line each on stderr"
  )
)

/** How a command that waits tells it: `--json` and `--progress` as `up` reads them. */
const tellingOf = (json: boolean, progress: boolean): Telling =>
  json ? (progress ? "events" : "quiet") : progress ? "lines" : "queue"

/**
 * A request that answers once the world runs (`up`, `reload`), telling meanwhile what it waits for; `request` names
 * the world whose status is read.
 */
const waitingFor = <E>(
  answer: Effect.Effect<WorldStatus, E>,
  request: { readonly cwd: string; readonly world: string | undefined },
  telling: Telling
) =>
  Effect.gen(function* () {
    const client = yield* DaemonClient
    // the request stays in flight (Ctrl-C ends it, and that takes the world out of the line) while the line is shown
    const waiting = yield* Effect.fork(answer)
    const tty = process.stderr.isTTY === true && telling !== "events" && telling !== "quiet"
    const began = Date.now()
    let said: string | undefined
    const show = Effect.gen(function* () {
      if (telling === "quiet") return
      const { worlds } = yield* client.Status({ cwd: request.cwd })
      const w = worldOf(worlds, request.world, request.cwd)
      if (telling === "events") {
        if (w === undefined) return
        const progress = progressOf(w)
        const key = JSON.stringify(progress)
        if (key === said) return
        said = key
        return yield* printDocumentLine("up-progress", { progress: { ...progress, elapsedMs: Date.now() - began } })
      }
      const line = tty
        ? progressLine(w, Date.now() - began)
        : telling === "lines" && w !== undefined && (w.state === "starting" || w.state === "queued")
          ? waitingLine(w)
          : queueLine(w)
      if (line === undefined || line === said) return
      said = line
      yield* Effect.sync(() => process.stderr.write(tty ? `\r\u001b[2K${line}` : `${line}\n`))
    }).pipe(Effect.ignore)
    const progress = yield* Effect.fork(
      Effect.zipRight(Effect.sleep("300 millis"), Effect.forever(Effect.zipRight(show, Effect.sleep("1 second"))))
    )
    const world = yield* Fiber.join(waiting).pipe(
      Effect.ensuring(Fiber.interrupt(progress)),
      // Ctrl-C: say what stays behind (the request's end is what withdraws a world still in line)
      Effect.onInterrupt(() =>
        telling === "quiet" || telling === "events"
          ? Effect.void
          : client.Status({ cwd: request.cwd }).pipe(
              Effect.map(({ worlds }) => worldOf(worlds, request.world, request.cwd)),
              Effect.timeout("1 second"),
              Effect.orElseSucceed(() => undefined),
              Effect.flatMap((w) =>
                Effect.sync(() => process.stderr.write(`${tty ? "\r\u001b[2K" : ""}${interruptedLine(w)}\n`))
              )
            )
      )
    )
    if (tty && said !== undefined) process.stderr.write("\r\u001b[2K")
    return world
  })

/** The world once a waiting command answered it: NDJSON's last line after the events, else as the command prints it. */
const printWaited = (command: "up" | "reload", json: boolean, telling: Telling) => (world: WorldStatus) =>
  // NDJSON: the world is the last line, as compact as the events before it
  telling === "events" ? printDocumentLine(command, { world }) : printWorld(json, command)(world)

/**
 * `up --all`: every world of the project whose worktree is still there, brought up together (the gate decides who
 * runs first). Each is asked for by name, as `berth up <name>` would; one failing does not stop the others.
 */
const upAll = (request: {
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly services: ReadonlyArray<string>
  readonly groups: ReadonlyArray<string>
  readonly wait: boolean
  readonly yes: boolean
}) =>
  Effect.gen(function* () {
    const client = yield* DaemonClient
    const { worlds } = yield* client.Status({ cwd: request.cwd })
    const present = worlds.filter((w) => existsSync(w.path))
    const outcomes = yield* Effect.forEach(
      present,
      (w) => Effect.either(consenting(request.yes, client.Up({ ...request, world: w.name }))),
      { concurrency: "unbounded" }
    )
    const started: Array<WorldStatus> = []
    const failed: Array<{ readonly name: string; readonly message: string }> = []
    outcomes.forEach((outcome, i) => {
      if (outcome._tag === "Right") started.push(outcome.right)
      else failed.push({ name: present[i]!.name, message: describeFailure(outcome.left).message })
    })
    return { started, failed }
  })

export const up = Command.make(
  "up",
  {
    name: worldName,
    services,
    groups,
    noWait,
    progress,
    all: Options.boolean("all").pipe(
      Options.withDescription("every world of this project whose worktree exists (not with a name)")
    ),
    anywhere: Options.boolean("anywhere").pipe(
      Options.withDescription(
        "in a cluster: run the branch (pushed to origin) on whichever machine has room; it moves when that machine is gone"
      )
    ),
    from: Options.text("from").pipe(
      Options.withDescription("a new world whose slices are copies of this world's, data included, as they are now"),
      Options.optional
    ),
    yes,
    json
  },
  ({ all, anywhere, from, groups, json, name, noWait, progress, services, yes }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const request = {
          ...ref(name),
          env: clientEnv(),
          services,
          groups,
          ...(anywhere ? { anywhere } : {}),
          ...(Option.isSome(from) ? { from: from.value } : {})
        }
        if (all && anywhere) return yield* new UsageError({ message: "up: --anywhere takes one world, not --all" })
        if (Option.isSome(from) && (all || anywhere)) {
          return yield* new UsageError({
            message: `up: --from makes one new world on this machine, not with ${all ? "--all" : "--anywhere"}`
          })
        }
        if (all) {
          if (Option.isSome(name)) {
            return yield* new UsageError({ message: "up: give a world's name or --all, not both" })
          }
          const { failed, started } = yield* upAll({ ...request, wait: !noWait, yes })
          if (json) yield* printDocument("up-all", { worlds: started, failed })
          else {
            for (const w of started) yield* Console.log(renderWorld(w).join("\n"))
            if (started.length === 0 && failed.length === 0)
              yield* Console.log("no worlds yet: berth up <branch> makes one")
          }
          if (failed.length > 0) {
            return yield* new InvalidRequest({
              reason: failed.map((f) => `world ${f.name}: ${f.message}`).join("\n")
            })
          }
          return
        }
        if (noWait) {
          return yield* printWorld(json, "up")(yield* consenting(yes, client.Up({ ...request, wait: false })))
        }
        const telling = tellingOf(json, progress)
        yield* printWaited(
          "up",
          json,
          telling
        )(yield* consenting(yes, waitingFor(client.Up(request), request, telling)))
      })
    ).pipe(askedBy("up", Option.getOrUndefined(name)))
).pipe(Command.withDescription("Start a world: its worktree, ports, services and routes"), withDaemon)

const servicesAndDependents = (what: string) =>
  Options.text("service").pipe(
    Options.withAlias("s"),
    Options.withDescription(`${what} only this service and what depends on it (repeatable)`),
    Options.repeated
  )

export const down = Command.make(
  "down",
  {
    name: worldName,
    all: Options.boolean("all").pipe(Options.withDescription("every world of this project")),
    services: servicesAndDependents("stop"),
    json
  },
  ({ all, json, name, services }) =>
    Effect.gen(function* () {
      // no daemon can start (a full disk, say): the world's processes are still stopped, by their marks
      const home = yield* Home
      const reached = yield* Effect.either(ensureDaemon(home))
      if (reached._tag === "Left" && services.length === 0) {
        const stopped = yield* downWithoutDaemon(
          home,
          { cwd: process.cwd(), name: Option.getOrUndefined(name), all },
          reached.left
        )
        if (json) yield* printDocument("down", { worlds: stopped.worlds })
        else yield* Console.log(renderDown(stopped.worlds))
        if (stopped.unrecorded === undefined) return
        yield* printError(
          `note: ${stopped.worlds.map((w) => w.name).join(", ")} stopped, but not recorded down: the next daemon starts ${stopped.worlds.length === 1 ? "it" : "them"} again; run berth down again once berth can write its state`
        )
        return yield* typeof stopped.unrecorded === "string"
          ? Effect.fail(new DaemonUnavailable({ reason: stopped.unrecorded, log: home.daemonLog }))
          : Effect.fail(stopped.unrecorded)
      }
      return yield* viaDaemon(
        Effect.gen(function* () {
          const client = yield* DaemonClient
          if (services.length > 0) {
            if (all) return yield* new UsageError({ message: "down: --service acts on one world, not with --all" })
            const world = yield* client.StopServices({ ...ref(name), services })
            if (json) return yield* printDocument("down", { worlds: [world] })
            return yield* Console.log(renderWorld(world).join("\n"))
          }
          const worlds = yield* client.Down({ ...ref(name), all })
          if (json) return yield* printDocument("down", { worlds })
          yield* Console.log(renderDown(worlds))
        })
      ).pipe(askedBy("down", Option.getOrUndefined(name)), Effect.provide(DaemonClient.Default))
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformLive))))
).pipe(
  Command.withDescription("Stop a world's processes (or, with -s, some services); keep its files, ports and data"),
  Command.provide(Home.layer)
)

export const reload = Command.make(
  "reload",
  {
    name: worldName,
    services: servicesAndDependents("restart"),
    groups: Options.text("group").pipe(
      Options.withAlias("g"),
      Options.withDescription("restart only the services of this group and what depends on them (repeatable)"),
      Options.repeated
    ),
    noWait,
    progress,
    yes,
    json
  },
  ({ groups, json, name, noWait, progress, services, yes }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const request = ref(name)
        if (services.length > 0 || groups.length > 0) {
          // the services are restarted in place, beside the rest: the answer comes once they are ready
          if (noWait) {
            return yield* new UsageError({ message: "reload: --no-wait reloads a whole world, not with -s or -g" })
          }
          const telling = tellingOf(json, progress)
          const restarted = client.RestartServices({ ...request, services, groups })
          return yield* printWaited(
            "reload",
            json,
            telling
          )(yield* consenting(yes, waitingFor(restarted, request, telling)))
        }
        const reloading = { ...request, env: clientEnv() }
        if (noWait) {
          return yield* printWorld(json, "reload")(yield* consenting(yes, client.Reload({ ...reloading, wait: false })))
        }
        const telling = tellingOf(json, progress)
        yield* printWaited(
          "reload",
          json,
          telling
        )(yield* consenting(yes, waitingFor(client.Reload(reloading), request, telling)))
      })
    ).pipe(askedBy("reload", Option.getOrUndefined(name)))
).pipe(
  Command.withDescription(
    "Stop a world, then start it again on the same ports and data (or, with -s/-g, restart some services); waits until it runs, as up does"
  ),
  withDaemon
)

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
        if (json) return yield* printDocument("remove", { removed })
        yield* Console.log(`removed ${removed.name} (${removed.path})`)
      })
    ).pipe(askedBy("remove", Option.getOrUndefined(name)))
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
        if (json) return yield* printDocument("status", { worlds })
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
        const { commands, vars, world } = yield* client.Env(ref(name))
        if (json) return yield* printDocument("env", { world, vars, commands })
        yield* Console.log(renderEnv(vars, shell ? "shell" : dotenv ? "dotenv" : "plain"))
      })
    ).pipe(askedBy("env", Option.getOrUndefined(name)))
).pipe(Command.withDescription("A world's coordinates: <SERVICE>_URL, <SERVICE>_PORT, <SLICE>_URL"), withDaemon)

export const logs = Command.make(
  "logs",
  {
    name: worldName,
    service: Options.text("service").pipe(
      Options.withAlias("s"),
      Options.withDescription("only this service's log (berth: the world's history)"),
      Options.optional
    ),
    follow: Options.boolean("follow").pipe(Options.withAlias("f"), Options.withDescription("keep printing new lines")),
    lines: Options.integer("lines").pipe(
      Options.withAlias("n"),
      Options.withDescription("how many of the last lines of each log (default 50)"),
      Options.withDefault(50)
    ),
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
                ? printDocumentLine("logs", l)
                : Console.log(only === undefined ? `${l.service} | ${l.line}` : l.line)
            )
          )
      })
    ).pipe(askedBy("logs", Option.getOrUndefined(name)))
).pipe(Command.withDescription("A world's service logs"), withDaemon)
