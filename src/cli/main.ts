/**
 * The berth command line: @effect/cli commands that are thin clients of the daemon (or, for commands that need no
 * daemon such as `check` and `init`, of the local services). Loaded lazily by `entry.ts`.
 */
import * as Command from "@effect/cli/Command"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { CliLive } from "../layers/cli.js"
import { version } from "../version.js"
import { exec, mcp, verify } from "./commands/agents.js"
import { check } from "./commands/check.js"
import { allow, deny } from "./commands/consent.js"
import { completion } from "./commands/completion.js"
import { cluster } from "./commands/cluster.js"
import { daemon, port } from "./commands/daemon.js"
import { dashboard } from "./commands/dashboard.js"
import { doctor } from "./commands/doctor.js"
import { hooks } from "./commands/hooks.js"
import { hosts } from "./commands/hosts.js"
import { init } from "./commands/init.js"
import { open } from "./commands/open.js"
import { config, metrics, reserve } from "./commands/machine.js"
import { curl } from "./commands/curl.js"
import { reset } from "./commands/reset.js"
import { gc, golden } from "./commands/slices.js"
import { trust } from "./commands/trust.js"
import { version as versionCommand } from "./commands/version.js"
import { down, env, logs, reload, remove, status, up } from "./commands/worlds.js"
import { expandAlias } from "./aliases.js"
import { candidateLines, complete, completionScript, projectNames, SHELLS } from "./completion.js"
import { reportFailure, UsageError, wantsJson, withCliConsole } from "./output.js"
import { helpFor } from "./help.js"
import { findUsageProblem } from "./usage.js"

export const berth = Command.make("berth").pipe(
  Command.withDescription("One isolated local world per git worktree"),
  Command.withSubcommands([
    up,
    down,
    reload,
    reset,
    remove,
    status,
    dashboard,
    env,
    logs,
    exec,
    verify,
    curl,
    open,
    gc,
    golden,
    check,
    allow,
    deny,
    doctor,
    hooks,
    hosts,
    init,
    trust,
    daemon,
    port,
    reserve,
    config,
    metrics,
    cluster,
    mcp,
    completion,
    versionCommand
  ])
)

const cli = Command.run(berth, { name: "berth", version })

export const run = (given: ReadonlyArray<string>): void => {
  // completion asks before anything else is parsed: the words typed so far, the last one the word being typed
  if (given[0] === "__complete") {
    const found = complete(berth, given.slice(1))
    const names = found.lookup.length === 0 ? [] : projectNames(process.cwd(), found.lookup)
    const lines = candidateLines([...found.values, ...names], found.prefix)
    if (lines.length > 0) process.stdout.write(`${lines.join("\n")}\n`)
    return
  }
  const shell = SHELLS.find((s) => given[0] === "--completions" && given[1] === s)
  if (shell !== undefined) {
    process.stdout.write(completionScript(shell))
    return
  }
  // `berth` alone shows the help rather than a "missing command" error
  const argv = given.length === 0 ? ["--help"] : expandAlias(given)
  const problem = findUsageProblem(berth, argv)
  // help in berth's own layout (@effect/cli's pads every option with generic text)
  const help = problem === undefined ? helpFor(berth, argv) : undefined
  if (help !== undefined) {
    process.stdout.write(`${help}\n`)
    return
  }
  const main: Effect.Effect<void, unknown, Layer.Layer.Success<typeof CliLive>> = problem === undefined
    ? cli(["node", "berth", ...argv])
    : Effect.fail(new UsageError(problem))
  const program = main.pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.sync(() => {
            process.exitCode = 130
          })
        : reportFailure(
            Option.getOrElse(Cause.failureOption(cause), () => Cause.squash(cause)),
            wantsJson(argv)
          )
    ),
    withCliConsole,
    Effect.provide(CliLive)
  )
  NodeRuntime.runMain(program, { disableErrorReporting: true })
}
