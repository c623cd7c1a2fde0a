/**
 * Fuzzes the daemon's socket: random and malformed NDJSON RPC requests, written straight to the unix socket the way
 * the lean CLI speaks (`src/daemon/wire.ts`) — wrong tags, missing fields, wrong types, huge strings, lines that are
 * not JSON, a cwd that does not exist, is relative or is a file, hostile world names, truncated lines. Whatever is
 * sent, every reply is a typed failure (a tag of `src/domain/errors.ts`), a success, or a parse/validation error of
 * the request itself — never the raw text of an internal error — and the daemon stays up (the same one answers Ping).
 *
 * Seeded: BERTH_FUZZ_SEED=<seed> replays a run; BERTH_FUZZ_RUNS sets how many cases, BERTH_FUZZ_TRACE=1 prints each
 * case with what came back (and BERTH_CHAOS_BIN points it at another build of berth).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import * as net from "node:net"
import { dirname, join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { request } from "../../src/daemon/wire.js"
import * as Errors from "../../src/domain/errors.js"
import { killAll, portBlock, type Sandbox, sandbox } from "../e2e/harness.js"
import { runExact, seedFrom } from "./helpers.js"

const SEED = seedFrom("BERTH_FUZZ_SEED")
const RUNS = Number(process.env.BERTH_FUZZ_RUNS ?? 120)

/** every tag a failure crossing the socket may carry */
const KNOWN_TAGS: ReadonlySet<string> = new Set(
  Object.values(Errors).flatMap((e) => ("_tag" in e && typeof e._tag === "string" ? [e._tag] : []))
)

/** what an internal error looks like when it leaks: a JS error class, a Node error code, a stack frame, a syscall */
const LEAK =
  /\b(TypeError|RangeError|ReferenceError|SyntaxError|EvalError|AggregateError)\b|\bERR_[A-Z_]+\b|\bat \S+ \(|node:internal|options\.cwd|\bspawn\b|\bE(NOENT|NOTDIR|ACCES|2BIG|NAMETOOLONG|INVAL|PERM)\b|is not a function|Cannot read propert/

/** the only connection-level defects allowed: @effect/rpc's own answers to a request it cannot route */
const PROTOCOL_DEFECT = /^(Unknown request tag: |Invalid request id: )/

const toml = `
[services.api]
cmd = "echo \${world.name} >> names.log; exec sleep 600"
`

let box: Sandbox | undefined
let socket = ""
let daemonPid = 0

const env = (home: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) out[k] = v
  return { ...out, BERTH_HOME: home, NO_COLOR: "1", BERTH_PROXY_PORT: "off", BERTH_HTTPS_PORT: "off" }
}

beforeAll(async () => {
  box = sandbox({ "berth.toml": toml })
  const run = (args: ReadonlyArray<string>) => runExact(args, { cwd: box!.dir, env: env(box!.home), timeoutMs: 30_000 })
  const range = await run(["port", "--range", portBlock()])
  expect(range.code, range.stderr).toBe(0)
  const up = await run(["up", "main", "--json"])
  expect(up.code, up.stderr).toBe(0)
  socket = join(box.home, "daemon.sock")
  const pong = await request(socket, "Ping", undefined, 5_000)
  expect(pong._tag).toBe("Success")
  daemonPid = (pong as { value: { pid: number } }).value.pid
}, 60_000)

afterAll(async () => {
  if (box === undefined) return
  await runExact(["down", "--all"], { cwd: box.dir, env: env(box.home), timeoutMs: 30_000 })
  killAll(box.home)
  box.cleanup()
})

// ---------------------------------------------------------------------------------------------------------------
// what is sent

const F = FastCheck

