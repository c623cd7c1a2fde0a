import { describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FastCheck from "effect/FastCheck"
import {
  lookupToken,
  parseTemplate,
  resolveTemplate,
  type ServiceCoordinates,
  shellQuote,
  type TemplatePart,
  type TokenContext,
  tokensOf
} from "../../src/domain/tokens.js"

const env: Record<string, string> = {
  DATABASE_URL: "postgres://u:p@localhost:5432/app",
  EMPTY: "",
  TRICKY: "a b; echo pwned $(id) `id` 'q' \"dq\" | & < >"
}

const services = new Map<string, ServiceCoordinates>([
  ["web", { url: "http://web.feat-x.localhost", host: "web.feat-x.localhost", port: 4100, ports: { metrics: 4101 } }],
  ["api", { url: "http://api.feat-x.localhost", host: "api.feat-x.localhost", port: 4200, ports: { x: 4201 } }],
  ["db", { url: "postgres://localhost:5432/app_feat_x" }],
  ["worker", {}]
])

const ctx: TokenContext = {
  self: "web",
  services,
  env: (name) => (Object.hasOwn(env, name) ? env[name] : undefined),
  world: { name: "feat/x", slug: "feat-x", path: "/home/me/src/app-feat-x" },
  project: { name: "shop" }
}

const bare: TokenContext = { services: new Map(), env: () => undefined }

const resolve = (template: string, options?: { readonly shell?: boolean }) =>
  resolveTemplate(template, ctx, options ?? {})

const literal = (text: string): TemplatePart => ({ _tag: "Literal", text })

/** what `sh -c "printf %s <command>"` writes */
const shPrintf = (words: string): string =>
  execFileSync("sh", ["-c", `printf %s ${words}`], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

describe("parseTemplate", () => {
  it("returns nothing for the empty string", () => {
    expect(parseTemplate("")).toEqual([])
  })

  it("keeps a template without tokens as one literal", () => {
    expect(parseTemplate("npm run dev -- --port 3000")).toEqual([literal("npm run dev -- --port 3000")])
  })

  it("splits literals and tokens, with offsets of `$` and after `}`", () => {
    const template = "serve --port ${self.port} --api ${api.url}/v1"
    expect(parseTemplate(template)).toEqual([
      literal("serve --port "),
      { _tag: "Token", expr: "self.port", segments: ["self", "port"], start: 13, end: 25 },
      literal(" --api "),
      { _tag: "Token", expr: "api.url", segments: ["api", "url"], start: 32, end: 42 },
      literal("/v1")
    ])
    expect(template.slice(13, 25)).toBe("${self.port}")
    expect(template.slice(32, 42)).toBe("${api.url}")
  })

  it("parses adjacent tokens without a literal between them", () => {
    expect(parseTemplate("${a.b}${c.d}")).toEqual([
      { _tag: "Token", expr: "a.b", segments: ["a", "b"], start: 0, end: 6 },
      { _tag: "Token", expr: "c.d", segments: ["c", "d"], start: 6, end: 12 }
    ])
  })

  it("trims whitespace inside the braces", () => {
    expect(parseTemplate("${ a.b }")).toEqual([{ _tag: "Token", expr: "a.b", segments: ["a", "b"], start: 0, end: 8 }])
    expect(parseTemplate("x${\tself.port  }y")).toEqual([
      literal("x"),
      { _tag: "Token", expr: "self.port", segments: ["self", "port"], start: 1, end: 16 },
      literal("y")
    ])
  })

  it("reads `$${` as a literal `${`", () => {
    expect(parseTemplate("$${HOME}")).toEqual([literal("${HOME}")])
    expect(parseTemplate("echo $${PATH} ${self.port}")).toEqual([
      literal("echo ${PATH} "),
      { _tag: "Token", expr: "self.port", segments: ["self", "port"], start: 14, end: 26 }
    ])
    expect(parseTemplate("$${$${")).toEqual([literal("${${")])
  })

  it("keeps an unterminated `${` literal", () => {
    expect(parseTemplate("${self.port")).toEqual([literal("${self.port")])
    expect(parseTemplate("a ${ b")).toEqual([literal("a ${ b")])
    expect(parseTemplate("${")).toEqual([literal("${")])
    expect(parseTemplate("$")).toEqual([literal("$")])
    expect(parseTemplate("$ {a}")).toEqual([literal("$ {a}")])
  })

  it("does not let an unterminated `${` swallow the token after it", () => {
    // the shell's own default-value syntax around a berth token
    expect(parseTemplate("--port ${PORT:-${self.port}}")).toEqual([
      literal("--port ${PORT:-"),
      { _tag: "Token", expr: "self.port", segments: ["self", "port"], start: 15, end: 27 },
      literal("}")
    ])
    expect(resolve("--port ${PORT:-${self.port}}").value).toBe("--port ${PORT:-4100}")
  })

  it("parses the empty token", () => {
    expect(parseTemplate("${}")).toEqual([{ _tag: "Token", expr: "", segments: [""], start: 0, end: 3 }])
  })

  it("tokensOf keeps only the tokens", () => {
    expect(tokensOf("a ${x.y} b $${z} ${w.v}").map((t) => t.expr)).toEqual(["x.y", "w.v"])
    expect(tokensOf("plain")).toEqual([])
  })

  it("offsets of every token point at its text (property)", () => {
    const piece = FastCheck.constantFrom("${", "$${", "}", "$", "{", "a", ".", " ", "self.port", "${ x.y }", "é")
    FastCheck.assert(
      FastCheck.property(FastCheck.array(piece, { maxLength: 20 }), (pieces) => {
        const template = pieces.join("")
        for (const token of tokensOf(template)) {
          const written = template.slice(token.start, token.end)
          expect(written.startsWith("${")).toBe(true)
          expect(written.endsWith("}")).toBe(true)
          expect(written.slice(2, -1).trim()).toBe(token.expr)
          expect(token.segments.join(".")).toBe(token.expr)
        }
      }),
      { numRuns: 300 }
    )
  })
})

describe("lookupToken", () => {
  const look = (expr: string, context: TokenContext = ctx) => lookupToken(expr.split("."), context)

  it("resolves self.port, self.url, self.host and self.ports.NAME", () => {
    expect(look("self.port")).toEqual({ value: "4100", fromEnv: false })
    expect(look("self.url")).toEqual({ value: "http://web.feat-x.localhost", fromEnv: false })
    expect(look("self.host")).toEqual({ value: "web.feat-x.localhost", fromEnv: false })
    expect(look("self.ports.metrics")).toEqual({ value: "4101", fromEnv: false })
  })

  it("resolves another service's url, port, host and named ports", () => {
    expect(look("api.url")).toEqual({ value: "http://api.feat-x.localhost", fromEnv: false })
    expect(look("api.port")).toEqual({ value: "4200", fromEnv: false })
    expect(look("api.host")).toEqual({ value: "api.feat-x.localhost", fromEnv: false })
    expect(look("api.ports.x")).toEqual({ value: "4201", fromEnv: false })
  })

  it("resolves a slice's url", () => {
    expect(look("db.url")).toEqual({ value: "postgres://localhost:5432/app_feat_x", fromEnv: false })
  })

  it("resolves env, world and project", () => {
    expect(look("env.DATABASE_URL")).toEqual({ value: env.DATABASE_URL, fromEnv: true })
    expect(look("env.EMPTY")).toEqual({ value: "", fromEnv: true })
    expect(look("world.name")).toEqual({ value: "feat/x", fromEnv: false })
    expect(look("world.slug")).toEqual({ value: "feat-x", fromEnv: false })
    expect(look("world.path")).toEqual({ value: "/home/me/src/app-feat-x", fromEnv: false })
    expect(look("project.name")).toEqual({ value: "shop", fromEnv: false })
  })

  it("returns undefined for anything it does not know", () => {
    for (const expr of [
      "",
      "self",
      "api",
      "nope.url",
      "api.nope",
      "api.url.extra",
      "api.port.extra",
      "api.ports",
      "api.ports.nope",
      "api.ports.x.extra",
      "self.ports.nope",
      "db.port",
      "db.host",
      "worker.url",
      "worker.port",
      "worker.ports.x",
      "env",
      "env.UNSET",
      "env.DATABASE_URL.x",
      "world",
      "world.nope",
      "world.name.x",
      "project",
      "project.slug",
      "project.name.x"
    ]) {
      expect(look(expr), expr).toBeUndefined()
    }
  })

  it("does not read inherited object properties as named ports", () => {
    for (const name of ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf"]) {
      expect(look(`api.ports.${name}`), name).toBeUndefined()
      expect(look(`self.ports.${name}`), name).toBeUndefined()
    }
  })

  it("has no self, world or project when the context lacks them", () => {
    expect(look("self.port", bare)).toBeUndefined()
    expect(look("world.name", bare)).toBeUndefined()
    expect(look("project.name", bare)).toBeUndefined()
  })

  it("resolves self through the services map", () => {
    expect(look("self.url", { ...ctx, self: "api" })).toEqual({ value: "http://api.feat-x.localhost", fromEnv: false })
    expect(look("self.url", { ...ctx, self: "ghost" })).toBeUndefined()
  })

  it("prints port 0 as 0", () => {
    expect(look("z.port", { ...bare, services: new Map([["z", { port: 0 }]]) })).toEqual({
      value: "0",
      fromEnv: false
    })
  })
})

describe("resolveTemplate", () => {
  it("substitutes every kind of token", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["${self.port}", "4100"],
      ["${self.url}", "http://web.feat-x.localhost"],
      ["${self.host}", "web.feat-x.localhost"],
      ["${self.ports.metrics}", "4101"],
      ["${api.url}", "http://api.feat-x.localhost"],
      ["${api.port}", "4200"],
      ["${api.host}", "api.feat-x.localhost"],
      ["${api.ports.x}", "4201"],
      ["${db.url}", "postgres://localhost:5432/app_feat_x"],
      ["${env.DATABASE_URL}", "postgres://u:p@localhost:5432/app"],
      ["${world.name}", "feat/x"],
      ["${world.slug}", "feat-x"],
      ["${world.path}", "/home/me/src/app-feat-x"],
      ["${project.name}", "shop"]
    ]
    for (const [template, value] of cases) {
      const resolved = resolve(`<${template}>`)
      expect(resolved.value, template).toBe(`<${value}>`)
      expect(resolved.unresolved, template).toEqual([])
      expect(resolved.missingEnv, template).toEqual([])
    }
  })

  it("substitutes several tokens in one value", () => {
    expect(resolve("http://${self.host}:${self.port}/?api=${api.url}&x=${ api.ports.x }").value).toBe(
      "http://web.feat-x.localhost:4100/?api=http://api.feat-x.localhost&x=4201"
    )
    expect(resolve("${world.slug}${project.name}").value).toBe("feat-xshop")
  })

  it("leaves unknown tokens exactly as written and lists them", () => {
    const resolved = resolve("a ${nope.url} b ${ api.nope } c ${api.url.x} d ${} e ${self.port}")
    expect(resolved.value).toBe("a ${nope.url} b ${ api.nope } c ${api.url.x} d ${} e 4100")
    expect(resolved.unresolved).toEqual(["${nope.url}", "${ api.nope }", "${api.url.x}", "${}"])
    expect(resolved.missingEnv).toEqual([])
    expect(resolved.secrets).toEqual([])
  })

  it("lists every occurrence of a repeated unknown token", () => {
    expect(resolve("${x.y}${x.y}").unresolved).toEqual(["${x.y}", "${x.y}"])
  })

  it("lists unset env variables in missingEnv, not in unresolved, and leaves them as written", () => {
    const resolved = resolve("${env.UNSET} and ${ env.ALSO_UNSET } and ${env.DATABASE_URL}")
    expect(resolved.value).toBe("${env.UNSET} and ${ env.ALSO_UNSET } and postgres://u:p@localhost:5432/app")
    expect(resolved.missingEnv).toEqual(["UNSET", "ALSO_UNSET"])
    expect(resolved.unresolved).toEqual([])
  })

  it("treats malformed env tokens as unresolved", () => {
    const resolved = resolve("${env} ${env.A.B}")
    expect(resolved.value).toBe("${env} ${env.A.B}")
    expect(resolved.unresolved).toEqual(["${env}", "${env.A.B}"])
    expect(resolved.missingEnv).toEqual([])
  })

  it("leaves a missing env token as written in a shell too", () => {
    expect(resolve("echo ${env.UNSET}", { shell: true }).value).toBe("echo ${env.UNSET}")
  })

  it("reports substituted env values as secrets, and only those", () => {
    const resolved = resolve("${env.DATABASE_URL} ${api.url} ${env.TRICKY} ${env.EMPTY} ${world.name}")
    expect(resolved.secrets).toEqual([env.DATABASE_URL, env.TRICKY])
    expect(resolve("${self.port}").secrets).toEqual([])
  })

  it("substitutes an empty env value", () => {
    const resolved = resolve("[${env.EMPTY}]")
    expect(resolved.value).toBe("[]")
    expect(resolved.missingEnv).toEqual([])
    expect(resolve("x ${env.EMPTY} y", { shell: true }).value).toBe("x '' y")
  })

  it("writes `$${` as a literal `${`, in a shell too", () => {
    expect(resolve("echo $${HOME} ${self.port}").value).toBe("echo ${HOME} 4100")
    expect(resolve("echo $${HOME} ${self.port}", { shell: true }).value).toBe("echo ${HOME} 4100")
    expect(resolve("$${self.port}").unresolved).toEqual([])
  })

  it("does not quote without shell: true", () => {
    expect(resolve("${env.TRICKY}").value).toBe(env.TRICKY)
    expect(resolve("${env.TRICKY}", { shell: false }).value).toBe(env.TRICKY)
    expect(resolveTemplate("${world.name}", ctx).value).toBe("feat/x")
  })

  it("quotes substituted values with shell: true and leaves plain words bare", () => {
    expect(resolve("serve --port ${self.port} --url ${self.url}", { shell: true }).value).toBe(
      "serve --port 4100 --url http://web.feat-x.localhost"
    )
    expect(resolve("echo ${env.TRICKY}", { shell: true }).value).toBe(
      "echo 'a b; echo pwned $(id) `id` '\\''q'\\'' \"dq\" | & < >'"
    )
    const branchy = { ...ctx, world: { name: "it's $(x);`y`", slug: "s", path: "/p q" } }
    expect(resolveTemplate("cd ${world.path} && echo ${world.name}", branchy, { shell: true }).value).toBe(
      "cd '/p q' && echo 'it'\\''s $(x);`y`'"
    )
  })

  it("does not quote literal text around tokens", () => {
    expect(resolve("a  'b' ${world.slug} $(c)", { shell: true }).value).toBe("a  'b' feat-x $(c)")
  })

  it("resolves nothing with an empty context", () => {
    const resolved = resolveTemplate("${self.port} ${world.name} ${project.name} ${env.X}", bare)
    expect(resolved.value).toBe("${self.port} ${world.name} ${project.name} ${env.X}")
    expect(resolved.unresolved).toEqual(["${self.port}", "${world.name}", "${project.name}"])
    expect(resolved.missingEnv).toEqual(["X"])
  })
})

