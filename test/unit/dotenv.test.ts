import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { parseDotenv } from "../../src/domain/dotenv.js"

const parse = (text: string): Record<string, string> => Object.fromEntries(parseDotenv(text))

describe("parseDotenv", () => {
  it("reads nothing from an empty file", () => {
    expect(parse("")).toEqual({})
    expect(parse("\n\n   \n\t\n")).toEqual({})
  })

  it("reads KEY=value lines", () => {
    expect(parse("A=1\nB=two\nC=http://x:1/y?z=1")).toEqual({ A: "1", B: "two", C: "http://x:1/y?z=1" })
  })

  it("accepts the key characters of the common dialect", () => {
    expect(parse("_A=1\nb.c-d_E9=2\nlower=3")).toEqual({ _A: "1", "b.c-d_E9": "2", lower: "3" })
  })

  it("strips an optional `export `", () => {
    expect(parse("export A=1\nexport\tB=2\n  export   C=3")).toEqual({ A: "1", B: "2", C: "3" })
  })

  it("reads a key named export", () => {
    expect(parse("export=1\nexport export=2")).toEqual({ export: "2" })
  })

  it("allows spaces around `=` and before the key", () => {
    expect(parse("  A = 1\nB\t=\t2\n\tC   =3")).toEqual({ A: "1", B: "2", C: "3" })
  })

  it("skips comments and blank lines", () => {
    const text = ["# a comment", "", "A=1", "   # indented comment", "#B=2", "", "C=3", "# trailing"].join("\n")
    expect(parse(text)).toEqual({ A: "1", C: "3" })
  })

  it("handles CRLF line endings", () => {
    expect(parse("A=1\r\nB='two'\r\n# c\r\nC=\"x\\ny\"\r\nD=4 # note\r\n")).toEqual({
      A: "1",
      B: "two",
      C: "x\ny",
      D: "4"
    })
    expect(parse('A="line1\r\nline2"')).toEqual({ A: "line1\nline2" })
  })

  it("keeps single-quoted values literal", () => {
    expect(parse("A='a \\n $HOME ${X} # not a comment \"q\"'")).toEqual({ A: 'a \\n $HOME ${X} # not a comment "q"' })
    expect(parse("A='  padded  '")).toEqual({ A: "  padded  " })
    expect(parse("A='back\\'")).toEqual({ A: "back\\" })
  })

  it("lets single quotes span lines", () => {
    expect(parse("A='one\ntwo'\nB=3")).toEqual({ A: "one\ntwo", B: "3" })
  })

  it("unescapes double-quoted values", () => {
    expect(parse('A="a\\nb\\tc\\rd\\"e\\\\f"')).toEqual({ A: 'a\nb\tc\rd"e\\f' })
    expect(parse('A="\\\\n"')).toEqual({ A: "\\n" })
    expect(parse('A="\\x \\$"')).toEqual({ A: "\\x \\$" })
    expect(parse('A="  # kept  "')).toEqual({ A: "  # kept  " })
    expect(parse('A="it\'s"')).toEqual({ A: "it's" })
  })

  it("lets double quotes span lines", () => {
    const text = 'KEY="-----BEGIN KEY-----\nabc\\tdef\n-----END KEY-----"\nNEXT=1'
    expect(parse(text)).toEqual({ KEY: "-----BEGIN KEY-----\nabc\tdef\n-----END KEY-----", NEXT: "1" })
  })

  it("ignores what follows the closing quote on its line", () => {
    expect(parse("A='x' # comment\nB=\"y\"   # comment\nC='z' junk\nD=4")).toEqual({ A: "x", B: "y", C: "z", D: "4" })
  })

  it("reads an unterminated quote to the end of the file", () => {
    expect(parse('A="open\nB=2')).toEqual({ A: "open\nB=2" })
    expect(parse("A='open")).toEqual({ A: "open" })
  })

  it("drops a trailing ` # comment` from unquoted values", () => {
    expect(parse("A=1 # one\nB=two\t# two\nC=a b   #c")).toEqual({ A: "1", B: "two", C: "a b" })
  })

  it("keeps `#` that does not start a comment", () => {
    expect(parse("A=a#b\nB=http://x/#frag\nC=#fff")).toEqual({ A: "a#b", B: "http://x/#frag", C: "#fff" })
  })

  it("trims unquoted values but keeps inner spaces and quotes", () => {
    expect(parse('A=  a  b  \nB=it\'s\nC=say "hi"')).toEqual({ A: "a  b", B: "it's", C: 'say "hi"' })
  })

  it("keeps `=` inside values", () => {
    expect(parse("A=b=c\nB='x=y'\nC=\"==\"\nD=postgres://u:p@h/db?sslmode=require")).toEqual({
      A: "b=c",
      B: "x=y",
      C: "==",
      D: "postgres://u:p@h/db?sslmode=require"
    })
  })

  it("reads empty values", () => {
    expect(parse("A=\nB=''\nC=\"\"\nD=   \nE=")).toEqual({ A: "", B: "", C: "", D: "", E: "" })
  })

  it("does not let an empty value take the next line", () => {
    expect(parse("A=\nB=2")).toEqual({ A: "", B: "2" })
    expect(parse("A= \n\n'quoted'")).toEqual({ A: "" })
    expect(parse("export A=\r\nB=2")).toEqual({ A: "", B: "2" })
  })

  it("does not join a bare word with a `=` on the next line", () => {
    expect(parse("JUNK\n=value\nA=1")).toEqual({ A: "1" })
  })

  it("lets later keys override earlier ones", () => {
    expect(parse("A=1\nB=2\nA=3\nexport A='4'")).toEqual({ A: "4", B: "2" })
    expect([...parseDotenv("A=1\nB=2\nA=3").keys()]).toEqual(["A", "B"])
  })

  it("skips garbage lines", () => {
    const text = ["not a pair", "1A=bad key", "-X=1", "=novalue", "A B=1", "A=1", "[section]", "  : ; ", "B=2"].join(
      "\n"
    )
    expect(parse(text)).toEqual({ A: "1", B: "2" })
  })

  it("does not interpolate", () => {
    expect(parse('A=1\nB=$A\nC=${A}\nD="${A}"')).toEqual({ A: "1", B: "$A", C: "${A}", D: "${A}" })
  })

  it("ends without a trailing newline", () => {
    expect(parse("A=1")).toEqual({ A: "1" })
    expect(parse("A='1'")).toEqual({ A: "1" })
    expect(parse("A=")).toEqual({ A: "" })
  })
})

