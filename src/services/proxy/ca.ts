/**
 * berth's local certificate authority: made once in a folder (ECDSA P-256, the key 0600), then used to mint one leaf
 * certificate per host name on demand (browsers refuse a `*.localhost` wildcard, so there is no wildcard). Leaves
 * are cached in memory and carry the CA in their chain, so a client that trusts the CA trusts every route.
 *
 * Certificates are built with the DER encoder in `der.ts` and signed with `crypto.sign`: Node parses X.509 but
 * cannot write it.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import * as tls from "node:tls"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as der from "./der.js"

export class CaError extends Data.TaggedError("CaError")<{ readonly path: string; readonly reason: string }> {
  override get message(): string {
    return `berth's certificate authority in ${this.path}: ${this.reason}`
  }
}

const OID = {
  ecPublicKey: "1.2.840.10045.2.1",
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  organization: "2.5.4.10",
  organizationalUnit: "2.5.4.11",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1"
} as const

const DAY_MS = 86_400_000
/** The CA lives ten years; a leaf 397 days, the longest browsers accept (counted from its notBefore). */
export const CA_VALIDITY_DAYS = 3650
export const LEAF_VALIDITY_DAYS = 397
/** Clocks drift; certificates start a little in the past. */
const BACKDATE_MS = 3_600_000
const LEAF_CACHE_LIMIT = 1000

type Name = ReadonlyArray<readonly [string, string]>

const encodeName = (name: Name): Buffer =>
  der.sequence(...name.map(([type, value]) => der.set(der.sequence(der.oid(type), der.utf8String(value)))))

const extension = (id: string, critical: boolean, value: Buffer): Buffer =>
  der.sequence(der.oid(id), ...(critical ? [der.boolean(true)] : []), der.octetString(value))

/** RFC 5280 method 1: SHA-1 of the public key's bits (for P-256, the uncompressed point). */
export const keyIdentifier = (publicKey: crypto.KeyObject): Buffer => {
  const spki = publicKey.export({ type: "spki", format: "der" })
  const spkiSequence = der.readChildren(der.readElement(spki).content)
  const bits = spkiSequence[1]
  if (bits === undefined || bits.tag !== 0x03) throw new Error("unexpected public key encoding")
  return crypto.createHash("sha1").update(bits.content.subarray(1)).digest()
}

const randomSerial = (): Buffer => {
  const bytes = crypto.randomBytes(16)
  bytes[0] = (bytes[0]! & 0x7f) | 0x01
  return bytes
}

interface Signed {
  readonly der: Buffer
  readonly pem: string
}

const toPem = (body: Buffer): string =>
  `-----BEGIN CERTIFICATE-----\n${
    body
      .toString("base64")
      .match(/.{1,64}/g)
      ?.join("\n") ?? ""
  }\n-----END CERTIFICATE-----\n`

const signCertificate = (options: {
  readonly serial: Buffer
  readonly issuer: Buffer
  readonly subject: Buffer
  readonly notBefore: Date
  readonly notAfter: Date
  readonly publicKey: crypto.KeyObject
  readonly extensions: ReadonlyArray<Buffer>
  readonly signingKey: crypto.KeyObject
}): Signed => {
  const algorithm = der.sequence(der.oid(OID.ecdsaWithSha256))
  const tbs = der.sequence(
    der.explicit(0, der.integer(2)),
    der.unsignedInteger(options.serial),
    algorithm,
    options.issuer,
    der.sequence(der.time(options.notBefore), der.time(options.notAfter)),
    options.subject,
    options.publicKey.export({ type: "spki", format: "der" }),
    der.explicit(3, der.sequence(...options.extensions))
  )
  // ECDSA signatures come out of node as DER (Ecdsa-Sig-Value), which is what X.509 carries
  const signature = crypto.sign("sha256", tbs, options.signingKey)
  const cert = der.sequence(tbs, algorithm, der.bitString(signature))
  return { der: cert, pem: toPem(cert) }
}

export const caCommonName = (hostname: string = os.hostname()): string => `berth local CA (${hostname})`

