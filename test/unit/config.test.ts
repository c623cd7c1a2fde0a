import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import type { Diagnostic } from "../../src/domain/config/diagnostic.js"
import { lintConfig } from "../../src/domain/config/lint.js"
import * as Model from "../../src/domain/config/model.js"
import { dirEscapes, type ParsedConfig, parseConfig } from "../../src/domain/config/parse.js"
import { type Entry, land } from "../../src/domain/paths.js"

const ok = (text: string): ParsedConfig => {
  const result = parseConfig(text, "berth.toml")
  if (Either.isLeft(result)) throw new Error(result.left.map((d) => `${d.line}:${d.column} ${d.message}`).join("\n"))
  return result.right
}

const errors = (text: string): ReadonlyArray<Diagnostic> => {
  const result = parseConfig(text, "berth.toml")
  if (Either.isRight(result)) throw new Error("expected errors")
  return result.left
}

const warnings = (text: string, env: Record<string, string> = {}, onPath: Array<string> = []) =>
  lintConfig(ok(text), { env: (n) => env[n], onPath: (c) => onPath.includes(c) })

const example = `
[project]
name = "acme"
setup = "npm ci"

[services.web]
cmd = "npm run dev -- --port \${self.port}"
dir = "web"
url = "web"
depends_on = ["api"]
env = { API_URL = "\${api.url}" }

[services.api]
cmd = "node server.js"
url = "api"
ports = ["metrics"]
health = { http = "/healthz" }
restart = "on-failure"
depends_on = ["db", "cache"]
env = { DATABASE_URL = "\${db.url}", REDIS_URL = "\${cache.url}", WORKERS = 4, DEBUG = true }

[services.worker]
cmd = "node worker.js"

[services.db]
adapter = "postgres"
admin_url = "\${env.POSTGRES_ADMIN_URL}"
migrate = "npm run migrate"
seed = "npm run seed"
clone_from = "golden"

[services.cache]
adapter = "redis"

[agents]
verify = ["npm test"]
`