describe("shellQuote", () => {
  it("leaves plain words bare", () => {
    for (const word of ["abc", "feat-x", "/a/b.c", "http://h:1/p", "a=b", "x@y", "1,2", "50%", "a+b"]) {
      expect(shellQuote(word)).toBe(word)
    }
  })

  it("single-quotes everything else", () => {
    expect(shellQuote("")).toBe("''")
    expect(shellQuote("a b")).toBe("'a b'")
    expect(shellQuote("it's")).toBe("'it'\\''s'")
    expect(shellQuote("$HOME")).toBe("'$HOME'")
    expect(shellQuote("~")).toBe("'~'")
    expect(shellQuote("*")).toBe("'*'")
    expect(shellQuote("é")).toBe("'é'")
  })

  it("is read back by sh as the value itself", () => {
    for (const value of ["", "'", "''", "a'b", "\\", "\n", "$(id)", "`id`", "a b  c", "-n", "--", "%s", "~", "*"]) {
      expect(shPrintf(shellQuote(value)), JSON.stringify(value)).toBe(value)
    }
  })
})

/** Characters a branch name or variable may hold that a shell would otherwise act on. */
const shellChar = FastCheck.oneof(
  {
    arbitrary: FastCheck.constantFrom(
      "$",
      ";",
      "(",
      ")",
      "'",
      '"',
      "|",
      "&",
      "<",
      ">",
      "`",
      "\\",
      "\n",
      "\t",
      " ",
      "*",
      "?",
      "~",
      "#",
      "!",
      "{",
      "}",
      "[",
      "]",
      "=",
      "%",
      "-",
      "$(",
      "${",
      "'\\''",
      "é",
      "日本",
      "🚀",
      "\u00a0"
    ),
    weight: 3
  },
  { arbitrary: FastCheck.string({ unit: "grapheme", minLength: 1, maxLength: 3 }), weight: 1 },
  { arbitrary: FastCheck.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 4 }), weight: 2 }
)
/** any string a shell argument can carry: everything but NUL */
const shellValue = FastCheck.array(shellChar, { maxLength: 12 })
  .map((cs) => cs.join(""))
  .filter((s) => !s.includes("\u0000"))

