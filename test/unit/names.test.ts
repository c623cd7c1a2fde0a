import { describe, expect, it } from "@effect/vitest"
import { WorldNotFound } from "../../src/domain/errors.js"
import * as FastCheck from "effect/FastCheck"
import { fnv1a32, shortHash } from "../../src/domain/hash.js"
import {
  assignSlug,
  baseSlug,
  closestName,
  envKey,
  isDnsLabel,
  projectLabel,
  sliceIdentifier,
  slugify
} from "../../src/domain/names.js"

const RUNS = { numRuns: 500 }

/** Names that really collide: a tiny alphabet where case and separators vanish, and long repeats that truncate. */
const alphabet = FastCheck.constantFrom("a", "A", "b", "/", "-", "_", ".")
const shortName = FastCheck.array(alphabet, { maxLength: 6 }).map((cs) => cs.join(""))
const longName = FastCheck.tuple(
  shortName,
  FastCheck.constantFrom("a", "A", "a-", "A_", "a/", "-"),
  FastCheck.integer({ min: 25, max: 75 }),
  shortName
).map(([head, unit, times, tail]) => head + unit.repeat(times) + tail)
/** Slugs of 57–63 characters that collide, so the hashed suffix has to cut into them. */
const nearLimit = FastCheck.tuple(
  FastCheck.integer({ min: 57, max: 63 }),
  FastCheck.constantFrom("a", "A"),
  FastCheck.constantFrom("", ".", "/", "-_")
).map(([times, unit, tail]) => unit.repeat(times) + tail)
const branchName = FastCheck.oneof(
  { arbitrary: shortName, weight: 3 },
  { arbitrary: longName, weight: 2 },
  { arbitrary: nearLimit, weight: 3 },
  { arbitrary: FastCheck.string({ unit: "grapheme", maxLength: 80 }), weight: 1 },
  { arbitrary: FastCheck.string({ maxLength: 200 }), weight: 1 }
)

const assignAll = (names: ReadonlyArray<string>): { slugs: Array<string>; taken: Map<string, string> } => {
  const taken = new Map<string, string>()
  const slugs = names.map((name) => {
    const slug = assignSlug(name, taken)
    taken.set(slug, name)
    return slug
  })
  return { slugs, taken }
}

const hostile = [
  "$(rm -rf ~)",
  "; rm -rf /",
  "'; DROP TABLE worlds; --",
  '"quoted"',
  "`whoami`",
  "🚀 launch 🎉",
  "feature/🦄",
  "",
  " ",
  "a".repeat(200)
]

describe("hash", () => {
  it("fnv1a32 matches the reference vectors", () => {
    expect(fnv1a32("")).toBe(0x811c9dc5)
    expect(fnv1a32("a")).toBe(0xe40c292c)
    expect(fnv1a32("foobar")).toBe(0xbf9cf968)
  })

  it("fnv1a32 hashes UTF-8 bytes, not UTF-16 code units", () => {
    // "é" is the single UTF-16 unit e9 but the two bytes c3 a9; the emoji is a surrogate pair but four bytes
    expect(fnv1a32("é")).toBe(0x1e9de8c1)
    expect(fnv1a32("🚀")).toBe(0x7fa78ada)
  })

  it("shortHash is fixed-length lower-case base36", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.string(), FastCheck.integer({ min: 1, max: 20 }), (s, length) => {
        const hash = shortHash(s, length)
        expect(hash).toMatch(new RegExp(`^[0-9a-z]{${length}}$`))
        expect(shortHash(s, length)).toBe(hash)
      }),
      RUNS
    )
    expect(shortHash("a")).toHaveLength(6)
    expect(shortHash("a", 8).startsWith(shortHash("a"))).toBe(true)
  })
})

describe("slugify", () => {
  it("reduces names to dash-separated lower-case alphanumerics", () => {
    expect(slugify("feature/Login-Page")).toBe("feature-login-page")
    expect(slugify("a/fix")).toBe("a-fix")
    expect(slugify("A_Fix")).toBe("a-fix")
    expect(slugify("Café Déjà-vu")).toBe("cafe-deja-vu")
    expect(slugify("ﬁx")).toBe("fix")
    expect(slugify("--release..1.2--")).toBe("release-1-2")
  })

  it("neutralises shell and SQL metacharacters, quotes, backticks and emoji", () => {
    expect(slugify("$(rm -rf ~)")).toBe("rm-rf")
    expect(slugify("; rm -rf /")).toBe("rm-rf")
    expect(slugify("'; DROP TABLE worlds; --")).toBe("drop-table-worlds")
    expect(slugify('"quoted"')).toBe("quoted")
    expect(slugify("`whoami`")).toBe("whoami")
    expect(slugify("🚀 launch 🎉")).toBe("launch")
  })

  it("never returns an empty slug", () => {
    expect(slugify("")).toBe("x")
    expect(slugify("---")).toBe("x")
    expect(slugify("🚀")).toBe("x")
  })

  it("does not shorten long names", () => {
    expect(slugify("a".repeat(200))).toBe("a".repeat(200))
  })

  it("is idempotent and yields dash-separated alphanumeric runs", () => {
    FastCheck.assert(
      FastCheck.property(branchName, (name) => {
        const slug = slugify(name)
        expect(slug).toMatch(/^[a-z0-9]+(?:-[a-z0-9]+)*$/)
        expect(slugify(slug)).toBe(slug)
      }),
      RUNS
    )
  })
})

