import * as http2 from "node:http2"
import * as net from "node:net"
import { describe, expect, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import { encodeHeaders, HeaderListTooLarge, HpackDecoder, HpackError } from "../../src/services/proxy/hpack.js"

type Field = readonly [string, string]

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ""), "hex")

const decode = (decoder: HpackDecoder, block: Uint8Array, maxListSize = Number.MAX_SAFE_INTEGER): Array<string> => {
  const out: Array<string> = []
  decoder.decode(block, out, maxListSize)
  return out
}

const flat = (fields: ReadonlyArray<Field>): Array<string> => fields.flat()

// --- building blocks by the RFC's rules -----------------------------------------------------------------------------

/** An integer with an N-bit prefix under the pattern bits `flags` (RFC 7541 5.1). */
const integer = (value: number, prefix: number, flags = 0): Array<number> => {
  const max = 2 ** prefix - 1
  if (value < max) return [flags | value]
  const out = [flags | max]
  let rest = value - max
  while (rest >= 128) {
    out.push((rest % 128) | 128)
    rest = Math.floor(rest / 128)
  }
  out.push(rest)
  return out
}

const rawString = (s: string): Array<number> => [...integer(s.length, 7), ...Buffer.from(s, "latin1")]
const huffmanString = (s: string): Array<number> => {
  const octets = huffman(s)
  return [...integer(octets.length, 7, 0x80), ...octets]
}
const huffmanOctets = (octets: ReadonlyArray<number>): Array<number> => [...integer(octets.length, 7, 0x80), ...octets]

/** A literal without indexing, new name "n", whose value is the given string literal octets. */
const valueLiteral = (value: ReadonlyArray<number>): Buffer => Buffer.from([0x00, ...rawString("n"), ...value])

/** The dynamic table, newest first, read with indexed fields (which leave it as it is). */
const dynamicTable = (decoder: HpackDecoder): Array<Field> => {
  const entries: Array<Field> = []
  for (let index = 62; ; index++) {
    let out: Array<string>
    try {
      out = decode(decoder, Buffer.from(integer(index, 7, 0x80)))
    } catch (error) {
      if (error instanceof HpackError) return entries
      throw error
    }
    entries.push([out[0]!, out[1]!])
  }
}

const tableSize = (entries: ReadonlyArray<Field>): number =>
  entries.reduce((sum, [name, value]) => sum + name.length + value.length + 32, 0)

// --- the Huffman code, derived here on its own (RFC 1951's way of assigning canonical codes) ------------------------

/** Code lengths of symbols 0..256 (RFC 7541 Appendix B). */
const LENGTHS: ReadonlyArray<number> = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
  28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6,
  5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23,
  22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22,
  23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26,
  20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27,
  27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27,
  27, 27, 27, 26, 30
]
const EOS = 256

const CODES: ReadonlyArray<number> = (() => {
  const count = new Array<number>(31).fill(0)
  for (const length of LENGTHS) count[length]!++
  const next = new Array<number>(31).fill(0)
  for (let bits = 1, code = 0; bits <= 30; bits++) {
    code = (code + count[bits - 1]!) * 2
    next[bits] = code
  }
  return LENGTHS.map((length) => next[length]!++)
})()

const bitsOf = (sym: number): string => CODES[sym]!.toString(2).padStart(LENGTHS[sym]!, "0")

/** Bits (a string of 0 and 1) as octets, the last padded with `pad`. */
const octetsOf = (bits: string, pad = "1"): Array<number> => {
  const padded = bits + pad.repeat((8 - (bits.length % 8)) % 8)
  const out: Array<number> = []
  for (let i = 0; i < padded.length; i += 8) out.push(Number.parseInt(padded.slice(i, i + 8), 2))
  return out
}

const huffman = (s: string): Array<number> =>
  octetsOf(Array.from(Buffer.from(s, "latin1"), (octet) => bitsOf(octet)).join(""))

// --- RFC 7541 Appendix C --------------------------------------------------------------------------------------------

interface Step {
  readonly block: string
  readonly list: ReadonlyArray<Field>
  /** newest first */
  readonly table: ReadonlyArray<Field>
  readonly size: number
}

const series = (decoder: HpackDecoder, steps: ReadonlyArray<Step>): void => {
  for (const step of steps) {
    expect(decode(decoder, hex(step.block))).toEqual(flat(step.list))
    const table = dynamicTable(decoder)
    expect(table).toEqual(step.table)
    expect(tableSize(table)).toBe(step.size)
  }
}

