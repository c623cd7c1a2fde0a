/**
 * Whether a process lives, by its pid: nothing imported but node:fs, so that the CLI's lean path and the fence's
 * watchdog (plain Node, `cluster/watchdog.ts`) can use it without pulling anything in.
 */
import { readFileSync } from "node:fs"

export const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (e) {
    // EPERM: it exists, it is just not ours to signal
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  // a zombie has ended (it runs nothing and holds no file: a daemon's lock and socket are free) though kill 0 reaches
  // it until its parent reaps it, which under some inits (a container's, a VM's) takes a second or more
  return !ended(pid)
}

/** A zombie (or dead) entry in /proc; false where there is no /proc to tell (macOS: kill 0 is all there is). */
const ended = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1")
    // the state follows the command's name, which is in parentheses and may hold any character
    const state = stat.charAt(stat.lastIndexOf(")") + 2)
    return state === "Z" || state === "X"
  } catch {
    return false
  }
}
