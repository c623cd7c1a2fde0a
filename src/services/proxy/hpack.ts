/**
 * HPACK (RFC 7541) for the hand-written HTTP/2 server: a decoder for request header blocks (static and dynamic table,
 * Huffman strings) and an encoder for response and trailer blocks (static table names, no Huffman, no dynamic table:
 * the peer is on loopback, where bytes are cheap and CPU is not).
 *
 * Both sit on the proxy's hot path, so the decoder keeps its own state in fields instead of returning objects, decodes
 * Huffman strings through a table built once at module load (one look-up per nibble) into a reused scratch buffer, and
 * the encoder sizes its one output buffer before it writes.
 */

/** A malformed header block: the connection must end with COMPRESSION_ERROR. */
export class HpackError extends Error {
  readonly _tag = "HpackError"
  constructor(message: string) {
    super(message)
    this.name = "HpackError"
  }
}

/**
 * The decoded list passed the size limit (SETTINGS_MAX_HEADER_LIST_SIZE): the stream is refused, the connection stays
 * (its decoding state is still kept in step).
 */
export class HeaderListTooLarge extends Error {
  readonly _tag = "HeaderListTooLarge"
  constructor(message: string) {
    super(message)
    this.name = "HeaderListTooLarge"
  }
}

// --- the static table (RFC 7541 Appendix A) -------------------------------------------------------------------------

const STATIC: ReadonlyArray<readonly [string, string]> = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""]
]
const STATIC_COUNT = 61
/** By HPACK index (slot 0 unused), so a look-up is one array read. */
const STATIC_NAMES: Array<string> = [""]
const STATIC_VALUES: Array<string> = [""]
for (const [name, value] of STATIC) {
  STATIC_NAMES.push(name)
  STATIC_VALUES.push(value)
}

/** A name's first static index, for literals with an indexed name. */
const NAME_INDEX = new Map<string, number>()
for (let i = STATIC_COUNT; i >= 1; i--) NAME_INDEX.set(STATIC_NAMES[i]!, i)

/** `:status` values with a static entry of their own (indexes 8–14). */
const STATUS_INDEX = new Map<string, number>()
for (let i = 8; i <= 14; i++) STATUS_INDEX.set(STATIC_VALUES[i]!, i)

// --- Huffman (RFC 7541 Appendix B) ----------------------------------------------------------------------------------

/**
 * Code lengths of symbols 0..256 (256 = EOS). The code is canonical (codes assigned in order of length, then symbol),
 * so the codes themselves follow from these.
 */
const HUFFMAN_LENGTHS = Uint8Array.from([
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
  28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6,
  5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23,
  22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22,
  23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26,
  20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27,
  27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27,
  27, 27, 27, 26, 30
])
const EOS = 256

/**
 * Transition entries: the next state times 16 (its row's offset) in bits 0–11, the emitted symbol in bits 12–19, then
 * these flags. Keeping the offset saves a shift on the loop's dependency chain (each look-up waits for the last).
 */
const EMIT = 1 << 20
/** The next state may end the string: it is the root, or 1–7 one bits into a code (a prefix of EOS). */
const ACCEPT = 1 << 21
/** EOS was decoded, which a string must not contain (the whole entry, nothing else set). */
const FAIL = 1 << 22

/**
 * The nibble state machine: for each internal node of the code tree (a state, 0 the root) and each 4-bit input,
 * `HUFFMAN_STEPS[state * 16 + nibble]`. The shortest code has 5 bits, so a nibble completes at most one symbol.
 */
const HUFFMAN_STEPS = (() => {
  const lengths = HUFFMAN_LENGTHS
  // canonical codes: by (length, symbol), each the previous plus one, shifted left to its length
  const order = Array.from({ length: EOS + 1 }, (_, sym) => sym).sort((a, b) => lengths[a]! - lengths[b]! || a - b)
  // children of internal nodes: > 0 another internal node, < 0 the leaf of symbol -(child + 1), 0 not yet set (the
  // root is no one's child)
  const zero: Array<number> = [0]
  const one: Array<number> = [0]
  let code = -1
  let previous = lengths[order[0]!]!
  for (const sym of order) {
    const length = lengths[sym]!
    code = (code + 1) * 2 ** (length - previous)
    previous = length
    let node = 0
    for (let bit = length - 1; bit >= 0; bit--) {
      const side = Math.floor(code / 2 ** bit) % 2 === 1 ? one : zero
      const child = side[node]!
      if (bit === 0) {
        if (child !== 0) throw new Error(`HPACK Huffman table: the code of ${sym} is taken`)
        side[node] = -(sym + 1)
      } else if (child < 0) {
        throw new Error(`HPACK Huffman table: the code of ${sym} runs through a leaf`)
      } else if (child === 0) {
        side[node] = zero.length
        node = zero.length
        zero.push(0)
        one.push(0)
      } else {
        node = child
      }
    }
  }
  const states = zero.length
  // a full tree (two children everywhere) is Kraft's equality: no length is off
  for (let s = 0; s < states; s++) {
    if (zero[s] === 0 || one[s] === 0) throw new Error("HPACK Huffman table: the code is not complete")
  }
  if (states > 256) throw new Error("HPACK Huffman table: more than 256 states")
  const accepting = new Uint8Array(states)
  accepting[0] = 1
  for (let depth = 1, node = 0; depth <= 7; depth++) {
    node = one[node]!
    accepting[node] = 1
  }
  const steps = new Int32Array(states * 16)
  for (let s = 0; s < states; s++) {
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = s
      let emit = 0
      let fail = false
      for (let bit = 3; bit >= 0 && !fail; bit--) {
        const child = ((nibble >> bit) & 1) === 1 ? one[node]! : zero[node]!
        if (child >= 0) {
          node = child
        } else if (-child - 1 === EOS) {
          fail = true
        } else {
          emit = EMIT | ((-child - 1) << 12)
          node = 0
        }
      }
      steps[s * 16 + nibble] = fail ? FAIL : emit | (node * 16) | (accepting[node] === 1 ? ACCEPT : 0)
    }
  }
  return steps
})()

