/**
 * `berth open [name] [service]`: a service's URL in the browser — `$BROWSER` when set, else the system's opener
 * (`xdg-open`, `open` on macOS). The URL is printed too, so it is there to click when no browser can be started;
 * then berth says so and exits 1.
 */
import { spawn } from "node:child_process"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { WorldStatus } from "../../daemon/api.js"
import { DaemonClient } from "../../daemon/client.js"
import { InvalidRequest } from "../../domain/errors.js"
import { printDocument } from "../json.js"
import { json, printError } from "../output.js"
import { errorPrefix } from "../render.js"
import { askedBy, viaDaemon, withDaemon } from "./worlds.js"

/** The service to open: the one named, else the first with a URL (berth.toml's order). */
export const serviceToOpen = (world: WorldStatus, name: string | undefined) => {
  const routed = world.services.filter((s) => s.kind === "process" && s.url !== null)
  if (name === undefined) {
    const first = routed[0]
    return first === undefined
      ? new InvalidRequest({ reason: `world ${world.name} has no service with a url to open` })
      : first
  }
  const found = routed.find((s) => s.name === name)
  return (
    found ??
    new InvalidRequest({
      reason: `world ${world.name} has no service ${JSON.stringify(name)} with a url; those are: ${routed.map((s) => s.name).join(", ") || "none"}`
    })
  )
}

/** How starting a browser went: opened, or why not. */
export type Launched = { readonly opened: true } | { readonly opened: false; readonly why: string }

/**
 * An opener (xdg-open, open) answers with its exit code at once; a browser named in BROWSER, or one xdg-open runs in
 * the foreground, runs on until it is closed: still running after this long, it has opened.
 */
const STILL_RUNNING_MS = 3_000

/**
 * Starts the opener detached and waits for its exit code (xdg-open exits 3 on a machine with no browser), so that
 * berth never says it opened what it did not.
 */
export const launchBrowser = (url: string) =>
  Effect.async<Launched>((resume) => {
    const opener = process.env.BROWSER ?? (process.platform === "darwin" ? "open" : "xdg-open")
    // BROWSER may hold arguments ("firefox --new-window"): split on spaces, and pass the URL as one more argument
    const [command, ...args] = opener.split(" ").filter((w) => w !== "")
    if (command === undefined) return resume(Effect.succeed({ opened: false, why: "BROWSER is empty" }))
    const child = spawn(command, [...args, url], { detached: true, stdio: "ignore" })
    let timer: NodeJS.Timeout | undefined
    const settle = (launched: Launched) => {
      clearTimeout(timer)
      child.removeAllListeners()
      // a browser that runs on is left to run, without keeping berth alive
      child.unref()
      resume(Effect.succeed(launched))
    }
    timer = setTimeout(() => settle({ opened: true }), STILL_RUNNING_MS)
    child.once("error", (e: NodeJS.ErrnoException) =>
      settle({ opened: false, why: `${command} could not be started: ${e.code ?? e.message}` })
    )
    child.once("exit", (code, signal) =>
      settle(
        code === 0
          ? { opened: true }
          : { opened: false, why: `${command} ${code === null ? `ended by ${signal}` : `exited with code ${code}`}` }
      )
    )
    return Effect.sync(() => clearTimeout(timer))
  })

/** What to tell when no browser opened: the URL is there to open by hand. */
export const notOpened = (why: string, url: string) =>
  `the browser could not be opened (${why}): open ${url} yourself, or set BROWSER to the command that opens one`

export const open = Command.make(
  "open",
  {
    name: Args.text({ name: "name" }).pipe(
      Args.withDescription("the world: a branch name (default: the worktree you are in)"),
      Args.optional
    ),
    service: Args.text({ name: "service" }).pipe(
      Args.withDescription("the service (default: the first with a url)"),
      Args.optional
    ),
    json
  },
  ({ json, name, service }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const cwd = process.cwd()
        // the daemon resolves the world (by name, or the worktree the folder is in), with its usual errors
        const { world } = yield* client
          .Env({ cwd, world: Option.getOrUndefined(name) })
          .pipe(askedBy("open", Option.getOrUndefined(name)))
        const { worlds } = yield* client.Status({ cwd })
        const w = worlds.find((x) => x.name === world)
        if (w === undefined) return yield* new InvalidRequest({ reason: `world ${world} is gone` })
        const chosen = serviceToOpen(w, Option.getOrUndefined(service))
        if (chosen instanceof InvalidRequest) return yield* chosen
        const url = chosen.url!
        if (!json) yield* Console.log(url)
        if (w.state !== "running" && w.state !== "degraded")
          yield* printError(`note: world ${w.name} is ${w.state}; berth up ${w.name} starts it`)
        const launched = yield* launchBrowser(url)
        if (json) yield* printDocument("open", { world: w.name, service: chosen.name, url, opened: launched.opened })
        else if (!launched.opened) yield* printError(`${errorPrefix("error:")} ${notOpened(launched.why, url)}`)
        if (!launched.opened) process.exitCode = 1
      })
    )
).pipe(Command.withDescription("Open a service of a world in the browser (and print its URL)"), withDaemon)
