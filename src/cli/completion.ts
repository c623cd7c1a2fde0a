/**
 * Shell completion: `berth completion bash|zsh|fish|powershell` (or `--completions <shell>`) prints a small script
 * that asks `berth __complete <words…>`
 * for the candidates of the word under the cursor, so commands, options, world names (the branches of the project's
 * worktrees, and for `up` any local branch), services, groups and slices are all completed by one piece of code,
 * read from the real command tree and the berth.toml of the folder the shell is in. `complete` is pure: it says what
 * to offer, and the caller looks up the names it asks for.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import * as Descriptor from "@effect/cli/CommandDescriptor"
import type * as Usage from "@effect/cli/Usage"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Model from "../domain/config/model.js"
import { parseConfig } from "../domain/config/parse.js"
import { commandAliases, expandAlias } from "./aliases.js"
import { childrenOf, type Node, nameOf, ownOptions } from "./usage.js"

/** Names that come from the project rather than the command tree. */
export type NameKind = "world" | "branch" | "service" | "group" | "slice"

export interface Completion {
  /** fixed candidates: commands, options */
  readonly values: ReadonlyArray<string>
  /** names to look up in the project, offered beside `values` */
  readonly lookup: ReadonlyArray<NameKind>
  /** what the word under the cursor starts with: every candidate offered must too */
  readonly prefix: string
}

/** What each command's positional arguments name, in order; the last repeats (`reset`'s slices). */
const positionals: Readonly<Record<string, ReadonlyArray<ReadonlyArray<NameKind>>>> = {
  up: [["world", "branch"]],
  down: [["world"]],
  reload: [["world"]],
  reset: [["world"], ["slice"]],
  remove: [["world"]],
  env: [["world"]],
  logs: [["world"]],
  exec: [["world"]],
  verify: [["world"]],
  open: [["world"], ["service"]],
  curl: [["world"], ["service"]],
  "golden rebuild": [["world"], ["service"]]
}

/** Commands whose last positional repeats: `berth reset feature db cache`. */
const REPEATS_LAST: ReadonlySet<string> = new Set(["reset"])

/** Options whose value names something berth knows. */
const optionValues: Readonly<Record<string, ReadonlyArray<NameKind>>> = {
  "-s": ["service"],
  "--service": ["service"],
  "-g": ["group"],
  "--group": ["group"]
}

/** Options every command accepts from @effect/cli itself (`--completions` takes a shell). */
const BUILT_IN = ["--help", "--version"]
export const SHELLS = ["bash", "zsh", "fish", "powershell"] as const
export type Shell = (typeof SHELLS)[number]

interface NamedOption {
  readonly name: string
  readonly takesValue: boolean
}

const namedOptions = (usage: Usage.Usage): ReadonlyArray<NamedOption> => {
  switch (usage._tag) {
    case "Named":
      return usage.names.map((name) => ({ name, takesValue: Option.isSome(usage.acceptedValues) }))
    case "Optional":
    case "Repeated":
      return namedOptions(usage.usage)
    case "Alternation":
    case "Concat":
      return [...namedOptions(usage.left), ...namedOptions(usage.right)]
    default:
      return []
  }
}

const none = (prefix: string): Completion => ({ values: [], lookup: [], prefix })

/**
 * The candidates for the last of `words` (the words after `berth`, the last one being typed: `""` when the cursor
 * stands after a space).
 */
export const complete = (root: { readonly descriptor: unknown }, words: ReadonlyArray<string>): Completion => {
  const typed = expandAlias(words.slice(0, -1))
  const prefix = words[words.length - 1] ?? ""
  if (typed.includes("--")) return none(prefix)
  if (typed[typed.length - 1] === "--completions") return { values: SHELLS, lookup: [], prefix }
  if (typed.length === 1 && typed[0] === "completion") return { values: SHELLS, lookup: [], prefix }
  let command = root.descriptor as Node
  const path: Array<string> = []
  let i = 0
  for (; i < typed.length; i++) {
    const next = childrenOf(command).find((c) => nameOf(c).includes(typed[i]!))
    if (next === undefined) break
    command = next
    path.push(typed[i]!)
  }
  const options = namedOptions(Descriptor.getUsage(ownOptions(command) as Descriptor.Command<unknown>))
  const valued = new Set(options.filter((o) => o.takesValue).map((o) => o.name))
  // the positional arguments given so far, skipping options and their values
  let given = 0
  for (let k = i; k < typed.length; k++) {
    const word = typed[k]!
    if (word.startsWith("-")) {
      if (valued.has(word) && !word.includes("=")) k++
    } else given++
  }
  const last = typed[typed.length - 1]
  if (last !== undefined && valued.has(last)) return { values: [], lookup: optionValues[last] ?? [], prefix }
  if (prefix.startsWith("-")) {
    return {
      values: [...options.map((o) => o.name), ...BUILT_IN].filter((o) => o.startsWith("--")),
      lookup: [],
      prefix
    }
  }
  const children = childrenOf(command)
  if (children.length > 0) {
    const names = children.flatMap(nameOf)
    return { values: path.length === 0 ? [...names, ...Object.keys(commandAliases)] : names, lookup: [], prefix }
  }
  const name = path.join(" ")
  const kinds = positionals[name] ?? []
  const kind = given < kinds.length ? kinds[given] : REPEATS_LAST.has(name) ? kinds[kinds.length - 1] : undefined
  return kind === undefined ? none(prefix) : { values: [], lookup: kind, prefix }
}