const REQUEST_1: ReadonlyArray<Field> = [
  [":method", "GET"],
  [":scheme", "http"],
  [":path", "/"],
  [":authority", "www.example.com"]
]
const REQUEST_2: ReadonlyArray<Field> = [...REQUEST_1, ["cache-control", "no-cache"]]
const REQUEST_3: ReadonlyArray<Field> = [
  [":method", "GET"],
  [":scheme", "https"],
  [":path", "/index.html"],
  [":authority", "www.example.com"],
  ["custom-key", "custom-value"]
]
const REQUEST_TABLES: ReadonlyArray<ReadonlyArray<Field>> = [
  [[":authority", "www.example.com"]],
  [
    ["cache-control", "no-cache"],
    [":authority", "www.example.com"]
  ],
  [
    ["custom-key", "custom-value"],
    ["cache-control", "no-cache"],
    [":authority", "www.example.com"]
  ]
]
const requests = (blocks: ReadonlyArray<string>): Array<Step> =>
  [REQUEST_1, REQUEST_2, REQUEST_3].map((list, i) => ({
    block: blocks[i]!,
    list,
    table: REQUEST_TABLES[i]!,
    size: [57, 110, 164][i]!
  }))

const DATE_1 = "Mon, 21 Oct 2013 20:13:21 GMT"
const DATE_2 = "Mon, 21 Oct 2013 20:13:22 GMT"
const COOKIE = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
const responses = (blocks: ReadonlyArray<string>): Array<Step> => [
  {
    block: blocks[0]!,
    list: [
      [":status", "302"],
      ["cache-control", "private"],
      ["date", DATE_1],
      ["location", "https://www.example.com"]
    ],
    table: [
      ["location", "https://www.example.com"],
      ["date", DATE_1],
      ["cache-control", "private"],
      [":status", "302"]
    ],
    size: 222
  },
  {
    block: blocks[1]!,
    list: [
      [":status", "307"],
      ["cache-control", "private"],
      ["date", DATE_1],
      ["location", "https://www.example.com"]
    ],
    table: [
      [":status", "307"],
      ["location", "https://www.example.com"],
      ["date", DATE_1],
      ["cache-control", "private"]
    ],
    size: 222
  },
  {
    block: blocks[2]!,
    list: [
      [":status", "200"],
      ["cache-control", "private"],
      ["date", DATE_2],
      ["location", "https://www.example.com"],
      ["content-encoding", "gzip"],
      ["set-cookie", COOKIE]
    ],
    table: [
      ["set-cookie", COOKIE],
      ["content-encoding", "gzip"],
      ["date", DATE_2]
    ],
    size: 215
  }
]

describe("HPACK: RFC 7541 Appendix C", () => {
  it("C.1: integers with a prefix (10 and 1337 in 5 bits, read as dynamic table size updates)", () => {
    expect(integer(10, 5)).toEqual([0x0a])
    expect(integer(1337, 5)).toEqual([0x1f, 0x9a, 0x0a])
    decode(new HpackDecoder(10), Buffer.from([0x20 | 0x0a]))
    expect(() => decode(new HpackDecoder(9), Buffer.from([0x20 | 0x0a]))).toThrow(HpackError)
    decode(new HpackDecoder(1337), hex("3f9a0a"))
    expect(() => decode(new HpackDecoder(1336), hex("3f9a0a"))).toThrow(HpackError)
  })

  it("C.2.1: literal with indexing", () => {
    const decoder = new HpackDecoder()
    series(decoder, [
      {
        block: "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        list: [["custom-key", "custom-header"]],
        table: [["custom-key", "custom-header"]],
        size: 55
      }
    ])
  })

  it("C.2.2: literal without indexing", () => {
    series(new HpackDecoder(), [
      { block: "040c 2f73 616d 706c 652f 7061 7468", list: [[":path", "/sample/path"]], table: [], size: 0 }
    ])
  })

  it("C.2.3: literal never indexed", () => {
    series(new HpackDecoder(), [
      { block: "1008 7061 7373 776f 7264 0673 6563 7265 74", list: [["password", "secret"]], table: [], size: 0 }
    ])
  })

  it("C.2.4: indexed field", () => {
    series(new HpackDecoder(), [{ block: "82", list: [[":method", "GET"]], table: [], size: 0 }])
  })

  it("C.3: three requests without Huffman on one decoder", () => {
    series(
      new HpackDecoder(),
      requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65"
      ])
    )
  })

  it("C.4: the same requests with Huffman", () => {
    series(
      new HpackDecoder(),
      requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"
      ])
    )
  })

  // in C.5 and C.6 the encoder's table holds 256 octets (SETTINGS_HEADER_TABLE_SIZE = 256), causing evictions
  it("C.5: three responses without Huffman, a 256-octet table", () => {
    series(
      new HpackDecoder(256),
      responses([
        `4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d
         546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d`,
        "4803 3330 37c1 c0bf",
        `88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f
         6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b
         2076 6572 7369 6f6e 3d31`
      ])
    )
  })

  it("C.6: the same responses with Huffman", () => {
    series(
      new HpackDecoder(256),
      responses([
        `4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7
         8f0b 97c8 e9ae 82ae 43d3`,
        "4883 640e ffc1 c0bf",
        `88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335
         dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07`
      ])
    )
  })

  it("the Appendix C Huffman strings, encoded here and decoded by the decoder", () => {
    const strings: ReadonlyArray<Field> = [
      ["www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"],
      ["no-cache", "a8eb10649cbf"],
      ["custom-key", "25a849e95ba97d7f"],
      ["custom-value", "25a849e95bb8e8b4bf"],
      ["302", "6402"],
      ["307", "640eff"],
      ["private", "aec3771a4b"],
      [DATE_1, "d07abe941054d444a8200595040b8166e082a62d1bff"],
      ["https://www.example.com", "9d29ad171863c78f0b97c8e9ae82ae43d3"],
      ["gzip", "9bd9ab"],
      [COOKIE, "94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"]
    ]
    const decoder = new HpackDecoder()
    for (const [text, code] of strings) {
      expect(Buffer.from(huffman(text)).toString("hex")).toBe(code)
      expect(decode(decoder, valueLiteral(huffmanOctets([...hex(code)])))).toEqual(["n", text])
    }
  })
})