/** A new self-signed CA certificate and its key. */
export const createCaCertificate = (now: Date = new Date(), hostname: string = os.hostname()) => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" })
  let user = "user"
  try {
    user = os.userInfo().username
  } catch {
    // no passwd entry (a container): keep the placeholder
  }
  const name = encodeName([
    [OID.organization, "berth"],
    [OID.organizationalUnit, `${user}@${hostname}`],
    [OID.commonName, caCommonName(hostname)]
  ])
  const ski = keyIdentifier(publicKey)
  const notBefore = new Date(now.getTime() - BACKDATE_MS)
  const cert = signCertificate({
    serial: randomSerial(),
    issuer: name,
    subject: name,
    notBefore,
    notAfter: new Date(notBefore.getTime() + CA_VALIDITY_DAYS * DAY_MS),
    publicKey,
    extensions: [
      extension(OID.basicConstraints, true, der.sequence(der.boolean(true), der.integer(0))),
      // digitalSignature, keyCertSign, cRLSign
      extension(OID.keyUsage, true, der.namedBits([0, 5, 6])),
      extension(OID.subjectKeyIdentifier, false, der.octetString(ski))
    ],
    signingKey: privateKey
  })
  return { certPem: cert.pem, keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
}

/** The subject Name of a certificate, exactly as encoded (a leaf's issuer must match it byte for byte). */
const subjectOf = (certDer: Buffer): Buffer => {
  const [tbs] = der.readChildren(der.readElement(certDer).content)
  if (tbs === undefined) throw new Error("not a certificate")
  const fields = der.readChildren(tbs.content)
  // version [0] is present in v3 certificates, shifting every field by one
  const offset = fields[0]?.tag === 0xa0 ? 1 : 0
  const subject = fields[offset + 4]
  if (subject === undefined || subject.tag !== 0x30) throw new Error("certificate has no subject")
  return subject.encoded
}

export interface Leaf {
  readonly certPem: string
  readonly keyPem: string
  readonly notAfter: Date
}

/** A leaf certificate for one host name, signed by the CA. */
export const mintLeaf = (
  ca: { readonly cert: crypto.X509Certificate; readonly key: crypto.KeyObject },
  hostname: string,
  now: Date = new Date()
): Leaf => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" })
  const notBefore = new Date(now.getTime() - BACKDATE_MS)
  const notAfter = new Date(notBefore.getTime() + LEAF_VALIDITY_DAYS * DAY_MS)
  // a common name holds at most 64 characters; the SAN is what clients check anyway
  const subject = encodeName([
    [OID.organization, "berth"],
    ...(hostname.length <= 64 ? [[OID.commonName, hostname] as const] : [])
  ])
  const cert = signCertificate({
    serial: randomSerial(),
    issuer: subjectOf(ca.cert.raw),
    subject,
    notBefore,
    notAfter,
    publicKey,
    extensions: [
      extension(OID.basicConstraints, true, der.sequence()),
      extension(OID.keyUsage, true, der.namedBits([0])),
      extension(OID.extKeyUsage, false, der.sequence(der.oid(OID.serverAuth))),
      extension(OID.subjectAltName, false, der.sequence(der.implicitPrimitive(2, Buffer.from(hostname, "ascii")))),
      extension(OID.subjectKeyIdentifier, false, der.octetString(keyIdentifier(publicKey))),
      extension(
        OID.authorityKeyIdentifier,
        false,
        der.sequence(der.implicitPrimitive(0, keyIdentifier(ca.cert.publicKey)))
      )
    ],
    signingKey: ca.key
  })
  return { certPem: cert.pem, keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(), notAfter }
}

export interface CertificateAuthority {
  readonly certPath: string
  readonly keyPath: string
  readonly certPem: string
  readonly cert: crypto.X509Certificate
  /** The subject's common name, e.g. `berth local CA (laptop)`. */
  readonly commonName: string
  /** SHA-256 of the certificate, lower-case hex without colons. */
  readonly fingerprint: string
  /** Whether this load made the CA (false: it was already there). */
  readonly created: boolean
  /** The leaf for `hostname` (lower case), minted on first use and cached. */
  readonly leaf: (hostname: string) => Leaf
  /** A TLS context serving the leaf for `hostname` with the CA in its chain; cached per host name. */
  readonly leafFor: (hostname: string) => tls.SecureContext
}

