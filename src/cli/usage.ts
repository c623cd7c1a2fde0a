/**
 * A pass over argv before @effect/cli sees it, for the two mistakes it reports badly: an unknown command (it lists
 * every command instead of naming the closest) and an unknown option (it takes `--jsn` for a positional argument).
 * Option and command names are read from the command tree itself, so this never drifts from the real CLI.
 */
import * as Descriptor from "@effect/cli/CommandDescriptor"
import type * as Usage from "@effect/cli/Usage"
import * as HashSet from "effect/HashSet"
import { closestName } from "../domain/names.js"
import { commandAliases } from "./aliases.js"

/** Options every command accepts from @effect/cli itself. */
const builtIn = ["--help", "-h", "--version", "--wizard", "--completions", "--log-level"]

const optionNames = (usage: Usage.Usage): Array<string> => {
  switch (usage._tag) {
    case "Named":
      return [...usage.names]
    case "Optional":
    case "Repeated":
      return optionNames(usage.usage)
    case "Alternation":
    case "Concat":
      return [...optionNames(usage.left), ...optionNames(usage.right)]
    default:
      return []
  }
}

export interface UsageProblem {
  readonly message: string
}

/**
 * The descriptor nodes @effect/cli builds: `Subcommands` (a parent and its children) and `Map` (a transformed
 * command) wrap the `Standard` leaves. Their fields are not in the public types, so they are read structurally.
 */
export interface Node {
  readonly _tag: string
  readonly command?: Node
  readonly parent?: Node
  readonly children?: ReadonlyArray<Node>
}

export const unwrap = (node: Node): Node =>
  node._tag === "Map" && node.command !== undefined ? unwrap(node.command) : node

export const childrenOf = (node: Node): ReadonlyArray<Node> => unwrap(node).children ?? []

/** The node whose options apply once this command is chosen: a parent's own, not its children's. */
export const ownOptions = (node: Node): Descriptor.Command<unknown> => {
  const n = unwrap(node)
  return (n._tag === "Subcommands" && n.parent !== undefined ? n.parent : n) as unknown as Descriptor.Command<unknown>
}

export const nameOf = (node: Node): ReadonlyArray<string> => [
  ...HashSet.values(Descriptor.getNames(node as unknown as Descriptor.Command<unknown>))
]

/** The first usage mistake in argv, if any. */
export const findUsageProblem = (
  root: { readonly descriptor: Descriptor.Command<unknown> },
  argv: ReadonlyArray<string>
): UsageProblem | undefined => {
  let command = root.descriptor as unknown as Node
  let path = "berth"
  const end = argv.indexOf("--")
  const args = end === -1 ? argv : argv.slice(0, end)
  let i = 0
  // descend through subcommand names
  for (; i < args.length; i++) {
    const children = childrenOf(command)
    const arg = args[i]!
    if (arg.startsWith("-") || children.length === 0) break
    const next = children.find((c) => nameOf(c).includes(arg))
    if (next === undefined) {
      const names = children.flatMap(nameOf)
      // at the top, the aliases are guesses too (`lst` → `ls`)
      const aliases = path === "berth" ? Object.keys(commandAliases) : []
      const guess = closestName(arg, [...names, ...aliases])
      return {
        message:
          guess === undefined
            ? `unknown command "${arg}" for ${path}; commands: ${names.join(", ")}`
            : `unknown command "${arg}" for ${path}; did you mean "${guess}"?`
      }
    }
    command = next
    path = `${path} ${arg}`
  }
  const known = [...builtIn, ...optionNames(Descriptor.getUsage(ownOptions(command)))]
  for (; i < args.length; i++) {
    const arg = args[i]!
    if (!arg.startsWith("-") || arg === "-") continue
    const name = arg.split("=")[0]!
    if (known.includes(name)) continue
    const guess = closestName(
      name,
      known.filter((k) => k.startsWith("--"))
    )
    return {
      message: `unknown option "${name}" for ${path}${guess === undefined ? "; see --help" : `; did you mean "${guess}"?`}`
    }
  }
  return undefined
}