describe("HPACK: the Huffman code", () => {
  it("has lengths that satisfy Kraft's equality (sum of 2^-length is exactly 1)", () => {
    expect(LENGTHS).toHaveLength(257)
    expect(LENGTHS.reduce((sum, length) => sum + 2n ** BigInt(30 - length), 0n)).toBe(2n ** 30n)
  })

  it("derives the RFC's codes", () => {
    const known: ReadonlyArray<readonly [number, number, number]> = [
      [0, 0x1ff8, 13],
      [1, 0x7fffd8, 23],
      [10, 0x3ffffffc, 30],
      [32, 0x14, 6],
      [48, 0x0, 5],
      [97, 0x3, 5],
      [65, 0x21, 6],
      [92, 0x7fff0, 19],
      [128, 0xfffe6, 20],
      [194, 0xfffeb, 20],
      [203, 0x7ffffde, 27],
      [255, 0x3ffffee, 26],
      [EOS, 0x3fffffff, 30]
    ]
    for (const [sym, code, length] of known) {
      expect([sym, CODES[sym], LENGTHS[sym]]).toEqual([sym, code, length])
      // the decoder's own table agrees (EOS aside, which it must refuse)
      if (sym !== EOS) {
        const bits = code.toString(2).padStart(length, "0")
        expect(decode(new HpackDecoder(), valueLiteral(huffmanOctets(octetsOf(bits))))).toEqual([
          "n",
          String.fromCharCode(sym)
        ])
      }
    }
  })

  it("decodes every symbol 0..255 from its code padded with ones, alone and all in one string", () => {
    const decoder = new HpackDecoder()
    for (let sym = 0; sym < 256; sym++) {
      expect(decode(decoder, valueLiteral(huffmanOctets(octetsOf(bitsOf(sym)))))).toEqual([
        "n",
        String.fromCharCode(sym)
      ])
    }
    let all = ""
    for (let sym = 0; sym < 256; sym++) all += String.fromCharCode(sym)
    expect(decode(decoder, valueLiteral(huffmanString(all)))).toEqual(["n", all])
  })

  it("decodes any latin1 string, long ones included (the scratch buffer grows)", () => {
    const decoder = new HpackDecoder()
    const long = "a".repeat(20_000)
    expect(decode(decoder, valueLiteral(huffmanString(long)))).toEqual(["n", long])
    fc.assert(
      fc.property(fc.string({ unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)) }), (s) => {
        expect(decode(decoder, valueLiteral(huffmanString(s)))).toEqual(["n", s])
      })
    )
  })
})

