/**
 * The lean path: the commands agents call in tight loops — `up`, `down`, `env --json`, `status` — are sent
 * straight over the daemon's socket without loading Effect or the command tree. Only plain forms are taken here;
 * anything else (another option, no daemon yet, a daemon of another version) goes to the full CLI, which handles
 * it. Nothing is sent before that decision, so a fallback never repeats a request.
 */
import type { PlainFailure, WorldStatus } from "../daemon/api.js"
import { exchange, type WireReply } from "../daemon/wire.js"
import { definedEnv } from "../domain/environment.js"
import { homePaths, resolveHome } from "../services/homePaths.js"
import { traceNow } from "../services/trace-mark.js"
import { isThisBuild } from "../version.js"
import { expandAlias } from "./aliases.js"
import { envDocument, formatDocument, formatErrorLine, worldDocument, worldsDocument } from "./documents.js"
import {
  errorPrefix,
  interruptedLine,
  progressLine,
  queueLine,
  renderDown,
  renderStatus,
  renderWorld,
  worldOf
} from "./render.js"

interface Lean {
  readonly tag: string
  readonly payload: Record<string, unknown>
  /** what to print for a successful reply */
  readonly print: (value: unknown) => string
  /** `…Plain` endpoints answer failures as data, rendered by the daemon */
  readonly plain: boolean
  /** an `up` that waits: while it does, its world's place in line is shown on stderr */
  readonly line?: { readonly cwd: string; readonly world: string | undefined } | undefined
}

interface Parsed {
  readonly command: string
  readonly positional: ReadonlyArray<string>
  readonly flags: ReadonlySet<string>
  readonly values: ReadonlyMap<string, ReadonlyArray<string>>
}

/** A strict little parser: `undefined` for anything it does not know, which sends the command to the full CLI. */
const parse = (argv: ReadonlyArray<string>, flags: ReadonlyArray<string>, valued: Record<string, string>) => {
  const [command, ...rest] = argv
  if (command === undefined) return undefined
  const positional: Array<string> = []
  const seen = new Set<string>()
  const values = new Map<string, Array<string>>()
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!
    if (!arg.startsWith("-")) {
      positional.push(arg)
      continue
    }
    if (flags.includes(arg)) {
      seen.add(arg)
      continue
    }
    const name = valued[arg]
    const value = rest[i + 1]
    if (name === undefined || value === undefined || value.startsWith("-")) return undefined
    values.set(name, [...(values.get(name) ?? []), value])
    i++
  }
  return { command, positional, flags: seen, values } satisfies Parsed
}

/** The working directory, or undefined when it cannot be read (deleted under the shell): the full CLI says so. */
const workingDirectory = (): string | undefined => {
  try {
    return process.cwd()
  } catch {
    return undefined
  }
}

/**
 * `path` made absolute against `cwd`, `.` and `..` folded: the daemon runs in another folder, so a relative path must
 * never reach it. Plain string work, since this path loads no module it can do without.
 */
export const absolutePath = (path: string, cwd: string): string => {
  const parts: Array<string> = []
  for (const part of `${path.startsWith("/") ? "" : cwd}/${path}`.split("/")) {
    if (part === "" || part === ".") continue
    if (part === "..") parts.pop()
    else parts.push(part)
  }
  return `/${parts.join("/")}`
}

const match = (given: ReadonlyArray<string>): Lean | undefined => {
  const p = parse(expandAlias(given), ["--json", "--all"], {
    "--service": "service",
    "-s": "service",
    "--group": "group",
    "-g": "group"
  })
  if (p === undefined || p.positional.length > 1) return undefined
  const world = p.positional[0] === undefined ? {} : { world: p.positional[0] }
  const json = p.flags.has("--json")
  const cwd = workingDirectory()
  switch (p.command) {
    case "up": {
      if (p.flags.has("--all") || cwd === undefined) return undefined
      const env = definedEnv(process.env)
      return {
        tag: "UpPlain",
        payload: { cwd, ...world, env, services: p.values.get("service") ?? [], groups: p.values.get("group") ?? [] },
        print: (value) => (json ? formatDocument(worldDocument(value)) : renderWorld(value as WorldStatus).join("\n")),
        plain: true,
        line: json ? undefined : { cwd, world: p.positional[0] }
      }
    }
    case "down":
      if (p.values.size > 0 || cwd === undefined) return undefined
      return {
        tag: "DownPlain",
        payload: { cwd, ...world, all: p.flags.has("--all") },
        print: (value) =>
          json
            ? formatDocument(worldsDocument(value as ReadonlyArray<WorldStatus>))
            : renderDown(value as ReadonlyArray<WorldStatus>),
        plain: true
      }
    case "env":
      if (!json || p.values.size > 0 || p.flags.has("--all") || cwd === undefined) return undefined
      return {
        tag: "Env",
        payload: { cwd, ...world },
        print: (v) => {
          const { commands, vars, world } = v as {
            readonly world: string
            readonly vars: Record<string, string>
            readonly commands: Record<string, string>
          }
          return formatDocument(envDocument(world, vars, commands))
        },
        plain: false
      }
    case "status": {
      if (p.values.size > 0 || p.flags.has("--all")) return undefined
      const path = p.positional[0]
      const print = (v: unknown) => {
        const worlds = (v as { readonly worlds: ReadonlyArray<WorldStatus> }).worlds
        return json ? formatDocument(worldsDocument(worlds)) : renderStatus(worlds)
      }
      if (path === undefined) return { tag: "Status", payload: {}, print, plain: false }
      if (!path.startsWith("/") && cwd === undefined) return undefined
      return { tag: "Status", payload: { cwd: absolutePath(path, cwd ?? "/") }, print, plain: false }
    }
    default:
      return undefined
  }
}

