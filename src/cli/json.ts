/**
 * The `--json` contract: every document a command prints, as an Effect Schema. Commands print through `printDocument`,
 * which encodes by the Schema (so nothing outside the contract leaks out), and `docs/json/<name>.schema.json` is
 * generated from `documents` (test/unit/json-contract.test.ts keeps the two equal). Each document is an object with
 * `"schema": 1`; a change that breaks a reader bumps it (see docs/json/CHANGELOG.md).
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as JSONSchema from "effect/JSONSchema"
import * as Schema from "effect/Schema"
import { ClusterStatus, ConfigReport, EnvReply, GcReport, Metrics, Settings, WorldStatus } from "../daemon/api.js"
import { DiagnosticSchema } from "../domain/errors.js"
import { VerifyReport } from "../mcp/world.js"
import { formatDocument, SCHEMA_VERSION } from "./documents.js"

const schema = Schema.Literal(SCHEMA_VERSION)

const doc = <Fields extends Schema.Struct.Fields>(title: string, description: string, fields: Fields) =>
  Schema.Struct({ schema, ...fields }).annotations({ title, description })

const WorldDocument = (command: string, what: string) => doc(`berth ${command} --json`, what, { world: WorldStatus })

const Worlds = Schema.Array(WorldStatus)

const TrustCa = Schema.Struct({
  certPath: Schema.String,
  commonName: Schema.String,
  fingerprint: Schema.String,
  sha1: Schema.String
})

const DaemonInfo = {
  running: Schema.Boolean,
  home: Schema.String,
  log: Schema.String,
  version: Schema.optional(Schema.String),
  build: Schema.optional(Schema.String),
  pid: Schema.optional(Schema.Number)
}

/** Every document, by the name of its file under docs/json. */
export const documents = {
  up: WorldDocument("up", "the world once it runs (or, with --no-wait, as it is now)"),
  reload: WorldDocument("reload", "the world, started again, once it runs (or, with --no-wait, as it is now)"),
  reset: WorldDocument("reset", "the world, its slices back to their golden (or a fresh migrate + seed)"),
  "golden-rebuild": WorldDocument("golden rebuild", "the world whose worktree built the golden"),
  "up-progress": doc(
    "berth up|reload --json --progress",
    "one line per change of what a waiting up or reload waits for (NDJSON); the command's own document is the last line",
    {
      progress: Schema.Struct({
        world: Schema.String,
        state: Schema.String,
        /** its place in line (1 is next) and what it waits for, while it is in line */
        queue: Schema.NullOr(Schema.Struct({ position: Schema.Number, waitingFor: Schema.String })),
        /** the project's setup runs now (once per worktree, before any service) */
        setup: Schema.Boolean,
        /** slices whose golden is being built now */
        building: Schema.Array(Schema.String),
        /** services not ready yet, with their state */
        waiting: Schema.Array(Schema.Struct({ name: Schema.String, state: Schema.String })),
        /** since the up asked */
        elapsedMs: Schema.Number
      })
    }
  ),
  "up-all": doc("berth up --all --json", "every world of the project whose worktree exists, brought up", {
    worlds: Worlds,
    /** the worlds that did not start, each with berth's message (the command exits 1 when there is any) */
    failed: Schema.Array(Schema.Struct({ name: Schema.String, message: Schema.String }))
  }),
  down: doc(
    "berth down --json",
    "each world stopped and the state it reached (with --service, the one world, its services stopped)",
    { worlds: Worlds }
  ),
  status: doc("berth status --json", "every world (of the project, with a path)", { worlds: Worlds }),
  remove: doc("berth remove --json", "the world removed", {
    removed: Schema.Struct({ project: Schema.String, name: Schema.String, path: Schema.String })
  }),
  env: doc("berth env --json", "the world's variables, and the command each process was last started with", {
    ...EnvReply.fields
  }),
  logs: doc("berth logs --json", "one log line; the command prints one such document per line (NDJSON)", {
    service: Schema.String,
    line: Schema.String
  }),
  verify: VerifyReport.annotations({
    title: "berth verify --json",
    description: "the commands of [agents] verify that ran; the last one failed when ok is false"
  }),
  open: doc(
    "berth open --json",
    "the URL, and whether a browser opened it (false, with exit 1, when the opener failed)",
    {
      world: Schema.String,
      service: Schema.String,
      url: Schema.String,
      opened: Schema.Boolean
    }
  ),
  doctor: doc("berth doctor --json", "what doctor looked at and found; ok is false when something is broken (exit 1)", {
    ok: Schema.Boolean,
    findings: Schema.Array(
      Schema.Struct({
        check: Schema.String,
        verdict: Schema.Literal("ok", "warn", "fail"),
        detail: Schema.String,
        fix: Schema.optional(Schema.String)
      })
    )
  }),
  allow: doc(
    "berth allow|deny --json",
    "the berth.toml decided on, its content's digest, the commands it may (or may no longer) run, and the decision",
    {
      file: Schema.String,
      digest: Schema.String,
      commands: Schema.Array(Schema.Struct({ field: Schema.String, command: Schema.String })),
      allowed: Schema.Boolean
    }
  ),
  hooks: doc(
    "berth hooks install|status|uninstall --json",
    "the post-checkout hook file, and whether berth's block is in it",
    {
      file: Schema.String,
      installed: Schema.Boolean
    }
  ),
  hosts: doc("berth hosts sync|clean --json", "the hosts file, and the route names berth's block holds in it now", {
    file: Schema.String,
    names: Schema.Array(Schema.String)
  }),
  check: doc("berth check --json", "berth.toml's errors and warnings", {
    errors: Schema.Array(DiagnosticSchema),
    warnings: Schema.Array(DiagnosticSchema),
    /** set when another repository declares the same project name */
    project: Schema.optional(
      Schema.Struct({ name: Schema.String, label: Schema.String, others: Schema.Array(Schema.String) })
    )
  }),
  init: doc("berth init --json", "the berth.toml written", {
    file: Schema.String,
    source: Schema.String,
    notes: Schema.Array(Schema.String),
    warnings: Schema.Array(DiagnosticSchema)
  }),
  gc: doc("berth gc --json", "what gc dropped (or, with --dry-run, would drop)", {
    dryRun: Schema.Boolean,
    ...GcReport.fields
  }),
  curl: doc("berth curl --json", "the service's answer", {
    url: Schema.String,
    status: Schema.Number,
    headers: Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Array(Schema.String)) }),
    body: Schema.NullOr(Schema.String)
  }),
  trust: doc("berth trust --json", "berth's CA and, with --dry-run, the plan, else what was done", {
    ca: TrustCa,
    plan: Schema.optional(
      Schema.Struct({
        action: Schema.Literal("install", "remove"),
        steps: Schema.Array(
          Schema.Struct({
            store: Schema.String,
            kind: Schema.Literal("run", "nss-add", "nss-remove"),
            argv: Schema.Array(Schema.String),
            root: Schema.Boolean
          })
        ),
        skipped: Schema.Array(Schema.Struct({ store: Schema.String, reason: Schema.String }))
      })
    ),
    report: Schema.optional(
      Schema.Struct({
        action: Schema.Literal("install", "remove"),
        done: Schema.Array(Schema.Struct({ store: Schema.String, command: Schema.String })),
        failed: Schema.Array(Schema.Struct({ store: Schema.String, command: Schema.String, message: Schema.String }))
      })
    )
  }),
  port: doc("berth port --json", "the lease range and the proxy's listeners", Settings.fields),
  config: doc(
    "berth config --json",
    "every machine-global setting and where its value comes from",
    ConfigReport.fields
  ),
  reserve: doc("berth reserve --json", "the reserves, after any change", ConfigReport.fields),
  cluster: doc(
    "berth cluster status|init|join|leave --json",
    "this machine's membership and every machine of its cluster",
    ClusterStatus.fields
  ),
  metrics: doc("berth metrics --json", "worlds, the line, admissions, readings and proxy requests", Metrics.fields),
  "daemon-status": doc(
    "berth daemon status --json (and daemon start --json)",
    "the daemon of this BERTH_HOME",
    DaemonInfo
  ),
  "daemon-stop": doc("berth daemon stop --json", "whether a daemon was stopped", { stopped: Schema.Boolean }),
  "daemon-install": doc(
    "berth daemon install --json",
    "the file that has the user's service manager start the daemon at login, and whether it is enabled",
    {
      /** linux: a systemd user unit; darwin: a launchd agent */
      platform: Schema.Literal("linux", "darwin"),
      file: Schema.String,
      /** the unit's name, or the agent's label */
      name: Schema.String,
      home: Schema.String,
      text: Schema.String,
      /** false with --dry-run */
      written: Schema.Boolean,
      /** systemctl --user enabled the unit */
      enabled: Schema.Boolean,
      /** what is left for the user to run, if anything */
      run: Schema.Array(Schema.String)
    }
  ),
  "daemon-uninstall": doc("berth daemon uninstall --json", "whether the login unit was removed", {
    platform: Schema.Literal("linux", "darwin"),
    file: Schema.String,
    name: Schema.String,
    home: Schema.String,
    /** false when there was none */
    removed: Schema.Boolean,
    /** systemctl --user disabled the unit (without it, berth removed the link that enabled it) */
    disabled: Schema.Boolean,
    run: Schema.Array(Schema.String)
  }),
  version: doc("berth version --json", "this berth: its version, its build, and the Node and platform it runs on", {
    version: Schema.String,
    /** the build's id: two builds of one version differ here */
    build: Schema.String,
    /** Node's version, as `node --version` prints it */
    node: Schema.String,
    /** `<platform>-<arch>`, e.g. linux-x64 */
    platform: Schema.String
  }),
  error: doc("berth <command> --json, on failure (stderr)", "what failed: berth's error tag, the message, the advice", {
    error: Schema.Struct({ tag: Schema.String, message: Schema.String, hint: Schema.NullOr(Schema.String) })
  })
} as const

