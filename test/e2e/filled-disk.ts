/**
 * A small disk for tests of a full one, with nothing of berth's harness: a tmpfs mounted at a folder (root only),
 * filled to the last byte and freed again. `tmpfs.ts` builds its sandboxes on these.
 */
import { execFileSync } from "node:child_process"
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs"
import { join } from "node:path"

/** Mounts a tmpfs of `size` (`8m`) at `dir`; the reason it cannot, when it cannot (not root, no mount). */
export const mountTmpfs = (dir: string, size: string): string | undefined => {
  mkdirSync(dir, { recursive: true })
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], { stdio: "pipe" })
    return undefined
  } catch (e) {
    return `cannot mount a tmpfs at ${dir}: ${(e as { stderr?: Buffer }).stderr?.toString().trim() || String(e)}`
  }
}

export const unmount = (dir: string): void => {
  try {
    execFileSync("umount", ["-l", dir], { stdio: "pipe" })
  } catch {
    // not mounted
  }
}

/** the file that takes the disk's last byte */
const FILLER = ".filler"

/** Writes into `dir` until its disk has no byte left. */
export const fillDisk = (dir: string): void => {
  const fd = openSync(join(dir, FILLER), "a", 0o600)
  try {
    for (const size of [1024 * 1024, 64 * 1024, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x61)
      try {
        for (;;) writeSync(fd, chunk)
      } catch {
        // this size no longer fits: go on with a smaller one
      }
    }
  } finally {
    closeSync(fd)
  }
}

export const freeDisk = (dir: string): void => rmSync(join(dir, FILLER), { force: true })