describe("HPACK: the decoder", () => {
  it("indexes the static table from 1 to 61 and the dynamic table from 62, newest first", () => {
    const decoder = new HpackDecoder()
    expect(decode(decoder, hex("81 bd 90 8e"))).toEqual([
      ":authority",
      "",
      "www-authenticate",
      "",
      "accept-encoding",
      "gzip, deflate",
      ":status",
      "500"
    ])
    decode(
      decoder,
      Buffer.from([0x40, ...rawString("a"), ...rawString("1"), 0x40, ...rawString("b"), ...rawString("2")])
    )
    expect(decode(decoder, hex("be bf"))).toEqual(["b", "2", "a", "1"])
    // a literal's name from the dynamic table
    expect(decode(decoder, Buffer.from([0x0f, 63 - 15, ...rawString("3")]))).toEqual(["a", "3"])
  })

  it("reads strings whose length takes more than the prefix, in a Uint8Array that is no Buffer", () => {
    const name = "x".repeat(127)
    const value = "y".repeat(1000)
    const block = [0x40, ...rawString(name), ...rawString(value)]
    const backing = new Uint8Array(block.length + 10)
    backing.set(block, 5)
    const decoder = new HpackDecoder()
    expect(decode(decoder, backing.subarray(5, 5 + block.length))).toEqual([name, value])
    expect(dynamicTable(decoder)).toEqual([[name, value]])
  })

  it("reads one-octet and empty strings, raw and Huffman", () => {
    expect(
      decode(new HpackDecoder(), Buffer.from([0x00, ...rawString("a"), ...rawString(""), 0x00, 0x80, 0x81, 0x07]))
    ).toEqual(["a", "", "", "0"])
  })

  it("evicts the oldest entries by size, and an entry larger than the table empties it", () => {
    const decoder = new HpackDecoder(100)
    const add = (name: string, value: string) =>
      decode(decoder, Buffer.from([0x40, ...rawString(name), ...rawString(value)]))
    add("a", "1".repeat(20)) // 53
    add("b", "2".repeat(10)) // 43: 96 in all
    expect(dynamicTable(decoder).map(([name]) => name)).toEqual(["b", "a"])
    add("c", "3") // 34: a goes
    expect(dynamicTable(decoder)).toEqual([
      ["c", "3"],
      ["b", "2".repeat(10)]
    ])
    add("d", "4".repeat(68)) // 101 > 100: the table empties and d is not added
    expect(dynamicTable(decoder)).toEqual([])
    add("e", "5".repeat(67)) // exactly 100 fits
    expect(dynamicTable(decoder)).toEqual([["e", "5".repeat(67)]])
  })

  it("takes an indexed name before the insertion that evicts its entry", () => {
    const decoder = new HpackDecoder(64)
    decode(decoder, Buffer.from([0x40, ...rawString("name"), ...rawString("v")])) // 37
    // literal with indexing, name = index 62 (the entry this insertion evicts)
    expect(decode(decoder, Buffer.from([0x40 | 62, ...rawString("w")]))).toEqual(["name", "w"])
    expect(dynamicTable(decoder)).toEqual([["name", "w"]])
  })

  it("applies dynamic table size updates at the start of a block, several in a row", () => {
    const decoder = new HpackDecoder()
    for (const value of ["a", "b", "c"]) decode(decoder, Buffer.from([0x40, ...rawString(value), ...rawString("")]))
    expect(dynamicTable(decoder)).toHaveLength(3)
    // to 66 (two entries of 33): c and b stay
    decode(decoder, Buffer.from(integer(66, 5, 0x20)))
    expect(dynamicTable(decoder).map(([name]) => name)).toEqual(["c", "b"])
    // to 0 then back to 4096, then a field: empty, and new entries go in again
    expect(decode(decoder, Buffer.from([...integer(0, 5, 0x20), ...integer(4096, 5, 0x20), 0x82]))).toEqual([
      ":method",
      "GET"
    ])
    expect(dynamicTable(decoder)).toEqual([])
    decode(decoder, Buffer.from([0x40, ...rawString("d"), ...rawString("")]))
    expect(dynamicTable(decoder)).toEqual([["d", ""]])
    // the limit set by an update holds for later insertions
    decode(decoder, Buffer.from(integer(40, 5, 0x20)))
    decode(decoder, Buffer.from([0x40, ...rawString("e"), ...rawString("")]))
    expect(dynamicTable(decoder)).toEqual([["e", ""]])
  })

  it("holds many entries in order (its ring grows)", () => {
    const decoder = new HpackDecoder(65536)
    const block: Array<number> = []
    for (let i = 0; i < 600; i++) block.push(0x40, ...rawString("k"), ...rawString(String(i)))
    decode(decoder, Buffer.from(block))
    const table = dynamicTable(decoder)
    expect(table).toHaveLength(600)
    expect(table[0]).toEqual(["k", "599"])
    expect(table[599]).toEqual(["k", "0"])
  })

  it("accepts integers up to 2^31 - 1", () => {
    const max = 2 ** 31 - 1
    decode(new HpackDecoder(max), Buffer.from(integer(max, 5, 0x20)))
    expect(() => decode(new HpackDecoder(max), Buffer.from(integer(max + 1, 5, 0x20)))).toThrow(HpackError)
  })

  const malformed: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
    ["index 0", [0x80]],
    ["an index past the static table, the dynamic one empty", [0x80 | 62]],
    ["a literal's name index past the tables", [0x40 | 62, ...rawString("v")]],
    ["a never-indexed literal's name index past the tables", [0x1f, 62 - 15, ...rawString("v")]],
    ["a truncated integer (prefix full, nothing after)", [0xff]],
    ["a truncated integer (continuation bit set at the end)", [0xff, 0x80]],
    ["a string length past the end", [0x00, 0x05, 0x61, 0x62]],
    ["a Huffman string past the end", [0x00, ...rawString("n"), 0x83, 0xff]],
    ["a name missing", [0x00]],
    ["a value missing", [0x01]],
    ["a value length truncated", [0x01, 0x7f]],
    [
      "Huffman padding longer than 7 bits",
      [0x00, ...rawString("n"), ...huffmanOctets(octetsOf(`${bitsOf(97)}${"1".repeat(11)}`))]
    ],
    ["Huffman padding of a whole octet", [0x00, ...rawString("n"), ...huffmanOctets([0xff])]],
    ["Huffman padding not all ones", [0x00, ...rawString("n"), ...huffmanOctets(octetsOf(bitsOf(97), "0"))]],
    [
      "EOS inside a Huffman string",
      [0x00, ...rawString("n"), ...huffmanOctets(octetsOf(bitsOf(97) + bitsOf(EOS) + bitsOf(98)))]
    ],
    [
      "EOS at the end of a Huffman string",
      [0x00, ...rawString("n"), ...huffmanOctets(octetsOf(bitsOf(97) + bitsOf(EOS)))]
    ],
    ["a dynamic table size update above the maximum", integer(4097, 5, 0x20)],
    ["a dynamic table size update after a field", [0x82, 0x20]],
    ["an integer that overflows 2^31", [0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]],
    ["an integer with more than 5 continuation octets", [0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]]
  ]
  for (const [what, block] of malformed) {
    it(`refuses ${what}`, () => {
      expect(() => decode(new HpackDecoder(), Buffer.from(block))).toThrow(HpackError)
    })
  }

  it("never fails on random octets with anything but HpackError (or HeaderListTooLarge)", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 8 }), (blocks) => {
        const decoder = new HpackDecoder()
        for (const block of blocks) {
          try {
            decode(decoder, block, 4096)
          } catch (error) {
            if (!(error instanceof HpackError || error instanceof HeaderListTooLarge)) throw error
          }
        }
      }),
      { numRuns: 2000 }
    )
  })

  it("decodes a whole block past the list size limit, throws HeaderListTooLarge, and stays in step", () => {
    const decoder = new HpackDecoder()
    const out = ["left", "over"]
    // the C.3 first request: 42 + 43 + 38 + 57 = 180 octets of list, its :authority added to the table
    expect(() => decoder.decode(hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"), out, 179)).toThrow(
      HeaderListTooLarge
    )
    expect(out).toEqual([])
    expect(dynamicTable(decoder)).toEqual([[":authority", "www.example.com"]])
    // the next request refers to it
    expect(decode(decoder, hex("8286 84be 5808 6e6f 2d63 6163 6865"), 4096)).toEqual(flat(REQUEST_2))
    // exactly at the limit passes
    expect(decode(decoder, hex("8286 84bf"), 180)).toEqual(flat(REQUEST_1))
  })

  it("is no HpackError when the list is too large", () => {
    try {
      decode(new HpackDecoder(), hex("82"), 10)
      expect.unreachable()
    } catch (error) {
      expect(error).toBeInstanceOf(HeaderListTooLarge)
      expect(error).not.toBeInstanceOf(HpackError)
      expect((error as HeaderListTooLarge)._tag).toBe("HeaderListTooLarge")
    }
  })
})

