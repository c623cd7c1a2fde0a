/**
 * Running an agent's command in a world's folder — `berth exec`, `berth verify` and the MCP tools of the same names.
 * The command gets its own process group whenever berth may have to stop it (a timeout, a cancelled tool call), so
 * that stopping it reaches everything it started; stopping is SIGTERM to the group, then SIGKILL to the group.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as Effect from "effect/Effect"
import { commandLine, exitCodeOf, LineTail, TIMEOUT_EXIT_CODE } from "../domain/agents.js"
import { CommandNotStarted } from "../domain/errors.js"

/** How long a stopped command gets between SIGTERM and SIGKILL. */
const STOP_GRACE_MS = 2_000
/** How long output still arriving after the command's exit is waited for (a background child may hold the pipe). */
const DRAIN_MS = 200

export interface RunSpec {
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  readonly timeoutMs?: number | undefined
  /**
   * `inherit`: the terminal's stdin, stdout and stderr, as if the user ran it (`berth exec`); otherwise the output is
   * captured into tails of `tailLines` lines, and copied as it comes to `echo` when one is given.
   */
  readonly output: "inherit" | { readonly tailLines: number; readonly echo?: NodeJS.WritableStream | undefined }
}

export interface RunResult {
  /** the command's exit code, 128 + N when signal N ended it, 124 when it ran out of time */
  readonly exitCode: number
  readonly timedOut: boolean
  readonly durationMs: number
  readonly stdoutTail: ReadonlyArray<string>
  readonly stderrTail: ReadonlyArray<string>
  /** stdout and stderr together, in the order they came */
  readonly outputTail: ReadonlyArray<string>
}

/**
 * While a command runs on the user's terminal, berth stands aside as `env` or `nice` would: Ctrl-C reaches the
 * command from the terminal itself (a REPL that ignores it keeps running), and a signal sent to berth alone is passed
 * on. The runtime's own handlers (which would interrupt berth) are set aside meanwhile and put back afterwards.
 */
const standAside = (forward: (signal: NodeJS.Signals) => void, inOwnGroup: boolean): (() => void) => {
  const signals: ReadonlyArray<NodeJS.Signals> = ["SIGINT", "SIGTERM", "SIGHUP"]
  const saved = new Map(signals.map((s) => [s, process.listeners(s)] as const))
  const handlers = new Map<NodeJS.Signals, () => void>()
  for (const signal of signals) {
    process.removeAllListeners(signal)
    // the terminal sends Ctrl-C to its foreground group: a command in that group has it already
    const handler = () => (signal === "SIGINT" && !inOwnGroup ? undefined : forward(signal))
    handlers.set(signal, handler)
    process.on(signal, handler)
  }
  return () => {
    for (const signal of signals) {
      const handler = handlers.get(signal)
      if (handler !== undefined) process.removeListener(signal, handler)
      for (const listener of saved.get(signal) ?? []) process.on(signal, listener as () => void)
    }
  }
}

const notStarted = (argv: ReadonlyArray<string>, e: NodeJS.ErrnoException) =>
  new CommandNotStarted({
    command: commandLine(argv),
    code: e.code ?? "",
    reason: e.code === "ENOENT" ? "command not found" : e.code === "EACCES" ? "permission denied" : e.message
  })

const signalOf = (child: ChildProcess, group: boolean) => (signal: NodeJS.Signals) => {
  try {
    if (group && child.pid !== undefined) process.kill(-child.pid, signal)
    else child.kill(signal)
  } catch {
    // already gone
  }
}

/**
 * Runs `argv` (no shell) and answers how it ended. Fails only when it could not be started at all. Interrupting the
 * effect stops the command (its group, when it has one) and waits until it is gone.
 */
export const runCommand = (spec: RunSpec): Effect.Effect<RunResult, CommandNotStarted> =>
  Effect.async<RunResult, CommandNotStarted>((resume) => {
    const started = Date.now()
    const inherit = spec.output === "inherit"
    const tailLines = spec.output === "inherit" ? 0 : spec.output.tailLines
    const echo = spec.output === "inherit" ? undefined : spec.output.echo
    // a command on the terminal stays in berth's process group (so it can read the terminal) unless berth may have to
    // stop it; captured commands always get their own group
    const ownGroup = !inherit || spec.timeoutMs !== undefined
    const [program, ...args] = spec.argv
    const stdout = new LineTail(tailLines)
    const stderr = new LineTail(tailLines)
    const both = new LineTail(tailLines)
    let timedOut = false
    let exited = false
    let child: ChildProcess
    try {
      child = spawn(program ?? "", args, {
        cwd: spec.cwd,
        env: spec.env,
        detached: ownGroup,
        stdio: inherit ? "inherit" : ["ignore", "pipe", "pipe"]
      })
    } catch (e) {
      resume(Effect.fail(notStarted(spec.argv, e as NodeJS.ErrnoException)))
      return
    }
    const signal = signalOf(child, ownGroup)
    const restore = inherit ? standAside(signal, ownGroup) : () => {}
    let killTimer: NodeJS.Timeout | undefined
    const stop = () => {
      if (killTimer !== undefined) return
      signal("SIGTERM")
      killTimer = setTimeout(() => signal("SIGKILL"), STOP_GRACE_MS)
    }
    const deadline =
      spec.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true
            stop()
          }, spec.timeoutMs)
    const collect = (tail: LineTail) => (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      tail.push(text)
      both.push(text)
      echo?.write(chunk)
    }
    child.stdout?.on("data", collect(stdout))
    child.stderr?.on("data", collect(stderr))
    const gone = new Promise<void>((resolveGone) => {
      child.once("error", (e: NodeJS.ErrnoException) => {
        // an error before any pid means it never started; later ones (a failed kill) change nothing
        if (child.pid !== undefined || exited) return
        exited = true
        restore()
        if (deadline !== undefined) clearTimeout(deadline)
        resume(Effect.fail(notStarted(spec.argv, e)))
        resolveGone()
      })
      child.once("exit", (code, exitSignal) => {
        exited = true
        restore()
        if (deadline !== undefined) clearTimeout(deadline)
        // what the command started and left in its group goes with it when berth stopped it
        if (killTimer !== undefined) {
          clearTimeout(killTimer)
          signal("SIGKILL")
        }
        let finished = false
        const finish = () => {
          if (finished) return
          finished = true
          child.stdout?.destroy()
          child.stderr?.destroy()
          resume(
            Effect.succeed({
              exitCode: timedOut ? TIMEOUT_EXIT_CODE : exitCodeOf(code, exitSignal),
              timedOut,
              durationMs: Date.now() - started,
              stdoutTail: stdout.get(),
              stderrTail: stderr.get(),
              outputTail: both.get()
            })
          )
          resolveGone()
        }
        if (inherit) return finish()
        const drained = setTimeout(finish, DRAIN_MS)
        child.once("close", () => {
          clearTimeout(drained)
          finish()
        })
      })
    })
    return Effect.promise(() => {
      if (!exited) stop()
      return gone
    })
  })
