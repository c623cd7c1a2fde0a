import { afterAll, describe, expect, it } from "vitest"
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { loadOrCreateCa } from "../../src/services/proxy/ca.js"
import {
  detectDistro,
  findNssDatabases,
  formatTrustReport,
  nssNickname,
  planTrust,
  runTrust,
  type TrustCa,
  type TrustFacts
} from "../../src/services/proxy/trust.js"

const base = mkdtempSync(join(tmpdir(), "berth-trust-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))

const ca: TrustCa = {
  certPath: "/home/ann/.berth/ca/ca.crt",
  commonName: "berth local CA (laptop)",
  fingerprint: "0123456789abcdef".repeat(4),
  sha1: "AB".repeat(20)
}

const facts = (overrides: Partial<TrustFacts>): TrustFacts => ({
  platform: "linux",
  osRelease: undefined,
  commands: new Set(),
  home: "/home/ann",
  nssDatabases: [],
  isRoot: false,
  ...overrides
})

const argvs = (plan: ReturnType<typeof planTrust>) => plan.steps.map((s) => s.argv.join(" "))

describe("trust plans", () => {
  it("recognises distributions by ID and ID_LIKE", () => {
    expect(detectDistro('ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"')).toBe("debian")
    expect(detectDistro('ID=linuxmint\nID_LIKE="ubuntu debian"')).toBe("debian")
    expect(detectDistro('ID="rocky"\nID_LIKE="rhel centos fedora"')).toBe("fedora")
    expect(detectDistro("ID=fedora")).toBe("fedora")
    expect(detectDistro("ID=manjaro\nID_LIKE=arch")).toBe("arch")
    expect(detectDistro('ID="opensuse-tumbleweed"\nID_LIKE="opensuse suse"')).toBe("suse")
    expect(detectDistro("ID=nixos")).toBeUndefined()
    expect(detectDistro(undefined)).toBeUndefined()
  })

  it("Debian/Ubuntu: copy into /usr/local/share/ca-certificates, then update-ca-certificates", () => {
    const f = facts({ osRelease: "ID=debian", commands: new Set(["update-ca-certificates"]) })
    const file = "/usr/local/share/ca-certificates/berth-0123456789abcdef.crt"
    expect(argvs(planTrust(f, ca, "install"))).toEqual([
      `install -m 0644 ${ca.certPath} ${file}`,
      "update-ca-certificates"
    ])
    expect(argvs(planTrust(f, ca, "remove"))).toEqual([`rm -f ${file}`, "update-ca-certificates --fresh"])
    expect(planTrust(f, ca, "install").steps.every((s) => s.root)).toBe(true)
  })

  it("Fedora/RHEL: the anchors folder, then update-ca-trust", () => {
    const f = facts({ osRelease: 'ID="rhel"', commands: new Set(["update-ca-trust"]) })
    expect(argvs(planTrust(f, ca, "install"))).toEqual([
      `install -m 0644 ${ca.certPath} /etc/pki/ca-trust/source/anchors/berth-0123456789abcdef.pem`,
      "update-ca-trust extract"
    ])
    expect(argvs(planTrust(f, ca, "remove"))[0]).toBe(
      "rm -f /etc/pki/ca-trust/source/anchors/berth-0123456789abcdef.pem"
    )
  })

  it("Arch: trust anchor --store / --remove", () => {
    const f = facts({ osRelease: "ID=arch", commands: new Set(["trust"]) })
    expect(argvs(planTrust(f, ca, "install"))).toEqual([`trust anchor --store ${ca.certPath}`])
    expect(argvs(planTrust(f, ca, "remove"))).toEqual([`trust anchor --remove ${ca.certPath}`])
  })

  it("macOS: the system keychain with security", () => {
    const f = facts({ platform: "darwin", commands: new Set(["security"]) })
    expect(argvs(planTrust(f, ca, "install"))).toEqual([
      `security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain ${ca.certPath}`
    ])
    expect(argvs(planTrust(f, ca, "remove"))).toEqual([
      `security remove-trusted-cert -d ${ca.certPath}`,
      `security delete-certificate -Z ${ca.sha1} /Library/Keychains/System.keychain`
    ])
  })

  it("NSS databases with certutil; each skipped with a reason without it", () => {
    const dbs = [
      { path: "/home/ann/.pki/nssdb", reader: "Chrome/Chromium" },
      { path: "/home/ann/.mozilla/firefox/x.default", reader: "Firefox (profile x.default)" }
    ]
    const nick = nssNickname(ca)
    expect(nick).toBe("berth local CA (laptop) 01234567")
    const withCertutil = planTrust(facts({ commands: new Set(["certutil"]), nssDatabases: dbs }), ca, "install")
    expect(withCertutil.steps.map((s) => [s.kind, s.root, ...s.argv])).toEqual(
      dbs.map((db) => [
        "nss-add",
        false,
        "certutil",
        "-A",
        "-d",
        `sql:${db.path}`,
        "-n",
        nick,
        "-t",
        "C,,",
        "-i",
        ca.certPath
      ])
    )
    const removal = planTrust(facts({ commands: new Set(["certutil"]), nssDatabases: dbs }), ca, "remove")
    expect(removal.steps[0]?.argv).toEqual(["certutil", "-D", "-d", "sql:/home/ann/.pki/nssdb", "-n", nick])
    const without = planTrust(facts({ nssDatabases: dbs }), ca, "install")
    expect(without.steps).toEqual([])
    expect(without.skipped.filter((s) => s.reason.startsWith("certutil is not installed")).length).toBe(2)
  })

  it("says what it cannot do: an unknown distribution, a missing tool, no Chrome database yet", () => {
    const plan = planTrust(facts({ osRelease: "ID=nixos" }), ca, "install")
    expect(plan.steps).toEqual([])
    expect(plan.skipped.map((s) => s.reason)).toEqual([
      `berth does not know this Linux distribution's trust store; add ${ca.certPath} to it by hand`,
      "it does not exist yet (Chrome and Chromium make it on their first start; run this again then)"
    ])
    const missing = planTrust(facts({ osRelease: "ID=debian" }), ca, "install")
    expect(missing.skipped[0]?.reason).toBe("update-ca-certificates is not installed (apt install ca-certificates)")
  })

  it("does not run root steps when not root: it prints the exact sudo command", async () => {
    const f = facts({ osRelease: "ID=ubuntu", commands: new Set(["update-ca-certificates"]) })
    const report = await Effect.runPromise(runTrust(planTrust(f, ca, "install"), { isRoot: false }))
    expect(report.done).toEqual([])
    expect(report.needsSudo).toEqual([
      {
        store: "system store (Debian/Ubuntu)",
        command: `sudo install -m 0644 ${ca.certPath} /usr/local/share/ca-certificates/berth-0123456789abcdef.crt && sudo update-ca-certificates`
      }
    ])
    expect(formatTrustReport(report)).toContain("needs root; run:\n    sudo install -m 0644")
  })

  it("finds Chrome's and each Firefox profile's database in a home folder", () => {
    const home = join(base, "home-find")
    for (const dir of [".pki/nssdb", ".mozilla/firefox/abc.default-release", ".mozilla/firefox/old.default"]) {
      mkdirSync(join(home, dir), { recursive: true })
    }
    writeFileSync(join(home, ".pki/nssdb/cert9.db"), "")
    writeFileSync(join(home, ".mozilla/firefox/abc.default-release/cert9.db"), "")
    // a profile with only the legacy database is not one certutil's sql: format can open
    writeFileSync(join(home, ".mozilla/firefox/old.default/cert8.db"), "")
    expect(findNssDatabases(home, "linux")).toEqual([
      { path: join(home, ".pki/nssdb"), reader: "Chrome/Chromium" },
      { path: join(home, ".mozilla/firefox/abc.default-release"), reader: "Firefox (profile abc.default-release)" }
    ])
  })
})

describe("trust in a real NSS database", () => {
  it("adds the CA with certutil, again without harm, and removes it", async () => {
    const real = await Effect.runPromise(loadOrCreateCa(join(base, "ca")))
    const db = join(base, "nssdb")
    mkdirSync(db, { recursive: true })
    execFileSync("certutil", ["-N", "--empty-password", "-d", `sql:${db}`])
    const trustCa: TrustCa = {
      certPath: real.certPath,
      commonName: real.commonName,
      fingerprint: real.fingerprint,
      sha1: real.cert.fingerprint.replaceAll(":", "")
    }
    // no system store in these facts: the machine's own is never touched by tests
    const f = facts({
      osRelease: "ID=nixos",
      commands: new Set(["certutil"]),
      home: base,
      nssDatabases: [{ path: db, reader: "test" }]
    })
    const list = () => execFileSync("certutil", ["-L", "-d", `sql:${db}`], { encoding: "utf8" })
    const nick = nssNickname(trustCa)

    const installed = await Effect.runPromise(runTrust(planTrust(f, trustCa, "install"), { isRoot: true }))
    expect(installed.failed).toEqual([])
    expect(installed.done.map((d) => d.store)).toEqual([`NSS database of test (${db})`])
    expect(list()).toMatch(new RegExp(`${nick.replace(/[()]/g, "\\$&")}\\s+C,,`))
    const again = await Effect.runPromise(runTrust(planTrust(f, trustCa, "install"), { isRoot: true }))
    expect(again.failed).toEqual([])
    expect(list().split(nick).length - 1).toBe(1)

    const removed = await Effect.runPromise(runTrust(planTrust(f, trustCa, "remove"), { isRoot: true }))
    expect(removed.done.length).toBe(1)
    expect(list()).not.toContain(nick)
    const twice = await Effect.runPromise(runTrust(planTrust(f, trustCa, "remove"), { isRoot: true }))
    expect(twice.done).toEqual([])
    expect(twice.skipped.map((s) => s.reason)).toContain("berth's CA is not in it")
    expect(formatTrustReport(installed)).toContain(`✓ trusted by the NSS database of test (${db})`)
  })
})
