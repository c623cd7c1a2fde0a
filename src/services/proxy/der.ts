/**
 * A small DER encoder: just the ASN.1 types an X.509 v3 certificate needs. Node can sign and parse certificates but
 * not build them, and berth takes no dependency for that.
 */

const lengthBytes = (n: number): Buffer => {
  if (n < 0x80) return Buffer.from([n])
  const bytes: Array<number> = []
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return Buffer.from([0x80 | bytes.length, ...bytes])
}

/** One TLV with `tag` (a whole identifier octet) around `content`. */
export const tlv = (tag: number, content: Buffer): Buffer =>
  Buffer.concat([Buffer.from([tag]), lengthBytes(content.length), content])

export const sequence = (...items: ReadonlyArray<Buffer>): Buffer => tlv(0x30, Buffer.concat(items))

export const set = (...items: ReadonlyArray<Buffer>): Buffer => tlv(0x31, Buffer.concat(items))

export const boolean = (value: boolean): Buffer => tlv(0x01, Buffer.from([value ? 0xff : 0x00]))

export const nullValue = (): Buffer => Buffer.from([0x05, 0x00])

/** A non-negative INTEGER from big-endian magnitude bytes (a leading zero is added when the top bit is set). */
export const unsignedInteger = (magnitude: Buffer): Buffer => {
  let start = 0
  while (start < magnitude.length - 1 && magnitude[start] === 0) start++
  const bytes = magnitude.subarray(start)
  const content = (bytes[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : Buffer.from(bytes)
  return tlv(0x02, content.length === 0 ? Buffer.from([0]) : content)
}

export const integer = (value: number): Buffer => {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`DER integer out of range: ${value}`)
  const bytes: Array<number> = []
  for (let v = value; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff)
  return unsignedInteger(Buffer.from(bytes.length === 0 ? [0] : bytes))
}

const base128 = (value: number): Array<number> => {
  const out = [value & 0x7f]
  for (let v = Math.floor(value / 128); v > 0; v = Math.floor(v / 128)) out.unshift((v & 0x7f) | 0x80)
  return out
}

/** An OBJECT IDENTIFIER from dotted text, e.g. `"2.5.29.17"`. */
export const oid = (dotted: string): Buffer => {
  const arcs = dotted.split(".").map((a) => Number(a))
  if (arcs.length < 2 || arcs.some((a) => !Number.isSafeInteger(a) || a < 0)) throw new Error(`bad OID ${dotted}`)
  const [first, second, ...rest] = arcs as [number, number, ...Array<number>]
  const bytes = [...base128(first * 40 + second), ...rest.flatMap(base128)]
  return tlv(0x06, Buffer.from(bytes))
}

export const utf8String = (s: string): Buffer => tlv(0x0c, Buffer.from(s, "utf8"))

export const ia5String = (s: string): Buffer => tlv(0x16, Buffer.from(s, "ascii"))

export const octetString = (content: Buffer): Buffer => tlv(0x04, content)

/** A BIT STRING of whole bytes. */
export const bitString = (content: Buffer, unusedBits = 0): Buffer =>
  tlv(0x03, Buffer.concat([Buffer.from([unusedBits]), content]))

/**
 * A BIT STRING of named bits (bit 0 is the most significant bit of the first byte), DER-minimal: trailing zero
 * bits are dropped and counted as unused.
 */
export const namedBits = (bits: ReadonlyArray<number>): Buffer => {
  if (bits.length === 0) return bitString(Buffer.alloc(0))
  const highest = Math.max(...bits)
  const bytes = Buffer.alloc(Math.floor(highest / 8) + 1)
  for (const bit of bits) bytes[Math.floor(bit / 8)]! |= 0x80 >> (bit % 8)
  return bitString(bytes, 7 - (highest % 8))
}

const two = (n: number): string => String(n).padStart(2, "0")

/** RFC 5280: UTCTime through 2049, GeneralizedTime from 2050; always UTC with seconds. */
export const time = (date: Date): Buffer => {
  const y = date.getUTCFullYear()
  const rest = `${two(date.getUTCMonth() + 1)}${two(date.getUTCDate())}${two(date.getUTCHours())}${two(date.getUTCMinutes())}${two(date.getUTCSeconds())}Z`
  return y < 2050 && y >= 1950
    ? tlv(0x17, Buffer.from(`${two(y % 100)}${rest}`, "ascii"))
    : tlv(0x18, Buffer.from(`${String(y).padStart(4, "0")}${rest}`, "ascii"))
}

/** `[n] EXPLICIT` around one encoded value. */
export const explicit = (n: number, value: Buffer): Buffer => tlv(0xa0 | n, value)

/** `[n] IMPLICIT` for a primitive value: the content bytes under a context tag. */
export const implicitPrimitive = (n: number, content: Buffer): Buffer => tlv(0x80 | n, content)

/** One element read back from DER: its tag, the whole encoding and its content. */
export interface Element {
  readonly tag: number
  readonly encoded: Buffer
  readonly content: Buffer
}

/** Reads the element at `offset` (definite lengths only, as DER requires). */
export const readElement = (buf: Buffer, offset = 0): Element => {
  const tag = buf[offset]
  let lengthByte = buf[offset + 1]
  if (tag === undefined || lengthByte === undefined) throw new Error("DER: truncated")
  let start = offset + 2
  let length = lengthByte
  if (lengthByte & 0x80) {
    const count = lengthByte & 0x7f
    if (count === 0 || count > 4) throw new Error("DER: unsupported length")
    length = 0
    for (let i = 0; i < count; i++) {
      lengthByte = buf[start + i]
      if (lengthByte === undefined) throw new Error("DER: truncated")
      length = length * 256 + lengthByte
    }
    start += count
  }
  if (start + length > buf.length) throw new Error("DER: truncated")
  return { tag, encoded: buf.subarray(offset, start + length), content: buf.subarray(start, start + length) }
}

/** The elements inside a constructed element's content. */
export const readChildren = (content: Buffer): ReadonlyArray<Element> => {
  const out: Array<Element> = []
  for (let offset = 0; offset < content.length; ) {
    const element = readElement(content, offset)
    out.push(element)
    offset += element.encoded.length
  }
  return out
}