describe("baseSlug", () => {
  it("keeps short slugs as they are", () => {
    expect(baseSlug("a/fix")).toBe("a-fix")
    expect(baseSlug("x".repeat(63))).toBe("x".repeat(63))
  })

  it("truncates long names and appends a hash of the full name", () => {
    const slug = baseSlug("a".repeat(200))
    expect(slug).toHaveLength(63)
    expect(slug).toBe(`${"a".repeat(56)}-${shortHash("a".repeat(200))}`)
    expect(baseSlug("a".repeat(201))).not.toBe(slug)
    expect(isDnsLabel(slug)).toBe(true)
  })

  it("does not leave a double dash where the cut falls on a separator", () => {
    const name = `${"a".repeat(55)}/${"b".repeat(20)}`
    const slug = baseSlug(name)
    expect(slug).toBe(`${"a".repeat(55)}-${shortHash(name)}`)
    expect(slug).not.toContain("--")
  })

  it("handles hostile names", () => {
    for (const name of hostile) expect(isDnsLabel(baseSlug(name))).toBe(true)
  })

  it("always yields a DNS label", () => {
    FastCheck.assert(
      FastCheck.property(branchName, (name) => {
        expect(isDnsLabel(baseSlug(name))).toBe(true)
      }),
      RUNS
    )
  })
})

describe("assignSlug", () => {
  it("suffixes names whose slug is held by a different name", () => {
    const taken = new Map<string, string>()
    expect(assignSlug("a/fix", taken)).toBe("a-fix")
    taken.set("a-fix", "a/fix")
    const second = assignSlug("a-fix", taken)
    expect(second).toBe(`a-fix-${shortHash("a-fix")}`)
    taken.set(second, "a-fix")
    const third = assignSlug("A_Fix", taken)
    expect(third).toBe(`a-fix-${shortHash("A_Fix")}`)
    expect(new Set(["a-fix", second, third]).size).toBe(3)
  })

  it("gives a name back the slug it already holds", () => {
    const taken = new Map([
      ["a-fix", "a/fix"],
      [`a-fix-${shortHash("A_Fix")}`, "A_Fix"]
    ])
    expect(assignSlug("a/fix", taken)).toBe("a-fix")
    expect(assignSlug("A_Fix", taken)).toBe(`a-fix-${shortHash("A_Fix")}`)
  })

  it("rehashes with #1, #2, … while the suffixed slug is held too", () => {
    const taken = new Map([
      ["a-fix", "a/fix"],
      [`a-fix-${shortHash("A_Fix")}`, "someone"],
      [`a-fix-${shortHash("A_Fix#1")}`, "someone else"]
    ])
    expect(assignSlug("A_Fix", taken)).toBe(`a-fix-${shortHash("A_Fix#2")}`)
  })

  it("keeps suffixed long slugs within 63 characters", () => {
    const name = "a".repeat(200)
    const taken = new Map([[baseSlug(name), "A".repeat(200)]])
    const slug = assignSlug(name, taken)
    expect(slug).not.toBe(baseSlug(name))
    expect(slug.length).toBeLessThanOrEqual(63)
    expect(isDnsLabel(slug)).toBe(true)
  })

  it("gives hostile and empty names distinct labels", () => {
    const { slugs } = assignAll(hostile)
    expect(new Set(slugs).size).toBe(hostile.length)
    for (const slug of slugs) expect(isDnsLabel(slug)).toBe(true)
  })

  it("always yields a DNS label and is stable", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.array(branchName, { maxLength: 20 }), branchName, (others, name) => {
        const { taken } = assignAll(others)
        const slug = assignSlug(name, taken)
        expect(isDnsLabel(slug)).toBe(true)
        expect(assignSlug(name, taken)).toBe(slug)
        expect(assignSlug(name, new Map(taken))).toBe(slug)
      }),
      RUNS
    )
  })

  it("yields distinct slugs for distinct names assigned one by one", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.uniqueArray(branchName, { maxLength: 40 }), (names) => {
        const { slugs, taken } = assignAll(names)
        expect(new Set(slugs).size).toBe(names.length)
        expect(taken.size).toBe(names.length)
        for (const slug of slugs) expect(isDnsLabel(slug)).toBe(true)
      }),
      RUNS
    )
  })

  it("finds a free slug however many suffixed candidates are held by others", () => {
    FastCheck.assert(
      FastCheck.property(branchName, FastCheck.integer({ min: 0, max: 6 }), (name, blocked) => {
        const taken = new Map<string, string>()
        for (let i = 0; i < blocked; i++) taken.set(assignSlug(name, taken), `other ${i}`)
        const slug = assignSlug(name, taken)
        expect(taken.has(slug)).toBe(false)
        expect(isDnsLabel(slug)).toBe(true)
      }),
      RUNS
    )
  })
})

