/**
 * One daemon per BERTH_HOME: an abstract unix socket on Linux (see `socketLock`), the pid file elsewhere. The pid file
 * names the daemon by pid and start time either way.
 */
import { createHash } from "node:crypto"
import { closeSync, openSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync, writeSync } from "node:fs"
import * as net from "node:net"
import * as Effect from "effect/Effect"
import { platformHere } from "../services/Platform.js"

/** The start time of a live process (a zombie is not alive: a killed daemon may linger as one, unreaped). */
const startTimeOf = (pid: number): string | undefined => {
  const entry = Effect.runSync(platformHere.process(pid))
  return entry === undefined || entry.defunct ? undefined : entry.startTime
}

export type LockResult =
  | { readonly _tag: "Acquired"; readonly release: () => void }
  | { readonly _tag: "Held"; readonly pid: number | undefined }

/** The pid a pid file names, when it names one. */
const pidIn = (pidFile: string): number | undefined => {
  try {
    const pid = Number(readFileSync(pidFile, "utf8").trim().split(" ")[0])
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

/** Writes the pid file whole (a reader never sees it half-written): for people and `berth doctor`, not the lock. */
const writePidFile = (pidFile: string): void => {
  const temporary = `${pidFile}.${process.pid}`
  try {
    writeFileSync(temporary, `${process.pid} ${startTimeOf(process.pid) ?? ""}\n`, { mode: 0o600 })
    renameSync(temporary, pidFile)
  } catch (e) {
    rmSync(temporary, { force: true })
    throw e
  }
}

/**
 * On Linux the lock is an abstract unix socket named after the home: binding it is atomic, and the kernel lets go of
 * it the moment its daemon dies, however it dies — so a crash leaves nothing to take over, and daemons starting at
 * once after one (every waiting command starts one) cannot both win, as two takeovers of a stale pid file could.
 */
const socketLock = (pidFile: string): Promise<LockResult> =>
  new Promise((done, fail) => {
    const name = `\0berth-daemon-${createHash("sha256")
      .update(`${process.getuid?.() ?? ""}:${pidFile}`)
      .digest("hex")
      .slice(0, 40)}`
    const server = net.createServer()
    server.once("error", (e: NodeJS.ErrnoException) =>
      e.code === "EADDRINUSE" ? done({ _tag: "Held", pid: pidIn(pidFile) }) : fail(e)
    )
    server.listen({ path: name }, () => {
      // the lock must not keep the daemon alive by itself
      server.unref()
      try {
        writePidFile(pidFile)
      } catch (e) {
        // a full disk, say: the daemon fails its start with the reason rather than crash in a callback
        server.close()
        return fail(e)
      }
      done({
        _tag: "Acquired",
        release: () => {
          server.close()
          releasePidFile(pidFile)
        }
      })
    })
  })

/**
 * Elsewhere, the pid file itself, created exclusively and naming its owner by pid and start time; a file left by a
 * crashed daemon (or a pid since reused by another program) is stale and taken over.
 */
const fileLock = (pidFile: string): LockResult => {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(pidFile, "wx", 0o600)
      writeSync(fd, `${process.pid} ${startTimeOf(process.pid) ?? ""}\n`)
      closeSync(fd)
      return { _tag: "Acquired", release: () => releasePidFile(pidFile) }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
      const [pid, startTime] = readFileSync(pidFile, "utf8").trim().split(" ")
      const owner = Number(pid)
      if (Number.isInteger(owner) && owner > 0 && startTimeOf(owner) === startTime && startTime !== undefined) {
        return { _tag: "Held", pid: owner }
      }
      unlinkSync(pidFile)
    }
  }
  throw new Error(`cannot take the daemon lock ${pidFile}`)
}

/** Takes the daemon lock, or says which daemon holds it. */
export const acquireLock = (pidFile: string): Promise<LockResult> =>
  process.platform === "linux" ? socketLock(pidFile) : Promise.resolve(fileLock(pidFile))

const releasePidFile = (pidFile: string): void => {
  try {
    const [pid] = readFileSync(pidFile, "utf8").trim().split(" ")
    if (Number(pid) === process.pid) unlinkSync(pidFile)
  } catch {
    // already gone
  }
}

/** Does anything answer on this unix socket? */
export const socketAnswers = (path: string, timeoutMs = 1_000): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect({ path })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })
