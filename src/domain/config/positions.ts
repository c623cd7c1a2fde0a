/**
 * Where each key path of a TOML document is written, so that errors found on the parsed value can point at a line
 * and column. smol-toml gives values but not positions; this scanner walks the same grammar only to record them.
 * It assumes the document already parsed (it is run after smol-toml succeeds) and never throws on odd input.
 */
import type { KeyPath, PathSegment } from "./diagnostic.js"

export interface Position {
  readonly line: number
  readonly column: number
}

export interface PositionIndex {
  /** The position of `path`, or of its nearest written ancestor, or of the document start. */
  readonly find: (path: KeyPath) => Position
  /** The position of exactly `path`, if it was written. */
  readonly exact: (path: KeyPath) => Position | undefined
  /** Where the value of `path` starts (its opening quote, for a string). */
  readonly value: (path: KeyPath) => Position | undefined
}

const keyOf = (path: KeyPath): string => JSON.stringify(path)

export const indexPositions = (text: string): PositionIndex => {
  const positions = new Map<string, Position>()
  const values = new Map<string, Position>()
  const arrayTableCounts = new Map<string, number>()
  let i = 0
  let line = 1
  let lineStart = 0

  const here = (): Position => ({ line, column: i - lineStart + 1 })
  const record = (path: KeyPath, at: Position) => {
    const k = keyOf(path)
    if (!positions.has(k)) positions.set(k, at)
  }
  const newline = () => {
    line++
    lineStart = i
  }
  const peek = (offset = 0) => text[i + offset]

  const skipInline = () => {
    while (i < text.length && (peek() === " " || peek() === "\t")) i++
  }
  const skipComment = () => {
    if (peek() === "#") while (i < text.length && peek() !== "\n") i++
  }
  /** whitespace, newlines and comments (inside arrays and between statements) */
  const skipAll = () => {
    for (;;) {
      skipInline()
      skipComment()
      if (peek() === "\r") i++
      if (peek() === "\n") {
        i++
        newline()
        continue
      }
      return
    }
  }

  const readString = (): string => {
    const quote = peek()!
    const triple = text.startsWith(quote.repeat(3), i)
    const literal = quote === "'"
    i += triple ? 3 : 1
    let out = ""
    while (i < text.length) {
      const c = text[i]!
      if (triple ? text.startsWith(quote.repeat(3), i) : c === quote) {
        i += triple ? 3 : 1
        // a closing run of up to two extra quotes belongs to the content
        while (triple && peek() === quote) {
          out += quote
          i++
        }
        return out
      }
      if (c === "\n") {
        i++
        newline()
        out += c
        continue
      }
      if (!literal && c === "\\") {
        const next = text[i + 1] ?? ""
        if (next === "\n" || next === "\r" || next === " " || next === "\t") {
          // a line-ending backslash: let the loop count the newline
          i++
          continue
        }
        const simple: Record<string, string> = { n: "\n", t: "\t", r: "\r", '"': '"', "\\": "\\", b: "\b", f: "\f" }
        if (next in simple) {
          out += simple[next]
          i += 2
          continue
        }
        if (next === "u" || next === "U") {
          const len = next === "u" ? 4 : 8
          out += String.fromCodePoint(Number.parseInt(text.slice(i + 2, i + 2 + len), 16) || 0)
          i += 2 + len
          continue
        }
        i += 2
        continue
      }
      out += c
      i++
    }
    return out
  }

  const readKey = (): Array<{ key: string; at: Position }> => {
    const parts: Array<{ key: string; at: Position }> = []
    for (;;) {
      skipInline()
      const at = here()
      if (peek() === '"' || peek() === "'") {
        parts.push({ key: readString(), at })
      } else {
        const start = i
        while (i < text.length && /[A-Za-z0-9_-]/.test(text[i]!)) i++
        parts.push({ key: text.slice(start, i), at })
      }
      skipInline()
      if (peek() === ".") {
        i++
        continue
      }
      return parts
    }
  }

  const readValue = (path: KeyPath): void => {
    skipInline()
    record(path, here())
    values.set(keyOf(path), here())
    const c = peek()
    if (c === '"' || c === "'") {
      readString()
    } else if (c === "[") {
      i++
      let index = 0
      for (;;) {
        skipAll()
        if (peek() === "]" || i >= text.length) {
          i++
          return
        }
        readValue([...path, index++])
        skipAll()
        if (peek() === ",") i++
      }
    } else if (c === "{") {
      i++
      // TOML 1.1 (and smol-toml) let an inline table span lines, with comments
      for (;;) {
        skipAll()
        if (peek() === "}" || i >= text.length) {
          i++
          return
        }
        readKeyValue(path)
        skipAll()
        if (peek() === ",") i++
      }
    } else {
      // at least one character, so that odd input cannot stall the scan
      const start = i
      do i++
      while (i < text.length && !/[,\]}\s#]/.test(text[i]!))
      // a date and a time may be separated by a space: `1979-05-27 07:32:00Z`
      if (/^\d{4}-\d{2}-\d{2}$/.test(text.slice(start, i)) && peek() === " " && /\d/.test(peek(1) ?? "")) {
        i++
        while (i < text.length && !/[,\]}\s#]/.test(text[i]!)) i++
      }
    }
  }

  const readKeyValue = (table: KeyPath): void => {
    const parts = readKey()
    const path: Array<PathSegment> = [...table]
    for (const part of parts) {
      path.push(part.key)
      record(path, part.at)
    }
    skipInline()
    if (peek() === "=") i++
    readValue(path)
  }

  let table: KeyPath = []
  while (i < text.length) {
    skipAll()
    if (i >= text.length) break
    if (peek() === "[") {
      const isArray = peek(1) === "["
      const at = here()
      i += isArray ? 2 : 1
      // below an array of tables, a header extends its latest element: `[[a]]` then `[a.b]` is a[last].b
      const keys = readKey().map((p) => p.key)
      const parts: Array<PathSegment> = []
      for (const [n, key] of keys.entries()) {
        parts.push(key)
        const count = n < keys.length - 1 ? arrayTableCounts.get(keyOf(parts)) : undefined
        if (count !== undefined) parts.push(count - 1)
      }
      i += isArray ? 2 : 1
      if (isArray) {
        const k = keyOf(parts)
        const n = arrayTableCounts.get(k) ?? 0
        arrayTableCounts.set(k, n + 1)
        table = [...parts, n]
        record(parts, at)
      } else {
        table = parts
      }
      record(table, at)
      for (let n = 1; n < parts.length; n++) record(parts.slice(0, n), at)
    } else {
      readKeyValue(table)
    }
    // anything left on the line (a comment) is skipped by the next skipAll
    skipInline()
    skipComment()
  }

  const exact = (path: KeyPath) => positions.get(keyOf(path))
  return {
    exact,
    value: (path) => values.get(keyOf(path)),
    find: (path) => {
      for (let n = path.length; n > 0; n--) {
        const p = exact(path.slice(0, n))
        if (p !== undefined) return p
      }
      return { line: 1, column: 1 }
    }
  }
}
