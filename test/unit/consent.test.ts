import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import { parseConfig } from "../../src/domain/config/parse.js"
import { allowedDigests, commandsOf, consentsByEnvironment, decisionLine } from "../../src/domain/consent.js"

const digest = (c: string) => c.repeat(64)

describe("what a berth.toml would run", () => {
  it("lists every command it names, where it is written, in the file's order", () => {
    const parsed = parseConfig(
      `[project]
setup = "npm ci"

[services.db]
adapter = "postgres"
migrate = "npm run migrate"
seed = "npm run seed"

[services.api]
cmd = "node api.js"
setup = "npm run build"
health = { cmd = "curl -f localhost" }

[services.web]
cmd = "vite"
health = { http = "/" }

[agents]
verify = ["npm test", "npm run lint"]

[overrides."exp-*".services.api]
cmd = "node api.js --experimental"
`,
      "berth.toml"
    )
    if (Either.isLeft(parsed)) return expect.fail(JSON.stringify(parsed.left))
    expect(commandsOf(parsed.right.config)).toEqual([
      { field: "project.setup", command: "npm ci" },
      { field: "services.db.migrate", command: "npm run migrate" },
      { field: "services.db.seed", command: "npm run seed" },
      { field: "services.api.setup", command: "npm run build" },
      { field: "services.api.cmd", command: "node api.js" },
      { field: "services.api.health.cmd", command: "curl -f localhost" },
      { field: "services.web.cmd", command: "vite" },
      { field: 'overrides."exp-*".api.cmd', command: "node api.js --experimental" },
      { field: "agents.verify[0]", command: "npm test" },
      { field: "agents.verify[1]", command: "npm run lint" }
    ])
  })
})

describe("the consent store", () => {
  it("takes each digest's last decision, and skips lines that are not decisions", () => {
    const text = [
      decisionLine("allow", digest("a"), 1, "/r/berth.toml"),
      decisionLine("allow", digest("b"), 2, "/s/berth.toml"),
      "garbage\n",
      "allow not-a-digest 3\n",
      decisionLine("deny", digest("a"), 4),
      ""
    ].join("")
    expect([...allowedDigests(text)]).toEqual([digest("b")])
    expect(allowedDigests(`${text}${decisionLine("allow", digest("a"), 5, "")}`).has(digest("a"))).toBe(true)
  })

  it("answers for any sequence of decisions as the last one of each digest says", () => {
    const decision = FastCheck.record({
      allow: FastCheck.boolean(),
      digest: FastCheck.constantFrom(digest("a"), digest("b"), digest("c"))
    })
    FastCheck.assert(
      FastCheck.property(FastCheck.array(decision), (decisions) => {
        const text = decisions.map((d, i) => decisionLine(d.allow ? "allow" : "deny", d.digest, i, "f")).join("")
        const allowed = allowedDigests(text)
        for (const d of [digest("a"), digest("b"), digest("c")]) {
          const last = decisions.filter((x) => x.digest === d).at(-1)
          expect(allowed.has(d)).toBe(last?.allow === true)
        }
      })
    )
  })

  it("reads a file path with spaces or quotes in it as part of its line", () => {
    const line = decisionLine("allow", digest("d"), 1, '/home/a b/"q"/berth.toml')
    expect(line.split("\n")).toHaveLength(2)
    expect(allowedDigests(line).has(digest("d"))).toBe(true)
  })
})

describe("the environment switch", () => {
  it("gives consent for BERTH_YES=1 (or true, yes), nothing else", () => {
    expect(consentsByEnvironment({ BERTH_YES: "1" })).toBe(true)
    expect(consentsByEnvironment({ BERTH_YES: "yes" })).toBe(true)
    expect(consentsByEnvironment({ BERTH_YES: "TRUE" })).toBe(true)
    expect(consentsByEnvironment({ BERTH_YES: "0" })).toBe(false)
    expect(consentsByEnvironment({ BERTH_YES: "" })).toBe(false)
    expect(consentsByEnvironment({})).toBe(false)
  })
})