export type DocumentName = keyof typeof documents
export type DocumentOf<N extends DocumentName> = (typeof documents)[N]["Type"]

/** The JSON Schema published for a document: draft-07, as `JSONSchema.make` writes it. */
export const jsonSchemaOf = (name: DocumentName): JSONSchema.JsonSchema7Root =>
  JSONSchema.make(documents[name] as Schema.Schema.AnyNoContext)

const encode = <N extends DocumentName>(name: N, value: Omit<DocumentOf<N>, "schema">) =>
  Schema.encode(documents[name] as unknown as Schema.Schema<DocumentOf<N>, unknown>)({
    ...value,
    schema: SCHEMA_VERSION
  } as DocumentOf<N>).pipe(Effect.orDie)

/** Prints a document on stdout, encoded by its Schema: a field the contract lacks is never printed. */
export const printDocument = <N extends DocumentName>(name: N, value: Omit<DocumentOf<N>, "schema">) =>
  Effect.flatMap(encode(name, value), (encoded) => Console.log(formatDocument(encoded)))

/** The same, one document per line (`logs --json`). */
export const printDocumentLine = <N extends DocumentName>(name: N, value: Omit<DocumentOf<N>, "schema">) =>
  Effect.flatMap(encode(name, value), (encoded) => Console.log(JSON.stringify(encoded)))