// --- the encoder ----------------------------------------------------------------------------------------------------

const latin1Char = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }),
  fc.integer({ min: 0x80, max: 0xff }),
  fc.constant(0x09)
)
const latin1Text = (maxLength: number) => fc.string({ unit: latin1Char.map((c) => String.fromCharCode(c)), maxLength })

describe("HPACK: the encoder", () => {
  it("writes :status as an indexed field when the static table has it, else a literal with name 8", () => {
    expect([...encodeHeaders([":status", "200"])]).toEqual([0x88])
    expect([...encodeHeaders([":status", "204", ":status", "206", ":status", "304"])]).toEqual([0x89, 0x8a, 0x8b])
    expect([...encodeHeaders([":status", "400", ":status", "404", ":status", "500"])]).toEqual([0x8c, 0x8d, 0x8e])
    expect(encodeHeaders([":status", "302"]).toString("hex")).toBe("0803333032")
  })

  it("writes other fields as literals without indexing, by static name index or new name, no Huffman", () => {
    expect(encodeHeaders(["content-type", "text/html"]).toString("hex")).toBe(
      `0f10 09 ${Buffer.from("text/html").toString("hex")}`.replace(/\s/g, "")
    )
    expect(encodeHeaders(["date", "x"]).toString("hex")).toBe("0f120178")
    expect(encodeHeaders(["age", "1"]).toString("hex")).toBe("0f060131")
    // :method's first index is 2, not 3
    expect(encodeHeaders([":method", "PUT"]).toString("hex")).toBe("0203505554")
    expect(encodeHeaders(["x-a", "b"]).toString("hex")).toBe("0003782d610162")
    expect([...encodeHeaders([])]).toEqual([])
  })

  it("round-trips through the decoder, leaving its table empty", () => {
    const decoder = new HpackDecoder()
    const name = fc.oneof(
      fc.constantFrom(":status", "content-type", "set-cookie", "www-authenticate", "date", "x-request-id"),
      latin1Text(200).map((s) => s.toLowerCase())
    )
    const value = fc.oneof(fc.constantFrom("200", "204", "304", "500", "302", "999", ""), latin1Text(300))
    fc.assert(
      fc.property(fc.array(fc.tuple(name, value), { maxLength: 20 }), (fields) => {
        expect(decode(decoder, encodeHeaders(flat(fields)))).toEqual(flat(fields))
      }),
      { numRuns: 500 }
    )
    expect(dynamicTable(decoder)).toEqual([])
  })
})

