/**
 * What an agent's command needs of a world, asked of the daemon as `berth env` and `berth status` ask: its name, its
 * worktree and its variables; and `[agents] verify`, run one command after another in that worktree.
 */
import { existsSync } from "node:fs"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { DaemonClient } from "../daemon/client.js"
import { identityVariables } from "../domain/coordinates.js"
import { definedEnv } from "../domain/environment.js"
import { WorktreeMissing } from "../domain/errors.js"
import { ConfigFiles } from "../services/ConfigFiles.js"
import { requireConsent } from "../services/Consent.js"
import { homePaths, resolveHome } from "../services/homePaths.js"
import { type RunResult, type RunSpec, runCommand } from "./run.js"

export interface WorldRef {
  readonly cwd: string
  readonly world?: string | undefined
}

export interface WorldContext {
  readonly name: string
  /** the world's worktree */
  readonly path: string
  /** what `berth env <name> --json` prints */
  readonly vars: Readonly<Record<string, string>>
  /**
   * the caller's environment with the world's variables over it, and the identity variables its services get: what a
   * command run in the world gets
   */
  readonly env: Readonly<Record<string, string>>
}

/** The world `ref` names (or the worktree of `ref.cwd`): WorldNotFound and the like come from the daemon as usual. */
export const worldContext = (client: DaemonClient, ref: WorldRef) =>
  Effect.gen(function* () {
    const { vars, world } = yield* client.Env(ref)
    const { worlds } = yield* client.Status({ cwd: ref.cwd })
    const status = worlds.find((w) => w.name === world)
    const path = status?.path ?? ""
    if (status === undefined || path === "" || !existsSync(path)) {
      return yield* new WorktreeMissing({ world, path })
    }
    const identity = identityVariables({ project: status.project, name: world })
    return { name: world, path, vars, env: { ...definedEnv(process.env), ...vars, ...identity } } satisfies WorldContext
  })

/**
 * `[agents] verify` of the berth.toml in the world's worktree (its branch may have its own): commands of the
 * repository's, so they run only once its content is allowed, as its services' do.
 */
export const verifyCommands = (world: WorldContext) =>
  Effect.gen(function* () {
    const loaded = yield* Effect.flatMap(ConfigFiles, (files) => files.load(world.path))
    yield* requireConsent(
      homePaths(resolveHome()).consentFile,
      { file: loaded.file, digest: loaded.digest, config: loaded.parsed.config },
      world.env
    )
    return loaded.parsed.config.agents.verify
  })

export const VerifyCommandResult = Schema.Struct({
  command: Schema.String,
  /** 124 when it ran out of time */
  exitCode: Schema.Number,
  durationMs: Schema.Number,
  /** its last lines of output, stdout and stderr together */
  outputTail: Schema.Array(Schema.String)
})

export const VerifyReport = Schema.Struct({
  schema: Schema.Literal(1),
  world: Schema.String,
  ok: Schema.Boolean,
  /** the commands that ran, in order: the last one failed when `ok` is false */
  commands: Schema.Array(VerifyCommandResult)
})
export type VerifyReport = typeof VerifyReport.Type

export interface VerifyOptions {
  readonly output: RunSpec["output"]
  readonly timeoutMs?: number | undefined
  /** told before each command starts: its place (from 0) and its text */
  readonly onStart?: (index: number, command: string) => Effect.Effect<void>
}

/** Runs `commands` with `sh -c` in the world, one after another, stopping at the first that fails. */
export const runVerify = (world: WorldContext, commands: ReadonlyArray<string>, options: VerifyOptions) =>
  Effect.gen(function* () {
    const done: Array<typeof VerifyCommandResult.Type> = []
    const results: Array<RunResult> = []
    for (const [index, command] of commands.entries()) {
      if (options.onStart !== undefined) yield* options.onStart(index, command)
      const result = yield* runCommand({
        argv: ["sh", "-c", command],
        cwd: world.path,
        env: world.env,
        timeoutMs: options.timeoutMs,
        output: options.output
      })
      results.push(result)
      done.push({ command, exitCode: result.exitCode, durationMs: result.durationMs, outputTail: result.outputTail })
      if (result.exitCode !== 0) break
    }
    const last = results.at(-1)
    const report: VerifyReport = {
      schema: 1,
      world: world.name,
      ok: last === undefined || last.exitCode === 0,
      commands: done
    }
    return { report, timedOut: last?.timedOut === true }
  })
