/**
 * Whether a process lives, by its pid: no import at all, so that the CLI's lean path and the fence's watchdog (plain
 * Node, `cluster/watchdog.ts`) can use it without pulling anything in.
 */
export const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    // EPERM: it exists, it is just not ours to signal
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}
