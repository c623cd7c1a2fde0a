/**
 * A small disk for tests of a full one: a tmpfs mounted where a sandbox's BERTH_HOME will be (root only), filled to
 * the last byte and freed again.
 */
import { execFileSync } from "node:child_process"
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, expect } from "@effect/vitest"
import { killAll, portBlock, type Sandbox, sandbox } from "./harness.js"

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

/**
 * A sandbox holding `files` whose BERTH_HOME is a tmpfs of `size`, made before the file's tests (its own port range,
 * and a gate that keeps no disk free: the default 2 GB would admit no world on a few MB) and gone after them. `skipped`
 * is why there is none, when the tmpfs cannot be mounted.
 */
export const smallDisk = (files: Readonly<Record<string, string>>, size = "8m") => {
  const made: { box: Sandbox; skipped: string | undefined } = { box: undefined as never, skipped: undefined }
  beforeAll(async () => {
    made.box = sandbox(files)
    made.skipped = mountTmpfs(made.box.home, size)
    if (made.skipped !== undefined) return
    const range = await made.box.run(["port", "--range", portBlock()])
    expect(range.code, range.stderr).toBe(0)
    const reserve = await made.box.run(["reserve", "--disk", "0"])
    expect(reserve.code, reserve.stderr).toBe(0)
  }, 60_000)
  afterAll(() => {
    killAll(made.box.home)
    unmount(made.box.home)
    made.box.cleanup()
  })
  return made
}
