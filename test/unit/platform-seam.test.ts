import { describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

/**
 * No file of src/ but the Linux implementation of the Platform reads /proc: everything else asks the Platform, so
 * macOS (no /proc) answers through the same seam. A grep over the code's lines (comments may name /proc freely): a
 * string or template literal that begins with `/proc` is a read, or the makings of one.
 */

const src = path.resolve(import.meta.dirname, "../../src")
/** the one module allowed to read /proc */
const LINUX_IMPLEMENTATION = "services/platformProc.ts"

const sources = (dir: string): ReadonlyArray<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return sources(full)
    return /\.(ts|mts|cts|js|mjs)$/.test(entry.name) ? [full] : []
  })

/** The lines of `text` that are code, not comments: block comments and whole-line `//` comments are dropped. */
const codeLines = (text: string): ReadonlyArray<{ readonly line: number; readonly text: string }> => {
  const out: Array<{ line: number; text: string }> = []
  let inBlock = false
  for (const [i, raw] of text.split("\n").entries()) {
    let line = raw
    if (inBlock) {
      const end = line.indexOf("*/")
      if (end === -1) continue
      line = line.slice(end + 2)
      inBlock = false
    }
    const start = line.indexOf("/*")
    if (start !== -1 && !line.slice(0, start).includes('"') && !line.slice(0, start).includes("`")) {
      const end = line.indexOf("*/", start + 2)
      if (end === -1) inBlock = true
      line = end === -1 ? line.slice(0, start) : line.slice(0, start) + line.slice(end + 2)
    }
    if (line.trim().startsWith("//")) continue
    out.push({ line: i + 1, text: line })
  }
  return out
}

/** a literal naming a /proc path: "/proc…", '/proc…' or `/proc…` */
const PROC_LITERAL = /["'`]\/proc(?:[/"'`$]|\b)/

/** Where `text` reads /proc: `file:line` of each code line holding such a literal. */
const procReads = (file: string, text: string): ReadonlyArray<string> =>
  codeLines(text).flatMap((l) => (PROC_LITERAL.test(l.text) ? [`${file}:${l.line}`] : []))

describe("the Platform seam", () => {
  it("no file of src/ outside the Linux implementation reads /proc", () => {
    const offenders = sources(src).flatMap((file) => {
      const relative = path.relative(src, file).split(path.sep).join("/")
      return relative === LINUX_IMPLEMENTATION ? [] : procReads(relative, fs.readFileSync(file, "utf8"))
    })
    expect(offenders).toEqual([])
  })

  it("the Linux implementation does read /proc (the test looks in the right place)", () => {
    expect(
      procReads(LINUX_IMPLEMENTATION, fs.readFileSync(path.join(src, LINUX_IMPLEMENTATION), "utf8")).length
    ).toBeGreaterThan(5)
  })

  it("finds a read in code and none in comments", () => {
    const sample = [
      "/** reads `/proc/<pid>/stat` */",
      "// from /proc/meminfo",
      "/*",
      ' * readFileSync("/proc/x")',
      " */",
      'const a = readFileSync("/proc/meminfo")',
      "const b = readdirSync(`/proc/${pid}/fd`)",
      "const c = readdirSync('/proc')",
      'const d = "/process/not-it"'
    ].join("\n")
    expect(procReads("x.ts", sample)).toEqual(["x.ts:6", "x.ts:7", "x.ts:8"])
  })
})
