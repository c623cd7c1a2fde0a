/**
 * Consent before a repository's commands run. A berth.toml names commands berth runs on the user's behalf (setup,
 * each service's cmd, setup and health cmd, each slice's migrate and seed, the agents' verify), so a freshly cloned
 * repository could run anything at `up`. As direnv's `allow` and mise's `trust` do, berth runs them only for a config
 * whose exact content the user allowed: the allowed contents are kept by digest in BERTH_HOME, and a config changed
 * since asks again.
 *
 * The store is an append-only file of lines, one decision each (`allow <digest> <ms> <file>` or `deny <digest> <ms>`),
 * so that two commands recording at once never lose each other's line; the last line of a digest decides.
 */

/** One command a config would have berth run, and the key that names it. */
export interface ConfigCommand {
  readonly field: string
  readonly command: string
}

/** What a config needs from the commands' point of view; the model's shape, reduced (so this module stays pure). */
export interface CommandSource {
  readonly project: { readonly setup: string | undefined }
  readonly services: ReadonlyArray<
    | {
        readonly _tag: "Process"
        readonly name: string
        readonly cmd: string
        readonly setup: string | undefined
        readonly health: { readonly kind: string; readonly target: string } | undefined
      }
    | {
        readonly _tag: "Slice"
        readonly name: string
        readonly migrate: string | undefined
        readonly seed: string | undefined
      }
  >
  readonly agents: { readonly verify: ReadonlyArray<string> }
  readonly overrides: ReadonlyArray<{
    readonly pattern: string
    readonly services: ReadonlyMap<string, { readonly cmd: string | undefined }>
  }>
}

/** Every command the config would run, as written (tokens unresolved), in the order the file gives them. */
export const commandsOf = (config: CommandSource): ReadonlyArray<ConfigCommand> => {
  const out: Array<ConfigCommand> = []
  if (config.project.setup !== undefined) out.push({ field: "project.setup", command: config.project.setup })
  for (const s of config.services) {
    const at = `services.${s.name}`
    if (s._tag === "Process") {
      if (s.setup !== undefined) out.push({ field: `${at}.setup`, command: s.setup })
      out.push({ field: `${at}.cmd`, command: s.cmd })
      if (s.health?.kind === "cmd") out.push({ field: `${at}.health.cmd`, command: s.health.target })
    } else {
      if (s.migrate !== undefined) out.push({ field: `${at}.migrate`, command: s.migrate })
      if (s.seed !== undefined) out.push({ field: `${at}.seed`, command: s.seed })
    }
  }
  for (const o of config.overrides) {
    for (const [name, s] of o.services) {
      if (s.cmd !== undefined) out.push({ field: `overrides."${o.pattern}".${name}.cmd`, command: s.cmd })
    }
  }
  for (const [i, command] of config.agents.verify.entries()) out.push({ field: `agents.verify[${i}]`, command })
  return out
}

/** The environment switch that gives consent for CI and agents: `BERTH_YES=1` in a command's environment. */
export const CONSENT_VARIABLE = "BERTH_YES"

export const consentsByEnvironment = (env: Readonly<Record<string, string | undefined>>): boolean => {
  const value = env[CONSENT_VARIABLE]?.trim().toLowerCase()
  return value === "1" || value === "true" || value === "yes"
}

const DIGEST = /^[0-9a-f]{64}$/

/** A line of the store for one decision. `file` says where the config was, for a person reading the store. */
export const decisionLine = (decision: "allow" | "deny", digest: string, at: number, file = ""): string =>
  `${decision} ${digest} ${at}${decision === "allow" ? ` ${JSON.stringify(file)}` : ""}\n`

/** The digests allowed now: each digest's last decision, in file order. Lines that are not decisions are skipped. */
export const allowedDigests = (text: string): ReadonlySet<string> => {
  const allowed = new Set<string>()
  for (const line of text.split("\n")) {
    const [decision, digest] = line.split(" ")
    if (digest === undefined || !DIGEST.test(digest)) continue
    if (decision === "allow") allowed.add(digest)
    else if (decision === "deny") allowed.delete(digest)
  }
  return allowed
}