/** node's own latin1 read and write (on Buffer.prototype, undeclared in @types/node): no argument checks to pay. */
interface Latin1 {
  readonly latin1Slice?: (this: Uint8Array, start: number, end: number) => string
  readonly latin1Write?: (this: Uint8Array, s: string, offset: number) => number
}
const { latin1Slice, latin1Write } = Buffer.prototype as Latin1

/** The latin1 string of `src[start, end)`. */
const latin1: (src: Uint8Array, start: number, end: number) => string =
  latin1Slice === undefined
    ? (src, start, end) => Buffer.from(src.buffer, src.byteOffset + start, end - start).toString("latin1")
    : (src, start, end) => latin1Slice.call(src, start, end)

/** Writes `s` as latin1 at `offset` (which has room for it). */
const writeLatin1: (buf: Buffer, s: string, offset: number) => void =
  latin1Write === undefined
    ? (buf, s, offset) => {
        buf.write(s, offset, "latin1")
      }
    : (buf, s, offset) => {
        latin1Write.call(buf, s, offset)
      }

/** Huffman output lands here first, and becomes a string with one latin1 read; grown when a string needs more. */
let scratch = new Uint8Array(4096)

/** The Huffman string in `src[start, end)`. */
const huffmanString = (src: Uint8Array, start: number, end: number): string => {
  // every code has at least 5 bits
  const most = Math.ceil(((end - start) * 8) / 5)
  if (scratch.length < most) scratch = new Uint8Array(Math.max(most, scratch.length * 2))
  const out = scratch
  const steps = HUFFMAN_STEPS
  let n = 0
  let entry = ACCEPT
  for (let i = start; i < end; i++) {
    const octet = src[i]!
    entry = steps[(entry & 0xff0) | (octet >> 4)]!
    if ((entry & EMIT) !== 0) out[n++] = entry >> 12
    else if (entry === FAIL) throw new HpackError("a Huffman string holds EOS")
    entry = steps[(entry & 0xff0) | (octet & 0x0f)]!
    if ((entry & EMIT) !== 0) out[n++] = entry >> 12
    else if (entry === FAIL) throw new HpackError("a Huffman string holds EOS")
  }
  if ((entry & ACCEPT) === 0) throw new HpackError("a Huffman string ends in padding that is no prefix of EOS")
  return latin1(out, 0, n)
}

// --- decoding -------------------------------------------------------------------------------------------------------

/** The largest integer accepted (an index, a length, a table size): more is malformed or an attack. */
const MAX_INTEGER = 0x7fffffff
/** Continuation octets an integer may take: 5 × 7 bits already pass MAX_INTEGER. */
const MAX_CONTINUATIONS = 5
/** Entry size overhead (RFC 7541 4.1). */
const ENTRY_OVERHEAD = 32

const EMPTY = new Uint8Array(0)

export class HpackDecoder {
  /** The SETTINGS_HEADER_TABLE_SIZE this side advertises: the most a size update may ask for. */
  private readonly maxTableSize: number
  /** The dynamic table's current limit (the last size update's, at first `maxTableSize`). */
  private capacity: number
  /** The sum of the entries' sizes. */
  private size = 0
  /** The dynamic table as a ring, newest at `first`, `count` entries going on from there; its length a power of 2. */
  private names: Array<string> = new Array<string>(16).fill("")
  private values: Array<string> = new Array<string>(16).fill("")
  private mask = 15
  private first = 0
  private count = 0
  /** The block being decoded and the read position in it (fields, so reads return one number, no objects). */
  private src: Uint8Array = EMPTY
  private pos = 0
  private end = 0

