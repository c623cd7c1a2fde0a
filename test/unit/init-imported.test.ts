import * as Either from "effect/Either"
import { parse } from "smol-toml"
import { describe, expect, it } from "vitest"
import { lintConfig } from "../../src/domain/config/lint.js"
import { parseConfig } from "../../src/domain/config/parse.js"
import { fromBinky, fromIsola } from "../../src/domain/init/imported.js"
import type { InitResult } from "../../src/domain/init/model.js"

type Table = Record<string, unknown>

interface Doc {
  readonly project: Table
  readonly services: Record<string, Table>
  readonly overrides: Record<string, { services: Record<string, Table> }>
}

/** The output must pass berth's own config check, with no warning but those that depend on the machine. */
const valid = (result: InitResult): InitResult => {
  const checked = parseConfig(result.toml, "berth.toml")
  if (Either.isLeft(checked)) expect.fail(checked.left.map((d) => `${d.path}: ${d.message}`).join("\n"))
  const warnings = lintConfig(checked.right, { onPath: () => false, env: () => undefined })
    .map((w) => w.message)
    .filter((message) => !/ is not set$| is not on PATH$/.test(message))
  expect(warnings).toEqual([])
  return result
}

const isola = (text: string): InitResult => {
  const result = fromIsola({ text, file: ".isola.toml", projectName: "demo" })
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return valid(result.right)
}

const binky = (text: string): InitResult => {
  const result = fromBinky({ text, file: "binky.toml", projectName: "demo" })
  if (Either.isLeft(result)) throw new Error(result.left.message)
  return valid(result.right)
}

const doc = (result: InitResult): Doc => {
  const parsed = parse(result.toml) as Partial<Doc>
  return { project: parsed.project ?? {}, services: parsed.services ?? {}, overrides: parsed.overrides ?? {} }
}

/** The comment lines right above `header` (a table's `[...]` line, or a key's `key =`). */
const commentsAbove = (toml: string, header: string): Array<string> => {
  const lines = toml.split("\n")
  const at = lines.findIndex((line) => line === header || line.startsWith(`${header} = `))
  expect(at, `${header} in\n${toml}`).toBeGreaterThan(-1)
  const out: Array<string> = []
  for (let i = at - 1; i >= 0 && lines[i]!.startsWith("#"); i--) out.unshift(lines[i]!)
  return out
}

