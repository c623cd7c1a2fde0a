import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { parse, stringify } from "smol-toml"
import type { KeyPath, PathSegment } from "../../src/domain/config/diagnostic.js"
import { indexPositions, type Position } from "../../src/domain/config/positions.js"

const at = (line: number, column: number): Position => ({ line, column })

/** Builds a document from lines, and checks that it is TOML (the scanner only ever sees parsed documents). */
const toml = (...lines: ReadonlyArray<string>): string => {
  const text = lines.join("\n")
  parse(text)
  return text
}

/** The text at a position, to check a recorded position by eye and by machine. */
const textAt = (text: string, p: Position): string => {
  const lines = text.split("\n")
  const offset = lines.slice(0, p.line - 1).reduce((n, l) => n + l.length + 1, 0) + p.column - 1
  return text.slice(offset)
}

describe("indexPositions: keys", () => {
  it("records bare keys and where their values start", () => {
    const index = indexPositions(toml("name = 1", "other=2", "  indented   =   'x'"))
    expect(index.exact(["name"])).toEqual(at(1, 1))
    expect(index.exact(["other"])).toEqual(at(2, 1))
    expect(index.exact(["indented"])).toEqual(at(3, 3))
    expect(index.value(["name"])).toEqual(at(1, 8))
    expect(index.value(["other"])).toEqual(at(2, 7))
    expect(index.value(["indented"])).toEqual(at(3, 18))
  })

  it("records quoted keys by their unquoted name, at the opening quote", () => {
    const text = toml(`"a b" = 1`, `'c.d' = 2`, `"e\\"f" = 3`, `"\\u00e9" = 4`, `"" = 5`, `'x\\y' = 6`)
    const index = indexPositions(text)
    expect(index.exact(["a b"])).toEqual(at(1, 1))
    expect(index.exact(["c.d"])).toEqual(at(2, 1))
    expect(index.exact(['e"f'])).toEqual(at(3, 1))
    expect(index.exact(["é"])).toEqual(at(4, 1))
    expect(index.exact([""])).toEqual(at(5, 1))
    expect(index.exact(["x\\y"])).toEqual(at(6, 1))
    expect(index.value(['e"f'])).toEqual(at(3, 10))
    expect(index.exact(["c"])).toBeUndefined()
  })

  it("records every segment of a dotted key", () => {
    const index = indexPositions(toml("a.b.c = 1", 'x . "y.z" .w = 2', "a.d = 3"))
    expect(index.exact(["a"])).toEqual(at(1, 1))
    expect(index.exact(["a", "b"])).toEqual(at(1, 3))
    expect(index.exact(["a", "b", "c"])).toEqual(at(1, 5))
    expect(index.value(["a", "b", "c"])).toEqual(at(1, 9))
    expect(index.exact(["x"])).toEqual(at(2, 1))
    expect(index.exact(["x", "y.z"])).toEqual(at(2, 5))
    expect(index.exact(["x", "y.z", "w"])).toEqual(at(2, 12))
    // the first place a table is written is where it is
    expect(index.exact(["a", "d"])).toEqual(at(3, 3))
  })

  it("records keys with digits and dashes, and keys that look like numbers", () => {
    const index = indexPositions(toml("1234 = 'a'", "a-b_c = 'b'", "3.14 = 'c'"))
    expect(index.exact(["1234"])).toEqual(at(1, 1))
    expect(index.exact(["a-b_c"])).toEqual(at(2, 1))
    expect(index.exact(["3", "14"])).toEqual(at(3, 3))
  })
})

