import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { escapesWorktree, globBase, globToRegExp, goldenKey, goldenName } from "../../src/domain/golden.js"

const recipe = {
  adapter: "postgres",
  server: "postgres://127.0.0.1:5432/postgres",
  migrate: "npm run migrate",
  seed: "npm run seed",
  inputs: [
    ["migrations/001.sql", "aa"],
    ["seeds/a.sql", "bb"]
  ] as const
}

describe("goldenKey", () => {
  it("is stable, ignores the order of inputs, and changes with anything the golden is made from", () => {
    const key = goldenKey(recipe)
    expect(key).toMatch(/^[0-9a-f]{64}$/)
    expect(goldenKey({ ...recipe, inputs: [...recipe.inputs].reverse() })).toBe(key)
    expect(goldenKey({ ...recipe, migrate: "npm run migrate -- --all" })).not.toBe(key)
    expect(goldenKey({ ...recipe, seed: undefined })).not.toBe(key)
    expect(goldenKey({ ...recipe, server: "postgres://127.0.0.1:5433/postgres" })).not.toBe(key)
    expect(goldenKey({ ...recipe, inputs: [["migrations/001.sql", "ab"]] })).not.toBe(key)
    // a renamed file is a different input even with the same content
    expect(goldenKey({ ...recipe, inputs: [["migrations/002.sql", "aa"], recipe.inputs[1]] })).not.toBe(key)
  })

  it("keeps the command boundaries: moving text between migrate and seed is a change", () => {
    expect(goldenKey({ ...recipe, migrate: "a", seed: "bc" })).not.toBe(
      goldenKey({ ...recipe, migrate: "ab", seed: "c" })
    )
  })
})

describe("goldenName", () => {
  it("starts with golden_ and stays within the limit", () => {
    expect(goldenName("shop", "db", "0123456789abcdef", 63)).toBe("golden_shop_db_0123456789")
    FastCheck.assert(
      FastCheck.property(
        FastCheck.string({ minLength: 1, maxLength: 80 }),
        FastCheck.string({ maxLength: 40 }),
        (p, s) => {
          const name = goldenName(p, s, "ffffffffff", 63)
          return name.length <= 63 && /^golden_[a-z0-9_]*$/.test(name)
        }
      )
    )
  })
})

describe("golden_inputs globs", () => {
  const matches = (glob: string, path: string) => globToRegExp(glob).test(path)

  it("matches * within a segment, ** across segments, ? and {a,b}", () => {
    expect(matches("migrations/**", "migrations/001.sql")).toBe(true)
    expect(matches("migrations/**", "migrations/deep/er/002.sql")).toBe(true)
    expect(matches("migrations/**", "seeds/001.sql")).toBe(false)
    expect(matches("migrations/*.sql", "migrations/001.sql")).toBe(true)
    expect(matches("migrations/*.sql", "migrations/x/001.sql")).toBe(false)
    expect(matches("**/*.sql", "a.sql")).toBe(true)
    expect(matches("**/*.sql", "a/b/c.sql")).toBe(true)
    expect(matches("db/**/schema.rb", "db/schema.rb")).toBe(true)
    expect(matches("db/**/schema.rb", "db/x/y/schema.rb")).toBe(true)
    expect(matches("seed?.sql", "seed1.sql")).toBe(true)
    expect(matches("seed?.sql", "seed12.sql")).toBe(false)
    expect(matches("{migrations,seeds}/*", "seeds/a")).toBe(true)
    expect(matches("{migrations,seeds}/*", "other/a")).toBe(false)
    expect(matches("./prisma/schema.prisma", "prisma/schema.prisma")).toBe(true)
  })

  it("treats regex metacharacters in names literally", () => {
    expect(matches("a+b(c).sql", "a+b(c).sql")).toBe(true)
    expect(matches("a+b(c).sql", "aab(c).sql")).toBe(false)
    expect(matches("v1.0/*.sql", "v1x0/a.sql")).toBe(false)
  })

  it("names the folder a walk can start from", () => {
    expect(globBase("migrations/**")).toBe("migrations")
    expect(globBase("db/migrate/*.rb")).toBe("db/migrate")
    expect(globBase("**/*.sql")).toBe("")
    expect(globBase("schema.sql")).toBe("")
    expect(globBase("{a,b}/x")).toBe("")
  })

  it("refuses globs that leave the worktree", () => {
    expect(escapesWorktree("../secrets/**")).toBe(true)
    expect(escapesWorktree("/etc/*")).toBe(true)
    expect(escapesWorktree("a/../../b")).toBe(true)
    expect(escapesWorktree("migrations/**")).toBe(false)
  })
})
