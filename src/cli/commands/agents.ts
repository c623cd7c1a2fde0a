/**
 * The agents' commands: `exec` runs a command in a world's environment, `verify` runs the world's `[agents] verify`
 * commands, and `mcp` serves every world command as MCP tools on stdio.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { DaemonClient } from "../../daemon/client.js"
import { commandLine, parseTimeout, TIMEOUT_EXIT_CODE } from "../../domain/agents.js"
import { CommandTimedOut, VerifyFailed } from "../../domain/errors.js"
import { serveMcp } from "../../mcp/server.js"
import { runCommand } from "../../mcp/run.js"
import { runVerify, verifyCommands, worldContext } from "../../mcp/world.js"
import { consenting } from "./consent.js"
import { Home } from "../../services/Home.js"
import { printDocument } from "../json.js"
import { json, printError, reportFailure, UsageError } from "../output.js"
import { askedBy, viaDaemon, withDaemon } from "./worlds.js"

const timeout = (what: string) =>
  Options.text("timeout").pipe(
    Options.withDescription(`${what}, e.g. 30s, 5m, 1h (a bare number is seconds)`),
    Options.optional
  )

const timeoutMs = (given: Option.Option<string>) =>
  Option.match(given, {
    onNone: () => Effect.succeed(undefined),
    onSome: (text) => {
      const ms = parseTimeout(text)
      return ms === undefined
        ? Effect.fail(
            new UsageError({ message: `--timeout ${JSON.stringify(text)} is not a duration: write e.g. 30s, 5m or 1h` })
          )
        : Effect.succeed(ms)
    }
  })

/**
 * @effect/cli hands every positional argument over as one list, those after `--` included, so where the world's name
 * ends and the command begins is read from the process's own argv: the command is everything after the first `--`.
 */
const splitExec = (positional: ReadonlyArray<string>) => {
  const end = process.argv.indexOf("--")
  const argv = end === -1 ? [] : process.argv.slice(end + 1)
  if (argv.length === 0) {
    return Effect.fail(
      new UsageError({ message: "berth exec needs a command after --: berth exec [name] -- <command> [args…]" })
    )
  }
  const before = positional.slice(0, positional.length - argv.length)
  if (before.length > 1) {
    return Effect.fail(
      new UsageError({
        message: `berth exec takes one world name before --, not ${before.length}: ${before.join(" ")}`
      })
    )
  }
  return Effect.succeed({ name: before[0], argv })
}

export const exec = Command.make(
  "exec",
  {
    timeout: timeout("stop the command's whole process group after this long and exit 124"),
    json,
    args: Args.text({ name: "[name] -- command" }).pipe(
      Args.withDescription("the world (default: the worktree you are in), then -- and the command with its arguments"),
      Args.repeated
    )
  },
  ({ args, json, timeout }) =>
    viaDaemon(
      Effect.gen(function* () {
        const { argv, name } = yield* splitExec(args)
        const ms = yield* timeoutMs(timeout)
        const client = yield* DaemonClient
        const world = yield* worldContext(client, { cwd: process.cwd(), world: name }).pipe(askedBy("exec", name))
        const result = yield* runCommand({ argv, cwd: world.path, env: world.env, timeoutMs: ms, output: "inherit" })
        if (result.timedOut) {
          return yield* new CommandTimedOut({ command: commandLine(argv), timeoutMs: ms ?? 0 })
        }
        process.exitCode = result.exitCode
      })
    ).pipe(
      // the exit codes a shell (and coreutils' timeout) would give: scripts test for them
      Effect.catchTags({
        CommandTimedOut: (e) =>
          Effect.zipRight(
            reportFailure(e, json),
            Effect.sync(() => {
              process.exitCode = TIMEOUT_EXIT_CODE
            })
          ),
        CommandNotStarted: (e) =>
          Effect.zipRight(
            reportFailure(e, json),
            Effect.sync(() => {
              process.exitCode = e.code === "ENOENT" ? 127 : 126
            })
          )
      })
    )
).pipe(
  Command.withDescription(
    "Run a command in a world: in its worktree, with your environment and the world's variables (berth env); no shell unless you run one (-- sh -c '…'); its exit code is berth's"
  ),
  withDaemon
)

const worldName = Args.text({ name: "name" }).pipe(
  Args.withDescription("the world: a branch name (default: the worktree you are in)"),
  Args.optional
)

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`

export const verify = Command.make(
  "verify",
  { name: worldName, timeout: timeout("stop a command's process group after this long (the command fails)"), json },
  ({ json, name, timeout }) =>
    viaDaemon(
      Effect.gen(function* () {
        const ms = yield* timeoutMs(timeout)
        const client = yield* DaemonClient
        const world = yield* worldContext(client, { cwd: process.cwd(), world: Option.getOrUndefined(name) }).pipe(
          askedBy("verify", Option.getOrUndefined(name))
        )
        const commands = yield* consenting(false, verifyCommands(world))
        if (commands.length === 0) {
          if (json) return yield* printDocument("verify", { world: world.name, ok: true, commands: [] })
          return yield* Console.log(
            `nothing to verify: ${world.name}'s berth.toml has no [agents] verify commands (verify = ["npm test"] adds one)`
          )
        }
        // the commands' output streams as it comes: on the terminal as it is, or, in JSON mode, to stderr (stdout
        // carries the report); each is announced on stderr with the line that runs it
        const { report, timedOut } = yield* runVerify(world, commands, {
          output: json ? { tailLines: 50, echo: process.stderr } : "inherit",
          timeoutMs: ms,
          onStart: (_, command) => printError(`$ ${command}`)
        })
        if (json) yield* printDocument("verify", report)
        const last = report.commands.at(-1)
        if (!report.ok && last !== undefined) {
          return yield* new VerifyFailed({
            world: world.name,
            command: last.command,
            exitCode: last.exitCode,
            timedOut
          })
        }
        if (!json) {
          const total = report.commands.reduce((sum, c) => sum + c.durationMs, 0)
          const n = report.commands.length
          yield* Console.log(`verified ${world.name}: ${n} command${n === 1 ? "" : "s"} passed in ${seconds(total)}`)
        }
      })
    )
).pipe(
  Command.withDescription(
    "Run the world's [agents] verify commands (berth.toml) one after another in its worktree, stopping at the first failure"
  ),
  withDaemon
)

export const mcp = Command.make("mcp", {}, () => serveMcp(process.cwd()).pipe(Effect.provide(Home.layer))).pipe(
  Command.withDescription(
    "Serve berth's world commands to an AI agent as MCP tools over stdio (claude mcp add berth -- berth mcp)"
  )
)
