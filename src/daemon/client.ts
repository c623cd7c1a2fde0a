/**
 * How a CLI reaches its daemon: connect to BERTH_HOME's socket, starting the daemon when nobody answers, and
 * replacing it cleanly when it is of another version. Then a typed @effect/rpc client of `DaemonApi`.
 */
import { spawn } from "node:child_process"
import { closeSync, fstatSync, openSync, readFileSync } from "node:fs"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as RpcClient from "@effect/rpc/RpcClient"
import type { RpcClientError } from "@effect/rpc/RpcClientError"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { isDiskFull } from "../domain/disk.js"
import { DaemonUnavailable, type DiskFull } from "../domain/errors.js"
import { asDiskFull, diskFullAt, freeBytesAt } from "../services/disk.js"
import { Home, type HomePaths } from "../services/Home.js"
import { pidAlive } from "../services/pids.js"
import { isThisBuild } from "../version.js"
import { DaemonApi } from "./api.js"
import { socketAnswers } from "./lock.js"
import { request } from "./wire.js"

const START_TIMEOUT_MS = 15_000
const PING_TIMEOUT_MS = 15_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const waitFor = async (check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  for (let delay = 10; Date.now() < deadline; delay = Math.min(delay * 2, 200)) {
    if (await check()) return true
    await sleep(delay)
  }
  return check()
}

/** The last lines the daemon wrote: what a failed start says about itself. */
const logTail = (file: string, lines = 5): string => {
  try {
    const text = readFileSync(file, "utf8").trimEnd().split("\n")
    return text.slice(-lines).join("\n")
  } catch {
    return ""
  }
}

/**
 * The daemon lives long and allocates little at a time: a small young generation keeps its memory down (V8 grows the
 * semi-spaces to 16 MiB each under steady allocation), and the old generation grows to twice what a full collection
 * left (V8 varies it from 1.1 to 4 times). Not `--optimize-for-size`: the daemon is also the proxy, and that flag's
 * tight heap growth made it collect garbage so often under load that an HTTPS request cost 1.5× the CPU (and a
 * `status` answer 1.5×) for 10–25 MiB less (docs/benchmarks.md).
 */
export const DAEMON_NODE_FLAGS: ReadonlyArray<string> = ["--max-semi-space-size=1", "--heap-growing-percent=100"]

/**
 * Starts `berth daemon run` detached, its output in the daemon log, and waits until it answers. A daemon that exits
 * first (a broken state database, say) fails the start at once with what it logged.
 */
const startDaemon = async (home: HomePaths): Promise<void> => {
  const log = openSync(home.daemonLog, "a", 0o600)
  const logStart = fstatSync(log).size
  const entry = process.argv[1]
  if (entry === undefined) throw new Error("cannot tell which berth to start")
  const child = spawn(process.execPath, [...DAEMON_NODE_FLAGS, entry, "daemon", "run"], {
    detached: true,
    stdio: ["ignore", log, log],
    env: { ...process.env, BERTH_HOME: home.root },
    cwd: home.root
  })
  closeSync(log)
  // a daemon that exits 0 found another one holding the lock (concurrent CLIs after a crash race to start one): the
  // winner is on its way, so keep waiting for it while it lives; any other exit is a failed start, told at once
  let exitCode: number | null | undefined
  child.once("exit", (code) => {
    exitCode = code
  })
  child.unref()
  await waitFor(async () => {
    if (await socketAnswers(home.socket)) return true
    if (exitCode === undefined) return false
    return exitCode !== 0 || !lockHolderAlive(home.pidFile)
  }, START_TIMEOUT_MS)
  if (await socketAnswers(home.socket)) return
  // the winner is gone too: the caller tries again
  if (exitCode === 0) return
  const said = readFileSync(home.daemonLog, "utf8").slice(logStart).trim()
  throw new Error(said === "" ? "it did not start" : `it stopped at once:\n${said.split("\n").slice(-5).join("\n")}`)
}

/** Whether the process named by the daemon's pid file (a daemon starting or serving) is alive. */
const lockHolderAlive = (pidFile: string): boolean => {
  try {
    const pid = Number(readFileSync(pidFile, "utf8").trim().split(" ")[0])
    return Number.isInteger(pid) && pid > 0 && pidAlive(pid)
  } catch {
    return false
  }
}

