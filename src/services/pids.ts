/**
 * Whether a process lives, by its pid: plain Node, no Effect, so that the CLI and the fence's watchdog (plain Node,
 * `cluster/watchdog.ts`) can use it without pulling the engine in.
 */
import { procEnded } from "./platformProc.js"

export const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (e) {
    // EPERM: it exists, it is just not ours to signal
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  // a zombie has ended (it runs nothing and holds no file: a daemon's lock and socket are free) though kill 0 reaches
  // it until its parent reaps it, which under some inits (a container's, a VM's) takes a second or more. Where there
  // is no /proc (macOS), kill 0 is all there is
  return !procEnded(pid)
}