const hostile = F.oneof(
  {
    arbitrary: F.constantFrom(
      "",
      ".",
      "..",
      "../..",
      "../../etc",
      "/",
      "-",
      "--all",
      "-rf",
      "a b",
      "a\nb",
      "a\u0000b",
      "\u0000",
      "HEAD",
      "@",
      "@{-1}",
      "a..b",
      "x.lock",
      "refs/heads/main",
      "main",
      "`touch${IFS}pwned`",
      "$(touch${IFS}pwned)",
      "a;touch${IFS}pwned",
      "'",
      '"',
      "\\",
      "ü",
      "日本語",
      "\u202e",
      "😀",
      "%s%n",
      "${env.HOME}",
      "$${x}",
      "\ud800",
      "__proto__",
      "constructor"
    ),
    weight: 6
  },
  { arbitrary: F.string({ maxLength: 30 }), weight: 2 },
  { arbitrary: F.string({ unit: "grapheme", maxLength: 12 }), weight: 1 },
  { arbitrary: F.integer({ min: 5_000, max: 3_000_000 }).map((n) => "x".repeat(n)), weight: 1 }
)

const wrongType = F.oneof(
  F.constant(null),
  F.boolean(),
  F.integer(),
  F.double({ noNaN: true, noDefaultInfinity: true }),
  F.array(F.integer(), { maxLength: 3 }),
  F.dictionary(F.string({ maxLength: 5 }), F.integer(), { maxKeys: 3 }),
  hostile
)

/** the payload fields of each request, each with the values a well-formed one would take (and some it would not) */
const fieldsOf = (repo: string): Record<string, Record<string, FastCheck.Arbitrary<unknown>>> => {
  const cwd = F.oneof(
    // the repository itself half of the time, so that requests reach the worlds and their hostile names
    { arbitrary: F.constant(repo), weight: 6 },
    {
      arbitrary: F.constantFrom(
        `${repo}/`,
        `${repo}/berth.toml`,
        `${repo}/missing`,
        "relative",
        "./",
        "../x",
        "",
        "/nonexistent/x",
        "/",
        "/dev/null",
        "/proc/self",
        `${repo}\u0000x`,
        "/a".repeat(3_000),
        `/${"x".repeat(300)}`
      ),
      weight: 5
    },
    { arbitrary: hostile, weight: 1 }
  )
  const world = F.option(hostile, { nil: undefined, freq: 4 })
  const env = F.oneof(
    { arbitrary: F.dictionary(hostile, hostile, { maxKeys: 4 }), weight: 3 },
    { arbitrary: F.constant({ PATH: process.env.PATH ?? "/usr/bin:/bin" }), weight: 4 },
    { arbitrary: F.constant({ BIG: "y".repeat(300_000) }), weight: 1 },
    {
      arbitrary: F.constant(Object.fromEntries(Array.from({ length: 3_000 }, (_, i) => [`K${i}`, "v".repeat(50)]))),
      weight: 1
    }
  )
  // mostly none, so that an up gets as far as the world's name
  const names = F.oneof(
    { arbitrary: F.constant([]), weight: 4 },
    { arbitrary: F.array(hostile, { maxLength: 3 }), weight: 1 }
  )
  const ref = { cwd, world }
  return {
    Ping: {},
    Up: { ...ref, env, services: names, groups: names, wait: F.option(F.boolean(), { nil: undefined }) },
    UpPlain: { ...ref, env, services: names, groups: names, wait: F.option(F.boolean(), { nil: undefined }) },
    Down: { ...ref, all: F.boolean() },
    DownPlain: { ...ref, all: F.boolean() },
    Reload: { ...ref, env },
    Remove: { ...ref, force: F.boolean() },
    Status: { cwd: F.option(cwd, { nil: undefined }) },
    Env: ref,
    Logs: {
      ...ref,
      service: F.option(hostile, { nil: undefined }),
      // following never ends: a request that follows would hold its connection open
      follow: F.constant(false),
      lines: F.integer({ min: -10, max: 5_000 })
    },
    GoldenRebuild: { ...ref, service: hostile, env },
    Gc: { dryRun: F.constant(true), env: F.option(env, { nil: undefined }) },
    GetSettings: {},
    Config: {},
    Metrics: {},
    // only values no daemon may accept: a valid range or proxy port would change this daemon's settings
    SetPortRange: {
      from: F.oneof(F.integer({ min: 65_536, max: 1_000_000 }), F.integer({ min: -100, max: 0 })),
      to: F.integer({ min: -5, max: 1_000_000 })
    },
    SetProxy: {
      http: F.option(
        F.oneof(F.integer({ min: 65_536, max: 10_000_000 }), F.integer({ min: -100, max: 0 }), F.constant(1.5)),
        { nil: undefined }
      ),
      https: F.option(F.integer({ min: 65_536, max: 10_000_000 }), { nil: undefined }),
      httpsUrls: F.constant(undefined)
    }
  }
}

