/**
 * This berth's launcher (`dist/berth`, beside the running `berth.cjs`), by absolute path: what a git hook or a sudo
 * line must run, since neither has the user's PATH. Undefined when berth is not running from its build.
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"

export const launcherPath = (): string | undefined => {
  const entry = process.argv[1]
  const beside = entry === undefined ? undefined : join(dirname(entry), "berth")
  return beside !== undefined && existsSync(beside) ? beside : undefined
}