describe("indexPositions: tables", () => {
  it("records a [table] header and the keys under it", () => {
    const text = toml("[project]", 'name = "shop"', "", "[services.api]", 'cmd = "npm start"', "  port = 3000")
    const index = indexPositions(text)
    expect(index.exact(["project"])).toEqual(at(1, 1))
    expect(index.exact(["project", "name"])).toEqual(at(2, 1))
    expect(index.exact(["services"])).toEqual(at(4, 1))
    expect(index.exact(["services", "api"])).toEqual(at(4, 1))
    expect(index.exact(["services", "api", "cmd"])).toEqual(at(5, 1))
    expect(index.exact(["services", "api", "port"])).toEqual(at(6, 3))
    expect(index.value(["services", "api", "cmd"])).toEqual(at(5, 7))
    expect(index.value(["services", "api"])).toBeUndefined()
    expect(index.exact(["cmd"])).toBeUndefined()
  })

  it("reads quoted and spaced header keys", () => {
    const text = toml('[a."b.c"]', "x = 1", "[ d . 'e f' ]", "y = 2", '["]"]', "z = 3")
    const index = indexPositions(text)
    expect(index.exact(["a", "b.c"])).toEqual(at(1, 1))
    expect(index.exact(["a", "b.c", "x"])).toEqual(at(2, 1))
    expect(index.exact(["a", "b", "c"])).toBeUndefined()
    expect(index.exact(["d", "e f"])).toEqual(at(3, 1))
    expect(index.exact(["d", "e f", "y"])).toEqual(at(4, 1))
    expect(index.exact(["]"])).toEqual(at(5, 1))
    expect(index.exact(["]", "z"])).toEqual(at(6, 1))
  })

  it("keeps the first position of a table written by a header after its sub-tables", () => {
    const index = indexPositions(toml("[a.b]", "x = 1", "[a]", "y = 2"))
    expect(index.exact(["a"])).toEqual(at(1, 1))
    expect(index.exact(["a", "y"])).toEqual(at(4, 1))
  })

  it("ignores comments after headers and values", () => {
    const index = indexPositions(toml("[a] # [b]", "x = 1 # y = 2", "# z = 3", "w = 'v' # c"))
    expect(index.exact(["a"])).toEqual(at(1, 1))
    expect(index.exact(["b"])).toBeUndefined()
    expect(index.exact(["a", "x"])).toEqual(at(2, 1))
    expect(index.exact(["a", "y"])).toBeUndefined()
    expect(index.exact(["a", "z"])).toBeUndefined()
    expect(index.exact(["a", "w"])).toEqual(at(4, 1))
  })

  it("indexes [[array.tables]] per occurrence", () => {
    const text = toml("[[routes]]", 'path = "/a"', "", "[[routes]]", 'path = "/b"', "[[x.y]]", "[[x.y]]", "z = 1")
    const index = indexPositions(text)
    expect(index.exact(["routes"])).toEqual(at(1, 1))
    expect(index.exact(["routes", 0])).toEqual(at(1, 1))
    expect(index.exact(["routes", 0, "path"])).toEqual(at(2, 1))
    expect(index.exact(["routes", 1])).toEqual(at(4, 1))
    expect(index.exact(["routes", 1, "path"])).toEqual(at(5, 1))
    expect(index.exact(["routes", 2])).toBeUndefined()
    expect(index.exact(["x"])).toEqual(at(6, 1))
    expect(index.exact(["x", "y"])).toEqual(at(6, 1))
    expect(index.exact(["x", "y", 0])).toEqual(at(6, 1))
    expect(index.exact(["x", "y", 1])).toEqual(at(7, 1))
    expect(index.exact(["x", "y", 1, "z"])).toEqual(at(8, 1))
  })

  it("puts tables under an array of tables into its latest element", () => {
    const text = toml(
      "[[fruits]]",
      'name = "apple"',
      "[fruits.physical]",
      'color = "red"',
      "[[fruits.varieties]]",
      'name = "red delicious"',
      "[[fruits.varieties]]",
      'name = "granny smith"',
      "[[fruits]]",
      'name = "banana"',
      "[[fruits.varieties]]",
      'name = "plantain"'
    )
    const index = indexPositions(text)
    expect(parse(text)).toMatchObject({ fruits: [{ physical: { color: "red" } }, { name: "banana" }] })
    expect(index.exact(["fruits", 0, "physical"])).toEqual(at(3, 1))
    expect(index.exact(["fruits", 0, "physical", "color"])).toEqual(at(4, 1))
    expect(index.exact(["fruits", 0, "varieties"])).toEqual(at(5, 1))
    expect(index.exact(["fruits", 0, "varieties", 0, "name"])).toEqual(at(6, 1))
    expect(index.exact(["fruits", 0, "varieties", 1, "name"])).toEqual(at(8, 1))
    expect(index.exact(["fruits", 1])).toEqual(at(9, 1))
    expect(index.exact(["fruits", 1, "varieties", 0])).toEqual(at(11, 1))
    expect(index.exact(["fruits", 1, "varieties", 0, "name"])).toEqual(at(12, 1))
    expect(index.exact(["fruits", "varieties"])).toBeUndefined()
  })
})