  constructor(maxTableSize = 4096) {
    this.maxTableSize = maxTableSize
    this.capacity = maxTableSize
  }

  /**
   * Decodes one complete header block (HEADERS + CONTINUATION fragments already joined) into `out` (written from index
   * 0 and cut to the list's length) as flat pairs: out[0]=name, out[1]=value, out[2]=name, ... in order. Strings are
   * latin1 (one char per octet). Throws HpackError for anything malformed (`out` then holds no meaningful list). If the
   * total list size (sum of name.length + value.length + 32 per field) exceeds maxListSize, it still decodes the whole
   * block (the dynamic table must stay in step), then empties `out` and throws HeaderListTooLarge.
   */
  decode(block: Uint8Array, out: Array<string>, maxListSize: number): void {
    this.src = block
    this.pos = 0
    this.end = block.length
    // `out` is written over in place and cut to length at the end: cheaper than emptying it and pushing
    let n = 0
    let listSize = 0
    let fields = false
    try {
      while (this.pos < this.end) {
        const octet = this.src[this.pos]!
        let name: string
        let value: string
        if (octet >= 0x80) {
          // indexed field
          const index = this.integer(0x7f)
          if (index <= STATIC_COUNT) {
            if (index === 0) throw new HpackError("index 0")
            name = STATIC_NAMES[index]!
            value = STATIC_VALUES[index]!
          } else {
            const slot = this.slot(index)
            name = this.names[slot]!
            value = this.values[slot]!
          }
        } else if (octet >= 0x40) {
          // literal with incremental indexing
          const index = this.integer(0x3f)
          name = index === 0 ? this.string() : this.name(index)
          value = this.string()
          this.insert(name, value)
        } else if (octet >= 0x20) {
          // dynamic table size update
          if (fields) throw new HpackError("a dynamic table size update after a field")
          const size = this.integer(0x1f)
          if (size > this.maxTableSize) {
            throw new HpackError(`a dynamic table size update to ${size}, above ${this.maxTableSize}`)
          }
          this.capacity = size
          this.evict(size)
          continue
        } else {
          // literal without indexing (0000) or never indexed (0001): the same to a proxy that does not re-encode them
          const index = this.integer(0x0f)
          name = index === 0 ? this.string() : this.name(index)
          value = this.string()
        }
        fields = true
        listSize += name.length + value.length + ENTRY_OVERHEAD
        // past the limit the stream is refused: keep decoding (the table), but stop keeping the list
        if (listSize <= maxListSize) {
          out[n++] = name
          out[n++] = value
        }
      }
    } finally {
      // the block is the caller's buffer: do not hold it
      this.src = EMPTY
    }
    const tooLarge = listSize > maxListSize
    if (tooLarge) n = 0
    // setting the length is a call into the runtime even when it does not change
    if (out.length !== n) out.length = n
    if (tooLarge) throw new HeaderListTooLarge(`header list of ${listSize} octets, above ${maxListSize}`)
  }

  /** An integer with an N-bit prefix (`mask` = 2^N - 1) at `pos`, which is inside the block. */
  private integer(mask: number): number {
    const src = this.src
    let pos = this.pos
    let value = src[pos++]! & mask
    if (value === mask) {
      let scale = 1
      for (let continuations = 0; ; continuations++) {
        if (pos >= this.end) throw new HpackError("an integer runs past the end of the block")
        if (continuations === MAX_CONTINUATIONS) throw new HpackError("an integer with too many octets")
        const octet = src[pos++]!
        value += (octet & 0x7f) * scale
        if (octet < 0x80) break
        scale *= 128
      }
      if (value > MAX_INTEGER) throw new HpackError("an integer overflows")
    }
    this.pos = pos
    return value
  }

  /** A string literal at `pos`. */
  private string(): string {
    if (this.pos >= this.end) throw new HpackError("a string is missing at the end of the block")
    const src = this.src
    const huffman = src[this.pos]! >= 0x80
    const length = this.integer(0x7f)
    const start = this.pos
    const end = start + length
    if (end > this.end) throw new HpackError("a string runs past the end of the block")
    this.pos = end
    if (huffman) return huffmanString(src, start, end)
    // a one-octet string comes from V8's cache of one-char strings, without the call into node
    return length > 1 ? latin1(src, start, end) : length === 1 ? String.fromCharCode(src[start]!) : ""
  }

  /** The name at a (non-zero) index of either table. */
  private name(index: number): string {
    return index <= STATIC_COUNT ? STATIC_NAMES[index]! : this.names[this.slot(index)]!
  }

  /** The ring slot of dynamic index `index` (> 61). */
  private slot(index: number): number {
    const k = index - STATIC_COUNT - 1
    if (k >= this.count) throw new HpackError(`index ${index} is past the tables`)
    return (this.first + k) & this.mask
  }

