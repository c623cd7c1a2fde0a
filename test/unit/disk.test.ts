import { describe, expect, it } from "@effect/vitest"
import { failedPath, formatBytes, isDiskFull } from "../../src/domain/disk.js"

describe("isDiskFull", () => {
  it("tells a full disk by errno code, SQLite's code, text, or a wrapped cause", () => {
    expect(isDiskFull(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" }))).toBe(
      true
    )
    expect(isDiskFull({ code: "EDQUOT" })).toBe(true)
    expect(isDiskFull(Object.assign(new Error("database or disk is full"), { code: "SQLITE_FULL" }))).toBe(true)
    expect(isDiskFull(new Error("Failed to execute statement", { cause: { code: "SQLITE_FULL" } }))).toBe(true)
    expect(isDiskFull("Error: ENOSPC: no space left on device, write")).toBe(true)
  })

  it("leaves every other failure alone", () => {
    expect(isDiskFull(Object.assign(new Error("permission denied"), { code: "EACCES" }))).toBe(false)
    expect(isDiskFull(new Error("Failed to execute statement", { cause: { code: "SQLITE_BUSY" } }))).toBe(false)
    expect(isDiskFull(undefined)).toBe(false)
    expect(isDiskFull(42)).toBe(false)
    const loop: { cause?: unknown } = {}
    loop.cause = loop
    expect(isDiskFull(loop)).toBe(false)
  })

  it("reads the path an errno error names", () => {
    expect(failedPath({ code: "ENOSPC", path: "/home/.berth/daemon.pid" })).toBe("/home/.berth/daemon.pid")
    expect(failedPath({ code: "ENOSPC", syscall: "write" })).toBeUndefined()
  })
})

describe("formatBytes", () => {
  it("speaks in powers of 1024", () => {
    expect(formatBytes(0)).toBe("0 B")
    expect(formatBytes(1023)).toBe("1023 B")
    expect(formatBytes(1536)).toBe("1.5 KB")
    expect(formatBytes(8 * 1024 ** 2)).toBe("8 MB")
    expect(formatBytes(2.5 * 1024 ** 3)).toBe("2.5 GB")
    expect(formatBytes(Number.NaN)).toBe("0 B")
  })
})