/**
 * While `pending` (an `up` that waits) runs, its world's place in line — if it is in line — is shown on stderr: one
 * live line on a terminal, a line per change when piped; as the full CLI does.
 */
const showingLine = async <A>(socket: string, lean: Lean, pending: Promise<A>): Promise<A> => {
  const line = lean.line
  if (line === undefined) return pending
  const tty = process.stderr.isTTY === true
  const began = Date.now()
  let said: string | undefined
  let done = false
  const looking = new AbortController()
  const show = async () => {
    const [reply] = await exchange(
      socket,
      [{ tag: "Status", payload: { cwd: line.cwd } }],
      5_000,
      undefined,
      looking.signal
    )
    if (done || reply?._tag !== "Success") return
    const { worlds } = reply.value as { readonly worlds: ReadonlyArray<WorldStatus> }
    const w = worldOf(worlds, line.world, line.cwd)
    const text = tty ? progressLine(w, Date.now() - began) : queueLine(w)
    if (text === undefined || text === said) return
    said = text
    process.stderr.write(tty ? `\r\u001b[2K${text}` : `${text}\n`)
  }
  let timer: NodeJS.Timeout | undefined
  // piped, only a place in line is told, and a world admitted at once has none: the first look waits longer there,
  // since each look costs the daemon a status while the world's services start
  const firstLookMs = tty ? 300 : 1_000
  const tick = () => {
    timer = setTimeout(
      () => {
        show()
          .catch(() => undefined)
          .finally(() => {
            if (!done) tick()
          })
      },
      said === undefined && timer === undefined ? firstLookMs : 1_000
    )
  }
  tick()
  // Ctrl-C: say what stays behind, then go (closing the socket is what withdraws a world still in line)
  const onInterrupt = () => {
    done = true
    clearTimeout(timer)
    exchange(socket, [{ tag: "Status", payload: { cwd: line.cwd } }], 1_000)
      .then(([reply]) =>
        reply?._tag === "Success"
          ? worldOf((reply.value as { readonly worlds: ReadonlyArray<WorldStatus> }).worlds, line.world, line.cwd)
          : undefined
      )
      .catch(() => undefined)
      .then((w) => {
        process.stderr.write(`${tty ? "\r\u001b[2K" : ""}${interruptedLine(w)}\n`)
        process.exit(130)
      })
  }
  process.once("SIGINT", onInterrupt)
  try {
    return await pending
  } finally {
    done = true
    clearTimeout(timer)
    looking.abort()
    process.removeListener("SIGINT", onInterrupt)
    if (tty && said !== undefined) process.stderr.write("\r\u001b[2K")
  }
}

/**
 * A change is given as long as it takes: an `up` may wait in line for hours, and closing the connection is what takes
 * a world out of the line. A daemon that dies closes the connection, which ends the wait at once.
 */
export const CHANGE_IDLE_TIMEOUT_MS = 0

/** True when the command was answered here (its output written and its exit code set). */
export const tryFast = async (argv: ReadonlyArray<string>): Promise<boolean> => {
  traceNow("cli: lean path")
  const lean = match(argv)
  if (lean === undefined) return false
  const home = homePaths(resolveHome())
  const ask = { tag: lean.tag, payload: lean.payload }
  const ping = { tag: "Ping", payload: undefined }
  const sameVersion = (r: WireReply | undefined) => r?._tag === "Success" && isThisBuild(r.value)
  // a read travels with the version check; a change waits for it (on the same connection), so a daemon of another
  // version never acts on it
  const replies = lean.plain
    ? await showingLine(
        home.socket,
        lean,
        exchange(home.socket, [ping], 10_000, ([pong]) =>
          sameVersion(pong) ? { requests: [ask], timeoutMs: CHANGE_IDLE_TIMEOUT_MS } : undefined
        )
      )
    : await exchange(home.socket, [ping, ask], 10_000)
  const [pong, reply] = replies
  traceNow("cli: replied")
  if (lean.plain && sameVersion(pong) && reply?._tag === "Unreachable") {
    // the change was sent: sending it again to another daemon could act twice, so say what happened instead
    const message = `the daemon stopped while handling \`${argv.join(" ")}\` (${reply.reason}); run \`berth status\` to see where the world is, then retry`
    process.stderr.write(
      argv.includes("--json")
        ? `${formatErrorLine("DaemonUnavailable", message)}\n`
        : `${errorPrefix("error:")} ${message}\n`
    )
    process.exitCode = 1
    return true
  }
  if (!sameVersion(pong) || reply?._tag !== "Success") return false
  if (!lean.plain) {
    process.stdout.write(`${lean.print(reply.value)}\n`)
    return true
  }
  const outcome = reply.value as { readonly _tag: "Success"; readonly value: unknown } | PlainFailure
  if (outcome._tag === "Success") {
    process.stdout.write(`${lean.print(outcome.value)}\n`)
    return true
  }
  // not allowed yet (nothing changed): at a terminal the full CLI asks, then sends it again
  if (outcome.tag === "ConfigNotAllowed" && process.stdin.isTTY === true && process.stderr.isTTY === true) return false
  process.stderr.write(
    argv.includes("--json")
      ? `${formatErrorLine(outcome.tag, outcome.message)}\n`
      : `${errorPrefix("error:")} ${outcome.message}\n`
  )
  process.exitCode = 1
  return true
}
