/**
 * One daemon per BERTH_HOME. The pid file is created exclusively and names its owner by pid and start time, so a
 * file left by a crashed daemon (or a pid since reused by another program) is recognised as stale and taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs"
import * as net from "node:net"
import { isDefunct, parseStat } from "../domain/proc.js"

/** The start time of a live process (a zombie is not alive: a killed daemon may linger as one, unreaped). */
const startTimeOf = (pid: number): string | undefined => {
  try {
    const stat = parseStat(readFileSync(`/proc/${pid}/stat`, "utf8"))
    return stat === undefined || isDefunct(stat) ? undefined : stat.startTime
  } catch {
    return undefined
  }
}

export type LockResult = { readonly _tag: "Acquired" } | { readonly _tag: "Held"; readonly pid: number }

/** Takes the daemon lock, or says which live daemon holds it. */
export const acquireLock = (pidFile: string): LockResult => {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(pidFile, "wx", 0o600)
      writeSync(fd, `${process.pid} ${startTimeOf(process.pid) ?? ""}\n`)
      closeSync(fd)
      return { _tag: "Acquired" }
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

export const releaseLock = (pidFile: string): void => {
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
