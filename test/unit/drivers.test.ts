import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { builtinAdapters } from "../../src/domain/adapters.js"
import { drivers, installCommand } from "../../src/domain/drivers.js"

const root = new URL("../../", import.meta.url)
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8")) as {
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}
const build = readFileSync(new URL("scripts/build.mjs", root), "utf8")

describe("the clients berth does not install", () => {
  it("are the versions berth is tested with, and never installed with berth", () => {
    for (const driver of drivers.values()) {
      expect(pkg.devDependencies[driver.packageName]).toBe(driver.version)
      expect(pkg.dependencies[driver.packageName]).toBeUndefined()
    }
  })

  it("are left out of the bundles, so that the adapters load them when a slice needs one", () => {
    const unbundled = /const unbundled = \[([^\]]*)\]/.exec(build)?.[1] ?? ""
    for (const driver of drivers.values()) expect(unbundled).toContain(JSON.stringify(driver.packageName))
  })

  it("serve built-in adapter families, aliases included", () => {
    const families = new Set([...builtinAdapters.values()].map((a) => a.family))
    for (const family of drivers.keys()) expect(families.has(family)).toBe(true)
    expect(drivers.get(builtinAdapters.get("minio")?.family ?? "")?.packageName).toBe("@aws-sdk/client-s3")
    expect(drivers.get(builtinAdapters.get("redpanda")?.family ?? "")?.packageName).toBe("kafkajs")
  })

  it("are installed beside a global berth, in the tested version", () => {
    expect(installCommand(drivers.get("mongodb")!)).toBe("npm i -g mongodb@7.9.1")
  })
})