describe("fromIsola: services", () => {
  it("maps command, dir, setup and env, and gives a service with a port range a url", () => {
    const result = isola(`[services.frontend]
command = "pnpm run dev --port $PORT"
dir = "frontend"
setup = "pnpm install"
port_range = { min = 3100, max = 3199 }
proxy_port = 3000
env = { NODE_ENV = "development", LEVEL = 3, DEBUG = true }

[services.worker]
command = "pnpm run worker"
`)
    const { services } = doc(result)
    expect(services.frontend).toEqual({
      cmd: "pnpm run dev --port $PORT",
      dir: "frontend",
      url: "frontend",
      env: { NODE_ENV: "development", LEVEL: "3", DEBUG: "true" },
      setup: "pnpm install"
    })
    // a background process (no port_range) gets no port
    expect(services.worker).toEqual({ cmd: "pnpm run worker" })
  })

  it("writes a failing TODO command where isola gives none", () => {
    const result = isola(`[services.api]\ndir = "api"\n`)
    expect(doc(result).services.api?.cmd).toBe("echo 'berth: set services.api.cmd in berth.toml' >&2; exit 1")
    expect(commentsAbove(result.toml, "cmd")).toEqual(["# TODO: .isola.toml gives api no command; set cmd"])
    expect(result.notes).toContain("api: no command in .isola.toml; set services.api.cmd")
  })

  it("turns isola's references into berth's tokens", () => {
    const result = isola(`[services.web]
command = "serve --api \${services.api.url} --branch \${ISOLA_BRANCH} --home \${HOME}"
port_range = { min = 3000, max = 3099 }
proxy_port = 3000

[services.web.env]
API = "\${services.api.url}"
API_PORT = "\${services.api.port}"
API_DIRECT = "\${services.api.direct_url}"
DB = "postgres-at:\${accessories.db.url}"
BRANCH = "\${ISOLA_BRANCH}"
SLUG = "\${ISOLA_BRANCH_SLUG}"
SELF = "\${ISOLA_SERVICE}"
SIBLING = "\${ISOLA_API_URL}"
SIBLING_PORT = "\${ISOLA_API_PORT}"
SIBLING_DIRECT = "\${ISOLA_API_DIRECT_URL}"
OWN_PORT = "\${PORT}"
USER_VAR = "\${SOME_TOKEN}"
LITERAL = "p$ssw0rd"

[services.api]
command = "node api.js"
port_range = { min = 3100, max = 3199 }

[accessories.db]
kind = "postgres"
server_url = "postgres://postgres@localhost:5432/postgres"
`)
    const web = doc(result).services.web!
    expect(web.cmd).toBe("serve --api ${api.url} --branch ${world.name} --home $${HOME}")
    expect(web.env).toEqual({
      API: "${api.url}",
      API_PORT: "${api.port}",
      API_DIRECT: "http://127.0.0.1:${api.port}",
      DB: "postgres-at:${db.url}",
      BRANCH: "${world.name}",
      SLUG: "${world.slug}",
      SELF: "web",
      SIBLING: "${api.url}",
      SIBLING_PORT: "${api.port}",
      SIBLING_DIRECT: "http://127.0.0.1:${api.port}",
      OWN_PORT: "${self.port}",
      USER_VAR: "${env.SOME_TOKEN}",
      LITERAL: "p$ssw0rd"
    })
  })

  it("leaves out a variable berth cannot give, saying so above the service", () => {
    const result = isola(`[services.web]
command = "node web.js"
port_range = { min = 3000, max = 3099 }
env = { NODE_EXTRA_CA_CERTS = "\${proxy.ca_cert}", GONE = "\${services.nowhere.url}", KEPT = "x" }
`)
    expect(doc(result).services.web?.env).toEqual({ KEPT: "x" })
    expect(commentsAbove(result.toml, "[services.web]")).toEqual([
      "# .isola.toml:4: services.web.env.NODE_EXTRA_CA_CERTS: not carried: berth has no token for its CA's file (`berth trust` makes the system trust it)",
      "# .isola.toml:4: services.web.env.GONE: not carried: berth has nothing for ${services.nowhere.url}"
    ])
  })

  it("writes env_file from [env_file], a service's own env_file winning; none when writing is off", () => {
    const on = isola(`[env_file]
path = ".env.local"

[services.a]
command = "a"

[services.b]
command = "b"
env_file = ".env.b"

[services.c]
command = "c"
env_file = ""
`)
    const { services } = doc(on)
    expect(services.a?.env_file).toBe(".env.local")
    expect(services.b?.env_file).toBe(".env.b")
    expect(services.c?.env_file).toBeUndefined()
    const off = isola(`[env_file]\nenabled = false\n\n[services.a]\ncommand = "a"\n`)
    expect(doc(off).services.a?.env_file).toBeUndefined()
    // isola's default (write into an existing .env) is not berth's: said, not guessed
    const unset = isola(`[services.a]\ncommand = "a"\n`)
    expect(doc(unset).services.a?.env_file).toBeUndefined()
    expect(unset.notes.join("\n")).toMatch(/add env_file = ".env" to a service that reads its .env/)
  })

  it("gives the global [env] of older files to every process, a service's own value winning", () => {
    const result = isola(`[env]
NODE_ENV = "development"
LOG = "debug"

[services.a]
command = "a"
env = { LOG = "info" }

[services.b]
command = "b"
`)
    const { services } = doc(result)
    expect(services.a?.env).toEqual({ NODE_ENV: "development", LOG: "info" })
    expect(services.b?.env).toEqual({ NODE_ENV: "development", LOG: "debug" })
  })

  it("says what port_range and proxy_port were, and the berth port --range that covers them", () => {
    const result = isola(`[services.frontend]
command = "f"
port_range = { min = 3100, max = 3199 }
proxy_port = 3000

[services.backend]
command = "b"
port_range = { min = 8100, max = 8199 }
proxy_port = 8000
`)
    const above = commentsAbove(result.toml, "[project]")
    expect(above).toContain(
      "# isola leased ports from 3100-3199 (frontend), 8100-8199 (backend); berth leases every world's ports from one range of this machine: `berth port --range 3100-8199` takes the same"
    )
    expect(above.join("\n")).toMatch(/proxy ports \(frontend 3000, backend 8000\) are not carried/)
    expect(result.notes.join("\n")).toMatch(/berth port --range 3100-8199/)
  })

  it("names every key berth.toml has no place for, with its line, above its service", () => {
    const result = isola(`[services.api]
command = "node api.js"
restart_on = "crash"
`)
    expect(commentsAbove(result.toml, "[services.api]")).toEqual([
      '# .isola.toml:3: services.api.restart_on = "crash": not carried over: berth.toml has no such key'
    ])
    expect(result.notes).toContain(
      '.isola.toml:3: services.api.restart_on = "crash": not carried over: berth.toml has no such key'
    )
  })

  it("never lets the file put a control sequence into a note", () => {
    const result = isola(`[services."x\\u001b[2J"]\ncommand = "a"\nmood = "\\u001b[2Jcleared"\n`)
    expect(result.notes.join("\n")).not.toContain("\u001b")
    expect(result.notes).toContain("renamed isola's service x?[2J to x--2j")
    expect(result.toml).not.toContain("\u001b")
  })

  it("renames a service whose name berth reserves or cannot take", () => {
    const result = isola(`[services.env]\ncommand = "e"\n\n[services."My.App"]\ncommand = "m"\n`)
    expect(Object.keys(doc(result).services).sort()).toEqual(["env-svc", "my-app"])
    expect(result.notes).toContain("renamed isola's service env to env-svc")
  })
})