type Mutation =
  | { readonly _tag: "None" }
  | { readonly _tag: "Drop"; readonly index: number }
  | { readonly _tag: "Retype"; readonly index: number; readonly value: unknown }
  | { readonly _tag: "Extra"; readonly key: string; readonly value: unknown }
  | { readonly _tag: "Replace"; readonly value: unknown }

const mutation: FastCheck.Arbitrary<Mutation> = F.oneof(
  { arbitrary: F.constant({ _tag: "None" as const }), weight: 8 },
  { arbitrary: F.record({ _tag: F.constant("Drop" as const), index: F.nat(8) }), weight: 2 },
  { arbitrary: F.record({ _tag: F.constant("Retype" as const), index: F.nat(8), value: wrongType }), weight: 3 },
  {
    arbitrary: F.record({ _tag: F.constant("Extra" as const), key: F.string({ maxLength: 8 }), value: wrongType }),
    weight: 1
  },
  { arbitrary: F.record({ _tag: F.constant("Replace" as const), value: wrongType }), weight: 1 }
)

const mutate = (payload: Record<string, unknown>, m: Mutation): unknown => {
  const keys = Object.keys(payload)
  switch (m._tag) {
    case "None":
      return payload
    case "Drop": {
      if (keys.length === 0) return payload
      const { [keys[m.index % keys.length]!]: _, ...rest } = payload
      return rest
    }
    case "Retype":
      return keys.length === 0 ? m.value : { ...payload, [keys[m.index % keys.length]!]: m.value }
    case "Extra":
      return { ...payload, [m.key]: m.value }
    case "Replace":
      return m.value
  }
}

/** One line of a case: a request (well formed or not), a JSON value that is no request, or text that is no JSON. */
const lineOf = (repo: string): FastCheck.Arbitrary<string> => {
  const fields = fieldsOf(repo)
  // the requests that create worlds (and so take hostile names deepest) come up more often
  const known = F.oneof(
    ...Object.entries(fields).map(([tag, spec]) => ({
      arbitrary: F.record(spec).map((payload) => ({ tag, payload })),
      weight: tag === "Up" || tag === "UpPlain" ? 4 : 1
    }))
  )
  const tag = F.oneof(
    { arbitrary: known, weight: 12 },
    {
      arbitrary: F.record({
        tag: F.oneof(F.constantFrom("Shutdown!", "ping", "UP", "", "__proto__", "toString"), hostile),
        payload: F.constant({})
      }),
      weight: 1
    }
  )
  const request = F.record({
    target: tag,
    mutation,
    envelope: F.constantFrom("ok", "ok", "ok", "ok", "no-headers", "number-id", "bad-id", "no-payload", "bad-headers")
  }).map(({ target, mutation: m, envelope }) => {
    const payload = mutate(target.payload as Record<string, unknown>, m)
    const message: Record<string, unknown> = { _tag: "Request", id: "#", tag: target.tag, payload, headers: [] }
    if (envelope === "no-headers") delete message.headers
    if (envelope === "no-payload") delete message.payload
    if (envelope === "bad-headers") message.headers = { a: 1 }
    if (envelope === "number-id") message.id = 7
    if (envelope === "bad-id") message.id = "x1"
    return JSON.stringify(message)
  })
  const other = F.oneof(
    F.constantFrom(
      '{"_tag":"Interrupt","requestId":"abc"}',
      '{"_tag":"Interrupt","requestId":"1"}',
      '{"_tag":"Ack","requestId":{}}',
      '{"_tag":"Eof"}',
      '{"_tag":"Ping"}',
      '{"_tag":"Nope"}',
      "{}",
      "[]",
      "null",
      "1e999",
      '"Request"',
      "{",
      '{"_tag":"Request"',
      "\u0000\u0001\u0002",
      "not json at all"
    ),
    F.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? "null"),
    F.string({ maxLength: 60 }).map((s) => s.replaceAll("\n", " "))
  )
  return F.oneof({ arbitrary: request, weight: 8 }, { arbitrary: other, weight: 2 })
}

