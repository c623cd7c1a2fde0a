/**
 * The shape of `berth.toml` as `effect/Schema`. These schemas describe the file exactly as written (snake_case keys);
 * `parse.ts` validates against them and then builds the camelCase model in `model.ts`. Every schema carries a
 * `description` phrased for a user ("a list of service names"), because error messages are built from it.
 */
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { SOURCE_DATABASE } from "../adapters.js"

const describe = <S extends Schema.Schema.Any>(schema: S, description: string): S =>
  schema.annotations({ description }) as S

export const Text = describe(Schema.String, "a string")

export const Command = describe(
  Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || "must not be empty: give a shell command")),
  "a shell command"
)

export const Label = describe(
  Schema.String.pipe(
    Schema.filter(
      (s) =>
        /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(s) ||
        `"${s}" is not a valid host name label: use lower-case letters, digits and "-" (at most 63)`
    )
  ),
  "a host name label"
)

export const PortName = describe(
  Schema.String.pipe(
    Schema.filter(
      (s) => /^[a-z][a-z0-9_]*$/.test(s) || `"${s}" is not a valid port name: use lower-case letters, digits and "_"`
    )
  ),
  "a port name"
)

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** `"10s"`, `"500ms"`, `"2m"`, `"1h"`, or a number of seconds; decoded to milliseconds. */
export const Duration = describe(
  Schema.transformOrFail(Schema.Union(Schema.Number, Schema.String), Schema.Number, {
    strict: true,
    decode: (input, _, ast) => {
      if (typeof input === "number") {
        return input >= 0 && Number.isFinite(input)
          ? ParseResult.succeed(input * 1000)
          : ParseResult.fail(new ParseResult.Type(ast, input, "a duration must be zero or more seconds"))
      }
      const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$/.exec(input)
      return m === null
        ? ParseResult.fail(
            new ParseResult.Type(
              ast,
              input,
              `"${input}" is not a duration: write e.g. "10s", "500ms", "2m" or a number`
            )
          )
        : ParseResult.succeed(Number(m[1]) * (durationUnits[m[2]!] ?? 1000))
    },
    encode: (ms) => ParseResult.succeed(`${ms}ms`)
  }),
  'a duration such as "10s"'
)

/** Environment values may be written as numbers or booleans for convenience; processes only ever see strings. */
export const EnvValue = describe(
  Schema.transform(Schema.Union(Schema.String, Schema.Number, Schema.Boolean), Schema.String, {
    strict: true,
    decode: (v) => String(v),
    encode: (v) => v
  }),
  "a string, number or boolean"
)

export const EnvTable = describe(Schema.Record({ key: Schema.String, value: EnvValue }), "a table of variables")

export const StringList = describe(Schema.Array(Text), "a list of strings")
export const NameList = describe(Schema.Array(Text), "a list of service names")

export const Health = describe(
  Schema.Struct({
    http: Schema.optional(
      describe(
        Schema.String.pipe(Schema.filter((s) => s.startsWith("/") || `the http check takes a path such as "/healthz"`)),
        "a path"
      )
    ),
    tcp: Schema.optional(describe(Schema.Boolean, "true or false")),
    cmd: Schema.optional(Command),
    log: Schema.optional(
      describe(
        Schema.String.pipe(
          Schema.filter((s) => {
            try {
              new RegExp(s)
              return true
            } catch (e) {
              return `not a valid regular expression: ${(e as Error).message}`
            }
          })
        ),
        "a regular expression"
      )
    ),
    timeout: Schema.optional(Duration),
    interval: Schema.optional(Duration)
  }).pipe(
    Schema.filter((h) => {
      const kinds = [h.http, h.tcp, h.cmd, h.log].filter((k) => k !== undefined).length
      return kinds === 1 || "a health check takes exactly one of http, tcp, cmd or log"
    })
  ),
  "a health check table"
)

export const Restart = describe(Schema.Literal("no", "on-failure", "always"), 'one of "no", "on-failure", "always"')