const fromParts = (
  certPath: string,
  keyPath: string,
  certPem: string,
  keyPem: string,
  created: boolean
): CertificateAuthority => {
  const cert = new crypto.X509Certificate(certPem)
  const key = crypto.createPrivateKey(keyPem)
  if (!cert.ca) throw new Error(`${certPath} is not a CA certificate`)
  if (!cert.checkPrivateKey(key)) throw new Error(`${keyPath} does not belong to ${certPath}`)
  const commonName = /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1] ?? "berth local CA"
  const leaves = new Map<string, { leaf: Leaf; context: tls.SecureContext | undefined }>()
  const entry = (hostname: string) => {
    const name = hostname.toLowerCase()
    const cached = leaves.get(name)
    // renew a month before the end, for a daemon that runs for a very long time
    if (cached !== undefined && cached.leaf.notAfter.getTime() - Date.now() > 30 * DAY_MS) return cached
    const fresh = { leaf: mintLeaf({ cert, key }, name), context: undefined as tls.SecureContext | undefined }
    leaves.delete(name)
    leaves.set(name, fresh)
    if (leaves.size > LEAF_CACHE_LIMIT) leaves.delete(leaves.keys().next().value!)
    return fresh
  }
  return {
    certPath,
    keyPath,
    certPem,
    cert,
    commonName,
    fingerprint: cert.fingerprint256.replaceAll(":", "").toLowerCase(),
    created,
    leaf: (hostname) => entry(hostname).leaf,
    leafFor: (hostname) => {
      const e = entry(hostname)
      e.context ??= tls.createSecureContext({ key: e.leaf.keyPem, cert: e.leaf.certPem + certPem })
      return e.context
    }
  }
}

const isMissing = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === "ENOENT"

const readIfThere = (path: string): string | undefined => {
  try {
    return fs.readFileSync(path, "utf8")
  } catch (e) {
    if (isMissing(e)) return undefined
    throw e
  }
}

type Attempt =
  | { readonly _tag: "Loaded"; readonly ca: CertificateAuthority }
  /** another process holds the key but its certificate is not written yet */
  | { readonly _tag: "Wait" }

/**
 * One try: load what is there, or create. Creation claims the key file with an exclusive link, so two processes
 * starting at once agree on one CA; an expired CA is replaced.
 */
const attempt = (dir: string, orphanKey: boolean): Attempt => {
  const certPath = join(dir, "ca.crt")
  const keyPath = join(dir, "ca.key")
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const keyPem = readIfThere(keyPath)
  const certPem = readIfThere(certPath)
  if (keyPem !== undefined && certPem !== undefined) {
    const ca = fromParts(certPath, keyPath, certPem, keyPem, false)
    if (new Date(ca.cert.validTo).getTime() - Date.now() > DAY_MS) {
      if ((fs.statSync(keyPath).mode & 0o077) !== 0) fs.chmodSync(keyPath, 0o600)
      return { _tag: "Loaded", ca }
    }
    // expired (or about to): a fresh one replaces it; trust must be given again
    fs.rmSync(certPath, { force: true })
    fs.rmSync(keyPath, { force: true })
  } else if (keyPem !== undefined) {
    if (!orphanKey) return { _tag: "Wait" }
    // a creator died between writing the key and the certificate
    fs.rmSync(keyPath, { force: true })
  } else if (certPem !== undefined) {
    throw new Error(`${certPath} exists without its key ${keyPath}; remove it to make a new CA`)
  }
  const made = createCaCertificate()
  const suffix = `${process.pid}.${crypto.randomBytes(4).toString("hex")}.tmp`
  const keyTmp = `${keyPath}.${suffix}`
  const certTmp = `${certPath}.${suffix}`
  try {
    fs.writeFileSync(keyTmp, made.keyPem, { mode: 0o600, flag: "wx" })
    fs.writeFileSync(certTmp, made.certPem, { mode: 0o644, flag: "wx" })
    try {
      fs.linkSync(keyTmp, keyPath)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") return { _tag: "Wait" }
      throw e
    }
    fs.renameSync(certTmp, certPath)
  } finally {
    fs.rmSync(keyTmp, { force: true })
    fs.rmSync(certTmp, { force: true })
  }
  return { _tag: "Loaded", ca: fromParts(certPath, keyPath, made.certPem, made.keyPem, true) }
}

/** berth's CA in `dir` (`ca.crt`, `ca.key`), made there on first use. */
export const loadOrCreateCa = Effect.fn("Ca.loadOrCreate")(function* (dir: string) {
  for (let i = 0; ; i++) {
    // after ~2 s of waiting, a lone key file is taken for a crashed creator's
    const orphanKey = i >= 40
    const result = yield* Effect.try({
      try: () => attempt(dir, orphanKey),
      catch: (e) => new CaError({ path: dir, reason: e instanceof Error ? e.message : String(e) })
    })
    if (result._tag === "Loaded") return result.ca
    if (i > 200) return yield* new CaError({ path: dir, reason: "another process kept the CA key without finishing" })
    yield* Effect.sleep(Duration.millis(50))
  }
})
