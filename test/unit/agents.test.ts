import { describe, expect, it } from "@effect/vitest"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import {
  argumentProblems,
  commandLine,
  describeArgument,
  exitCodeOf,
  LineTail,
  maskArguments,
  parseTimeout,
  refusedArguments,
  splitHint,
  type ToolInput,
  toolCallEvent,
  toolHint,
  worldAt
} from "../../src/domain/agents.js"

describe("parseTimeout", () => {
  it("reads durations with a unit, and bare numbers as seconds", () => {
    expect(parseTimeout("500ms")).toBe(500)
    expect(parseTimeout("30s")).toBe(30_000)
    expect(parseTimeout("2m")).toBe(120_000)
    expect(parseTimeout("1h")).toBe(3_600_000)
    expect(parseTimeout("1.5s")).toBe(1500)
    expect(parseTimeout("10")).toBe(10_000)
  })

  it("refuses what is not a positive duration", () => {
    for (const text of ["", "0", "0s", "-1s", "abc", "10 minutes", "1d", "s"])
      expect(parseTimeout(text)).toBeUndefined()
  })
})

describe("exitCodeOf", () => {
  it("passes a code through and turns a signal into 128 + its number, as shells do", () => {
    expect(exitCodeOf(0, null)).toBe(0)
    expect(exitCodeOf(7, null)).toBe(7)
    expect(exitCodeOf(null, "SIGTERM")).toBe(143)
    expect(exitCodeOf(null, "SIGKILL")).toBe(137)
    expect(exitCodeOf(null, "SIGINT")).toBe(130)
  })
})

describe("commandLine", () => {
  it("quotes what a shell would split", () => {
    expect(commandLine(["sh", "-c", "echo $HOME; exit 3"])).toBe("sh -c 'echo $HOME; exit 3'")
    expect(commandLine(["npm", "test"])).toBe("npm test")
  })
})

describe("LineTail", () => {
  it("keeps the last lines of text arriving in any chunks, the unfinished line included", () => {
    const tail = new LineTail(3)
    for (const chunk of ["a\nb", "\nc\r\n", "d\ne", "f"]) tail.push(chunk)
    expect(tail.get()).toEqual(["c", "d", "ef"])
  })

  it("holds whatever was written, however it was cut into chunks", () => {
    FastCheck.assert(
      FastCheck.property(
        FastCheck.array(FastCheck.constantFrom("x", "y", "\n"), { maxLength: 200 }),
        FastCheck.nat(200),
        (chars, cutAt) => {
          const text = chars.join("")
          const tail = new LineTail(5)
          tail.push(text.slice(0, cutAt))
          tail.push(text.slice(cutAt))
          const lines = text.split("\n")
          if (lines.at(-1) === "") lines.pop()
          expect(tail.get()).toEqual(lines.slice(-5))
        }
      )
    )
  })

  it("cuts a very long line", () => {
    const tail = new LineTail(2)
    tail.push(`${"z".repeat(5000)}\n`)
    expect(tail.get()[0]).toHaveLength(2001)
  })
})

describe("splitHint", () => {
  it("takes berth's hint line off the message", () => {
    expect(splitHint('project a has no world "x"; it has none yet\n  hint: berth up x')).toEqual({
      message: 'project a has no world "x"; it has none yet',
      hint: "berth up x"
    })
    expect(splitHint("plain")).toEqual({ message: "plain", hint: undefined })
  })
})

describe("worldAt", () => {
  const worlds = [
    { name: "main", path: "/src/app" },
    { name: "inner", path: "/src/app/worktrees/inner" },
    { name: "other", path: "/src/app-other" },
    { name: "unmade", path: "" }
  ]
  const checkouts = new Set(["/src/app", "/src/app/worktrees/inner", "/src/app/worktrees/fresh", "/src/app-other"])
  const isCheckout = (dir: string) => checkouts.has(dir)

  it("finds the world of the folder's own checkout, never a sibling sharing a prefix", () => {
    expect(worldAt(worlds, "/src/app", isCheckout)?.name).toBe("main")
    expect(worldAt(worlds, "/src/app/lib/x", isCheckout)?.name).toBe("main")
    expect(worldAt(worlds, "/src/app/worktrees/inner/a", isCheckout)?.name).toBe("inner")
    expect(worldAt(worlds, "/src/app-other/x", isCheckout)?.name).toBe("other")
    expect(worldAt(worlds, "/elsewhere", isCheckout)).toBeUndefined()
  })

  it("finds none for a worktree inside another before it has a world, never the checkout around it", () => {
    expect(worldAt(worlds, "/src/app/worktrees/fresh", isCheckout)).toBeUndefined()
    expect(worldAt(worlds, "/src/app/worktrees/fresh/src", isCheckout)).toBeUndefined()
  })
})

describe("toolHint", () => {
  it("turns berth up into the up tool, for the server's own world or the one named", () => {
    expect(toolHint("berth up feature", undefined)).toBe("call the up tool: it makes this worktree's world")
    expect(toolHint("berth up nope", "nope")).toBe('call the up tool with world "nope" to make it')
    expect(toolHint("berth up feature makes it", "feature")).toBe('call the up tool with world "feature" to make it')
    expect(toolHint("stop that process", undefined)).toBe("stop that process")
    expect(toolHint("this worktree's world was never brought up: berth up starts it", undefined)).toBe(
      "call the up tool: it makes this worktree's world"
    )
    expect(toolHint("use one of them (berth status shows each with its state)", "nope")).toBe(
      "use one of them (the status tool shows each with its state)"
    )
    expect(toolHint(null, undefined)).toBeNull()
  })
})