describe("projectLabel", () => {
  it("is a DNS label", () => {
    expect(projectLabel("My Project")).toBe("my-project")
    expect(projectLabel("")).toBe("x")
    for (const name of hostile) expect(isDnsLabel(projectLabel(name))).toBe(true)
    FastCheck.assert(
      FastCheck.property(branchName, (name) => {
        expect(isDnsLabel(projectLabel(name))).toBe(true)
      }),
      RUNS
    )
  })
})

describe("isDnsLabel", () => {
  it("accepts 1–63 lower-case alphanumerics and inner dashes", () => {
    for (const ok of ["a", "0", "a-b", "a--b", "9lives", "x".repeat(63)]) expect(isDnsLabel(ok)).toBe(true)
  })

  it("rejects everything else", () => {
    for (const bad of ["", "-a", "a-", "-", "A", "a_b", "a.b", "a b", "é", "x".repeat(64), "$(rm -rf ~)"]) {
      expect(isDnsLabel(bad)).toBe(false)
    }
  })
})

describe("sliceIdentifier", () => {
  it("joins sanitised parts with underscores", () => {
    expect(sliceIdentifier(["shop", "feature-login", "db"], 63)).toBe("shop_feature_login_db")
    expect(sliceIdentifier(["My-Proj", "a/fix", "API"], 63)).toBe("my_proj_a_fix_api")
    expect(sliceIdentifier(["a__b", "", "_c_"], 63)).toBe("a_b_c")
  })

  it("starts with a letter", () => {
    expect(sliceIdentifier(["1shop", "x"], 63)).toBe("b_1shop_x")
    expect(sliceIdentifier(["_9"], 63)).toBe("b_9")
    expect(sliceIdentifier([], 63)).toBe("b")
    expect(sliceIdentifier(["", "🚀"], 63)).toBe("b")
  })

  it("neutralises hostile parts", () => {
    expect(sliceIdentifier(["$(rm -rf ~)", "; drop", "`x`", "'q'", '"d"'], 63)).toBe("rm_rf_drop_x_q_d")
    for (const name of hostile) expect(sliceIdentifier(["p", name, "db"], 63)).toMatch(/^[a-z][a-z0-9_]*$/)
  })

  it("truncates with a hash of the whole identifier", () => {
    const whole = `p_${"a".repeat(200)}_db`
    const id = sliceIdentifier(["p", "a".repeat(200), "db"], 63)
    expect(id).toHaveLength(63)
    expect(id).toBe(`${whole.slice(0, 54)}_${shortHash(whole, 8)}`)
    expect(sliceIdentifier(["p", "a".repeat(200), "cache"], 63)).not.toBe(id)
  })

  it("does not leave a double underscore where the cut falls on a separator", () => {
    const id = sliceIdentifier([`${"a".repeat(6)}-${"b".repeat(30)}`], 16)
    expect(id).toBe(`${"a".repeat(6)}_${shortHash(`${"a".repeat(6)}_${"b".repeat(30)}`, 8)}`)
  })

  it("always matches the identifier grammar and length bound", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(FastCheck.oneof(branchName, FastCheck.string()), { maxLength: 5 }),
        FastCheck.integer({ min: 16, max: 128 }),
        (parts, maxLength) => {
          const id = sliceIdentifier(parts, maxLength)
          expect(id).toMatch(/^[a-z][a-z0-9_]*$/)
          expect(id.length).toBeLessThanOrEqual(maxLength)
          expect(sliceIdentifier(parts, maxLength)).toBe(id)
        }
      ),
      RUNS
    )
  })
})

