/**
 * A small disk for tests of a full one: a tmpfs mounted where a sandbox's BERTH_HOME will be (root only), filled to
 * the last byte and freed again (`filled-disk.ts`).
 */
import { afterAll, beforeAll, expect } from "@effect/vitest"
import { mountTmpfs, unmount } from "./filled-disk.js"
import { killAll, portBlock, type Sandbox, sandbox } from "./harness.js"

export { fillDisk, freeDisk, mountTmpfs, unmount } from "./filled-disk.js"

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