// --- against nghttp2 (node:http2) -----------------------------------------------------------------------------------

const PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
const HEADERS = 1
const SETTINGS = 4
const CONTINUATION = 9
const END_STREAM = 0x1
const END_HEADERS = 0x4
const PADDED = 0x8
const PRIORITY = 0x20
const ACK = 0x1
/** The client's SETTINGS_MAX_FRAME_SIZE (the default: it sends none other). */
const MAX_FRAME = 16384

const frame = (type: number, flags: number, stream: number, payload: Uint8Array): Buffer => {
  const head = Buffer.alloc(9)
  head.writeUIntBE(payload.length, 0, 3)
  head[3] = type
  head[4] = flags
  head.writeUInt32BE(stream, 5)
  return Buffer.concat([head, payload])
}

/** A response head as HEADERS and CONTINUATION frames, ending the stream. */
const headersFrames = (stream: number, block: Buffer): Array<Buffer> => {
  const frames: Array<Buffer> = []
  for (let at = 0; at === 0 || at < block.length; at += MAX_FRAME) {
    const last = at + MAX_FRAME >= block.length
    const type = at === 0 ? HEADERS : CONTINUATION
    const flags = (at === 0 ? END_STREAM : 0) | (last ? END_HEADERS : 0)
    frames.push(frame(type, flags, stream, block.subarray(at, at + MAX_FRAME)))
  }
  return frames
}

interface Request {
  readonly fields: ReadonlyArray<Field>
  readonly status: number
}

interface Exchanged {
  readonly port: number
  /** by request: the list the server decoded */
  readonly decoded: ReadonlyArray<ReadonlyArray<string>>
  /** by request: the headers node's client read from the server's encodeHeaders block */
  readonly responses: ReadonlyArray<http2.IncomingHttpHeaders>
  /** the request header blocks as they came, in order */
  readonly blocks: ReadonlyArray<Buffer>
  readonly continuations: number
}

/**
 * Sends the requests from node's client to a raw h2c peer on loopback, which decodes every header block in order with
 * one HpackDecoder and answers each request with its own fields and status through encodeHeaders.
 */