describe("indexPositions: inline tables and arrays", () => {
  it("records keys of inline tables, nested", () => {
    const text = toml('health = { http = "/up", opts = { retries = 3, "a.b" = { c = true } } }', "next = 1")
    const index = indexPositions(text)
    expect(index.exact(["health"])).toEqual(at(1, 1))
    expect(index.value(["health"])).toEqual(at(1, 10))
    expect(index.exact(["health", "http"])).toEqual(at(1, 12))
    expect(index.value(["health", "http"])).toEqual(at(1, 19))
    expect(index.exact(["health", "opts"])).toEqual(at(1, 26))
    expect(index.exact(["health", "opts", "retries"])).toEqual(at(1, 35))
    expect(index.exact(["health", "opts", "a.b"])).toEqual(at(1, 48))
    expect(index.exact(["health", "opts", "a.b", "c"])).toEqual(at(1, 58))
    expect(index.exact(["next"])).toEqual(at(2, 1))
  })

  it("records dotted keys and empty tables inside inline tables", () => {
    const index = indexPositions(toml("t = { a.b = 1, e = {}, f = [] }", "u = 2"))
    expect(index.exact(["t", "a"])).toEqual(at(1, 7))
    expect(index.exact(["t", "a", "b"])).toEqual(at(1, 9))
    expect(index.exact(["t", "e"])).toEqual(at(1, 16))
    expect(index.value(["t", "f"])).toEqual(at(1, 28))
    expect(index.exact(["u"])).toEqual(at(2, 1))
  })

  it("reads an inline table spanning lines, with comments (TOML 1.1, accepted by smol-toml)", () => {
    const text = toml("t = {", "  a = 1, # first", "  # between", "  b = { c = 2 },", "}", "u = 3")
    const index = indexPositions(text)
    expect(index.exact(["t", "a"])).toEqual(at(2, 3))
    expect(index.exact(["t", "b"])).toEqual(at(4, 3))
    expect(index.exact(["t", "b", "c"])).toEqual(at(4, 9))
    expect(index.exact(["u"])).toEqual(at(6, 1))
    expect(index.exact(["a"])).toBeUndefined()
  })

  it("records each array element by index", () => {
    const index = indexPositions(toml('depends_on = ["db", "cache" ,  "queue"]', "ports = [1,2]", "empty = []"))
    expect(index.exact(["depends_on"])).toEqual(at(1, 1))
    expect(index.value(["depends_on"])).toEqual(at(1, 14))
    expect(index.exact(["depends_on", 0])).toEqual(at(1, 15))
    expect(index.exact(["depends_on", 1])).toEqual(at(1, 21))
    expect(index.exact(["depends_on", 2])).toEqual(at(1, 32))
    expect(index.exact(["depends_on", 3])).toBeUndefined()
    expect(index.exact(["ports", 1])).toEqual(at(2, 12))
    expect(index.exact(["empty", 0])).toBeUndefined()
  })

  it("records elements of arrays spanning lines, with comments and a trailing comma", () => {
    const text = toml(
      "list = [",
      "  # leading comment, with [brackets] and 'quotes'",
      '  "a", # one',
      "",
      '  "b" # two, no comma yet',
      "  ,",
      '  "c",',
      "]",
      "after = 1"
    )
    const index = indexPositions(text)
    expect(index.exact(["list", 0])).toEqual(at(3, 3))
    expect(index.exact(["list", 1])).toEqual(at(5, 3))
    expect(index.exact(["list", 2])).toEqual(at(7, 3))
    expect(index.exact(["list", 3])).toBeUndefined()
    expect(index.exact(["after"])).toEqual(at(9, 1))
  })

  it("records nested arrays and arrays of inline tables", () => {
    const text = toml("m = [[1, 2], [3, [4]]]", "r = [{ a = 1 }, { a = 2, b = [true] }]", "z = 0")
    const index = indexPositions(text)
    expect(index.exact(["m", 0])).toEqual(at(1, 6))
    expect(index.exact(["m", 0, 1])).toEqual(at(1, 10))
    expect(index.exact(["m", 1])).toEqual(at(1, 14))
    expect(index.exact(["m", 1, 1])).toEqual(at(1, 18))
    expect(index.exact(["m", 1, 1, 0])).toEqual(at(1, 19))
    expect(index.exact(["r", 0, "a"])).toEqual(at(2, 8))
    expect(index.exact(["r", 1])).toEqual(at(2, 17))
    expect(index.exact(["r", 1, "a"])).toEqual(at(2, 19))
    expect(index.exact(["r", 1, "b", 0])).toEqual(at(2, 31))
    expect(index.exact(["z"])).toEqual(at(3, 1))
  })

  it("reads strings with brackets, braces, commas and `#` inside arrays", () => {
    const index = indexPositions(toml(`a = ["],}#", '[{,#', "\\"]"]`, "b = 1"))
    expect(index.exact(["a", 1])).toEqual(at(1, 14))
    expect(index.exact(["a", 2])).toEqual(at(1, 22))
    expect(index.exact(["b"])).toEqual(at(2, 1))
  })

  it("reads a date and time separated by a space as one value", () => {
    const text = toml("a = 1979-05-27 07:32:00Z", "b = [1979-05-27 07:32:00, 2, 1979-05-27, 07:32:00]", "c = 3")
    const index = indexPositions(text)
    expect(index.exact(["b", 1])).toEqual(at(2, 27))
    expect(index.exact(["b", 2])).toEqual(at(2, 30))
    expect(index.exact(["b", 3])).toEqual(at(2, 42))
    expect(index.exact(["b", 4])).toBeUndefined()
    expect(index.exact(["c"])).toEqual(at(3, 1))
    expect(index.exact(["07"])).toBeUndefined()
  })
})

