import { describe, expect, it } from "@effect/vitest"
import { bundleHolds, type Listener, type PortFacts, portFindings, staleProcesses } from "../../src/domain/doctor.js"

const listener = (port: number, pid?: number, pgid?: number, command?: string): Listener => ({
  port,
  pid,
  pgid,
  command
})

const facts = (over: Partial<PortFacts>): PortFacts => ({
  range: { from: 4000, to: 5999 },
  ephemeral: { from: 32768, to: 60999 },
  listeners: [],
  leases: new Map(),
  groups: new Set(),
  proxyPorts: [],
  ...over
})

describe("doctor: ports", () => {
  it("is quiet about a range clear of the kernel's, its own processes and the proxy", () => {
    const found = portFindings(
      facts({
        listeners: [listener(4100, 10, 10, "node"), listener(4999, 20, 20, "node")],
        leases: new Map([[4100, "shop/main api"]]),
        groups: new Set([10]),
        proxyPorts: [4999]
      })
    )
    expect(found).toEqual([{ check: "port range", verdict: "ok", detail: "4000-5999, 1 leased" }])
  })

  it("warns about a range the kernel also hands to outgoing connections, with one that is not", () => {
    const [range] = portFindings(facts({ range: { from: 30000, to: 40000 } }))
    expect(range).toMatchObject({ verdict: "warn", fix: "berth port --range 4000-5999" })
    const [low] = portFindings(facts({ range: { from: 2000, to: 3000 }, ephemeral: { from: 2500, to: 9000 } }))
    expect(low).toMatchObject({ verdict: "warn", fix: "berth port --range 1024-2499" })
  })

  it("fails on a leased port another process holds, naming both, and lists squatters apart", () => {
    const found = portFindings(
      facts({
        listeners: [listener(4100, 77, 77, "python3"), listener(4200, 88, 88, "vite"), listener(4300)],
        leases: new Map([
          [4100, "shop/main api"],
          [4300, "shop/main web"]
        ])
      })
    )
    expect(found[1]).toMatchObject({
      check: "leased ports",
      verdict: "fail",
      detail: "4100 (leased to shop/main api) is held by python3 (pid 77)"
    })
    // 4300: a holder this user may not see is not called a conflict
    expect(found[2]).toMatchObject({ check: "port squatters", verdict: "warn" })
    expect(found[2]!.detail).toContain("4200 vite (pid 88)")
    expect(found).toHaveLength(3)
  })
})

describe("doctor: stale processes", () => {
  const p = (pid: number, pgid: number, world: string) => ({ pid, pgid, project: "shop", world, service: "api" })

  it("names processes of known worlds in groups berth does not record, with the kill line", () => {
    const found = staleProcesses(
      [p(10, 10, "main"), p(20, 20, "main"), p(21, 20, "main"), p(30, 30, "elsewhere")],
      new Set(["shop/main"]),
      new Set([10])
    )
    expect(found).toMatchObject({ check: "stale processes", verdict: "warn", fix: "kill -TERM -20" })
    expect(found.detail).toContain("shop/main api (pid 20)")
    expect(found.detail).not.toContain("elsewhere")
  })

  it("is ok when every world process is watched", () => {
    expect(staleProcesses([p(10, 10, "main")], new Set(["shop/main"]), new Set([10])).verdict).toBe("ok")
  })
})

describe("doctor: trust bundles", () => {
  const pem = "-----BEGIN CERTIFICATE-----\nAAAA\nBBBB\n-----END CERTIFICATE-----\n"
  it("finds a certificate in a bundle whatever the line breaks", () => {
    expect(bundleHolds(`-----BEGIN CERTIFICATE-----\nZZZZ\n-----END CERTIFICATE-----\n${pem}`, pem)).toBe(true)
    expect(bundleHolds("-----BEGIN CERTIFICATE-----\nAAAABB\nBB\n-----END CERTIFICATE-----\n", pem)).toBe(true)
    expect(bundleHolds("-----BEGIN CERTIFICATE-----\nCCCC\n-----END CERTIFICATE-----\n", pem)).toBe(false)
  })
})