/** A valid key: a letter or `_`, then letters, digits, `_`, `.`, `-`. */
const key = FastCheck.tuple(
  FastCheck.constantFrom(..."ABCXYZabcxyz_"),
  FastCheck.array(FastCheck.constantFrom(..."ABZaz09_.-"), { maxLength: 8 })
).map(([head, tail]) => head + tail.join(""))

const valueChar = FastCheck.oneof(
  {
    arbitrary: FastCheck.constantFrom(
      " ",
      "\t",
      "\n",
      "\r",
      "#",
      " #",
      "=",
      "'",
      '"',
      "\\",
      "\\n",
      "$",
      "${X}",
      "export ",
      "A=1",
      "é",
      "🚀"
    ),
    weight: 2
  },
  { arbitrary: FastCheck.string({ unit: "grapheme", minLength: 1, maxLength: 3 }), weight: 1 },
  { arbitrary: FastCheck.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 4 }), weight: 3 }
)
const value = FastCheck.array(valueChar, { maxLength: 10 }).map((cs) => cs.join(""))

type Form = "single" | "double" | "bare"

const canWrite = (v: string, form: Form): boolean => {
  switch (form) {
    // `\r` alone would be read as a line ending
    case "single":
      return !v.includes("'") && !v.includes("\r")
    case "double":
      return true
    case "bare":
      return v === v.trim() && !/[\r\n]/.test(v) && !/\s#/.test(v) && !v.startsWith("'") && !v.startsWith('"')
  }
}

const write = (v: string, form: Form): string => {
  switch (form) {
    case "single":
      return `'${v}'`
    case "double":
      return `"${v.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\r", "\\r").replaceAll("\n", "\\n")}"`
    case "bare":
      return v
  }
}

describe("parseDotenv (properties)", () => {
  it("reads back what was written, in any form", () => {
    const entry = FastCheck.record({
      key,
      value,
      form: FastCheck.constantFrom<Form>("single", "double", "bare"),
      exported: FastCheck.boolean(),
      indent: FastCheck.constantFrom("", " ", "\t"),
      around: FastCheck.constantFrom("", " ", "  "),
      comment: FastCheck.constantFrom("", " # note", "\t# a='b'"),
      before: FastCheck.constantFrom("", "# comment", "   ", "#X=1")
    })
    FastCheck.assert(
      FastCheck.property(
        FastCheck.uniqueArray(entry, { selector: (e) => e.key, maxLength: 8 }),
        FastCheck.constantFrom("\n", "\r\n"),
        (entries, eol) => {
          const expected = new Map<string, string>()
          const lines: Array<string> = []
          for (const e of entries) {
            // `KEY= # note` is ambiguous between dialects: an empty unquoted value is written without a comment
            const bareEmpty = e.form === "bare" && e.value === "" && e.comment !== ""
            const form: Form = canWrite(e.value, e.form) && !bareEmpty ? e.form : "double"
            if (e.before !== "") lines.push(e.before)
            const exported = e.exported ? "export " : ""
            lines.push(`${e.indent}${exported}${e.key}${e.around}=${e.around}${write(e.value, form)}${e.comment}`)
            expected.set(e.key, e.value)
          }
          const parsed = parseDotenv(lines.join(eol) + eol)
          expect(Object.fromEntries(parsed)).toEqual(Object.fromEntries(expected))
        }
      ),
      { numRuns: 300 }
    )
  })

  it("keeps raw newlines inside quotes", () => {
    const multi = value.filter((v) => !v.includes("'") && !v.includes("\r"))
    FastCheck.assert(
      FastCheck.property(
        FastCheck.uniqueArray(FastCheck.tuple(key, multi), { selector: ([k]) => k, maxLength: 6 }),
        (pairs) => {
          const raw = (v: string) => v.replaceAll("\\", "\\\\").replaceAll('"', '\\"')
          const text = pairs.map(([k, v], n) => (n % 2 === 0 ? `${k}='${v}'` : `${k}="${raw(v)}"`))
          expect(Object.fromEntries(parseDotenv(text.join("\n")))).toEqual(Object.fromEntries(pairs))
        }
      ),
      { numRuns: 300 }
    )
  })

  it("lets the last of repeated keys win", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(FastCheck.tuple(FastCheck.constantFrom("A", "B", "C"), key), { maxLength: 12 }),
        (pairs) => {
          const expected = new Map<string, string>()
          for (const [k, v] of pairs) expected.set(k, v)
          const text = pairs.map(([k, v]) => `${k}=${v}`).join("\n")
          expect(Object.fromEntries(parseDotenv(text))).toEqual(Object.fromEntries(expected))
        }
      ),
      { numRuns: 300 }
    )
  })

  it("never throws", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "grapheme", maxLength: 200 }), (text) => {
        parseDotenv(text)
      }),
      { numRuns: 300 }
    )
  })
})