describe("parseConfig", () => {
  it("reads the design's example into the model with defaults", () => {
    const { config } = ok(example)
    expect(config.project).toEqual({
      name: "acme",
      domain: "localhost",
      worktrees: undefined,
      setup: "npm ci",
      https: false,
      idleSuspendMs: undefined,
      copy: [],
      link: []
    })
    expect(config.services.map((s) => `${s._tag}:${s.name}`)).toEqual([
      "Process:web",
      "Process:api",
      "Process:worker",
      "Slice:db",
      "Slice:cache"
    ])
    const api = config.services[1] as Model.ProcessService
    expect(api.env).toEqual({
      DATABASE_URL: "${db.url}",
      REDIS_URL: "${cache.url}",
      WORKERS: "4",
      DEBUG: "true"
    })
    expect(api.health).toEqual({ kind: "http", target: "/healthz", timeoutMs: 60_000, intervalMs: 100 })
    expect(api.restart).toBe("on-failure")
    expect((config.services[2] as Model.ProcessService).restart).toBe("no")
    expect((config.services[2] as Model.ProcessService).stopGraceMs).toBe(10_000)
    expect(config.graph.order).toEqual(["worker", "db", "cache", "api", "web"])
    expect(config.graph.reverse).toEqual(["web", "api", "cache", "db", "worker"])
    expect(config.agents.verify).toEqual(["npm test"])
    const db = config.services[3] as Model.SliceService
    expect(db).toMatchObject({ adapter: "postgres", cloneFrom: "golden", migrate: "npm run migrate" })
  })

  it("accepts an empty file", () => {
    expect(ok("").config.services).toEqual([])
  })

  it("reports a TOML syntax error with its line and column", () => {
    const [d] = errors(`[services.web]\ncmd = "x\n`)
    expect(d).toMatchObject({ line: 2, severity: "error" })
    expect(d!.message).toMatch(/^invalid TOML/)
  })

  it("reports every error of a file in one run, in file order", () => {
    const ds = errors(`
[project]
nmae = "x"

[services.web]
cmd = "a"
depends_on = ["apii"]
restart = "sometimes"

[services.api]
command = "b"
`)
    expect(ds.map((d) => [d.line, d.path, d.message, d.hint])).toEqual([
      [3, "project.nmae", 'unknown key "nmae" in [project]', 'did you mean "name"?'],
      [7, "services.web.depends_on[0]", '"apii" is not a service in this file', 'did you mean "api"?'],
      [8, "services.web.restart", 'expected one of "no", "on-failure", "always", got "sometimes"', undefined],
      [10, "services.api.cmd", 'missing required key "cmd" in the service "api"', undefined],
      [11, "services.api.command", 'unknown key "command" in the service "api"', 'did you mean "cmd"?']
    ])
  })

  it("points into arrays and inline tables", () => {
    const ds = errors(`[services.a]\ncmd = "x"\nports = ["ok", "Not Ok"]\nhealth = { http = "nope" }\n`)
    expect(ds.map((d) => [d.path, d.line, d.column])).toEqual([
      ["services.a.ports[1]", 3, 16],
      ["services.a.health.http", 4, 12]
    ])
  })

  it("prints a depends_on cycle as a path", () => {
    const ds = errors(
      `[services.a]\ncmd = "x"\ndepends_on = ["b"]\n[services.b]\ncmd = "y"\ndepends_on = ["c"]\n[services.c]\ncmd = "z"\ndepends_on = ["a"]\n`
    )
    expect(ds.map((d) => d.message)).toEqual(["depends_on has a cycle: a → b → c → a"])
  })

  it("rejects self, duplicate and unknown dependencies", () => {
    const ds = errors(`[services.a]\ncmd = "x"\ndepends_on = ["a", "b", "b", "zz"]\n[services.b]\ncmd = "y"\n`)
    expect(ds.map((d) => d.path)).toEqual([
      "services.a.depends_on[0]",
      "services.a.depends_on[2]",
      "services.a.depends_on[3]"
    ])
  })

  it("tells a process from a slice and explains a slice key in a process", () => {
    const [d] = errors(`[services.db]\ncmd = "x"\nmigrate = "m"\n`)
    expect(d!.hint).toMatch(/belongs to a slice/)
  })

  it("points misspelt keys at what berth calls them: a slice's (adaptor), another tool's name (comand), its own", () => {
    const hintOf = (toml: string, path: string) => errors(toml).find((d) => d.path === path)?.hint
    expect(hintOf(`[services.db]\nadaptor = "postgres"\n`, "services.db.adaptor")).toBe(
      'did you mean "adapter"? that belongs to a slice: add adapter = "postgres" (or another adapter) to make this service a slice'
    )
    expect(hintOf(`[services.api]\ncomand = "node x.js"\n`, "services.api.comand")).toBe('did you mean "cmd"?')
    expect(hintOf(`[services.api]\ncmd = "x"\nenviroment = { A = "1" }\n`, "services.api.enviroment")).toBe(
      'did you mean "env"?'
    )
    expect(hintOf(`[services.api]\ncmd = "x"\nhealht = { tcp = true }\n`, "services.api.healht")).toBe(
      'did you mean "health"?'
    )
  })

  it("checks adapter-specific keys of built-in adapters and passes external ones through", () => {
    const [d] = errors(`[services.cache]\nadapter = "redis"\nmode = "dbb"\n`)
    expect(d).toMatchObject({ path: "services.cache.mode", hint: 'did you mean "db"?' })
    const { config } = ok(
      `[services.search]\nadapter = "meili"\nindex_prefix = "x"\n[services.kv]\nadapter = "valkey"\nmode = "prefix"\n`
    )
    expect((config.services[0] as Model.SliceService).options).toEqual({ index_prefix: "x" })
    expect((config.services[1] as Model.SliceService).options).toEqual({ mode: "prefix" })
  })

  it("rejects reserved and malformed service names", () => {
    const ds = errors(`[services.env]\ncmd = "x"\n[services."9lives"]\ncmd = "y"\n`)
    expect(ds.map((d) => d.path)).toEqual(["services.env", "services.9lives"])
  })

  it("parses durations", () => {
    const { config } = ok(
      `[services.a]\ncmd = "x"\nstop_grace = "500ms"\nhealth = { tcp = true, timeout = "2m", interval = 1 }\n`
    )
    const a = config.services[0] as Model.ProcessService
    expect(a.stopGraceMs).toBe(500)
    expect(a.health).toEqual({ kind: "tcp", target: "", timeoutMs: 120_000, intervalMs: 1000 })
    expect(errors(`[services.a]\ncmd = "x"\nstop_grace = "10 parsecs"\n`)[0]!.message).toMatch(/not a duration/)
  })

  it("wants exactly one kind of health check", () => {
    expect(errors(`[services.a]\ncmd = "x"\nhealth = { http = "/", tcp = true }\n`)[0]!.message).toBe(
      "a health check takes exactly one of http, tcp, cmd or log"
    )
  })

  it("checks overrides name real processes", () => {
    const ds = errors(
      `[services.api]\ncmd = "x"\n[services.db]\nadapter = "postgres"\n[overrides."exp-*".services.apu]\ncmd = "y"\n[overrides."exp-*".services.db]\ncmd = "z"\n`
    )
    expect(ds.map((d) => [d.path, d.hint])).toEqual([
      ['overrides."exp-*".services.apu', 'did you mean "api"?'],
      ['overrides."exp-*".services.db', undefined]
    ])
  })

  it("applies overrides to matching worlds only", () => {
    const { config } = ok(
      `[services.api]\ncmd = "x"\nenv = { A = "1", B = "2" }\n[overrides."feature/*".services.api]\ncmd = "y"\nenv = { B = "3" }\nports = ["debug"]\n`
    )
    const api = (c: Model.Config) => c.services[0] as Model.ProcessService
    expect(api(Model.forWorld(config, "main")).cmd).toBe("x")
    const overridden = api(Model.forWorld(config, "feature/login"))
    expect(overridden).toMatchObject({ cmd: "y", env: { A: "1", B: "3" }, ports: ["debug"] })
  })
})

