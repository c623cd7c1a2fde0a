/**
 * `berth dashboard` (`berth dash`): every world of every project (or of one), live, in the terminal. It reads the
 * daemon's state stream (`Watch`) and acts through the same requests as the world commands; the screen is drawn by
 * `cli/dashboard/screen.ts` from the view model `domain/dashboard.ts` folds the stream into.
 */
import { resolve } from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Stream from "effect/Stream"
import type { WorldStatus } from "../../daemon/api.js"
import { DaemonClient } from "../../daemon/client.js"
import { request } from "../../daemon/wire.js"
import { applyMessage, type DashboardModel, emptyModel, rowsOf } from "../../domain/dashboard.js"
import { definedEnv } from "../../domain/environment.js"
import { DaemonUnavailable } from "../../domain/errors.js"
import { Home } from "../../services/Home.js"
import { isThisBuild } from "../../version.js"
import { parseKeys } from "../dashboard/keys.js"
import { pageSize, screen } from "../dashboard/screen.js"
import { type Action, addLogLine, follow, initialUi, press, type UiState } from "../dashboard/state.js"
import { openTerminal } from "../dashboard/terminal.js"
import { describeFailure, UsageError } from "../output.js"
import { wantsColour } from "../render.js"
import { launchBrowser } from "./open.js"
import { viaDaemon, withDaemon } from "./worlds.js"

/** The terminal, taken for the dashboard and given back whatever ends it. */
const terminal = Effect.acquireRelease(
  Effect.sync(() => openTerminal(process.stdout, process.stdin)),
  (t) => Effect.sync(() => t.restore())
)

/** Longer than the daemon goes without a message while it lives (it sends readings every 2 s). */
const SILENCE = "6 seconds"

/** A failure in one line, for the status line. */
const oneLine = (e: unknown) => describeFailure(e).message.split("\n")[0] ?? ""

