import { afterAll, describe, expect, it } from "vitest"
import { execFileSync, spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import * as https from "node:https"
import type * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import {
  CA_VALIDITY_DAYS,
  CaError,
  createCaCertificate,
  LEAF_CACHE_LIMIT,
  LEAF_VALIDITY_DAYS,
  loadOrCreateCa,
  mintLeaf
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

/** `openssl verify` of `leafPem` against the CA at `caPath`: its exit and what it said. */
const opensslVerify = (caPath: string, leafPem: string) => {
  const leafPath = join(base, `leaf-${count++}.pem`)
  writeFileSync(leafPath, leafPem)
  const r = spawnSync("openssl", ["verify", "-CAfile", caPath, leafPath], { encoding: "utf8" })
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` }
}

/** Node's own verdict on a TLS server presenting `leafPem`, checked against `caPem` for `servername`. */
const nodeVerdict = async (leafPem: string, keyPem: string, caPem: string, servername: string) => {
  const server = tls.createServer({ key: keyPem, cert: leafPem + caPem }, (s) => s.end())
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
  try {
    return await new Promise<string>((resolve) => {
      const socket = tls.connect({
        host: "127.0.0.1",
        port: (server.address() as net.AddressInfo).port,
        servername,
        ca: caPem
      })
      socket.once("secureConnect", () => {
        socket.destroy()
        resolve("verified")
      })
      socket.once("error", (e: NodeJS.ErrnoException) => resolve(`${e.code}: ${e.message}`))
    })
  } finally {
    server.close()
  }
}

describe("the CA's name constraints", () => {
  it("permit only the .localhost and .test trees and loopback addresses, as a critical extension", async () => {
    const ca = await load(fresh())
    const text = execFileSync("openssl", ["x509", "-text", "-noout", "-in", ca.certPath], { encoding: "utf8" })
    expect(text).toMatch(
      /X509v3 Name Constraints: critical\s+Permitted:\s+DNS:localhost\s+DNS:test\s+IP:127\.0\.0\.0\/255\.0\.0\.0\s+IP:0:0:0:0:0:0:0:1\/FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF\s/
    )
    expect(text).not.toContain("Excluded")
    // and it vouches for servers only
    expect(text).toMatch(/X509v3 Extended Key Usage:\s+TLS Web Server Authentication\n/)
  })

  it("make a leaf for any other name fail verification, even one signed with the CA's own key", async () => {
    const ca = await load(fresh())
    const key = crypto.createPrivateKey(readFileSync(ca.keyPath, "utf8"))
    for (const name of ["web.w1.demo.localhost", "localhost", "api.main.shop.test"]) {
      const leaf = mintLeaf({ cert: ca.cert, key }, name)
      expect(opensslVerify(ca.certPath, leaf.certPem).ok, name).toBe(true)
      expect(await nodeVerdict(leaf.certPem, leaf.keyPem, ca.certPem, name)).toBe("verified")
    }
    for (const name of ["example.com", "localhost.example.com", "bank.localhost.evil"]) {
      const forged = mintLeaf({ cert: ca.cert, key }, name)
      const verdict = opensslVerify(ca.certPath, forged.certPem)
      expect(verdict.ok, name).toBe(false)
      expect(verdict.output).toMatch(/permitted subtree violation/)
      // node has no code of its own for it; OpenSSL's reason comes through in the message
      expect(await nodeVerdict(forged.certPem, forged.keyPem, ca.certPem, name)).toBe(
        "UNSPECIFIED: permitted subtree violation"
      )
    }
    // and berth itself never mints one
    expect(() => ca.leaf("example.com")).toThrow(/outside/)
  })

  it("are added by making the CA again when the one on disk has none; its key goes, its certificate is set aside", async () => {
    const dir = fresh()
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    // a CA as berth made them before: no name constraints
    execFileSync("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      join(dir, "ca.key"),
      "-out",
      join(dir, "ca.crt"),
      "-days",
      "3650",
      "-subj",
      "/O=berth/CN=berth local CA (old)",
      "-addext",
      "basicConstraints=critical,CA:TRUE,pathlen:0",
      "-addext",
      "keyUsage=critical,digitalSignature,keyCertSign,cRLSign"
    ])
    const oldPem = readFileSync(join(dir, "ca.crt"), "utf8")
    const oldKey = readFileSync(join(dir, "ca.key"), "utf8")
    const old = new crypto.X509Certificate(oldPem)
    const ca = await load(dir)
    expect(ca.created).toBe(true)
    expect(ca.replaced).toBe(
      join(dir, `retired-${old.fingerprint256.replaceAll(":", "").toLowerCase().slice(0, 16)}.crt`)
    )
    expect(readFileSync(ca.replaced!, "utf8")).toBe(oldPem)
    // the old key, which could vouch for any name, is gone
    expect(readFileSync(join(dir, "ca.key"), "utf8")).not.toBe(oldKey)
    expect(ca.certPem).not.toBe(oldPem)
    expect(execFileSync("openssl", ["x509", "-text", "-noout", "-in", ca.certPath], { encoding: "utf8" })).toContain(
      "X509v3 Name Constraints: critical"
    )
    expect(readdirSync(dir).sort()).toEqual(["ca.crt", "ca.key", ca.replaced!.slice(dir.length + 1)].sort())
    // the next load keeps it
    const again = await load(dir)
    expect(again.created).toBe(false)
    expect(again.fingerprint).toBe(ca.fingerprint)
    expect(again.replaced).toBeUndefined()
  })

  it("bound the leaf cache, dropping the least recently used", async () => {
    const ca = await load(fresh())
    const contexts = Array.from({ length: LEAF_CACHE_LIMIT }, (_, i) => ca.leafFor(`n${i}.demo.localhost`))
    expect(ca.cachedLeaves()).toBe(LEAF_CACHE_LIMIT)
    // n0 is used again, so n1 is now the least recent, and the next name pushes it out
    expect(ca.leafFor("n0.demo.localhost")).toBe(contexts[0])
    ca.leafFor("one-more.demo.localhost")
    expect(ca.cachedLeaves()).toBe(LEAF_CACHE_LIMIT)
    expect(ca.leafFor("n0.demo.localhost")).toBe(contexts[0])
    expect(ca.leafFor("n2.demo.localhost")).toBe(contexts[2])
    expect(ca.leafFor("n1.demo.localhost")).not.toBe(contexts[1])
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
