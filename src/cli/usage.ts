/**
 * A pass over argv before @effect/cli sees it, for the two mistakes it reports badly: an unknown command (it lists
 * every command instead of naming the closest) and an unknown option (it takes `--jsn` for a positional argument).
 * Option and command names are read from the command tree itself, so this never drifts from the real CLI.
 */
import * as Descriptor from "@effect/cli/CommandDescriptor"
import type * as Usage from "@effect/cli/Usage"
import * as HashMap from "effect/HashMap"
import * as HashSet from "effect/HashSet"
import * as Option from "effect/Option"
import { closestName } from "../domain/names.js"

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

/** The first usage mistake in argv, if any. */
export const findUsageProblem = (
  root: { readonly descriptor: Descriptor.Command<unknown> },
  argv: ReadonlyArray<string>
): UsageProblem | undefined => {
  let command = root.descriptor
  let path = "berth"
  const end = argv.indexOf("--")
  const args = end === -1 ? argv : argv.slice(0, end)
  let i = 0
  // descend through subcommand names
  for (; i < args.length; i++) {
    // a leaf lists itself as its only subcommand
    const own = Descriptor.getNames(command)
    const subcommands = HashMap.filter(Descriptor.getSubcommands(command), (_, name) => !HashSet.has(own, name))
    const arg = args[i]!
    if (arg.startsWith("-") || HashMap.size(subcommands) === 0) break
    const next = HashMap.get(subcommands, arg)
    if (Option.isNone(next)) {
      const names = [...HashMap.keys(subcommands)]
      const guess = closestName(arg, names)
      return {
        message:
          guess === undefined
            ? `unknown command "${arg}" for ${path}; commands: ${names.join(", ")}`
            : `unknown command "${arg}" for ${path}; did you mean "${guess}"?`
      }
    }
    command = next.value
    path = `${path} ${arg}`
  }
  const known = [...builtIn, ...optionNames(Descriptor.getUsage(command))]
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
