/**
 * The lean path: read-only commands that agents call in tight loops (`berth env <name> --json`, `berth status
 * --json`) are answered straight from the daemon's socket, without loading Effect or the command tree. Anything
 * unusual — no daemon yet, another version, an error to explain — falls back to the full CLI, which handles it.
 */
import { version } from "../version.js"
import { exchange } from "../daemon/wire.js"
import { homePaths, resolveHome } from "../services/homePaths.js"

interface Fast {
  readonly tag: "Env" | "Status"
  readonly payload: Record<string, unknown>
  readonly print: (value: unknown) => unknown
}

/** `env [name] --json` and `status --json`, nothing else. */
const match = (argv: ReadonlyArray<string>): Fast | undefined => {
  const json = argv.filter((a) => a === "--json").length === 1
  const rest = argv.filter((a) => a !== "--json")
  if (!json || rest.some((a) => a.startsWith("-"))) return undefined
  if (rest[0] === "env" && rest.length <= 2) {
    return {
      tag: "Env",
      payload: { cwd: process.cwd(), ...(rest[1] === undefined ? {} : { world: rest[1] }) },
      print: (value) => (value as { vars: unknown }).vars
    }
  }
  if (rest[0] === "status" && rest.length === 1) return { tag: "Status", payload: {}, print: (value) => value }
  return undefined
}

/** True when the command was answered here. */
export const tryFast = async (argv: ReadonlyArray<string>): Promise<boolean> => {
  const fast = match(argv)
  if (fast === undefined) return false
  const home = homePaths(resolveHome())
  const [pong, reply] = await exchange(
    home.socket,
    [
      { tag: "Ping", payload: undefined },
      { tag: fast.tag, payload: fast.payload }
    ],
    10_000
  )
  if (pong?._tag !== "Success" || (pong.value as { version?: unknown }).version !== version) return false
  if (reply?._tag !== "Success") return false
  process.stdout.write(`${JSON.stringify(fast.print(reply.value), null, 2)}\n`)
  return true
}
