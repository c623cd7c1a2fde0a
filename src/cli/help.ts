/**
 * `berth --help` and `berth <command> --help`, in berth's words: read from the same command tree @effect/cli runs
 * (names, aliases, descriptions), laid out as one usage line, the arguments, the options and examples — without the
 * generic filler @effect/cli adds to each one ("A user-defined piece of text.", "This setting is optional.").
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import { version } from "../version.js"
import { commandAliases } from "./aliases.js"
import { stripAnsi } from "./output.js"
import { childrenOf, type Node, nameOf, ownOptions, unwrap } from "./usage.js"

interface Entry {
  readonly name: string
  readonly aliases: ReadonlyArray<string>
  /** what the option takes (`text`, `integer`, `a|b`); none for a flag */
  readonly value: string | undefined
  readonly description: string
  readonly repeated: boolean
  readonly optional: boolean
}

/** The descriptor's parts, read structurally: @effect/cli's public types do not show them. */
interface Part {
  readonly _tag: string
  readonly name?: string
  readonly fullName?: string
  readonly aliases?: ReadonlyArray<string>
  readonly placeholder?: string
  readonly pseudoName?: { readonly _tag: string; readonly value?: string }
  readonly primitiveType?: { readonly _tag: string; readonly alternatives?: ReadonlyArray<readonly [string, unknown]> }
  readonly description?: HelpDoc.HelpDoc
  readonly options?: Part
  readonly args?: Part
  readonly argumentOption?: Part
  readonly left?: Part
  readonly right?: Part
  readonly arg?: Part
}

const text = (doc: HelpDoc.HelpDoc | undefined): string =>
  doc === undefined
    ? ""
    : stripAnsi(HelpDoc.toAnsiText(doc))
        .trim()
        .replace(/\s*\n\s*/g, " ")

const placeholderOf = (single: Part): string | undefined => {
  const type = single.primitiveType
  if (type?._tag === "Bool") return undefined
  if (type?._tag === "Choice" && type.alternatives !== undefined) return type.alternatives.map(([k]) => k).join("|")
  const pseudo = single.pseudoName?._tag === "Some" ? single.pseudoName.value : undefined
  return pseudo ?? single.placeholder ?? "value"
}

/** Every option or argument of a tree, with whether it is repeated or optional. */
const entries = (part: Part | undefined, repeated = false, optional = false): Array<Entry> => {
  if (part === undefined) return []
  switch (part._tag) {
    case "Single":
      return [
        {
          name: part.fullName ?? (part.name ?? "").replace(/^<(.*)>$/, "$1"),
          aliases: (part.aliases ?? []).map((a) => (a.length === 1 ? `-${a}` : `--${a}`)),
          value: part.fullName === undefined ? undefined : placeholderOf(part),
          description: text(part.description),
          repeated,
          optional
        }
      ]
    case "Both":
      return [...entries(part.left, repeated, optional), ...entries(part.right, repeated, optional)]
    case "Variadic":
      return entries(part.argumentOption ?? part.arg ?? part.options, true, optional)
    case "WithDefault":
    case "WithFallback":
      return entries(part.options ?? part.args ?? part.arg, repeated, true)
    case "Map":
    case "Transform":
      return entries(part.options ?? part.args ?? part.arg, repeated, optional)
    default:
      return entries(part.options ?? part.args ?? part.arg, repeated, optional)
  }
}

/** What people type most, per command path. */
const EXAMPLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  up: ["berth up login-fix", "berth up -s api --no-wait", "berth up --all", "berth up login-fix --anywhere"],
  down: ["berth down login-fix", "berth down -s worker", "berth down --all"],
  reload: ["berth reload", "berth reload -s api", "berth reload -g workers"],
  reset: ["berth reset", "berth reset login-fix db"],
  remove: ["berth remove login-fix"],
  status: ["berth status", "berth status --json"],
  dashboard: ["berth dash", "berth dashboard --project ."],
  env: ["berth env --dotenv > .env.world", 'eval "$(berth env --shell)"'],
  logs: ["berth logs -s api -f", "berth logs -s berth"],
  exec: ["berth exec -- npm test", "berth exec login-fix --timeout 5m -- sh -c 'npm run e2e'"],
  verify: ["berth verify --json"],
  curl: ["berth curl login-fix api /healthz", "berth curl login-fix api /items -X POST -d '{\"a\":1}'"],
  open: ["berth open", "berth open login-fix api"],
  doctor: ["berth doctor", "berth doctor --json"],
  check: ["berth check", "berth check --json"],
  init: ["berth init"],
  gc: ["berth gc --dry-run"],
  port: ["berth port --proxy auto --https auto", "berth port --range 40000-41999"],
  reserve: ["berth reserve --ram 15 --disk 5 --max-parallel 8"]
}

const pad = (rows: ReadonlyArray<readonly [string, string]>): Array<string> => {
  const width = Math.min(32, Math.max(...rows.map(([left]) => left.length)))
  return rows.map(([left, right]) =>
    right === ""
      ? `  ${left}`
      : left.length > width
        ? `  ${left}\n  ${" ".repeat(width + 2)}${right}`
        : `  ${left.padEnd(width)}  ${right}`
  )
}