interface Case {
  readonly lines: ReadonlyArray<string>
  /** the last line is cut short and the connection closed without its newline */
  readonly truncated: boolean
  readonly cut: number
}

const caseOf = (repo: string): FastCheck.Arbitrary<Case> =>
  F.record({
    lines: F.array(lineOf(repo), { minLength: 1, maxLength: 4 }),
    truncated: F.boolean(),
    cut: F.double({ min: 0, max: 1, noNaN: true })
  })

// ---------------------------------------------------------------------------------------------------------------
// what comes back

const SENTINEL = "9999999"

interface Sent {
  readonly text: string
  /** the ids of the lines that are requests the server can route, whose replies are awaited */
  readonly awaited: ReadonlySet<string>
  /**
   * every line is a request in a well-formed envelope: then every one is answered. Otherwise the daemon may end the
   * connection (an id it cannot read, an Eof, an Interrupt) and leave the rest unanswered — and after a line that is
   * not JSON, @effect/rpc's NDJSON parser keeps failing on it for the rest of the connection, answering every later
   * chunk with the same SyntaxError and nothing else (the daemon itself is fine; other connections are served).
   */
  readonly clean: boolean
}

const wellFormed = (line: string): boolean => {
  try {
    const m = JSON.parse(line) as { _tag?: unknown; id?: unknown; headers?: unknown }
    return m._tag === "Request" && m.id === "#" && Array.isArray(m.headers)
  } catch {
    return false
  }
}

/** Numbers the requests of a case (ids 1…n) and lists the ones a reply is due for. */
const number = (c: Case): Sent => {
  const awaited = new Set<string>()
  const lines = c.lines.map((line, i) => {
    if (!line.includes('"id":"#"')) return line
    const id = String(i + 1)
    const parsed = JSON.parse(line) as { tag?: unknown }
    if (typeof parsed.tag === "string" && KNOWN_RPCS.has(parsed.tag)) awaited.add(id)
    return line.replace('"id":"#"', `"id":"${id}"`)
  })
  const clean = c.lines.every(wellFormed)
  if (!c.truncated) {
    const ping = { _tag: "Request", id: SENTINEL, tag: "Ping", payload: null, headers: [] }
    return {
      text: `${[...lines, JSON.stringify(ping)].join("\n")}\n`,
      awaited: new Set([...awaited, SENTINEL]),
      clean
    }
  }
  const last = lines.at(-1)!
  const head = lines.slice(0, -1)
  const cutAt = Math.floor(last.length * c.cut)
  // requests before the cut one may be answered; the cut one never is
  return { text: [...head, ""].join("\n") + last.slice(0, cutAt), awaited: new Set(), clean: false }
}

const KNOWN_RPCS: ReadonlySet<string> = new Set([
  "Ping",
  "Up",
  "UpPlain",
  "Down",
  "DownPlain",
  "Reload",
  "Remove",
  "Status",
  "Env",
  "Logs",
  "GoldenRebuild",
  "Gc",
  "GetSettings",
  "Config",
  "Metrics",
  "SetPortRange",
  "SetProxy"
])