describe("lintConfig", () => {
  it("finds nothing wrong with the design's example when its variables are set", () => {
    const ws = warnings(example, { POSTGRES_ADMIN_URL: "postgres://localhost/postgres" })
    expect(ws).toEqual([])
  })

  it("warns about an env_file outside the worktree, at the key; [agents] verify is berth verify's, no warning", () => {
    const ws = warnings(
      `[services.api]\ncmd = "x"\nenv_file = [".env.api", "../.env"]\n\n[services.web]\ncmd = "y"\nenv_file = ".env.web"\n\n[agents]\nverify = ["npm test"]\n`
    )
    expect(ws.map((w) => [w.line, w.path])).toEqual([[3, "services.api.env_file"]])
    expect(ws[0]!.message).toBe('env_file "../.env" is outside the worktree; berth up will refuse to start "api"')
    expect(warnings(`[services.api]\ncmd = "x"\nenv_file = []\n[agents]\nverify = []\n`)).toEqual([])
  })

  it("warns about env_file, dir, copy, link and golden_inputs paths that a link of the checkout leads out of", () => {
    const disk: Record<string, Entry> = {
      "/w/.env": { kind: "link", target: "/home/u/.bashrc" },
      "/w/sub": { kind: "link", target: "/elsewhere" },
      "/w/cfg": { kind: "link", target: "/secrets" },
      "/w/seeds": { kind: "link", target: "../outside" },
      "/w/inside.env": { kind: "link", target: "config/dev.env" },
      "/w/config": { kind: "folder" }
    }
    const text = [
      '[project]\ncopy = ["cfg/key.txt", "inside.env"]\nlink = ["cfg/*.pem"]\n',
      '[services.web]\ncmd = "x"\nenv_file = [".env", "inside.env"]\n',
      '[services.api]\ncmd = "y"\ndir = "sub"\n',
      '[services.db]\nadapter = "sqlite"\nmigrate = "m"\ngolden_inputs = ["seeds/**/*.sql"]\n'
    ].join("\n")
    const ws = lintConfig(ok(text), {
      env: () => undefined,
      onPath: () => false,
      lands: (path, options) => land("/w", path, (p) => disk[p] ?? { kind: "missing" }, options)
    })
    expect(ws.map((w) => [w.path, w.message])).toEqual([
      [
        "project.copy[0]",
        '[project] copy "cfg/key.txt" goes through the link cfg to /secrets/key.txt, outside the worktree; berth up will refuse to bring it'
      ],
      [
        "project.link[0]",
        '[project] link "cfg/*.pem" goes through the link cfg to /secrets, outside the worktree; berth up will refuse to bring it'
      ],
      [
        "services.web.env_file",
        'env_file ".env" is a link to /home/u/.bashrc, outside the worktree; berth up will refuse to start "web"'
      ],
      [
        "services.api.dir",
        'dir "sub" is a link to /elsewhere, outside the worktree; berth up will refuse to start "api"'
      ],
      [
        "services.db.golden_inputs[0]",
        'golden_inputs "seeds/**/*.sql" goes through the link seeds to /outside, outside the worktree; berth will refuse to build the golden'
      ]
    ])
    expect(ws[0]!.hint).toBe(
      "berth writes and reads only inside the worktree: make cfg a file or folder of its own, or name another path"
    )
  })

  it("warns about a dev server that ignores PORT when inject = false, at the key, with the flags to write", () => {
    const [w, ...rest] = warnings(`[services.web]\ncmd = "vite dev"\nurl = "web"\ninject = false\n`)
    expect(rest).toEqual([])
    expect(w).toMatchObject({ line: 4, path: "services.web.inject" })
    expect(w!.message).toMatch(/runs vite, which ignores PORT/)
    expect(w!.hint).toBe(
      "remove inject = false, or pass the port yourself: --port ${self.port} --strictPort --host 127.0.0.1"
    )
    // berth injects, the user placed the port, or it is no dev server: nothing to say
    expect(warnings(`[services.web]\ncmd = "vite dev"\nurl = "web"\n`)).toEqual([])
    expect(warnings(`[services.web]\ncmd = "vite --port \${self.port}"\nurl = "web"\ninject = false\n`)).toEqual([])
    expect(warnings(`[services.web]\ncmd = "node server.js"\nurl = "web"\ninject = false\n`)).toEqual([])
  })

  it("says when a file defines no services", () => {
    for (const text of ["", '[project]\nname = "empty"\n']) {
      const ws = warnings(text)
      expect(ws.map((w) => [w.line, w.column, w.path, w.message])).toEqual([
        [1, 1, "", "this file defines no services: berth up would start nothing"]
      ])
      expect(ws[0]!.hint).toMatch(/berth init/)
    }
  })

  it("warns about ${self.port} in a service that gets no port, at the token", () => {
    const [w] = warnings(`[services.worker]\ncmd = "node w.js --port \${self.port}"\n`)
    expect(w).toMatchObject({ severity: "warning", line: 2, column: 25, path: "services.worker.cmd" })
    expect(w!.hint).toMatch(/add url/)
  })

  it("warns about tokens that name nothing", () => {
    const ws = warnings(
      `[services.api]\ncmd = "x"\nurl = "api"\nports = ["m"]\nenv = { A = "\${apii.url}", B = "\${api.ports.n}", C = "\${world.nope}" }\n`
    )
    expect(ws.map((w) => w.message)).toEqual([
      "${apii.url} names no service; it will stay as written",
      '${api.ports.n}: "api" declares no port named "n"',
      "${world.nope} is not a world token"
    ])
    expect(ws[0]!.hint).toBe("did you mean ${api.url}?")
  })

  it("warns about credentials written inline", () => {
    const ws = warnings(
      `[services.api]\ncmd = "x"\nenv = { DB = "postgres://u:hunter2@h/db", API_TOKEN = "abc", OK_TOKEN = "\${env.T}", PUBLIC = "x" }\n`,
      { T: "1" }
    )
    expect(ws.map((w) => w.path)).toEqual(["services.api.env.DB", "services.api.env.API_TOKEN"])
    for (const w of ws) expect(JSON.stringify(w)).not.toContain("hunter2")
  })

  it("warns about unset variables, dir escaping, shared urls, unknown adapters and impossible clones", () => {
    const ws = warnings(`
[services.a]
cmd = "x"
dir = "../elsewhere"
url = "app"
[services.b]
cmd = "y"
url = "app"
[services.mq]
adapter = "rabbitmq"
clone_from = "golden"
migrate = "m"
[services.s]
adapter = "postgress"
admin_url = "\${env.PG}"
`)
    expect(ws.map((w) => w.path)).toEqual([
      "services.a.dir",
      "services.b.url",
      "services.mq.clone_from",
      "services.s.adapter",
      "services.s.admin_url"
    ])
    expect(ws[3]!.hint).toBe('did you mean "postgres"?')
  })

  it('reads clone_from = "<database>" as a source to copy, and warns where the adapter cannot copy one', () => {
    const config = ok(`[services.db]\nadapter = "postgres"\nclone_from = "shop-dev_2"\n`)
    const db = config.config.services.find((s) => s.name === "db") as Model.SliceService
    expect([db.cloneFrom, db.cloneSource]).toEqual([undefined, "shop-dev_2"])
    const golden = ok(`[services.db]\nadapter = "postgres"\nclone_from = "golden"\nmigrate = "m"\n`)
    expect((golden.config.services[0] as Model.SliceService).cloneSource).toBeUndefined()
    const bad = errors(`[services.db]\nadapter = "postgres"\nclone_from = "dev; drop"\n`)
    expect(bad.map((d) => [d.path, d.line])).toEqual([["services.db.clone_from", 3]])
    expect(bad[0]!.message).toMatch(/neither "golden" nor a database name/)
    const ws = warnings(`[services.c]\nadapter = "redis"\nclone_from = "cache_dev"\n`)
    expect(ws.map((w) => w.path)).toEqual(["services.c.clone_from"])
    expect(ws[0]!.message).toMatch(/cannot copy a database already on its server/)
  })

  it("accepts an external adapter that is on PATH", () => {
    expect(warnings(`[services.s]\nadapter = "meili"\n`, {}, ["berth-adapter-meili"])).toEqual([])
    expect(warnings(`[services.s]\nadapter = "meili"\n`, {}, ["berth-adapter-meili", "binky-adapter-meili"])).toEqual(
      []
    )
  })

  it("says where an adapter written for binky will serve a slice, in binky's protocol", () => {
    const ws = warnings(`[services.s]\nadapter = "meili"\nclone_from = "golden"\nmigrate = "m"\n`, {}, [
      "binky-adapter-meili"
    ])
    expect(ws.map((w) => [w.path, w.line])).toEqual([["services.s.adapter", 2]])
    expect(ws[0]!.message).toBe(
      `berth has no built-in adapter "meili": binky-adapter-meili serves it, and berth speaks binky's protocol to it (no clone: every world runs migrate and seed; gc sees only the slices it lists with this installation as owner)`
    )
    expect(ws[0]!.hint).toBe("a berth-adapter-meili on PATH would be used instead, in berth's own protocol")
  })
})

describe("dirEscapes", () => {
  it("is true only for paths that leave the root", () => {
    expect(["web", "./web", "a/../b", "a/b/../../c"].map(dirEscapes)).toEqual([false, false, false, false])
    expect(["..", "../x", "a/../../x", "/etc"].map(dirEscapes)).toEqual([true, true, true, true])
  })
})