describe("indexPositions: multi-line strings", () => {
  it("counts lines inside multi-line basic strings", () => {
    const text = toml('a = """', "one", "two # not a comment", 'with "quotes" and ""two""', '"""', "b = 1")
    const index = indexPositions(text)
    expect(index.value(["a"])).toEqual(at(1, 5))
    expect(index.exact(["b"])).toEqual(at(6, 1))
  })

  it("counts lines inside multi-line literal strings", () => {
    const text = toml("a = '''", "C:\\path\\", "it's ''quoted''", "'''", "[t]", "b = 1")
    const index = indexPositions(text)
    expect(index.exact(["t"])).toEqual(at(5, 1))
    expect(index.exact(["t", "b"])).toEqual(at(6, 1))
  })

  it("counts the line after a line-ending backslash", () => {
    const text = toml('a = """one \\', "    two \\   ", "    three\\\\\\", '  """', "b = 2", 'c = """x\\\\"""', "d = 3")
    expect(parse(text)).toMatchObject({ a: "one two three\\", c: "x\\" })
    const index = indexPositions(text)
    expect(index.exact(["b"])).toEqual(at(5, 1))
    expect(index.exact(["d"])).toEqual(at(7, 1))
  })

  it("keeps up to two quotes before the closing delimiter", () => {
    const text = toml('a = """x""""', "b = '''y'''''", 'c = """"""', "d = ''''''", "e = 1")
    const index = indexPositions(text)
    expect(index.exact(["b"])).toEqual(at(2, 1))
    expect(index.exact(["c"])).toEqual(at(3, 1))
    expect(index.exact(["d"])).toEqual(at(4, 1))
    expect(index.exact(["e"])).toEqual(at(5, 1))
  })

  it("reads multi-line strings inside arrays and inline tables", () => {
    const text = toml('a = ["""x', "y\"\"\", '''z", "w''', 1]", 't = { k = """', '""", m = 2 }', "n = 3")
    const index = indexPositions(text)
    expect(index.exact(["a", 1])).toEqual(at(2, 7))
    expect(index.exact(["a", 2])).toEqual(at(3, 7))
    expect(index.exact(["t", "m"])).toEqual(at(5, 6))
    expect(index.exact(["n"])).toEqual(at(6, 1))
  })

  it("reads escapes in single-line strings without losing its place", () => {
    const text = toml('a = "\\"# \\\\" # c', 'b = "\\u00e9\\U0001F600\\t"', "'c' = 'a\\'", "d = 1")
    const index = indexPositions(text)
    expect(index.exact(["b"])).toEqual(at(2, 1))
    expect(index.exact(["c"])).toEqual(at(3, 1))
    expect(index.exact(["d"])).toEqual(at(4, 1))
  })
})