/** Sends a case on a fresh connection and collects what the daemon writes back, until every awaited id is answered. */
const exchangeRaw = (text: string, awaited: ReadonlySet<string>, truncated: boolean, timeoutMs = 20_000) =>
  new Promise<{ readonly messages: ReadonlyArray<string>; readonly missing: ReadonlyArray<string> }>((resolve) => {
    const messages: Array<string> = []
    const answered = new Set<string>()
    const client = net.connect({ path: socket })
    let buffer = ""
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      client.destroy()
      resolve({ messages, missing: [...awaited].filter((id) => !answered.has(id)) })
    }
    const timer = setTimeout(finish, timeoutMs)
    client.on("error", finish)
    client.on("close", finish)
    client.on("connect", () => {
      client.write(text)
      // a truncated line is never completed: the client goes, and the daemon must shrug
      if (truncated) client.end()
      if (awaited.size === 0) setTimeout(finish, 300)
    })
    client.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8")
      for (let nl = buffer.indexOf("\n"); nl !== -1; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(nl + 1)
        messages.push(line)
        try {
          const m = JSON.parse(line) as { _tag?: string; requestId?: string }
          if (m._tag === "Chunk" && m.requestId !== undefined) {
            client.write(`${JSON.stringify({ _tag: "Ack", requestId: m.requestId })}\n`)
          }
          if (m._tag === "Exit" && m.requestId !== undefined) answered.add(m.requestId)
        } catch {
          // judged below
        }
      }
      if (awaited.size > 0 && [...awaited].every((id) => answered.has(id))) finish()
    })
  })

const isSchemaIssue = (text: string) =>
  /(Expected |is missing|is unexpected|└─|Type side transformation failure|Encoded side)/.test(text) && !LEAK.test(text)

/** A cause made of interruptions only (`Sequential`/`Parallel` of `Interrupt` and `Empty`). */
const onlyInterruptions = (cause: unknown): boolean => {
  if (typeof cause !== "object" || cause === null) return false
  const c = cause as { _tag?: unknown; left?: unknown; right?: unknown }
  if (c._tag === "Interrupt") return true
  if (c._tag === "Sequential" || c._tag === "Parallel") {
    const sides = [c.left, c.right]
    return (
      sides.some((s) => (s as { _tag?: unknown })._tag !== "Empty") &&
      sides.every((s) => (s as { _tag?: unknown })._tag === "Empty" || onlyInterruptions(s))
    )
  }
  return false
}

