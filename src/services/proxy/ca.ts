/**
 * berth's local certificate authority: made once in a folder (ECDSA P-256, the key 0600), then used to mint one leaf
 * certificate per host name on demand (browsers refuse a `*.localhost` wildcard, so there is no wildcard). Leaves
 * are cached in memory (the least recently used beyond a bound are dropped) and carry the CA in their chain, so a
 * client that trusts the CA trusts every route.
 *
 * The CA is name-constrained (RFC 5280 4.2.1.10, critical): it may vouch only for names under `.localhost` and
 * `.test` and for loopback addresses, and only for TLS servers. Its key sits in a file of the user's home; should it
 * leak, it still cannot vouch for a real site. A CA made before berth added the constraints is made again.
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
  nameConstraints: "2.5.29.30",
  serverAuth: "1.3.6.1.5.5.7.3.1"
} as const

const DAY_MS = 86_400_000
/** The CA lives ten years; a leaf 397 days, the longest browsers accept (counted from its notBefore). */
export const CA_VALIDITY_DAYS = 3650
export const LEAF_VALIDITY_DAYS = 397
/** Clocks drift; certificates start a little in the past. */
const BACKDATE_MS = 3_600_000
/**
 * Leaves kept at once (each costs about 13 KiB with its TLS context): far more than the routes of a busy machine,
 * and a bound however many names clients ask for. Past it a leaf is minted again, about a millisecond.
 */
export const LEAF_CACHE_LIMIT = 256

/**
 * The DNS trees berth's CA may vouch for: `localhost` (RFC 6761, where routes live) and `test` (RFC 6761, reserved
 * for testing; a `[project] domain` under it works over HTTPS). No public DNS serves either, so no real site is
 * under them. A project domain outside them is routed over plain HTTP, but gets no certificate.
 */
export const PERMITTED_DNS: ReadonlyArray<string> = ["localhost", "test"]

/** Whether berth's CA may vouch for `host` (lower case): a plain DNS name under one of the permitted trees. */
export const isPermittedName = (host: string): boolean =>
  /^[a-z0-9.-]+$/.test(host) &&
  !host.includes("..") &&
  PERMITTED_DNS.some((tree) => host === tree || host.endsWith(`.${tree}`))

/** Loopback only, in case a leaf ever carries an address: 127.0.0.0/8 and ::1/128 (address, then mask). */
const PERMITTED_IPS: ReadonlyArray<Buffer> = [
  Buffer.from([127, 0, 0, 0, 255, 0, 0, 0]),
  Buffer.concat([Buffer.alloc(15), Buffer.from([1]), Buffer.alloc(16, 0xff)])
]

/**
 * NameConstraints with permitted subtrees only: dNSName [2] and iPAddress [7]. Every name type listed is confined;
 * the addresses are listed so that a leaf naming a public address fails as well.
 */
const nameConstraints = (): Buffer =>
  der.sequence(
    der.tlv(
      0xa0,
      Buffer.concat([
        ...PERMITTED_DNS.map((tree) => der.sequence(der.implicitPrimitive(2, Buffer.from(tree, "ascii")))),
        ...PERMITTED_IPS.map((range) => der.sequence(der.implicitPrimitive(7, range)))
      ])
    )
  )

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
      extension(OID.subjectKeyIdentifier, false, der.octetString(ski)),
      extension(OID.nameConstraints, true, nameConstraints()),
      // TLS servers only: name constraints say nothing of e-mail or code signing
      extension(OID.extKeyUsage, false, der.sequence(der.oid(OID.serverAuth)))
    ],
    signingKey: privateKey
  })
  return { certPem: cert.pem, keyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString() }
}

const tbsFields = (certDer: Buffer): ReadonlyArray<der.Element> => {
  const [tbs] = der.readChildren(der.readElement(certDer).content)
  if (tbs === undefined) throw new Error("not a certificate")
  return der.readChildren(tbs.content)
}

