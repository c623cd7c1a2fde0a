import { spawnSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"

const root = new URL("../../", import.meta.url)
const text = readFileSync(new URL("ARCHITECTURE.md", root), "utf8")

/** `src/domain/{hooks,hosts}.ts` → both paths */
const expand = (path: string): ReadonlyArray<string> => {
  const brace = /\{([^}]*)\}/.exec(path)
  if (brace === null) return [path]
  return brace[1]!
    .split(",")
    .flatMap((part) => expand(path.slice(0, brace.index) + part + path.slice(brace.index + brace[0].length)))
}

/**
 * The paths a section names in backticks: anything under a top folder of the repository, or under one of src/'s
 * (`domain/gc.ts`); placeholders (`adapters/<family>/`) skipped.
 */
const pathsIn = (section: string): ReadonlyArray<string> =>
  [...section.matchAll(/`([^`\s]+)`/g)]
    .map((match) => match[1]!)
    .filter((word) => !/[<>…*]/.test(word))
    .map((word) => (/^(domain|services|actors|cluster|daemon|cli|mcp|layers)\/./.test(word) ? `src/${word}` : word))
    .filter((word) => /^(src|adapters|test|scripts|bench|docs|examples)\/./.test(word))
    .flatMap(expand)

const section = (heading: string): string => {
  const start = text.indexOf(`\n## ${heading}\n`)
  expect(start, `ARCHITECTURE.md has a "## ${heading}" section`).toBeGreaterThanOrEqual(0)
  const end = text.indexOf("\n## ", start + 1)
  return text.slice(start, end < 0 ? undefined : end)
}

describe("ARCHITECTURE.md", () => {
  it("its state diagrams and tables are the ones the transition data draws (npm run docs:architecture)", () => {
    const check = spawnSync(process.execPath, ["scripts/architecture.mjs", "--check"], {
      cwd: root,
      encoding: "utf8"
    })
    expect(check.stderr, "run npm run docs:architecture").toBe("")
    expect(check.status).toBe(0)
  })

  it("every path 'Where things are' names exists", () => {
    const paths = pathsIn(section("Where things are"))
    expect(paths.length).toBeGreaterThan(50)
    expect(paths.filter((path) => !existsSync(new URL(path, root)))).toEqual([])
  })

  it("every link of its contents leads to a heading", () => {
    // GitHub's anchors: lower case, punctuation dropped, spaces as hyphens
    const anchor = (heading: string) =>
      heading
        .toLowerCase()
        .replace(/[^a-z0-9 _-]/g, "")
        .replace(/ /g, "-")
    const anchors = new Set([...text.matchAll(/^#{2,3} (.+)$/gm)].map((match) => anchor(match[1]!)))
    const links = [...section("Contents").matchAll(/\]\(#([^)]+)\)/g)].map((match) => match[1]!)
    expect(links.length).toBeGreaterThan(10)
    expect(links.filter((link) => !anchors.has(link))).toEqual([])
  })

  it("every path the rest of it names exists too", () => {
    const missing = pathsIn(text).filter((path) => !existsSync(new URL(path, root)))
    expect(missing).toEqual([])
  })
})

describe("CONTRIBUTING.md", () => {
  it("every path it names exists", () => {
    const contributing = readFileSync(new URL("CONTRIBUTING.md", root), "utf8")
    const paths = pathsIn(contributing)
    expect(paths.length).toBeGreaterThan(30)
    expect(paths.filter((path) => !existsSync(new URL(path, root)))).toEqual([])
  })
})
