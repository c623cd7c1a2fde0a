import { readdirSync, readFileSync } from "node:fs"
import * as Command from "@effect/cli/Command"
import { describe, expect, it } from "vitest"
import { expandAlias } from "../../src/cli/aliases.js"
import { errorDocument } from "../../src/cli/documents.js"
import { type DocumentName, documents, jsonSchemaOf } from "../../src/cli/json.js"
import { findUsageProblem } from "../../src/cli/usage.js"

const dir = new URL("../../docs/json/", import.meta.url)

describe("the --json contract", () => {
  it("docs/json holds exactly the schemas the Effect Schemas generate now (node scripts/json-schemas.mjs)", () => {
    const names = Object.keys(documents) as Array<DocumentName>
    const files = readdirSync(dir).filter((f) => f.endsWith(".schema.json"))
    expect(files.sort()).toEqual(names.map((n) => `${n}.schema.json`).sort())
    for (const name of names) {
      const committed = JSON.parse(readFileSync(new URL(`${name}.schema.json`, dir), "utf8")) as unknown
      expect(committed, `docs/json/${name}.schema.json is stale: run node scripts/json-schemas.mjs`).toEqual(
        jsonSchemaOf(name)
      )
    }
  })

  it("every document is versioned", () => {
    for (const name of Object.keys(documents) as Array<DocumentName>) {
      const schema = jsonSchemaOf(name) as { required?: ReadonlyArray<string> }
      expect(schema.required, name).toContain("schema")
    }
  })

  it("an error carries its hint apart from its message", () => {
    expect(errorDocument("WorldNotFound", 'project p has no world "x"; it has none yet\n  hint: berth up x')).toEqual({
      schema: 1,
      error: { tag: "WorldNotFound", message: 'project p has no world "x"; it has none yet', hint: "berth up x" }
    })
    expect(errorDocument("InvalidRequest", "bad")).toEqual({
      schema: 1,
      error: { tag: "InvalidRequest", message: "bad", hint: null }
    })
  })
})

describe("command aliases", () => {
  it("ls and list are status, stop is down, restart is reload", () => {
    expect(expandAlias(["ls", "--json"])).toEqual(["status", "--json"])
    expect(expandAlias(["list"])).toEqual(["status"])
    expect(expandAlias(["stop", "w1"])).toEqual(["down", "w1"])
    expect(expandAlias(["restart"])).toEqual(["reload"])
    expect(expandAlias(["up", "ls"])).toEqual(["up", "ls"])
  })

  it("an unknown command's closest name may be an alias", () => {
    const root = Command.make("berth").pipe(
      Command.withSubcommands([Command.make("status"), Command.make("down"), Command.make("reload")])
    )
    expect(findUsageProblem(root, ["restrat"])?.message).toBe(
      'unknown command "restrat" for berth; did you mean "restart"?'
    )
    expect(findUsageProblem(root, ["lss"])?.message).toBe('unknown command "lss" for berth; did you mean "ls"?')
  })
})