describe("fromIsola: accessories", () => {
  it("postgres: admin_url from server_url, and a golden filled from the clone_from template", () => {
    const result = isola(`[accessories.database]
kind = "postgres"
server_url = "postgres://postgres@localhost:5432/postgres"
clone_from = "myapp_dev"
name = "myapp_\${ISOLA_BRANCH_SLUG}"
url = "postgres://app@localhost:5432/\${db}"

[services.backend]
command = "go run ."
env = { DATABASE_URL = "\${accessories.database.url}" }
`)
    const { services } = doc(result)
    expect(services.database).toEqual({
      adapter: "postgres",
      admin_url: "postgres://postgres@localhost:5432/postgres",
      clone_from: "golden",
      seed: 'f=$(mktemp) && pg_dump --no-owner --no-privileges -f "$f" postgres://postgres@localhost:5432/myapp_dev && psql -q -v ON_ERROR_STOP=1 -f "$f" ${database.url}; s=$?; rm -f "$f"; exit $s'
    })
    expect(services.backend?.env).toEqual({ DATABASE_URL: "${database.url}" })
    expect(commentsAbove(result.toml, "[services.database]")).toEqual([
      '# .isola.toml:5: accessories.database.name = "myapp_${ISOLA_BRANCH_SLUG}": berth names each world\'s slice itself (<project>_<world>_database)',
      '# .isola.toml:6: accessories.database.url = "postgres://app@localhost:5432/${db}": berth gives the slice\'s own address as ${database.url}'
    ])
    expect(commentsAbove(result.toml, "seed")).toEqual([
      "# .isola.toml:4: isola copied each worktree's database from myapp_dev; berth copies one golden into each world, and this seed fills the golden with a copy of myapp_dev"
    ])
  })

  it("postgres with a password in server_url: the URL goes to .env, never into berth.toml or the notes", () => {
    const result = isola(`[accessories.db]
kind = "postgres"
server_url = "postgres://app:S3cretPw@db.local:5432/postgres"
clone_from = "tmpl"
`)
    expect(result.toml).not.toContain("S3cretPw")
    expect(result.notes.join("\n")).not.toContain("S3cretPw")
    const db = doc(result).services.db!
    expect(db.admin_url).toBe("${env.DB_ADMIN_URL}")
    expect(db.seed).toContain("${env.DB_TEMPLATE_URL}")
    expect(result.notes).toContain(
      "db: set DB_ADMIN_URL in .env to isola's server_url (.isola.toml:3); it holds a password, which stays out of berth.toml"
    )
    expect(result.notes).toContain(
      "db: set DB_TEMPLATE_URL in .env to the URL of the database tmpl, which the seed copies"
    )
  })

  it("a password that is a reference in server_url stays one, as berth's ${env.…}", () => {
    const result = isola(`[accessories.db]
kind = "postgres"
server_url = "postgres://app:\${DB_PASSWORD}@db.local:5432/postgres"
`)
    expect(doc(result).services.db?.admin_url).toBe("postgres://app:${env.DB_PASSWORD}@db.local:5432/postgres")
  })

  it("redis: a DB of its own per world; databases is berth's to choose", () => {
    const result = isola(`[accessories.cache]
kind = "redis"
server_url = "redis://localhost:6379"
databases = 32
`)
    expect(doc(result).services.cache).toEqual({ adapter: "redis", admin_url: "redis://localhost:6379", mode: "db" })
    expect(commentsAbove(result.toml, "[services.cache]")).toEqual([
      "# .isola.toml:4: accessories.cache.databases = 32: berth's redis adapter takes a free database of the server itself"
    ])
  })

  it("inject (older files) sets the slice's address in every process", () => {
    const result = isola(`[accessories.primary]
kind = "postgres"
server_url = "postgres://postgres@localhost:5432/postgres"
inject = "DATABASE_URL"

[services.a]
command = "a"

[services.b]
command = "b"
env = { DATABASE_URL = "postgres://elsewhere/db" }
`)
    const { services } = doc(result)
    expect(services.a?.env).toEqual({ DATABASE_URL: "${primary.url}" })
    expect(services.b?.env).toEqual({ DATABASE_URL: "postgres://elsewhere/db" })
  })

  it("another kind berth serves itself keeps its name; a third-party driver becomes an external adapter", () => {
    const result = isola(`[accessories.mysql]
kind = "mysql"
server_url = "mysql://root@127.0.0.1:3306/"

[accessories.search]
kind = "acme/search"
server_url = "http://127.0.0.1:9000"
`)
    const { services } = doc(result)
    expect(services.mysql).toEqual({ adapter: "mysql", admin_url: "mysql://root@127.0.0.1:3306/" })
    expect(services.search?.adapter).toBe("search")
    expect(commentsAbove(result.toml, "[services.search]")).toEqual([
      '# .isola.toml:6: accessories.search.kind = "acme/search": berth\'s adapter for it is "search"',
      '# .isola.toml:6: accessories.search.kind = "acme/search": berth has no built-in search adapter: it runs berth-adapter-search from PATH, or binky-adapter-search (binky\'s protocol)'
    ])
  })

  it("clone_from of a kind berth cannot copy from a template is said, not guessed", () => {
    const result = isola(`[accessories.cache]
kind = "redis"
server_url = "redis://localhost:6379"
clone_from = "0"
`)
    expect(doc(result).services.cache?.clone_from).toBeUndefined()
    expect(commentsAbove(result.toml, "[services.cache]").join("\n")).toMatch(
      /accessories.cache.clone_from = "0": berth copies a golden built by migrate and seed/
    )
  })
})