describe("envKey", () => {
  it("upper-cases and replaces every other character with _", () => {
    expect(envKey("my-api")).toBe("MY_API")
    expect(envKey("web.v2")).toBe("WEB_V2")
    expect(envKey("db_main")).toBe("DB_MAIN")
    expect(envKey("a--b")).toBe("A__B")
    expect(envKey("$(rm -rf ~)")).toBe("__RM__RF___")
    expect(envKey("🚀")).toBe("_")
  })

  it("never starts with a digit", () => {
    expect(envKey("9lives")).toBe("_9LIVES")
    expect(envKey("")).toBe("_")
  })

  it("always yields a valid env-var name", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.oneof(branchName, FastCheck.string()), (name) => {
        expect(envKey(name)).toMatch(/^[A-Z_][A-Z0-9_]*$/)
      }),
      RUNS
    )
  })
})

describe("closestName", () => {
  const services = ["web", "api", "database", "cache", "worker"]

  it("suggests the nearest candidate", () => {
    expect(closestName("wbe", services)).toBe("web")
    expect(closestName("databse", services)).toBe("database")
    expect(closestName("cahce", services)).toBe("cache")
    expect(closestName("API", services)).toBe("api")
    expect(closestName("wroker", services)).toBe("worker")
  })

  it("gives up when nothing is close", () => {
    expect(closestName("frontend", services)).toBeUndefined()
    expect(closestName("x", [])).toBeUndefined()
  })

  it("allows max(2, floor(length / 3)) edits", () => {
    expect(closestName("abcdefghi", ["abcdefxyz"])).toBe("abcdefxyz")
    expect(closestName("abcdefgh", ["abcdefxyz"])).toBeUndefined()
    expect(closestName("ab", ["xy"])).toBe("xy")
    expect(closestName("abc", ["xyz"])).toBeUndefined()
  })

  it("counts a transposition as one edit, without editing the swapped pair again (OSA)", () => {
    expect(closestName("ca", ["ac"])).toBe("ac")
    // true Damerau–Levenshtein gives 2 here, optimal string alignment 3
    expect(closestName("ca", ["abc"])).toBeUndefined()
  })

  it("breaks ties by iteration order", () => {
    expect(closestName("ab", ["ac", "ad"])).toBe("ac")
    expect(closestName("ab", new Set(["ad", "ac"]))).toBe("ad")
  })

  it("returns an exact match when there is one", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.uniqueArray(FastCheck.string(), { minLength: 1, maxLength: 8 }), (candidates) => {
        for (const candidate of candidates) {
          const suggestion = closestName(candidate, candidates)
          expect(suggestion?.toLowerCase()).toBe(candidate.toLowerCase())
        }
      }),
      RUNS
    )
  })
})

describe("WorldNotFound", () => {
  const known = ["main", "feature-a", "feature-b"]
  it("for up, points at the closest existing world before offering to make a new one", () => {
    const typo = new WorldNotFound({ project: "shop", name: "featur-a", known, command: "up" })
    expect(typo.message).toBe(
      'project shop has no world "featur-a"; its worlds: main, feature-a, feature-b\n  hint: did you mean feature-a? (berth up featur-a makes a new world)'
    )
    expect(new WorldNotFound({ project: "shop", name: "brand-new", known: ["main"], command: "up" }).message).toMatch(
      /hint: berth up brand-new$/
    )
  })

  it("for a command that acts on a world that exists, never offers to make it: the closest name, or berth status", () => {
    for (const command of ["down", "remove", "reload", "logs", "env", "exec", undefined]) {
      const typo = new WorldNotFound({ project: "shop", name: "featur-a", known, command })
      expect(typo.message).not.toContain("berth up")
      expect(typo.message).toMatch(
        command === undefined
          ? /\n {2}hint: did you mean feature-a\?$/
          : new RegExp(`\\n {2}hint: did you mean feature-a\\? berth ${command} feature-a$`)
      )
      const other = new WorldNotFound({ project: "shop", name: "nosuch", known, command })
      expect(other.message).toBe(
        'project shop has no world "nosuch"; its worlds: main, feature-a, feature-b\n  hint: use one of them (berth status shows each with its state)'
      )
      expect(new WorldNotFound({ project: "shop", name: "nosuch", known: [], command }).message).toBe(
        'project shop has no world "nosuch"; it has none yet\n  hint: berth status lists the worlds of every project'
      )
    }
    // a name with shell metacharacters is quoted in the command offered
    expect(new WorldNotFound({ project: "shop", name: "feat$a", known: ["feat a"], command: "down" }).message).toMatch(
      /berth down 'feat a'$/
    )
  })

  it("for the worktree the command ran in (no name given), says that berth up starts its world", () => {
    const here = new WorldNotFound({
      project: "shop",
      name: "main",
      known: ["feature-a"],
      command: "env",
      current: true
    })
    expect(here.message).toBe(
      'project shop has no world "main"; its worlds: feature-a\n  hint: this worktree\'s world was never brought up: berth up starts it'
    )
  })
})