describe("shell safety (properties)", () => {
  it("a substituted value reaches the command exactly as it was", () => {
    const kinds = ["world.name", "world.path", "env.V", "api.url", "self.host", "project.name"] as const
    FastCheck.assert(
      FastCheck.property(shellValue, FastCheck.constantFrom(...kinds), (v, kind) => {
        const context: TokenContext = {
          self: "api",
          services: new Map([["api", { url: v, host: v, port: 1 }]]),
          env: (name) => (name === "V" ? v : undefined),
          world: { name: v, slug: "s", path: v },
          project: { name: v }
        }
        const resolved = resolveTemplate(`\${${kind}}`, context, { shell: true })
        expect(resolved.unresolved).toEqual([])
        expect(shPrintf(resolved.value)).toBe(v)
        // several values side by side stay separate and intact
        const pair = resolveTemplate(`\${${kind}}-\${${kind}}`, context, { shell: true })
        expect(shPrintf(pair.value)).toBe(`${v}-${v}`)
      }),
      { numRuns: 100 }
    )
  })

  it("a substituted value never runs anything", () => {
    const dir = mkdtempSync(join(tmpdir(), "berth-tokens-"))
    try {
      let n = 0
      const attack = FastCheck.constantFrom(
        (f: string) => `$(touch ${f})`,
        (f: string) => `\`touch ${f}\``,
        (f: string) => `; touch ${f}`,
        (f: string) => `&& touch ${f}`,
        (f: string) => `| touch ${f}`,
        (f: string) => `'; touch ${f}; '`,
        (f: string) => `"; touch ${f}; "`,
        (f: string) => `'$(touch ${f})'`,
        (f: string) => `\n touch ${f}\n`,
        (f: string) => `> ${f}`,
        (f: string) => `\${x:-$(touch ${f})}`
      )
      FastCheck.assert(
        FastCheck.property(shellValue, attack, shellValue, (before, make, after) => {
          const file = join(dir, `f${n++}`)
          const v = `${before}${make(file)}${after}`
          const context: TokenContext = { services: new Map(), env: () => v, world: { name: v, slug: v, path: v } }
          const resolved = resolveTemplate("${world.name} ${env.X}", context, { shell: true })
          expect(shPrintf(resolved.value)).toBe(`${v}${v}`)
          expect(existsSync(file)).toBe(false)
        }),
        { numRuns: 100 }
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("shellQuote round-trips through sh", () => {
    FastCheck.assert(
      FastCheck.property(shellValue, (v) => {
        expect(shPrintf(shellQuote(v))).toBe(v)
      }),
      { numRuns: 100 }
    )
  })

  it("shellQuote produces one word for sh", () => {
    FastCheck.assert(
      FastCheck.property(shellValue, shellValue, (a, b) => {
        // printf reuses its format for each argument: two quoted words are two arguments, printed with a separator
        const out = execFileSync("sh", ["-c", `printf '%s|' ${shellQuote(a)} ${shellQuote(b)}`], { encoding: "utf8" })
        expect(out).toBe(`${a}|${b}|`)
      }),
      { numRuns: 50 }
    )
  })
})

describe("templates without tokens (properties)", () => {
  const noToken = FastCheck.string({ unit: "grapheme", maxLength: 60 }).filter((s) => !s.includes("${"))
  const dollarish = FastCheck.array(FastCheck.constantFrom("$", "{", "}", "a", " ", "$ {", "{$", "}$"), {
    maxLength: 20
  })
    .map((cs) => cs.join(""))
    .filter((s) => !s.includes("${"))

  it("resolve to themselves", () => {
    FastCheck.assert(
      FastCheck.property(FastCheck.oneof(noToken, dollarish), FastCheck.boolean(), (template, shell) => {
        const resolved = resolveTemplate(template, ctx, { shell })
        expect(resolved).toEqual({ value: template, unresolved: [], missingEnv: [], secrets: [] })
        expect(tokensOf(template)).toEqual([])
      }),
      { numRuns: 300 }
    )
  })

  it("unknown tokens round-trip exactly as written", () => {
    // `env`, `world` and `project` are namespaces a token may name: `${env.url}` is a variable, not an unknown token
    const namespaces = new Set(["self", "env", "world", "project"])
    const name = FastCheck.stringMatching(/^[a-z]{1,6}$/).filter((s) => !services.has(s) && !namespaces.has(s))
    const gap = FastCheck.constantFrom("", " ", "  ", "\t")
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(FastCheck.tuple(noToken, gap, name, FastCheck.constantFrom("url", "port", "x.y"), gap), {
          maxLength: 5
        }),
        noToken,
        (pieces, tail) => {
          const tokens = pieces.map(([, l, n, f, r]) => `\${${l}${n}.${f}${r}}`)
          const template = pieces.map(([text], k) => `${text}${tokens[k]}`).join("") + tail
          // literal text ending in `$` would turn the next `${` into the `$${` escape: keep those out
          FastCheck.pre(!template.includes("$${") && tokensOf(template).length === pieces.length)
          const resolved = resolveTemplate(template, ctx, { shell: true })
          expect(resolved.value).toBe(template)
          expect(resolved.unresolved).toEqual(tokens)
        }
      ),
      { numRuns: 300 }
    )
  })
})