describe("indexPositions: line endings, find and odd input", () => {
  it("reads CRLF documents", () => {
    const text = ["[a]", "x = 1", 'y = """', "two", '"""', "z = [", "  1, # c", "  2", "]", "w = 2"].join("\r\n")
    parse(text)
    const index = indexPositions(text)
    expect(index.exact(["a", "x"])).toEqual(at(2, 1))
    expect(index.exact(["a", "z", 1])).toEqual(at(8, 3))
    expect(index.exact(["a", "w"])).toEqual(at(10, 1))
  })

  it("counts columns in UTF-16 code units after non-ASCII text", () => {
    const index = indexPositions(toml('t = { "é" = 1, b = "日本", c = 2 }'))
    expect(index.exact(["t", "b"])).toEqual(at(1, 16))
    expect(index.exact(["t", "c"])).toEqual(at(1, 26))
  })

  it("find falls back to the nearest written ancestor, then to 1:1", () => {
    const index = indexPositions(toml("# header comment", "[services.api]", 'cmd = "x"', 'ports = ["http"]'))
    expect(index.find(["services", "api", "cmd"])).toEqual(at(3, 1))
    expect(index.find(["services", "api", "cmd", "nope", 3])).toEqual(at(3, 1))
    expect(index.find(["services", "api", "ports", 0])).toEqual(at(4, 10))
    expect(index.find(["services", "api", "ports", 5])).toEqual(at(4, 1))
    expect(index.find(["services", "web", "cmd"])).toEqual(at(2, 1))
    expect(index.find(["nothing", "here"])).toEqual(at(1, 1))
    expect(index.find([])).toEqual(at(1, 1))
    expect(index.exact([])).toBeUndefined()
    expect(index.value(["nothing"])).toBeUndefined()
  })

  it("reads the empty document", () => {
    const index = indexPositions("")
    expect(index.find(["a"])).toEqual(at(1, 1))
    expect(index.exact(["a"])).toBeUndefined()
  })

  it("never throws or stalls on odd input", () => {
    for (const text of [
      "]",
      "}",
      ",",
      "a = [}",
      "a = {]",
      "[",
      "[[",
      "a = [",
      'a = "open',
      "a = '''",
      "= = =",
      "a.",
      "\\"
    ]) {
      expect(() => indexPositions(text).find(["a"])).not.toThrow()
    }
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "grapheme-ascii", maxLength: 80 }), (text) => {
        indexPositions(text).find(["a", 0])
      }),
      { numRuns: 500 }
    )
    const piece = FastCheck.constantFrom(
      "[",
      "]",
      "{",
      "}",
      ",",
      "=",
      '"',
      "'",
      '"""',
      "#",
      "\n",
      " ",
      "a",
      ".",
      "1",
      "\\"
    )
    FastCheck.assert(
      FastCheck.property(FastCheck.array(piece, { maxLength: 40 }), (pieces) => {
        indexPositions(pieces.join("")).find(["a"])
      }),
      { numRuns: 500 }
    )
  })
})

// ---------------------------------------------------------------------------------------------------------------------
// Generated documents: a structure rendered to TOML text while noting where each key and value is written.

interface KeyText {
  readonly key: string
  readonly text: string
}

type Value =
  | { readonly _tag: "Atom"; readonly text: string }
  | {
      readonly _tag: "Array"
      readonly items: ReadonlyArray<Value>
      readonly multiline: boolean
      readonly trailingComma: boolean
      readonly comments: boolean
      readonly space: string
    }
  | {
      readonly _tag: "Inline"
      readonly entries: ReadonlyArray<Entry>
      readonly multiline: boolean
      readonly trailingComma: boolean
      readonly comments: boolean
    }

interface Entry {
  readonly keys: ReadonlyArray<KeyText>
  readonly value: Value
  readonly eq: string
  readonly dot: string
  readonly comment: string
}

interface Body {
  readonly entries: ReadonlyArray<Entry>
  readonly subs: ReadonlyArray<{ readonly array: boolean; readonly bodies: ReadonlyArray<ReadonlyArray<Entry>> }>
}

interface Table {
  readonly style: "bare" | "basic" | "literal"
  readonly second: KeyText | undefined
  readonly array: boolean
  readonly inner: string
  readonly comment: string
  readonly bodies: ReadonlyArray<Body>
}

interface Doc {
  readonly root: ReadonlyArray<Entry>
  readonly tables: ReadonlyArray<Table>
  readonly eol: "\n" | "\r\n"
  readonly gap: ReadonlyArray<string>
}

const renderKey = (key: string, style: string): string => {
  if (style === "bare" && /^[A-Za-z0-9_-]+$/.test(key)) return key
  if (style === "literal" && !key.includes("'")) return `'${key}'`
  const escaped = key.replaceAll("\\", "\\\\").replaceAll('"', '\\"')
  return `"${style === "unicode" ? escaped.replaceAll("é", "\\u00e9") : escaped}"`
}

/** Keys written by entries: lower case, so they never meet the upper-case table names. */
const keyText: FastCheck.Arbitrary<KeyText> = FastCheck.tuple(
  FastCheck.array(FastCheck.constantFrom(..."abxyz019_-", " ", ".", "#", "=", "é", '"', "\\", "'", "[", "]", "日"), {
    maxLength: 5
  }),
  FastCheck.constantFrom("bare", "bare", "basic", "literal", "unicode")
).map(([cs, style]) => ({ key: cs.join(""), text: renderKey(cs.join(""), style) }))

/** escape pairs replaced, to look for an unescaped `"""` */
const unescaped = (body: string): string => body.replace(/\\[^\r\n]/g, "__")