describe("fromIsola: project, proxy and worktrees", () => {
  it("maps project, setup and copy_files; copies .env by default, as isola does", () => {
    const result = isola(`project = "myapp"
setup = "pnpm install"
copy_files = [".env", "config/local.yml"]

[services.a]
command = "a"
`)
    expect(doc(result).project).toEqual({ name: "myapp", setup: "pnpm install", copy: [".env", "config/local.yml"] })
    expect(doc(isola(`[services.a]\ncommand = "a"\n`)).project).toEqual({ name: "demo", copy: [".env"] })
    expect(doc(isola(`copy_files = []\n\n[services.a]\ncommand = "a"\n`)).project).toEqual({ name: "demo" })
  })

  it("keeps the folder's name when project is no host name label", () => {
    const result = isola(`project = "My App"\n\n[services.a]\ncommand = "a"\n`)
    expect(doc(result).project.name).toBe("demo")
    expect(commentsAbove(result.toml, "[project]")).toContain(
      '# .isola.toml:1: project = "My App": not a host name label: the folder\'s name is used'
    )
  })

  it("[proxy]: https carries over; enabled and auto_trust are said", () => {
    const result = isola(`[proxy]
enabled = false
https = true
auto_trust = false

[services.a]
command = "a"
`)
    expect(doc(result).project.https).toBe(true)
    const above = commentsAbove(result.toml, "[project]").join("\n")
    expect(above).toMatch(/\.isola\.toml:2: proxy\.enabled = false: berth's proxy is the machine's/)
    expect(above).toMatch(/\.isola\.toml:4: proxy\.auto_trust = false: berth asks for trust only when told/)
  })

  it("[worktrees] become overrides; a fixed port is said", () => {
    const result = isola(`[services.backend]
command = "go run ."
port_range = { min = 8100, max = 8199 }

[worktrees.main]
services.backend.port = 8100

[worktrees."feature/auth"]
services.backend.command = "go run . -config auth"
services.backend.env = { DEBUG = "1" }
`)
    expect(doc(result).overrides).toEqual({
      "feature/auth": { services: { backend: { cmd: "go run . -config auth", env: { DEBUG: "1" } } } }
    })
    // main's override had only a port: nothing of it is left, so it is said above [project]
    expect(commentsAbove(result.toml, "[project]")).toContain(
      "# .isola.toml:6: worktrees.main.services.backend.port = 8100: berth leases ports itself; a world keeps its ports for its whole life"
    )
  })

  it("reports a TOML error with its line", () => {
    const result = fromIsola({
      text: `[services.a]\ncommand = "a"\nport_range = {`,
      file: ".isola.toml",
      projectName: "x"
    })
    expect(Either.isLeft(result)).toBe(true)
    if (Either.isLeft(result)) {
      expect(result.left.file).toBe(".isola.toml")
      expect(result.left.line).toBe(3)
    }
  })
})

