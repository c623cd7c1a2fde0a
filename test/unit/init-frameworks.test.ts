/**
 * `berth init` for the dev servers berth recognises: package.json scripts that start one get a command that works as
 * written (berth adds the port, strict-port and host flags at start) and say so; compose values written for a
 * developer's machine (`http://localhost:4000`, where another service publishes 4000) become that service's token.
 */
import * as Either from "effect/Either"
import { parse } from "smol-toml"
import { describe, expect, it } from "vitest"
import { parseConfig } from "../../src/domain/config/parse.js"
import { fromCompose } from "../../src/domain/init/compose.js"
import { fromPackageJson } from "../../src/domain/init/packageJson.js"

type Table = Record<string, unknown>

const valid = (toml: string): Record<string, Table> => {
  const checked = parseConfig(toml, "berth.toml")
  if (Either.isLeft(checked)) expect.fail(checked.left.map((d) => `${d.path}: ${d.message}`).join("\n"))
  return (parse(toml) as { services: Record<string, Table> }).services
}

const fromScripts = (scripts: Record<string, string>, lockfiles: ReadonlyArray<string> = ["package-lock.json"]) =>
  fromPackageJson({ packageJsonText: JSON.stringify({ scripts }), projectName: "demo", lockfiles })

describe("berth init from package.json, for dev servers berth recognises", () => {
  it("keeps `npm run dev` for Vite and says which flags berth adds when it starts it", () => {
    const result = fromScripts({ dev: "vite" })
    expect(valid(result.toml).web).toEqual({ cmd: "npm run dev", url: "web", env: { PORT: "${self.port}" } })
    expect(result.toml).toContain(
      "# berth recognises vite here and starts it as `npm run dev -- --port ${self.port} --strictPort --host 127.0.0.1`"
    )
    expect(result.toml).toContain("inject = false")
    expect(result.toml).not.toContain("ignores PORT")
  })

  it("names the framework for each manager's way of passing flags", () => {
    expect(fromScripts({ dev: "astro dev" }, ["pnpm-lock.yaml"]).toml).toContain(
      "starts it as `pnpm run dev --port ${self.port} --host 127.0.0.1`"
    )
    expect(fromScripts({ dev: "next dev" }, ["yarn.lock"]).toml).toContain(
      "starts it as `yarn run dev -p ${self.port} -H 127.0.0.1`"
    )
    expect(fromScripts({ start: "ng serve" }).toml).toContain("berth recognises angular here")
  })

  it("says how to pass the port by hand when the script is more than one command", () => {
    const result = fromScripts({ dev: "npm run codegen && vite" })
    valid(result.toml)
    expect(result.toml).toContain("runs vite inside a longer script")
    expect(result.toml).toContain("npm run dev -- --port ${self.port} --strictPort")
  })

  it("adds nothing for a server that reads PORT itself", () => {
    const result = fromScripts({ start: "node server.js" })
    expect(valid(result.toml).web).toEqual({ cmd: "npm run start", url: "web", env: { PORT: "${self.port}" } })
    expect(result.toml).not.toContain("berth recognises")
  })
})

describe("berth init from compose: values written for a developer's machine", () => {
  const convert = (composeText: string) => {
    const result = fromCompose({ composeText, composeFile: "compose.yaml", projectName: "demo" })
    if (Either.isLeft(result)) throw new Error(result.left.message)
    return valid(result.right.toml)
  }

  it("turns http://localhost:<a port another service publishes> into that service's url", () => {
    const services = convert(`services:
  api:
    build: ./api
    command: node server.js
    ports: ["4000:3000"]
  web:
    build: ./web
    command: npm run dev
    ports: ["8080:8080"]
    environment:
      API_URL: http://localhost:4000
      API_ON_LOOPBACK: http://127.0.0.1:4000/v1
      OWN_URL: http://localhost:8080
      ELSEWHERE: http://localhost:9999
      DATABASE_URL: postgres://app@localhost:5433/app
  db:
    image: postgres:16
    ports: ["5433:5432"]
`)
    const env = services.web!.env as Record<string, string>
    expect(env.API_URL).toBe("${api.url}")
    expect(env.API_ON_LOOPBACK).toBe("${api.url}")
    expect(env.DATABASE_URL).toBe("${db.url}")
    // its own port, and one nobody publishes, stay as written
    expect(env.OWN_URL).toBe("http://localhost:8080")
    expect(env.ELSEWHERE).toBe("http://localhost:9999")
    expect(services.api!.url).toBe("api")
  })
})