const multiBasic = FastCheck.tuple(
  FastCheck.boolean(),
  FastCheck.array(
    FastCheck.tuple(
      FastCheck.array(
        FastCheck.constantFrom("a", " ", '"', '""', "#", "\\\\", '\\"', "é", "]", "'''", "\\t", "=", "[x]", "{"),
        { maxLength: 5 }
      ),
      FastCheck.constantFrom("", "\\", "\\  ")
    ),
    { minLength: 1, maxLength: 4 }
  )
)
  .map(([leading, lines]) => {
    const body = lines.map(([pieces, end], n) => pieces.join("") + (n < lines.length - 1 ? end : "")).join("\n")
    return `"""${leading ? "\n" : ""}${body}"""`
  })
  .filter((s) => !unescaped(s.slice(3, -3)).includes('"""'))

const multiLiteral = FastCheck.tuple(
  FastCheck.boolean(),
  FastCheck.array(
    FastCheck.array(FastCheck.constantFrom("a", " ", "'", "''", '"""', "\\", "#", "é", "]", "\\n"), { maxLength: 5 }),
    { minLength: 1, maxLength: 4 }
  )
)
  .map(([leading, lines]) => `'''${leading ? "\n" : ""}${lines.map((l) => l.join("")).join("\n")}'''`)
  .filter((s) => !s.slice(3, -3).includes("'''"))

const basicString = FastCheck.array(
  FastCheck.constantFrom("a", "b c", "#", ",", "]", "}", "[", "{", "=", "'", '\\"', "\\\\", "\\t", "\\u00e9", "\\n"),
  { maxLength: 6 }
).map((ps) => `"${ps.join("")}"`)

const literalString = FastCheck.array(FastCheck.constantFrom("a", " ", "\\", '"', "#", ",", "]", "}", "=", "é"), {
  maxLength: 6
}).map((ps) => `'${ps.join("")}'`)

const scalar = FastCheck.constantFrom(
  "42",
  "-17",
  "+3",
  "1_000",
  "0xff",
  "0o17",
  "0b101",
  "3.14",
  "-0.5e3",
  "inf",
  "-nan",
  "true",
  "false",
  "1979-05-27T07:32:00Z",
  "1979-05-27 07:32:00Z",
  "1979-05-27 07:32:00.999-07:00",
  "1979-05-27 07:32:00",
  "1979-05-27",
  "07:32:00"
)

const atom: FastCheck.Arbitrary<Value> = FastCheck.oneof(
  { arbitrary: scalar, weight: 3 },
  { arbitrary: basicString, weight: 2 },
  { arbitrary: literalString, weight: 1 },
  { arbitrary: multiBasic, weight: 2 },
  { arbitrary: multiLiteral, weight: 1 }
).map((text) => ({ _tag: "Atom" as const, text }))

const entries = (depth: number): FastCheck.Arbitrary<ReadonlyArray<Entry>> =>
  FastCheck.uniqueArray(entry(depth), { selector: (e) => e.keys[0]!.key, maxLength: 4 })

const value = (depth: number): FastCheck.Arbitrary<Value> =>
  depth <= 0
    ? atom
    : FastCheck.oneof(
        { arbitrary: atom, weight: 4 },
        {
          arbitrary: FastCheck.record({
            items: FastCheck.array(value(depth - 1), { maxLength: 4 }),
            multiline: FastCheck.boolean(),
            trailingComma: FastCheck.boolean(),
            comments: FastCheck.boolean(),
            space: FastCheck.constantFrom("", " ")
          }).map((a) => ({ _tag: "Array" as const, ...a })),
          weight: 1
        },
        {
          arbitrary: FastCheck.record({
            entries: entries(depth - 1),
            multiline: FastCheck.boolean(),
            trailingComma: FastCheck.boolean(),
            comments: FastCheck.boolean()
          }).map((t) => ({ _tag: "Inline" as const, ...t })),
          weight: 1
        }
      )

const entry = (depth: number): FastCheck.Arbitrary<Entry> =>
  FastCheck.record({
    keys: FastCheck.array(keyText, { minLength: 1, maxLength: 3 }),
    value: value(depth),
    eq: FastCheck.constantFrom(" = ", "=", "  =\t"),
    dot: FastCheck.constantFrom(".", " . "),
    comment: FastCheck.constantFrom("", "", " # note", "\t#x = [1]")
  })

