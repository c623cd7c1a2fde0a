import { afterAll, describe, expect, it } from "vitest"
import { execFileSync } from "node:child_process"
import * as crypto from "node:crypto"
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as https from "node:https"
import type * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import {
  CA_VALIDITY_DAYS,
  CaError,
  createCaCertificate,
  LEAF_VALIDITY_DAYS,
  loadOrCreateCa
} from "../../src/services/proxy/ca.js"
import * as der from "../../src/services/proxy/der.js"

const base = mkdtempSync(join(tmpdir(), "berth-ca-"))
afterAll(() => rmSync(base, { recursive: true, force: true }))
let count = 0
const fresh = () => join(base, `ca-${count++}`)
const load = (dir: string) => Effect.runPromise(loadOrCreateCa(dir))
const DAY = 86_400_000

describe("berth's CA", () => {
  it("is made once: key 0600, certificate readable, reused by the next load", async () => {
    const dir = fresh()
    const first = await load(dir)
    expect(first.created).toBe(true)
    expect(statSync(join(dir, "ca.key")).mode & 0o777).toBe(0o600)
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    expect(first.commonName).toMatch(/^berth local CA \(.+\)$/)
    const second = await load(dir)
    expect(second.created).toBe(false)
    expect(second.fingerprint).toBe(first.fingerprint)
    expect(second.certPem).toBe(first.certPem)
  })

  it("is an ECDSA P-256 CA for about ten years, as openssl reads it", async () => {
    const ca = await load(fresh())
    expect(ca.cert.ca).toBe(true)
    expect(ca.cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1")
    const days = (Date.parse(ca.cert.validTo) - Date.parse(ca.cert.validFrom)) / DAY
    expect(days).toBe(CA_VALIDITY_DAYS)
    const text = execFileSync("openssl", ["x509", "-text", "-noout", "-in", ca.certPath], { encoding: "utf8" })
    expect(text).toContain("CA:TRUE")
    expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature, Certificate Sign, CRL Sign/)
    expect(text).toContain("NIST CURVE: P-256")
    expect(text).toContain("Signature Algorithm: ecdsa-with-SHA256")
    expect(text).toContain(`CN = ${ca.commonName}`)
  })

  it("mints a leaf per host name that verifies against the CA, cached", async () => {
    const dir = fresh()
    const ca = await load(dir)
    const host = "web.feature-x.demo.localhost"
    const leaf = ca.leaf(host)
    expect(ca.leaf(host)).toBe(leaf)
    expect(ca.leafFor(host)).toBe(ca.leafFor(host))
    expect(ca.leaf("api.feature-x.demo.localhost").certPem).not.toBe(leaf.certPem)
    const x509 = new crypto.X509Certificate(leaf.certPem)
    expect(x509.subjectAltName).toBe(`DNS:${host}`)
    expect(x509.checkHost(host)).toBe(host)
    expect(x509.checkHost("other.demo.localhost")).toBeUndefined()
    expect(x509.checkIssued(ca.cert)).toBe(true)
    expect(x509.verify(ca.cert.publicKey)).toBe(true)
    expect(x509.ca).toBe(false)
    expect((Date.parse(x509.validTo) - Date.parse(x509.validFrom)) / DAY).toBeLessThanOrEqual(LEAF_VALIDITY_DAYS)
    const leafPath = join(dir, "leaf.pem")
    writeFileSync(leafPath, leaf.certPem)
    expect(execFileSync("openssl", ["verify", "-CAfile", ca.certPath, leafPath], { encoding: "utf8" })).toContain("OK")
    const text = execFileSync("openssl", ["x509", "-text", "-noout", "-in", leafPath], { encoding: "utf8" })
    expect(text).toContain(`DNS:${host}`)
    expect(text).toContain("TLS Web Server Authentication")
    expect(text).toContain("CA:FALSE")
    // a host name longer than a common name may hold still gets its SAN
    const long = `${"a".repeat(60)}.${"b".repeat(40)}.demo.localhost`
    expect(new crypto.X509Certificate(ca.leaf(long).certPem).subjectAltName).toBe(`DNS:${long}`)
  })

  it("serves TLS that node verifies with the CA and no insecure flag", async () => {
    const ca = await load(fresh())
    const host = "web.w1.demo.localhost"
    const server = https.createServer({ SNICallback: (name, cb) => cb(null, ca.leafFor(name)) }, (_req, res) =>
      res.end("trusted")
    )
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
    try {
      const body = await new Promise<string>((resolve, reject) => {
        https
          .get(
            {
              host: "127.0.0.1",
              port: (server.address() as net.AddressInfo).port,
              servername: host,
              ca: ca.certPem,
              agent: false
            },
            (res) => {
              let b = ""
              res.on("data", (c: Buffer) => (b += c.toString()))
              res.on("end", () => resolve(b))
            }
          )
          .on("error", reject)
      })
      expect(body).toBe("trusted")
    } finally {
      server.close()
    }
  })

  it("replaces an expired CA, and takes over a key left without its certificate", async () => {
    const dir = fresh()
    mkdirSync(dir, { recursive: true })
    const old = createCaCertificate(new Date(Date.now() - (CA_VALIDITY_DAYS + 5) * DAY))
    writeFileSync(join(dir, "ca.crt"), old.certPem)
    writeFileSync(join(dir, "ca.key"), old.keyPem, { mode: 0o600 })
    const renewed = await load(dir)
    expect(renewed.created).toBe(true)
    expect(renewed.certPem).not.toBe(old.certPem)

    const orphan = fresh()
    mkdirSync(orphan, { recursive: true })
    writeFileSync(join(orphan, "ca.key"), old.keyPem, { mode: 0o600 })
    const taken = await load(orphan)
    expect(taken.created).toBe(true)
  })

  it("refuses a certificate without its key, or a key of another CA", async () => {
    const dir = fresh()
    mkdirSync(dir, { recursive: true })
    const one = createCaCertificate()
    const two = createCaCertificate()
    writeFileSync(join(dir, "ca.crt"), one.certPem)
    const missing = await Effect.runPromiseExit(loadOrCreateCa(dir))
    expect(Exit.isFailure(missing) && missing.cause._tag === "Fail" && missing.cause.error).toBeInstanceOf(CaError)
    writeFileSync(join(dir, "ca.key"), two.keyPem, { mode: 0o600 })
    const mismatch = await Effect.runPromiseExit(loadOrCreateCa(dir))
    expect(Exit.isFailure(mismatch)).toBe(true)
    if (Exit.isFailure(mismatch) && mismatch.cause._tag === "Fail") {
      expect(mismatch.cause.error.message).toContain("does not belong to")
    }
  })
})