/**
 * Asks the daemon that answers on the socket to stop, and returns only once it has let go of its socket and its lock
 * (its process is gone), so that a daemon started right after never finds the old one still holding them. Its
 * services keep running: the next daemon adopts them. Returns the old daemon's pid, or undefined when none answered.
 */
export const shutdownDaemon = async (home: HomePaths, timeoutMs = 20_000): Promise<number | undefined> => {
  const pong = await request(home.socket, "Ping", undefined, 5_000)
  if (pong._tag !== "Success") return undefined
  const pid = (pong.value as { readonly pid: number }).pid
  await request(home.socket, "Shutdown", undefined, 5_000)
  // gone once its process is: it let go of the socket and the lock then. A socket that answers again may be the next
  // daemon already (another client reconnecting at once), which is no reason to wait
  const gone = await waitFor(async () => !pidAlive(pid), timeoutMs)
  if (!gone) throw new Error(`the daemon (pid ${pid}) did not stop within ${Math.round(timeoutMs / 1000)} s`)
  return pid
}

/** Makes sure a daemon of this very version answers on the socket. */
export const ensureDaemon = (home: HomePaths) =>
  Effect.tryPromise({
    try: async () => {
      // a busy daemon (adopting many worlds on a loaded machine) may take seconds to answer: a socket nobody listens
      // on fails at once, so the wait costs nothing when there is no daemon
      const ping = () => request(home.socket, "Ping", undefined, PING_TIMEOUT_MS)
      for (let attempt = 0; attempt < 3; attempt++) {
        const pong = await ping()
        if (pong._tag === "Success") {
          if (isThisBuild(pong.value)) return
          // another build answers: ask it to go, wait until it has let go of the socket and the lock, start ours
          await shutdownDaemon(home)
        }
        await startDaemon(home)
      }
      const last = await ping()
      if (last._tag === "Success" && isThisBuild(last.value)) return
      throw new Error(`it did not start\n${logTail(home.daemonLog)}`)
    },
    catch: (e) =>
      startFailure(e, home) ??
      new DaemonUnavailable({ reason: e instanceof Error ? e.message : String(e), log: home.daemonLog })
  })

/** below this much free space in BERTH_HOME, a daemon that could not start is taken to have met a full disk */
const LOW_SPACE_BYTES = 256 * 1024

/**
 * A daemon that could not start on a full disk (the CLI's own write failed, its log says so, or BERTH_HOME has next to
 * no room: the log may have had none to say it) is a DiskFull, never Node's words.
 */
const startFailure = (e: unknown, home: HomePaths): DiskFull | undefined =>
  asDiskFull(e, home.root, home.root) ??
  (isDiskFull(logTail(home.daemonLog, 20)) || freeBytesAt(home.root) < LOW_SPACE_BYTES
    ? diskFullAt(home.root, home.root)
    : undefined)

/**
 * The daemon as its thin clients (the CLI, the MCP server, the dashboard) call it: one method per RPC of `DaemonApi`,
 * each with that RPC's payload, success and failure union. `DaemonApi` (daemon/api.ts) is the written shape; this
 * is its client's type.
 */
export type DaemonClientService = RpcClient.RpcClient<RpcGroup.Rpcs<typeof DaemonApi>, RpcClientError>

/**
 * The typed client; building it starts the daemon if needed. Tests and embedders that want the daemon's answers
 * without its socket use `DaemonClientInProcess` (daemon/server.ts): the same handlers, called in the same process.
 */
export class DaemonClient extends Effect.Service<DaemonClient>()("berth/DaemonClient", {
  scoped: Effect.gen(function* () {
    const home = yield* Home
    yield* ensureDaemon(home)
    // built into the service's own scope: the connection must live as long as the client, not just its creation
    const protocol = yield* Layer.build(
      RpcClient.layerProtocolSocket({ retryTransientErrors: false }).pipe(
        Layer.provide(RpcSerialization.layerNdjson),
        Layer.provide(NodeSocket.layerNet({ path: home.socket }))
      )
    )
    const client: DaemonClientService = yield* RpcClient.make(DaemonApi).pipe(Effect.provide(protocol))
    return client
  })
}) {}