const table: FastCheck.Arbitrary<Table> = FastCheck.record({
  style: FastCheck.constantFrom("bare", "basic", "literal"),
  second: FastCheck.option(keyText, { nil: undefined }),
  array: FastCheck.boolean(),
  inner: FastCheck.constantFrom("", " "),
  comment: FastCheck.constantFrom("", " # [not.a.table]"),
  bodies: FastCheck.array(
    FastCheck.record({
      entries: entries(2),
      subs: FastCheck.array(
        FastCheck.record({
          array: FastCheck.boolean(),
          bodies: FastCheck.array(entries(1), { minLength: 1, maxLength: 2 })
        }),
        { maxLength: 2 }
      )
    }),
    { minLength: 1, maxLength: 3 }
  )
})

const doc: FastCheck.Arbitrary<Doc> = FastCheck.record({
  root: entries(2),
  tables: FastCheck.array(table, { maxLength: 4 }),
  eol: FastCheck.constantFrom("\n" as const, "\r\n" as const),
  gap: FastCheck.array(FastCheck.constantFrom("", "# comment = [x]", "   "), { minLength: 1, maxLength: 6 })
})

const keyOf = (path: KeyPath): string => JSON.stringify(path)

/** Appends text and knows where it is, counting columns as the scanner does (UTF-16 code units). */
class Writer {
  text = ""
  private line = 1
  private column = 1
  private gaps = 0
  readonly keys = new Map<string, { readonly path: KeyPath; readonly at: Position }>()
  readonly values = new Map<string, { readonly path: KeyPath; readonly at: Position }>()

  constructor(
    readonly eol: string,
    readonly gap: ReadonlyArray<string>
  ) {}

  put(s: string): void {
    const text = s.replaceAll("\n", this.eol)
    for (let k = 0; k < text.length; k++) {
      if (text[k] === "\n") {
        this.line++
        this.column = 1
      } else {
        this.column++
      }
    }
    this.text += text
  }

  /** ends a statement, sometimes with blank or comment lines after it */
  end(): void {
    this.put("\n")
    const extra = this.gap[this.gaps++ % this.gap.length]!
    if (extra !== "") this.put(`${extra}\n`)
  }

  at(): Position {
    return { line: this.line, column: this.column }
  }

  key(path: KeyPath, p: Position = this.at()): void {
    if (!this.keys.has(keyOf(path))) this.keys.set(keyOf(path), { path, at: p })
  }

  value(path: KeyPath): void {
    this.key(path)
    this.values.set(keyOf(path), { path, at: this.at() })
  }
}

const writeValue = (w: Writer, path: KeyPath, v: Value): void => {
  w.value(path)
  switch (v._tag) {
    case "Atom":
      w.put(v.text)
      return
    case "Array": {
      w.put("[")
      v.items.forEach((item, k) => {
        const last = k === v.items.length - 1
        if (v.multiline) w.put(k === 0 && v.comments ? "\n  # first, [not] an element\n  " : "\n  ")
        else w.put(k === 0 ? v.space : ` ${v.space}`)
        writeValue(w, [...path, k], item)
        if (!last || v.trailingComma) w.put(",")
        if (v.multiline && v.comments) w.put(" # c")
      })
      w.put(v.multiline && v.items.length > 0 ? "\n]" : `${v.space}]`)
      return
    }
    case "Inline": {
      w.put("{")
      v.entries.forEach((e, k) => {
        const last = k === v.entries.length - 1
        w.put(v.multiline ? "\n  " : " ")
        writeEntry(w, path, e)
        if (!last || v.trailingComma) w.put(",")
        if (v.multiline && v.comments) w.put(" # c, }")
      })
      w.put(v.entries.length === 0 ? "}" : v.multiline ? "\n}" : " }")
      return
    }
  }
}

const writeEntry = (w: Writer, table: KeyPath, e: Entry): void => {
  const path: Array<PathSegment> = [...table]
  e.keys.forEach((k, n) => {
    if (n > 0) w.put(e.dot)
    path.push(k.key)
    w.key([...path])
    w.put(k.text)
  })
  w.put(e.eq)
  writeValue(w, path, e.value)
}

const writeEntries = (w: Writer, table: KeyPath, list: ReadonlyArray<Entry>): void => {
  for (const e of list) {
    writeEntry(w, table, e)
    w.put(e.comment)
    w.end()
  }
}

/** `[name]` or `[[name]]` for the written path `keys`, whose parsed path is `path` */
const writeHeader = (w: Writer, array: boolean, inner: string, keys: ReadonlyArray<string>, path: KeyPath) => {
  const p = w.at()
  for (let n = 1; n <= path.length; n++) w.key(path.slice(0, n), p)
  w.put(`${array ? "[[" : "["}${inner}${keys.join(".")}${inner}${array ? "]]" : "]"}`)
}