/** The subject Name of a certificate, exactly as encoded (a leaf's issuer must match it byte for byte). */
const subjectOf = (certDer: Buffer): Buffer => {
  const fields = tbsFields(certDer)
  // version [0] is present in v3 certificates, shifting every field by one
  const offset = fields[0]?.tag === 0xa0 ? 1 : 0
  const subject = fields[offset + 4]
  if (subject === undefined || subject.tag !== 0x30) throw new Error("certificate has no subject")
  return subject.encoded
}

/** Whether a certificate carries a critical nameConstraints extension. */
export const hasNameConstraints = (certDer: Buffer): boolean => {
  const wanted = der.oid(OID.nameConstraints)
  const extensions = tbsFields(certDer).find((f) => f.tag === 0xa3)
  if (extensions === undefined) return false
  const [list] = der.readChildren(extensions.content)
  return der.readChildren(list?.content ?? Buffer.alloc(0)).some((ext) => {
    const [id, critical] = der.readChildren(ext.content)
    return id?.encoded.equals(wanted) === true && critical?.tag === 0x01 && critical.content[0] !== 0
  })
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
  /** Where the CA this load replaced (one without name constraints) was set aside; its key is deleted. */
  readonly replaced: string | undefined
  /** The leaf for `hostname` (lower case), minted on first use and cached; throws outside `isPermittedName`. */
  readonly leaf: (hostname: string) => Leaf
  /** A TLS context serving the leaf for `hostname` with the CA in its chain; cached per host name. */
  readonly leafFor: (hostname: string) => tls.SecureContext
  /** How many leaves the cache holds now. */
  readonly cachedLeaves: () => number
}

const fromParts = (
  certPath: string,
  keyPath: string,
  certPem: string,
  keyPem: string,
  created: boolean,
  replaced?: string
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
    if (cached !== undefined && cached.leaf.notAfter.getTime() - Date.now() > 30 * DAY_MS) {
      // most recently used last: the first key is the one to drop
      leaves.delete(name)
      leaves.set(name, cached)
      return cached
    }
    // the CA's constraints would make such a leaf fail anyway; never mint one
    if (!isPermittedName(name)) throw new Error(`${hostname} is outside the names berth's CA may vouch for`)
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
    replaced,
    leaf: (hostname) => entry(hostname).leaf,
    leafFor: (hostname) => {
      const e = entry(hostname)
      e.context ??= tls.createSecureContext({ key: e.leaf.keyPem, cert: e.leaf.certPem + certPem })
      return e.context
    },
    cachedLeaves: () => leaves.size
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
 * starting at once agree on one CA; an expired CA is replaced, and so is one without name constraints.
 */
const attempt = (dir: string, orphanKey: boolean): Attempt => {
  const certPath = join(dir, "ca.crt")
  const keyPath = join(dir, "ca.key")
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const keyPem = readIfThere(keyPath)
  const certPem = readIfThere(certPath)
  let replaced: string | undefined
  if (keyPem !== undefined && certPem !== undefined) {
    const ca = fromParts(certPath, keyPath, certPem, keyPem, false)
    const constrained = hasNameConstraints(ca.cert.raw)
    if (constrained && new Date(ca.cert.validTo).getTime() - Date.now() > DAY_MS) {
      if ((fs.statSync(keyPath).mode & 0o077) !== 0) fs.chmodSync(keyPath, 0o600)
      return { _tag: "Loaded", ca }
    }
    if (!constrained) {
      // Made before the constraints: trust stores hold it, and its key could vouch for any site as long as it
      // exists. The key goes and a constrained CA takes its place (trust must be given again); the certificate is
      // set aside so it can still be found and taken out of the stores. The exclusive link is the claim: a second
      // process replacing the same CA waits for the first.
      replaced = join(dir, `retired-${ca.fingerprint.slice(0, 16)}.crt`)
      try {
        fs.linkSync(certPath, replaced)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
        // a replacer that died half-way left the claim behind
        if (!orphanKey) return { _tag: "Wait" }
      }
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
  return { _tag: "Loaded", ca: fromParts(certPath, keyPath, made.certPem, made.keyPem, true, replaced) }
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