const live = (cwd: string | undefined) =>
  Effect.scoped(
    Effect.gen(function* () {
      let client = yield* DaemonClient
      const colour = wantsColour(process.stdout)
      const term = yield* terminal
      const runtime = yield* Effect.runtime<never>()
      const quit = yield* Deferred.make<void>()
      let model: DashboardModel<WorldStatus> = emptyModel()
      let ui: UiState = initialUi
      const render = () => term.draw(screen(model, ui, term.size(), colour))
      const update = (f: (ui: UiState) => UiState) =>
        Effect.sync(() => {
          ui = f(ui)
          render()
        })
      const say = (message: string) => update((u) => ({ ...u, message }))
      render()

      // the daemon sends readings every 2 s: a longer silence means it is gone (stopped, or replaced by another
      // build), and a connection of its own finds the next one (starting it, as every command does)
      let lost = false
      // the first watch goes over the command's own connection, just made to a daemon of this build: the snapshot is
      // the first thing asked, and drawn as it comes
      let reconnecting = false
      const home = yield* Home
      const watchOnce = Effect.scoped(
        Effect.gen(function* () {
          if (reconnecting) {
            // a daemon of another build answers (berth was upgraded): replacing it, as a new command would, is for the
            // new berth to do; an old dashboard left open would otherwise take the daemon back from every new command
            const pong = yield* Effect.promise(() => request(home.socket, "Ping", undefined, 5_000))
            if (pong._tag === "Success" && !isThisBuild(pong.value)) {
              return yield* new DaemonUnavailable({
                reason: "berth was upgraded; quit (q) and start berth dashboard again"
              })
            }
            client = Context.get(yield* Layer.build(DaemonClient.Default), DaemonClient)
          }
          reconnecting = true
          yield* client.Watch({ cwd }).pipe(
            Stream.timeoutFail(
              () => new DaemonUnavailable({ reason: "it stopped answering; connecting again…" }),
              SILENCE
            ),
            Stream.runForEach((message) =>
              Effect.sync(() => {
                if (lost && message._tag === "Snapshot") {
                  lost = false
                  ui = { ...ui, message: "connected to the daemon again" }
                }
                model = applyMessage(model, message)
                ui = follow(ui, rowsOf(model, ui.filter))
                render()
              })
            )
          )
        })
      )
      yield* watchOnce.pipe(
        // however it ended: a failure, the end of the stream, or the daemon interrupting it as it stopped
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.zipRight(
            Effect.sync(() => {
              lost = true
            }),
            say(
              Exit.isFailure(exit) && Cause.isFailType(exit.cause) && exit.cause.error._tag === "DaemonUnavailable"
                ? `lost the daemon: ${exit.cause.error.reason}`
                : "lost the daemon: connecting again…"
            )
          )
        ),
        Effect.zipRight(Effect.sleep("1 second")),
        Effect.forever,
        Effect.forkScoped
      )

      let logs: Fiber.RuntimeFiber<void> | undefined
      const stopLogs = Effect.suspend(() => {
        const fiber = logs
        logs = undefined
        return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
      })
      yield* Effect.addFinalizer(() => stopLogs)

      /** Runs what a key asked for; its outcome (or failure) is told on the status line. */
      const act = (action: Action): Effect.Effect<void> => {
        if (action._tag === "Quit") return Deferred.succeed(quit, undefined).pipe(Effect.asVoid)
        if (action._tag === "StopLogs") return stopLogs
        const w = action.row.world
        const name = w.status.name
        const ref = { cwd: w.mainRoot, world: name }
        const told = <A, E, R>(doing: string, effect: Effect.Effect<A, E, R>, done: (a: A) => string) =>
          Effect.zipRight(
            say(doing),
            effect.pipe(
              Effect.matchEffect({
                onFailure: (e) => say(`${name}: ${oneLine(e)}`),
                onSuccess: (a) => say(done(a))
              })
            )
          )
        switch (action._tag) {
          case "Up":
            return told(
              `bringing ${name} up…`,
              client.Up({
                ...ref,
                env: definedEnv(process.env),
                services: w.selection.services,
                groups: w.selection.groups,
                wait: false
              }),
              (s) => `${name}: ${s.state}`
            )
          case "Down":
            return told(`bringing ${name} down…`, client.Down({ ...ref, all: false }), () => `${name}: stopped`)
          case "Reload":
            return told(
              `reloading ${name}…`,
              client.Reload({ ...ref, env: definedEnv(process.env) }),
              (s) => `${name}: ${s.state}`
            )
          case "Remove":
            return told(
              `removing ${name}…`,
              client.Remove({ ...ref, force: false }),
              (r) => `removed ${r.name} (${r.path})`
            )
          case "Restart":
            return told(
              `restarting ${action.service} of ${name}…`,
              client.RestartServices({ ...ref, services: [action.service] }),
              () => `${name}: restarted ${action.service}`
            )
          case "Open": {
            const url = w.status.services.find((s) => s.name === action.service)?.url ?? ""
            return told(`opening ${url}`, launchBrowser(url), (launched) =>
              // the URL first: it is what to open by hand, and a long line is cut at its end
              launched.opened ? `opened ${url}` : `could not open ${url} in a browser (${launched.why})`
            )
          }
          case "Logs":
            return Effect.gen(function* () {
              yield* stopLogs
              logs = yield* client.Logs({ ...ref, service: action.service, follow: true, lines: 200 }).pipe(
                Stream.runForEach((l) => update((u) => addLogLine(u, l.line))),
                Effect.catchAll((e) => update((u) => addLogLine(u, `(berth: ${oneLine(e)})`))),
                Effect.forkDaemon
              )
            })
        }
      }

      const onKeys = (data: string | Buffer) => {
        for (const key of parseKeys(data.toString())) {
          const outcome = press(ui, key, rowsOf(model, ui.filter), pageSize(term.size()))
          ui = follow(outcome.ui, rowsOf(model, outcome.ui.filter))
          render()
          if (outcome.action !== undefined) Runtime.runFork(runtime)(act(outcome.action))
        }
      }
      const onResize = () => {
        term.invalidate()
        render()
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          process.stdin.on("data", onKeys)
          process.stdout.on("resize", onResize)
        }),
        () =>
          Effect.sync(() => {
            process.stdin.removeListener("data", onKeys)
            process.stdout.removeListener("resize", onResize)
          })
      )
      yield* Deferred.await(quit)
    })
  )

export const dashboard = Command.make(
  "dashboard",
  {
    project: Options.directory("project").pipe(
      Options.withDescription("only the worlds of the project this folder belongs to (e.g. .)"),
      Options.optional
    ),
    // every command takes --json; a live view has no document to print, so here it is a usage error (in JSON)
    json: Options.boolean("json").pipe(
      Options.withDescription("a usage error here: berth status --json prints every world once")
    )
  },
  ({ json, project }) =>
    viaDaemon(
      Effect.gen(function* () {
        if (json) {
          return yield* new UsageError({
            message: "dashboard: --json has no live view to print; berth status --json prints every world once"
          })
        }
        if (process.stdin.isTTY !== true || process.stdout.isTTY !== true) {
          return yield* new UsageError({
            message: "dashboard: needs a terminal (stdin and stdout); berth status prints every world once"
          })
        }
        // the daemon runs in another folder: a relative path means one under the CLI's
        const cwd = Option.getOrUndefined(Option.map(project, (p) => resolve(p)))
        // a folder outside any project fails here, before the terminal is taken
        if (cwd !== undefined) yield* (yield* DaemonClient).Project({ cwd })
        yield* live(cwd)
      })
    )
).pipe(
  Command.withDescription(
    "A live view of every world: states, services, URLs, CPU and memory, the line; keys to act (? for help)"
  ),
  withDaemon
)