const render = (d: Doc): Writer => {
  const w = new Writer(d.eol, d.gap)
  writeEntries(w, [], d.root)
  d.tables.forEach((t, ti) => {
    const name = `T${ti}`
    const keys = [renderKey(name, t.style), ...(t.second === undefined ? [] : [t.second.text])]
    const base: ReadonlyArray<PathSegment> = [name, ...(t.second === undefined ? [] : [t.second.key])]
    const bodies = t.array ? t.bodies : t.bodies.slice(0, 1)
    bodies.forEach((body, n) => {
      const path = t.array ? [...base, n] : base
      writeHeader(w, t.array, t.inner, keys, path)
      w.put(t.comment)
      w.end()
      writeEntries(w, path, body.entries)
      body.subs.forEach((sub, si) => {
        const subBodies = sub.array ? sub.bodies : sub.bodies.slice(0, 1)
        subBodies.forEach((subEntries, m) => {
          const subPath = sub.array ? [...path, `S${si}`, m] : [...path, `S${si}`]
          writeHeader(w, sub.array, "", [...keys, `S${si}`], subPath)
          w.end()
          writeEntries(w, subPath, subEntries)
        })
      })
    })
  })
  return w
}

const getIn = (root: unknown, path: KeyPath): unknown => {
  let node = root
  for (const segment of path) {
    if (typeof segment === "number") node = Array.isArray(node) ? node[segment] : undefined
    else
      node =
        typeof node === "object" && node !== null && Object.hasOwn(node, segment)
          ? Reflect.get(node, segment)
          : undefined
  }
  return node
}

describe("indexPositions (properties)", () => {
  it("finds every key and value of a generated document where it was written", () => {
    FastCheck.assert(
      FastCheck.property(doc, (d) => {
        const w = render(d)
        // the generator writes TOML, and means the same key paths as the parser
        const parsed = parse(w.text)
        for (const { path } of w.keys.values()) expect(getIn(parsed, path), keyOf(path)).not.toBeUndefined()
        const index = indexPositions(w.text)
        for (const { path, at: p } of w.keys.values()) {
          expect(index.exact(path), keyOf(path)).toEqual(p)
          expect(index.find([...path, "not-written", 0]), keyOf(path)).toEqual(p)
        }
        for (const { path, at: p } of w.values.values()) expect(index.value(path), keyOf(path)).toEqual(p)
      }),
      { numRuns: 300 }
    )
  })

  it("finds every key path of documents written by smol-toml", () => {
    const leaf = FastCheck.oneof(
      FastCheck.string({ maxLength: 8 }),
      FastCheck.integer(),
      FastCheck.boolean(),
      FastCheck.double({ noNaN: true })
    )
    const keyName = FastCheck.oneof(
      FastCheck.stringMatching(/^[a-z][a-z0-9_-]{0,5}$/),
      FastCheck.string({ unit: "grapheme", maxLength: 6 })
    )
    const { node } = FastCheck.letrec((tie) => ({
      node: FastCheck.oneof(
        { depthSize: "small", withCrossShrink: true },
        leaf,
        FastCheck.array(tie("node"), { maxLength: 3 }),
        FastCheck.array(tie("table"), { minLength: 1, maxLength: 3 }),
        tie("table")
      ),
      table: FastCheck.dictionary(keyName, tie("node"), { maxKeys: 4 })
    }))
    const tableArb = FastCheck.dictionary(keyName, node, { maxKeys: 5 })
    const paths = (value: unknown, path: Array<PathSegment>, out: Array<KeyPath>): Array<KeyPath> => {
      if (path.length > 0) out.push(path)
      if (Array.isArray(value)) {
        for (const [k, v] of value.entries()) paths(v, [...path, k], out)
      } else if (typeof value === "object" && value !== null && !(value instanceof Date)) {
        for (const [k, v] of Object.entries(value)) paths(v, [...path, k], out)
      }
      return out
    }
    FastCheck.assert(
      FastCheck.property(tableArb, (value) => {
        const text = stringify(value)
        const index = indexPositions(text)
        for (const path of paths(parse(text), [], [])) {
          const p = index.exact(path)
          expect(p, `${keyOf(path)} in\n${text}`).not.toBeUndefined()
          const last = path[path.length - 1]!
          const written = textAt(text, p!)
          if (typeof last === "string" && !/^[["']/.test(written)) expect(written.startsWith(last)).toBe(true)
        }
      }),
      { numRuns: 300 }
    )
  })
})