export const ProcessService = describe(
  Schema.Struct({
    cmd: Command,
    dir: Schema.optional(Text),
    url: Schema.optional(Label),
    ports: Schema.optional(describe(Schema.Array(PortName), "a list of port names")),
    depends_on: Schema.optional(NameList),
    env: Schema.optional(EnvTable),
    env_file: Schema.optional(describe(Schema.Union(Text, Schema.Array(Text)), "a file name or a list of them")),
    setup: Schema.optional(Command),
    health: Schema.optional(Health),
    restart: Schema.optional(Restart),
    max_restarts: Schema.optional(
      describe(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), "a whole number of restarts")
    ),
    restart_backoff: Schema.optional(Duration),
    stop_grace: Schema.optional(Duration),
    groups: Schema.optional(describe(Schema.Array(Label), "a list of group names")),
    inject: Schema.optional(describe(Schema.Boolean, "true or false"))
  }),
  "a service table"
)

/** The keys every slice accepts; an adapter adds its own (see `domain/adapters.ts`). */
export const sliceFields = {
  adapter: Text,
  admin_url: Schema.optional(Text),
  migrate: Schema.optional(Command),
  seed: Schema.optional(Command),
  clone_from: Schema.optional(
    describe(
      Schema.String.pipe(
        Schema.filter(
          (s) =>
            s === "golden" ||
            SOURCE_DATABASE.test(s) ||
            `${JSON.stringify(s)} is neither "golden" nor a database name (letters, digits, "_", "-" and "$", at most 63)`
        )
      ),
      '"golden" or the name of a database on the server'
    )
  ),
  golden_inputs: Schema.optional(describe(Schema.Array(Text), "a list of file globs")),
  groups: Schema.optional(describe(Schema.Array(Label), "a list of group names"))
}

export const SliceService = describe(Schema.Struct(sliceFields), "a slice table")

export const Project = describe(
  Schema.Struct({
    name: Schema.optional(Label),
    domain: Schema.optional(
      describe(
        Schema.String.pipe(
          Schema.filter(
            (s) => /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(s) || `"${s}" is not a valid domain such as "localhost"`
          )
        ),
        "a domain"
      )
    ),
    worktrees: Schema.optional(Text),
    setup: Schema.optional(Command),
    https: Schema.optional(describe(Schema.Boolean, "true or false")),
    /** a world whose routes saw no request for this long is suspended, and woken by its next request */
    idle_suspend: Schema.optional(Duration),
    /** paths or globs of the main checkout copied into each new worktree (gitignored files such as .env) */
    copy: Schema.optional(describe(Schema.Array(Text), "a list of paths or globs")),
    /** the same, symlinked instead of copied */
    link: Schema.optional(describe(Schema.Array(Text), "a list of paths or globs"))
  }),
  "the [project] table"
)

export const Agents = describe(
  Schema.Struct({ verify: Schema.optional(describe(Schema.Array(Command), "a list of shell commands")) }),
  "the [agents] table"
)

export const ServiceOverride = describe(
  Schema.Struct({
    cmd: Schema.optional(Command),
    env: Schema.optional(EnvTable),
    ports: Schema.optional(describe(Schema.Array(PortName), "a list of port names"))
  }),
  "a service override table"
)

export const Override = describe(
  Schema.Struct({
    services: Schema.optional(describe(Schema.Record({ key: Schema.String, value: ServiceOverride }), "a table"))
  }),
  "an override table"
)

export const Overrides = describe(Schema.Record({ key: Schema.String, value: Override }), "a table of overrides")

/** The top level. Services are checked one by one afterwards, because a slice and a process accept other keys. */
export const ConfigFile = describe(
  Schema.Struct({
    project: Schema.optional(Project),
    services: Schema.optional(
      describe(Schema.Record({ key: Schema.String, value: Schema.Unknown }), "a table of service tables")
    ),
    agents: Schema.optional(Agents),
    overrides: Schema.optional(Overrides)
  }),
  "a berth.toml document"
)

export type ProcessServiceInput = Schema.Schema.Type<typeof ProcessService>
export type SliceServiceInput = Schema.Schema.Type<typeof SliceService>
export type ConfigFileInput = Schema.Schema.Type<typeof ConfigFile>