const exchange = async (requests: ReadonlyArray<Request>, tableSize?: number): Promise<Exchanged> => {
  const decoded = new Map<number, Array<string>>()
  const blocks: Array<Buffer> = []
  let continuations = 0
  const sockets = new Set<net.Socket>()
  let fail: (error: unknown) => void = () => {}
  const failed = new Promise<never>((_, reject) => {
    fail = reject
  })
  // a failure after the race (a reset as everything closes) is no unhandled rejection
  failed.catch(() => {})
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("error", fail)
    const decoder = new HpackDecoder()
    let pending = Buffer.alloc(0)
    let preface = false
    let fragments: Array<Buffer> = []
    let stream = 0
    // a client reads the server's SETTINGS first; SETTINGS_HEADER_TABLE_SIZE (1) has nghttp2 send a size update
    const settings = Buffer.alloc(tableSize === undefined ? 0 : 6)
    if (tableSize !== undefined) {
      settings.writeUInt16BE(1, 0)
      settings.writeUInt32BE(tableSize, 2)
    }
    socket.write(frame(SETTINGS, 0, 0, settings))
    socket.on("data", (chunk: Buffer) => {
      try {
        pending = Buffer.concat([pending, chunk])
        if (!preface) {
          if (pending.length < PREFACE.length) return
          if (pending.toString("latin1", 0, PREFACE.length) !== PREFACE) throw new Error("no client preface")
          pending = pending.subarray(PREFACE.length)
          preface = true
        }
        while (pending.length >= 9) {
          const length = pending.readUIntBE(0, 3)
          if (pending.length < 9 + length) break
          const type = pending[3]!
          const flags = pending[4]!
          const id = pending.readUInt32BE(5) & 0x7fffffff
          let payload = pending.subarray(9, 9 + length)
          pending = pending.subarray(9 + length)
          if (type === SETTINGS && (flags & ACK) === 0) socket.write(frame(SETTINGS, ACK, 0, Buffer.alloc(0)))
          if (type === HEADERS) {
            if ((flags & PADDED) !== 0) payload = payload.subarray(1, payload.length - payload[0]!)
            if ((flags & PRIORITY) !== 0) payload = payload.subarray(5)
            fragments = [payload]
            stream = id
          } else if (type === CONTINUATION) {
            if (id !== stream) throw new Error("CONTINUATION on another stream")
            fragments.push(payload)
            continuations++
          } else {
            continue
          }
          if ((flags & END_HEADERS) === 0) continue
          const block = Buffer.concat(fragments)
          blocks.push(block)
          const list: Array<string> = []
          decoder.decode(block, list, Number.MAX_SAFE_INTEGER)
          const seq = Number(list[list.indexOf("x-seq") + 1])
          decoded.set(seq, list)
          const request = requests[seq]!
          const answer = [":status", String(request.status), ...flat(request.fields)]
          for (const f of headersFrames(stream, encodeHeaders(answer))) socket.write(f)
        }
      } catch (error) {
        fail(error)
      }
    })
  })
  let client: http2.ClientHttp2Session | undefined
  let timer: NodeJS.Timeout | undefined
  try {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as net.AddressInfo).port
    const session = http2.connect(`http://127.0.0.1:${port}`)
    client = session
    session.on("error", fail)
    const send = (request: Request, seq: number) =>
      new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const headers: http2.OutgoingHttpHeaders = { ":path": `/r/${seq}`, "x-seq": String(seq) }
        for (const [name, value] of request.fields) headers[name] = value
        // nghttp2 sends these as never-indexed literals
        const req = session.request(Object.assign(headers, { [http2.sensitiveHeaders]: ["authorization"] }))
        req.on("response", resolve)
        req.on("error", reject)
        req.resume()
      })
    // the first request alone: once it is answered the client has our SETTINGS, so the rest see their effect (a
    // dynamic table size update)
    const answered = send(requests[0]!, 0).then(async (first) => [
      first,
      ...(await Promise.all(requests.slice(1).map((request, i) => send(request, i + 1))))
    ])
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("no answer within 20 s")), 20_000)
    })
    const responses = await Promise.race([answered, failed, timeout])
    return { port, decoded: requests.map((_, seq) => decoded.get(seq) ?? []), responses, blocks, continuations }
  } finally {
    clearTimeout(timer)
    client?.destroy()
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** How often each representation shows in header blocks (read here on their own), to see what a test exercised. */
interface Census {
  indexedDynamic: number
  incremental: number
  withoutIndexing: number
  neverIndexed: number
  sizeUpdates: number
  huffman: number
}

const emptyCensus = (): Census => ({
  indexedDynamic: 0,
  incremental: 0,
  withoutIndexing: 0,
  neverIndexed: 0,
  sizeUpdates: 0,
  huffman: 0
})

const count = (blocks: ReadonlyArray<Buffer>, into: Census): Census => {
  for (const block of blocks) {
    let pos = 0
    const int = (prefix: number): number => {
      const max = 2 ** prefix - 1
      let value = block[pos++]! & max
      if (value === max) {
        for (let scale = 1; pos < block.length; scale *= 128) {
          const octet = block[pos++]!
          value += (octet & 0x7f) * scale
          if (octet < 0x80) break
        }
      }
      return value
    }
    const str = (): void => {
      if (block[pos]! >= 0x80) into.huffman++
      const length = int(7)
      pos += length
    }
    while (pos < block.length) {
      const octet = block[pos]!
      if (octet >= 0x80) {
        if (int(7) > 61) into.indexedDynamic++
      } else if (octet >= 0x40) {
        into.incremental++
        if (int(6) === 0) str()
        str()
      } else if (octet >= 0x20) {
        into.sizeUpdates++
        int(5)
      } else {
        if (octet >= 0x10) into.neverIndexed++
        else into.withoutIndexing++
        if (int(4) === 0) str()
        str()
      }
    }
  }
  return into
}

const pairsOf = (list: ReadonlyArray<string>): Array<Field> => {
  const pairs: Array<Field> = []
  for (let i = 0; i < list.length; i += 2) pairs.push([list[i]!, list[i + 1]!])
  return pairs
}

const checkExchange = (requests: ReadonlyArray<Request>, result: Exchanged): void => {
  requests.forEach((request, seq) => {
    const list = pairsOf(result.decoded[seq]!)
    expect(list).toEqual(
      expect.arrayContaining([
        [":method", "GET"],
        [":path", `/r/${seq}`],
        [":scheme", "http"],
        [":authority", `127.0.0.1:${result.port}`],
        ["x-seq", String(seq)],
        ...request.fields
      ])
    )
    expect(list).toHaveLength(request.fields.length + 5)
    const response = result.responses[seq]!
    expect(response[":status"]).toBe(request.status)
    for (const [name, value] of request.fields) expect([name, response[name]]).toEqual([name, value])
  })
}

/** Fields node sends and nghttp2 takes back in a response: no connection-specific ones, no framing ones. */
const FORBIDDEN = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "http2-settings",
  "host",
  "content-length",
  "set-cookie",
  "x-seq"
])
const TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
const headerName = fc
  .oneof(
    fc.string({ unit: fc.constantFrom(...TCHARS), minLength: 1, maxLength: 24 }),
    fc.constantFrom("accept", "user-agent", "cookie", "authorization", "referer", "cache-control", "if-none-match"),
    fc.constantFrom("x-custom-header", "sec-fetch-mode", "x-forwarded-for")
  )
  .filter((name) => !FORBIDDEN.has(name))