/** What is wrong with one message from the daemon, if anything. */
const judge = (line: string): string | undefined => {
  let m: {
    _tag?: unknown
    requestId?: unknown
    defect?: unknown
    exit?: {
      _tag?: unknown
      value?: unknown
      cause?: { _tag?: unknown; error?: unknown; defect?: unknown }
    }
  }
  try {
    m = JSON.parse(line) as typeof m
  } catch {
    return `the daemon wrote a line that is not JSON: ${line.slice(0, 200)}`
  }
  if (m._tag === "Defect") {
    const d = m.defect
    if (typeof d === "string" && PROTOCOL_DEFECT.test(d)) return undefined
    // a line that is not JSON is a parse error of the request: the daemon says so (JSON.parse's words) and goes on
    if (
      typeof d === "object" &&
      d !== null &&
      (d as { name?: unknown }).name === "SyntaxError" &&
      /JSON/.test(String((d as { message?: unknown }).message))
    ) {
      return undefined
    }
    return `a connection-level defect: ${JSON.stringify(d).slice(0, 300)}`
  }
  if (m._tag === "Chunk" || m._tag === "Pong" || m._tag === "ClientEnd") return undefined
  if (m._tag !== "Exit") return `an unexpected message: ${line.slice(0, 200)}`
  const exit = m.exit
  if (exit?._tag === "Success") {
    const value = exit.value as { _tag?: unknown; tag?: unknown; message?: unknown } | null
    // the `…Plain` endpoints answer failures as data
    if (value !== null && typeof value === "object" && value._tag === "Failure") {
      if (typeof value.tag !== "string" || !KNOWN_TAGS.has(value.tag))
        return `a plain failure of unknown tag: ${line.slice(0, 300)}`
      if (LEAK.test(String(value.message))) return `a plain failure leaking an internal error: ${line.slice(0, 400)}`
    }
    return undefined
  }
  const cause = exit?.cause
  // a request interrupted (by an Interrupt the case sent, or its connection going) is no failure of the daemon
  if (onlyInterruptions(cause)) return undefined
  if (cause?._tag === "Fail") {
    const error = cause.error as { _tag?: unknown } | null
    if (error === null || typeof error !== "object" || typeof error._tag !== "string" || !KNOWN_TAGS.has(error._tag)) {
      return `a failure of unknown tag: ${line.slice(0, 300)}`
    }
    if (LEAK.test(JSON.stringify(error))) return `a failure leaking an internal error: ${line.slice(0, 400)}`
    return undefined
  }
  // the payload did not decode: @effect/rpc answers with the Schema issue, a validation error of the request
  if (cause?._tag === "Die" && typeof cause.defect === "string" && isSchemaIssue(cause.defect)) return undefined
  return `an untyped failure: ${line.slice(0, 400)}`
}

const preview = (c: Case) =>
  JSON.stringify({ ...c, lines: c.lines.map((l) => (l.length > 300 ? `${l.slice(0, 300)}…(${l.length})` : l)) })

const stats = { cases: 0, requests: 0, replies: 0, typed: new Map<string, number>() }

const count = (line: string) => {
  stats.replies++
  let key = "other"
  try {
    const m = JSON.parse(line) as {
      _tag: string
      defect?: unknown
      exit?: {
        _tag: string
        value?: { _tag?: string; tag?: string }
        cause?: { _tag: string; error?: { _tag?: string } }
      }
    }
    key =
      m._tag === "Defect"
        ? "Defect (protocol)"
        : m._tag !== "Exit"
          ? m._tag
          : m.exit?._tag === "Success"
            ? m.exit.value?._tag === "Failure"
              ? `plain ${m.exit.value.tag}`
              : "Success"
            : m.exit?.cause?._tag === "Fail"
              ? `${m.exit.cause.error?._tag}`
              : m.exit?.cause?._tag === "Die"
                ? "Die (payload schema)"
                : `${m.exit?.cause?._tag} (interrupted)`
  } catch {}
  stats.typed.set(key, (stats.typed.get(key) ?? 0) + 1)
}

// ---------------------------------------------------------------------------------------------------------------