/** The lines `__complete` prints: every candidate that starts with the word typed, each once, sorted. */
export const candidateLines = (values: ReadonlyArray<string>, prefix: string): ReadonlyArray<string> =>
  [...new Set(values.filter((v) => v.startsWith(prefix)))].sort()

/** The script for a shell: it hands the words to `berth __complete` and offers what comes back. */
export const completionScript = (shell: Shell): string => {
  switch (shell) {
    case "bash":
      return `# berth completion for bash: source it, or save it as /etc/bash_completion.d/berth
_berth() {
  local IFS=$'\\n'
  COMPREPLY=($(berth __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _berth berth
`
    case "zsh":
      return `#compdef berth
# berth completion for zsh: save it as _berth in a folder of $fpath, or source it after compinit
_berth() {
  local -a candidates
  candidates=("\${(@f)$(berth __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  if (( \${#candidates} )) && [[ -n "\${candidates[1]}" ]]; then
    compadd -- "\${candidates[@]}"
  else
    _files
  fi
}
if (( $+functions[compdef] )); then compdef _berth berth; fi
`
    case "fish":
      return `# berth completion for fish: save it as ~/.config/fish/completions/berth.fish
complete -c berth -f -a '(berth __complete (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
`
    case "powershell":
      // the words up to the cursor go to berth __complete as they were typed; an answer of no line at all leaves
      // PowerShell its own (file) completion
      return `# berth completion for PowerShell: add it to your profile (berth completion powershell >> $PROFILE), or load it
# now with: berth completion powershell | Out-String | Invoke-Expression
Register-ArgumentCompleter -Native -CommandName berth -ScriptBlock {
  param($wordToComplete, $commandAst, $cursorPosition)
  # the words up to the cursor, berth itself left out; the last is the one being typed (empty after a space)
  $words = @($commandAst.CommandElements | Where-Object { $_.Extent.StartOffset -lt $cursorPosition } |
    Select-Object -Skip 1 | ForEach-Object { $_.Extent.Text })
  if ($wordToComplete -eq '') {
    # PowerShell before 7.3 drops an empty argument to a native command: quoted, it arrives empty
    $v = $PSVersionTable.PSVersion
    $words += if ([version]"$($v.Major).$($v.Minor)" -lt [version]'7.3') { '""' } else { '' }
  }
  & berth __complete @words 2>$null | ForEach-Object {
    $kind = if ($_.StartsWith('-')) { 'ParameterName' } else { 'ParameterValue' }
    [System.Management.Automation.CompletionResult]::new($_, $_, $kind, $_)
  }
}
`
  }
}

const git = (cwd: string, args: ReadonlyArray<string>): ReadonlyArray<string> => {
  try {
    return execFileSync("git", args, { cwd, encoding: "utf8", timeout: 2_000, stdio: ["ignore", "pipe", "ignore"] })
      .split("\n")
      .filter((line) => line !== "")
  } catch {
    return []
  }
}

/** The berth.toml at or above `cwd`, parsed; undefined when there is none or it does not parse. */
const configAt = (cwd: string): Model.Config | undefined => {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const file = join(dir, "berth.toml")
    if (existsSync(file)) {
      const parsed = parseConfig(readFileSync(file, "utf8"), file)
      return Either.isRight(parsed) ? parsed.right.config : undefined
    }
    if (dirname(dir) === dir) return undefined
  }
}

/**
 * The names of a kind for the project `cwd` is in, read without the daemon (a completion must never start one):
 * worlds are the branches of the repository's worktrees, services, groups and slices those of its berth.toml.
 */
export const projectNames = (cwd: string, kinds: ReadonlyArray<NameKind>): ReadonlyArray<string> => {
  let config: Model.Config | undefined
  const services = () => {
    if (config === undefined) config = configAt(cwd)
    return config?.services ?? []
  }
  const lookup: Readonly<Record<NameKind, () => ReadonlyArray<string>>> = {
    world: () =>
      git(cwd, ["worktree", "list", "--porcelain"]).flatMap((line) =>
        line.startsWith("branch refs/heads/") ? [line.slice("branch refs/heads/".length)] : []
      ),
    branch: () => git(cwd, ["for-each-ref", "--format=%(refname:short)", "refs/heads"]),
    service: () => services().map((s) => s.name),
    group: () => services().flatMap((s) => s.groups),
    slice: () => services().flatMap((s) => (s._tag === "Slice" ? [s.name] : []))
  }
  return kinds.flatMap((kind) => lookup[kind]())
}