describe("maskArguments and toolCallEvent", () => {
  it("masks secret-looking keys, assignments, credential headers, URL passwords and known secret values", () => {
    const masked = maskArguments(
      {
        command: ["env", "API_TOKEN=abc123456", "psql", "postgres://me:hunter22@db/app", "--name=plain"],
        headers: { Authorization: "Bearer xyz987654", accept: "text/plain" },
        password: "letmein!",
        note: "uses s3cr3t-value here"
      },
      ["s3cr3t-value"]
    )
    expect(masked).toEqual({
      command: ["env", "API_TOKEN=***", "psql", "postgres://me:***@db/app", "--name=plain"],
      headers: { Authorization: "***", accept: "text/plain" },
      password: "***",
      note: "uses *** here"
    })
    expect(maskArguments(["curl", "-H", "Authorization: Bearer abc"], [])).toEqual(["curl", "-H", "Authorization: ***"])
  })

  it("tells a call in one short line, the caller's secret values masked", () => {
    expect(toolCallEvent("exec", { command: ["npm", "test"] }, "exit 0", {})).toBe(
      'exec {"command":["npm","test"]} → exit 0'
    )
    expect(toolCallEvent("status", {}, "ok", {})).toBe("status → ok")
    const env = { GITHUB_TOKEN: "ghp_verysecret" }
    expect(toolCallEvent("exec", { command: ["echo", "ghp_verysecret"] }, "exit 0", env)).toBe(
      'exec {"command":["echo","***"]} → exit 0'
    )
    expect(toolCallEvent("exec", { command: ["x".repeat(2000)] }, "exit 0", {}).length).toBeLessThanOrEqual(500)
  })
})

describe("describeArgument", () => {
  it("says in words what a JSON Schema takes", () => {
    expect(describeArgument({ type: "string" })).toBe("a string")
    expect(describeArgument({ type: "boolean" })).toBe("true or false")
    expect(describeArgument({ type: "integer", minimum: 1, maximum: 1000 })).toBe("an integer from 1 to 1000")
    expect(describeArgument({ type: "number", minimum: 1 })).toBe("a number of at least 1")
    expect(describeArgument({ type: "array", items: { type: "string" } })).toBe("an array of strings")
    expect(describeArgument({ type: "array", minItems: 1, items: { type: "string" } })).toBe(
      "a non-empty array of strings"
    )
    expect(describeArgument({ type: "object", additionalProperties: { type: "string" } })).toBe("an object of strings")
    expect(describeArgument({ enum: ["GET", "POST"] })).toBe('one of "GET", "POST"')
    expect(describeArgument({ anyOf: [{ type: "string" }, { type: "number" }] })).toBe("a string or a number")
  })
})

describe("argumentProblems and refusedArguments", () => {
  const Params = Schema.Struct({
    world: Schema.optional(Schema.String.annotations({ description: "another world" })),
    command: Schema.NonEmptyArray(Schema.String).annotations({ description: "the program and its arguments" }),
    tailLines: Schema.optional(Schema.Int.pipe(Schema.between(1, 2000)).annotations({ description: "lines kept" }))
  })
  // as McpServer advertises a tool's inputSchema
  const input = JSONSchema.fromAST(Params.ast, { definitions: {}, topLevelReferenceStrategy: "skip" }) as ToolInput
  const refuse = (args: Record<string, unknown>) => {
    const decoded = Schema.decodeUnknownEither(Params)(args, { errors: "all", onExcessProperty: "error" })
    if (Either.isRight(decoded)) return undefined
    return refusedArguments("exec", input, argumentProblems(decoded.left.issue), args)
  }

  it("names each argument that is missing, unknown or not what the tool takes, and what it must be", () => {
    expect(refuse({ command: ["true"] })).toBeUndefined()
    expect(refuse({})?.message).toBe(
      'exec: argument "command" is required: a non-empty array of strings (the program and its arguments)'
    )
    expect(refuse({ command: [], tailLines: 0.5 })?.message).toBe(
      'exec: argument "command" must be a non-empty array of strings (the program and its arguments), not []; argument "tailLines" must be an integer from 1 to 2000 (lines kept), not 0.5'
    )
    // an unknown one comes first, with the closest argument the tool takes
    expect(refuse({ command: ["true"], wrld: "x", cwd: "/etc" })?.message).toBe(
      'exec: unknown argument "wrld" (did you mean "world"?); unknown argument "cwd"'
    )
  })

  it("hints at the arguments the tool takes, the required first", () => {
    expect(refuse({})?.hint).toBe("exec takes command (required), world, tailLines, as its inputSchema describes them")
  })

  it("quotes a long value shortly", () => {
    const message = refuse({ command: "x".repeat(500) })?.message ?? ""
    expect(message.length).toBeLessThan(250)
    expect(message).toMatch(/…$/)
  })
})