describe("the daemon's socket", () => {
  it(`answers random and malformed requests with typed failures and stays up (seed ${SEED})`, async () => {
    const repo = box!.dir
    const property = F.asyncProperty(caseOf(repo), async (c) => {
      stats.cases++
      const sent = number(c)
      stats.requests += c.lines.length
      const t0 = Date.now()
      // a case with a line the daemon may give up on (an id it cannot read) is not waited for long
      const { messages, missing } = await exchangeRaw(sent.text, sent.awaited, c.truncated, sent.clean ? 20_000 : 2_000)
      if (process.env.BERTH_FUZZ_TRACE !== undefined) {
        console.log(`case ${stats.cases}: ${Date.now() - t0} ms, missing ${missing}: ${preview(c).slice(0, 400)}`)
        for (const m of messages) console.log(`   <- ${m.slice(0, 300)}`)
      }
      for (const line of messages) count(line)
      const problems = messages.flatMap((line) => judge(line) ?? [])
      if (sent.clean && missing.length > 0) problems.push(`no reply to request(s) ${missing.join(", ")}`)
      const pong = await request(socket, "Ping", undefined, 10_000)
      const pid = pong._tag === "Success" ? (pong.value as { pid: number }).pid : undefined
      if (pid !== daemonPid) problems.push(`the daemon is gone: Ping answered ${JSON.stringify(pong)}`)
      if (problems.length > 0) throw new Error(`${problems.join("\n")}\ncase: ${preview(c)}`)
    })
    const examples: Array<[Case]> = [
      // the requests that leaked internal errors before the boundary checked them
      ...[
        { cwd: `${repo}/berth.toml` },
        { cwd: `${repo}\u0000x` },
        { cwd: "relative" },
        { cwd: "/nonexistent" },
        { cwd: "/a".repeat(3_000) }
      ].flatMap(({ cwd }) =>
        ["Env", "Status", "Up", "Down", "Remove", "Reload", "Logs"].map((tag): [Case] => [
          {
            lines: [
              JSON.stringify({
                _tag: "Request",
                id: "#",
                tag,
                payload: { cwd, env: {}, services: [], groups: [], all: false, force: false, follow: false, lines: 5 },
                headers: []
              })
            ],
            truncated: false,
            cut: 0
          }
        ])
      ),
      [
        {
          lines: [
            JSON.stringify({
              _tag: "Request",
              id: "#",
              tag: "Up",
              payload: {
                cwd: repo,
                world: "bad\u0000name",
                env: { "A=B": "1", C: "x\u0000y" },
                services: [],
                groups: []
              },
              headers: []
            })
          ],
          truncated: false,
          cut: 0
        }
      ],
      // names git takes that a shell would not: worlds are made of them, and their commands run
      ...[
        "`touch${IFS}pwned`",
        "$(touch${IFS}pwned)",
        "a;touch${IFS}pwned",
        "ü",
        "日本語",
        "😀",
        "%s%n",
        "${env.HOME}",
        "__proto__",
        "constructor"
      ].map((world): [Case] => [
        {
          lines: [
            JSON.stringify({
              _tag: "Request",
              id: "#",
              tag: "UpPlain",
              payload: {
                cwd: repo,
                world,
                env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
                services: [],
                groups: []
              },
              headers: []
            })
          ],
          truncated: false,
          cut: 0
        }
      ]),
      [{ lines: ["not json at all", '{"_tag":"Interrupt","requestId":"abc"}'], truncated: false, cut: 0 }],
      [
        {
          lines: [`{"_tag":"Request","id":"#","tag":"Status","payload":{"cwd":"${"z".repeat(5_000_000)}"}}`],
          truncated: true,
          cut: 0.5
        }
      ]
    ]
    const started = Date.now()
    await F.assert(property, { numRuns: RUNS, seed: SEED, examples, endOnFailure: true })
    console.log(
      `socket fuzz: seed ${SEED}, ${stats.cases} cases, ${stats.requests} lines, ${stats.replies} replies in ${((Date.now() - started) / 1000).toFixed(1)} s: ${[
        ...stats.typed
      ]
        .sort((a, b) => b[1] - a[1])
        .map(([k, n]) => `${k} ${n}`)
        .join(", ")}`
    )
    // hostile world names reached worlds' commands only quoted: nothing a name spelled was run
    const found: Array<string> = []
    const walk = (dir: string, depth: number) => {
      if (depth > 4 || !existsSync(dir)) return
      for (const entry of readdirSync(dir)) {
        const path = join(dir, entry)
        if (entry.startsWith("pwned")) found.push(path)
        if (statSync(path, { throwIfNoEntry: false })?.isDirectory() && entry !== ".git") walk(path, depth + 1)
      }
    }
    walk(dirname(box!.dir), 0)
    expect(found).toEqual([])
    // the daemon is the same one, and it logged no crash of its protocol
    const log = readFileSync(join(box!.home, "daemon.log"), "utf8")
    expect(log).not.toMatch(/protocol crashed/)
  }, 240_000)
})