describe("the DER encoder", () => {
  it("encodes lengths, integers, OIDs, bit strings and times as DER requires", () => {
    expect(der.integer(0).toString("hex")).toBe("020100")
    expect(der.integer(128).toString("hex")).toBe("02020080")
    expect(der.unsignedInteger(Buffer.from([0, 0, 0xff])).toString("hex")).toBe("020200ff")
    expect(der.oid("1.2.840.10045.4.3.2").toString("hex")).toBe("06082a8648ce3d040302")
    expect(der.oid("2.5.29.17").toString("hex")).toBe("0603551d11")
    // digitalSignature only: seven unused bits; keyCertSign + cRLSign: one
    expect(der.namedBits([0]).toString("hex")).toBe("03020780")
    expect(der.namedBits([5, 6]).toString("hex")).toBe("03020106")
    expect(der.octetString(Buffer.alloc(200)).subarray(0, 3).toString("hex")).toBe("0481c8")
    expect(der.octetString(Buffer.alloc(300)).subarray(0, 4).toString("hex")).toBe("0482012c")
    expect(
      der
        .time(new Date(Date.UTC(2030, 0, 2, 3, 4, 5)))
        .toString("latin1")
        .slice(2)
    ).toBe("300102030405Z")
    expect(
      der
        .time(new Date(Date.UTC(2051, 0, 2, 3, 4, 5)))
        .toString("latin1")
        .slice(2)
    ).toBe("20510102030405Z")
    const element = der.readElement(der.sequence(der.integer(5), der.boolean(true)))
    expect(der.readChildren(element.content).map((e) => e.tag)).toEqual([0x02, 0x01])
  })
})
