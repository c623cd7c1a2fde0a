import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { type Entry, land, within } from "../../src/domain/paths.js"

/** A disk as a table: folders, files and links by absolute path; anything else is missing. */
const disk =
  (entries: Readonly<Record<string, string>>) =>
  (path: string): Entry => {
    const e = entries[path]
    if (e === undefined) return { kind: "missing" }
    if (e === "folder") return { kind: "folder" }
    if (e === "file") return { kind: "file" }
    return { kind: "link", target: e.slice("-> ".length) }
  }

const root = "/w"
const tree = disk({
  "/w": "folder",
  "/w/src": "folder",
  "/w/src/app.ts": "file",
  "/w/.env": "-> /home/u/.bashrc",
  "/w/env": "-> config/dev.env",
  "/w/config": "folder",
  "/w/config/dev.env": "file",
  "/w/sub": "-> /elsewhere",
  "/w/up": "-> ..",
  "/w/abs-in": "-> /w/config",
  "/w/loop": "-> loop",
  "/w/out-and-back": "-> /elsewhere/back",
  "/elsewhere": "folder",
  "/elsewhere/back": "-> /w/src",
  "/home/u/.bashrc": "file"
})

describe("land", () => {
  it("keeps a plain path, one not there yet, and a link that stays inside", () => {
    expect(land(root, "src/app.ts", tree)).toEqual({ resolved: "/w/src/app.ts", inside: true, relative: "src/app.ts" })
    expect(land(root, "new/deep/file", tree)).toMatchObject({ resolved: "/w/new/deep/file", inside: true })
    expect(land(root, "env", tree)).toMatchObject({ resolved: "/w/config/dev.env", inside: true })
    expect(land(root, "./src/../config/./dev.env", tree)).toMatchObject({ resolved: "/w/config/dev.env", inside: true })
    expect(land(root, "abs-in/dev.env", tree)).toMatchObject({ resolved: "/w/config/dev.env", inside: true })
    expect(land(root, "", tree)).toEqual({ resolved: "/w", inside: true, relative: "" })
  })

  it("names the link that leads out, as the last part or on the way", () => {
    expect(land(root, ".env", tree)).toEqual({ resolved: "/home/u/.bashrc", inside: false, link: ".env" })
    expect(land(root, "sub", tree)).toEqual({ resolved: "/elsewhere", inside: false, link: "sub" })
    expect(land(root, "sub/.env", tree)).toEqual({ resolved: "/elsewhere/.env", inside: false, link: "sub" })
    expect(land(root, "src/../sub/x", tree)).toMatchObject({ inside: false, link: "sub" })
    expect(land(root, "up/x", tree)).toEqual({ resolved: "/x", inside: false, link: "up" })
    // out by a link counts, even where the rest comes back
    expect(land(root, "sub/../w/src", tree)).toMatchObject({ resolved: "/w/src", inside: false, link: "sub" })
  })

  it("refuses `..` above the root, an absolute path and a loop", () => {
    expect(land(root, "../x", tree)).toEqual({ resolved: "/x", inside: false })
    expect(land(root, "src/../../w/src", tree)).toMatchObject({ inside: false })
    expect(land(root, "/w/src", tree)).toMatchObject({ inside: false })
    expect(land(root, "loop/x", tree)).toMatchObject({ inside: false, link: "loop" })
  })

  it("a link that ends inside after passing outside ends inside", () => {
    expect(land(root, "out-and-back/app.ts", tree)).toMatchObject({ resolved: "/w/src/app.ts", inside: true })
  })

  it("leaves the last part's link unfollowed when asked (what is copied is the link itself)", () => {
    expect(land(root, ".env", tree, { followLast: false })).toMatchObject({ resolved: "/w/.env", inside: true })
    expect(land(root, "sub/x", tree, { followLast: false })).toMatchObject({ inside: false, link: "sub" })
  })

  it("takes what is below a file or a missing part as written", () => {
    expect(land(root, "src/app.ts/x", tree)).toMatchObject({ resolved: "/w/src/app.ts/x", inside: true })
    expect(land(root, "nope/../..", tree)).toMatchObject({ inside: false })
  })

  it("lands inside whenever no part of the path is a link and it never climbs above the root", () => {
    const plain = (path: string): Entry =>
      path === "/w" || path.startsWith("/w/") ? { kind: "folder" } : { kind: "missing" }
    const part = FastCheck.constantFrom("a", "b", ".", "..", "")
    FastCheck.assert(
      FastCheck.property(FastCheck.array(part, { maxLength: 8 }), (parts) => {
        let depth = 0
        let climbs = false
        for (const p of parts) {
          if (p === "..") depth--
          else if (p !== "." && p !== "") depth++
          if (depth < 0) climbs = true
        }
        // a path that starts with "/" is absolute: never inside (above)
        const l = land(root, `./${parts.join("/")}`, plain)
        return l.inside === !climbs && (!l.inside || within(root, l.resolved))
      })
    )
  })
})