const optionRow = (e: Entry): readonly [string, string] => {
  const names = [...e.aliases, e.name].join(", ")
  const left = `${e.aliases.length === 0 ? "    " : ""}${names}${e.value === undefined ? "" : ` <${e.value}>`}`
  return [left, `${e.description}${e.repeated && !/repeatable/.test(e.description) ? " (repeatable)" : ""}`]
}

const commandHelp = (node: Node, path: string): string => {
  const own = unwrap(ownOptions(node) as unknown as Node) as unknown as Part
  const options = entries(own.options)
  const args = entries(own.args)
  const children = childrenOf(node)
  const usage = [
    `berth ${path}`.trim(),
    ...(children.length > 0 ? ["<command>"] : []),
    ...args.map((a) => {
      const shown = `<${a.name}>${a.repeated ? "…" : ""}`
      return a.optional || a.repeated ? `[${shown}]` : shown
    }),
    ...(options.length > 0 ? ["[options]"] : [])
  ].join(" ")
  const lines = [`Usage: ${usage}`, "", text(own.description)]
  if (children.length > 0) {
    lines.push("", "Commands:")
    lines.push(
      ...pad(
        children.map(
          (c) =>
            [
              nameOf(c)[0] ?? "",
              text((unwrap(ownOptions(c) as unknown as Node) as unknown as Part).description)
            ] as const
        )
      )
    )
  }
  if (args.length > 0) {
    lines.push("", "Arguments:")
    lines.push(...pad(args.map((a) => [`<${a.name}>`, a.description] as const)))
  }
  lines.push("", "Options:")
  lines.push(...pad([...options.map(optionRow), ["-h, --help", "show this help"]]))
  const examples = EXAMPLES[path]
  if (examples !== undefined) lines.push("", "Examples:", ...examples.map((e) => `  $ ${e}`))
  return lines.join("\n")
}

const rootHelp = (root: Node): string => {
  const commands = childrenOf(root).map(
    (c) =>
      [nameOf(c)[0] ?? "", text((unwrap(ownOptions(c) as unknown as Node) as unknown as Part).description)] as const
  )
  const aliases = Object.entries(commandAliases)
    .map(([alias, target]) => `${alias} → ${target}`)
    .join(", ")
  return [
    `berth ${version}: one isolated local world per git worktree`,
    "",
    "Usage: berth <command> [options]",
    "",
    "Commands:",
    ...pad(commands),
    "",
    `Aliases: ${aliases}`,
    "",
    "Options:",
    ...pad([
      ["    --version", "print berth's version"],
      ["-h, --help", "show this help (berth <command> --help: that command's)"],
      ["    --completions <bash|zsh|fish|powershell>", "print a shell completion script (as berth completion does)"]
    ]),
    "",
    "Examples:",
    "  $ berth up login-fix        # a world for branch login-fix: worktree, ports, data, services, routes",
    "  $ berth status              # every world of every project",
    "  $ berth env --json          # this world's URLs and ports",
    "",
    "Every command takes --json; agents: berth mcp (see AGENTS.md)."
  ].join("\n")
}

export interface HelpPage {
  /** the command's words after `berth` (`golden rebuild`) */
  readonly path: string
  /** its one-line description */
  readonly summary: string
  /** what `berth <path> --help` prints */
  readonly help: string
}

/** Every command's help, each parent before its children: the data docs/commands.md is generated from. */
export const helpPages = (root: { readonly descriptor: unknown }): ReadonlyArray<HelpPage> => {
  const out: Array<HelpPage> = []
  const visit = (node: Node, path: string) => {
    for (const child of childrenOf(node)) {
      const childPath = `${path} ${nameOf(child)[0] ?? ""}`.trim()
      const own = unwrap(ownOptions(child) as unknown as Node) as unknown as Part
      out.push({ path: childPath, summary: text(own.description), help: commandHelp(child, childPath) })
      visit(child, childPath)
    }
  }
  visit(root.descriptor as Node, "")
  return out
}

/** Every argument and option of the tree that has no description of its own: `path option`, for a test to refuse. */
export const undocumented = (root: { readonly descriptor: unknown }): ReadonlyArray<string> => {
  const out: Array<string> = []
  const visit = (node: Node, path: string) => {
    const own = unwrap(ownOptions(node) as unknown as Node) as unknown as Part
    for (const e of [...entries(own.options), ...entries(own.args)]) {
      if (e.description === "") out.push(`${path} ${e.name}`.trim())
    }
    for (const child of childrenOf(node)) visit(child, `${path} ${nameOf(child)[0] ?? ""}`.trim())
  }
  visit(root.descriptor as Node, "")
  return out
}

/**
 * The help argv asks for (`--help` or `-h` before any `--`), or undefined when it asks for none. `argv` has passed
 * `findUsageProblem`, so every word before the first option names a command.
 */
export const helpFor = (root: { readonly descriptor: unknown }, argv: ReadonlyArray<string>): string | undefined => {
  const end = argv.indexOf("--")
  const args = end === -1 ? argv : argv.slice(0, end)
  if (!args.includes("--help") && !args.includes("-h")) return undefined
  let node = root.descriptor as Node
  const path: Array<string> = []
  for (const arg of args) {
    if (arg.startsWith("-")) break
    const next = childrenOf(node).find((c) => nameOf(c).includes(arg))
    if (next === undefined) break
    node = next
    path.push(arg)
  }
  return path.length === 0 ? rootHelp(node) : commandHelp(node, path.join(" "))
}