/** Values without surrounding whitespace (nghttp2 refuses it in a response), some long and repetitive. */
const headerValue = fc
  .oneof(
    latin1Text(80),
    fc.string({ unit: fc.constantFrom(..."abcdefghij0123456789/-=;."), maxLength: 200 }),
    fc.tuple(latin1Text(8), fc.integer({ min: 1, max: 120 })).map(([s, n]) => s.repeat(n)),
    fc.constantFrom("text/html", "gzip, deflate, br", "no-cache", "*/*", "Mozilla/5.0 (X11; Linux x86_64)", "")
  )
  .map((value) => value.replace(/^[ \t]+|[ \t]+$/g, ""))
const request: fc.Arbitrary<Request> = fc.record({
  fields: fc.uniqueArray(fc.tuple(headerName, headerValue), { selector: ([name]) => name, maxLength: 10 }),
  status: fc.constantFrom(200, 204, 206, 304, 400, 404, 500, 302, 418, 503)
})

describe("HPACK against nghttp2 (node:http2 on loopback)", () => {
  it("decodes node's request blocks (Huffman, dynamic table) and node reads the encoder's responses", async () => {
    const seen = emptyCensus()
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 16 }), async (requests) => {
        const result = await exchange(requests)
        checkExchange(requests, result)
        count(result.blocks, seen)
      }),
      { numRuns: 15 }
    )
    expect(seen.huffman).toBeGreaterThan(0)
    expect(seen.indexedDynamic).toBeGreaterThan(0)
    expect(seen.incremental).toBeGreaterThan(0)
  })

  it("keeps in step over many requests that evict, refer back, and span CONTINUATION frames", async () => {
    const browser: ReadonlyArray<Field> = [
      ["user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0"],
      ["accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],
      ["accept-language", "en-US,en;q=0.9"],
      ["sec-fetch-mode", "navigate"],
      ["cookie", "session=abc123; theme=dark"],
      ["authorization", "Bearer abc.def.ghi"]
    ]
    const requests: Array<Request> = []
    for (let i = 0; i < 40; i++) {
      const fields: Array<Field> = [...browser, [`x-unique-${i}`, `value ${i} `.repeat(20).trim()]]
      // now and then a field far larger than the table, and one larger than a frame
      if (i % 10 === 3) fields.push(["x-large", "\xe9\xff\x80".repeat(2000)])
      if (i === 17) fields.push(["x-huge", "z\xfe".repeat(12_000)])
      requests.push({ fields, status: i % 2 === 0 ? 200 : 302 })
    }
    // a smaller table than the 4096 the client starts with: a size update, then evictions at 1024
    const result = await exchange(requests, 1024)
    checkExchange(requests, result)
    expect(result.continuations).toBeGreaterThan(0)
    const seen = count(result.blocks, emptyCensus())
    expect(seen.sizeUpdates).toBeGreaterThan(0)
    expect(seen.neverIndexed).toBeGreaterThan(0)
    expect(seen.indexedDynamic).toBeGreaterThan(0)
    expect(seen.incremental).toBeGreaterThan(0)
    expect(seen.withoutIndexing).toBeGreaterThan(0)
    expect(seen.huffman).toBeGreaterThan(0)
  })
})