  /** Adds an entry, evicting the oldest to make room; one larger than the table empties it (RFC 7541 4.4). */
  private insert(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD
    if (size > this.capacity) {
      this.evict(0)
      return
    }
    this.evict(this.capacity - size)
    if (this.count === this.names.length) this.grow()
    this.first = (this.first - 1) & this.mask
    this.names[this.first] = name
    this.values[this.first] = value
    this.count++
    this.size += size
  }

  /** Evicts the oldest entries until the table's size is at most `limit`. */
  private evict(limit: number): void {
    while (this.size > limit) {
      const slot = (this.first + this.count - 1) & this.mask
      this.size -= this.names[slot]!.length + this.values[slot]!.length + ENTRY_OVERHEAD
      // let the strings go
      this.names[slot] = ""
      this.values[slot] = ""
      this.count--
    }
  }

  /** Doubles the ring, the newest entry at slot 0. */
  private grow(): void {
    const length = this.names.length * 2
    const names = new Array<string>(length).fill("")
    const values = new Array<string>(length).fill("")
    for (let k = 0; k < this.count; k++) {
      const slot = (this.first + k) & this.mask
      names[k] = this.names[slot]!
      values[k] = this.values[slot]!
    }
    this.names = names
    this.values = values
    this.mask = length - 1
    this.first = 0
  }
}

// --- encoding -------------------------------------------------------------------------------------------------------

/** Octets of an integer with an N-bit prefix (`mask` = 2^N - 1). */
const integerLength = (value: number, mask: number): number => {
  if (value < mask) return 1
  let n = 2
  for (let rest = value - mask; rest >= 0x80; rest = Math.floor(rest / 128)) n++
  return n
}

/** Writes an integer with an N-bit prefix (`mask` = 2^N - 1) under the pattern bits `flags`; the position after it. */
const writeInteger = (buf: Buffer, pos: number, value: number, mask: number, flags: number): number => {
  if (value < mask) {
    buf[pos++] = flags | value
    return pos
  }
  buf[pos++] = flags | mask
  let rest = value - mask
  while (rest >= 0x80) {
    buf[pos++] = (rest % 128) | 0x80
    rest = Math.floor(rest / 128)
  }
  buf[pos++] = rest
  return pos
}

/** Strings up to this length are written with a loop: shorter than the call into node's latin1 write costs. */
const SHORT_STRING = 16

/** Writes a raw (non-Huffman) string literal; the position after it. */
const writeString = (buf: Buffer, pos: number, s: string): number => {
  const length = s.length
  pos = writeInteger(buf, pos, length, 0x7f, 0)
  if (length <= SHORT_STRING) {
    for (let i = 0; i < length; i++) buf[pos + i] = s.charCodeAt(i)
  } else {
    writeLatin1(buf, s, pos)
  }
  return pos + length
}

/** Per field of the list being encoded: its `:status` index with STATUS_FIELD set, its name's index, or 0. */
let fieldIndexes = new Uint8Array(64)
const STATUS_FIELD = 0x80

/** Encodes a response or trailer header list (flat pairs, names lower-case latin1, values latin1) as one header block. */
export const encodeHeaders = (fields: ReadonlyArray<string>): Buffer => {
  const pairs = fields.length >> 1
  if (fieldIndexes.length < pairs) fieldIndexes = new Uint8Array(Math.max(pairs, fieldIndexes.length * 2))
  const indexes = fieldIndexes
  let size = 0
  for (let i = 0; i < pairs; i++) {
    const name = fields[2 * i]!
    const value = fields[2 * i + 1]!
    if (name === ":status") {
      const status = STATUS_INDEX.get(value)
      if (status !== undefined) {
        indexes[i] = STATUS_FIELD | status
        size++
        continue
      }
    }
    const index = NAME_INDEX.get(name) ?? 0
    indexes[i] = index
    size +=
      index === 0
        ? 1 + integerLength(name.length, 0x7f) + name.length + integerLength(value.length, 0x7f) + value.length
        : integerLength(index, 0x0f) + integerLength(value.length, 0x7f) + value.length
  }
  const buf = Buffer.allocUnsafe(size)
  let pos = 0
  for (let i = 0; i < pairs; i++) {
    const index = indexes[i]!
    if ((index & STATUS_FIELD) !== 0) {
      buf[pos++] = 0x80 | (index & 0x7f)
      continue
    }
    // literal without indexing: 0000 and a 4-bit name index, or 0 and the name
    if (index === 0) {
      buf[pos++] = 0
      pos = writeString(buf, pos, fields[2 * i]!)
    } else {
      pos = writeInteger(buf, pos, index, 0x0f, 0)
    }
    pos = writeString(buf, pos, fields[2 * i + 1]!)
  }
  return buf
}