describe("fromBinky", () => {
  it("maps [project], services (command or cmd, depends_on) and [slices]", () => {
    const result = binky(`[project]
name = "shop"
setup = "npm ci"
port_range = "41000-41999"

[services.web]
command = "npm run dev -- --port \${PORT}"
dir = "web"
depends_on = ["api"]
port_range = [5100, 5199]
env = { API_URL = "\${services.api.url}", DB = "\${slices.db.address}", NOTES = "\${notes.url}" }

[services.api]
cmd = "node api.js"
port_range = "5200-5299"

[slices.db]
adapter = "postgres"
admin_url = "postgres://postgres@127.0.0.1:5432/postgres"
clone_from = "golden"
migrate = "psql \${db.url} -f schema.sql"
seed = "psql \${db.url} -f seed.sql"

[slices.notes]
adapter = "notes"
`)
    const { project, services } = doc(result)
    expect(project).toEqual({ name: "shop", setup: "npm ci" })
    expect(services.web).toEqual({
      cmd: "npm run dev -- --port ${self.port}",
      dir: "web",
      url: "web",
      depends_on: ["api"],
      env: { API_URL: "${api.url}", DB: "${db.url}", NOTES: "${notes.url}" }
    })
    expect(services.api).toEqual({ cmd: "node api.js", url: "api" })
    expect(services.db).toEqual({
      adapter: "postgres",
      admin_url: "postgres://postgres@127.0.0.1:5432/postgres",
      clone_from: "golden",
      migrate: "psql ${db.url} -f schema.sql",
      seed: "psql ${db.url} -f seed.sql"
    })
    expect(services.notes).toEqual({ adapter: "notes" })
    expect(commentsAbove(result.toml, "[services.notes]")).toEqual([
      '# binky.toml:25: slices.notes.adapter = "notes": berth has no built-in notes adapter: it runs berth-adapter-notes from PATH, or binky-adapter-notes (binky\'s protocol)'
    ])
    expect(commentsAbove(result.toml, "[project]")).toContain(
      "# binky leased ports from 5100-5199 (web), 5200-5299 (api), 41000-41999; berth leases every world's ports from one range of this machine: `berth port --range 5100-41999` takes the same"
    )
  })

  it("reads project-wide keys written at the top level too, and a slice's template like isola's", () => {
    const result = binky(`project = "shop"
port_range = { min = 40000, max = 40999 }

[slices.db]
kind = "postgresql"
server_url = "postgres://postgres@127.0.0.1:5432/postgres"
clone_from = "shop_dev"
`)
    const { project, services } = doc(result)
    expect(project).toEqual({ name: "shop" })
    expect(services.db?.adapter).toBe("postgres")
    expect(services.db?.clone_from).toBe("golden")
    expect(services.db?.seed).toContain("postgres://postgres@127.0.0.1:5432/shop_dev")
    expect(result.notes.join("\n")).toMatch(/berth port --range 40000-40999/)
  })

  it("names what it cannot carry, with binky.toml's line", () => {
    const result = binky(
      `[services.api]\ncmd = "node api.js"\nrestart = "always"\n\n[project]\nname = "x"\ntheme = "dark"\n`
    )
    expect(commentsAbove(result.toml, "[services.api]")).toEqual([
      '# binky.toml:3: services.api.restart = "always": not carried over: berth.toml has no such key'
    ])
    expect(commentsAbove(result.toml, "[project]")).toEqual([
      '# binky.toml:7: project.theme = "dark": not carried over: berth.toml has no such key'
    ])
  })
})
