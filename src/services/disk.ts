/**
 * A full disk as berth reports it: the `DiskFull` of a path, with the free space its filesystem has now.
 */
import { statfsSync } from "node:fs"
import { dirname } from "node:path"
import { failedPath, isDiskFull } from "../domain/disk.js"
import { DiskFull } from "../domain/errors.js"

/** Free bytes (for an unprivileged writer) on the filesystem of `path`, or of the nearest folder above it that exists. */
export const freeBytesAt = (path: string): number => {
  for (let at = path; ; at = dirname(at)) {
    try {
      const s = statfsSync(at)
      return s.bavail * s.bsize
    } catch {
      if (dirname(at) === at) return 0
    }
  }
}

/** The size of the filesystem of `path` (bytes), or 0 when it cannot be read. */
export const diskBytesAt = (path: string): number => {
  try {
    const s = statfsSync(path)
    return s.blocks * s.bsize
  } catch {
    return 0
  }
}

/** The `DiskFull` of a write to `path` (BERTH_HOME's `home`). */
export const diskFullAt = (path: string, home: string): DiskFull =>
  new DiskFull({ path, freeBytes: freeBytesAt(path), home })

/** `failure` as a `DiskFull` when it says the disk is full (naming the path it names, else `fallback`). */
export const asDiskFull = (failure: unknown, fallback: string, home: string): DiskFull | undefined =>
  isDiskFull(failure) ? diskFullAt(failedPath(failure) ?? fallback, home) : undefined
