/**
 * The store of consent (`domain/consent.ts`): which berth.toml contents may run commands, kept in BERTH_HOME as an
 * append-only file. Plain functions over the file's path, so that the CLI (`berth allow`, the prompt of `up`) and the
 * daemon (which refuses to run what was not allowed) read one truth, with or without the other running.
 */
import { appendFileSync, existsSync, readFileSync, statSync } from "node:fs"
import * as Effect from "effect/Effect"
import {
  allowedDigests,
  type CommandSource,
  commandsOf,
  consentsByEnvironment,
  decisionLine
} from "../domain/consent.js"
import { ConfigNotAllowed } from "../domain/errors.js"

let cached: { readonly file: string; readonly stamp: string; readonly allowed: ReadonlySet<string> } | undefined

/** The allowed digests, read again only when the file changed (every `up` asks). */
export const allowed = (file: string): ReadonlySet<string> => {
  const stat = statSync(file, { throwIfNoEntry: false })
  if (stat === undefined) return new Set()
  const stamp = `${stat.size}:${stat.mtimeMs}:${stat.ino}`
  if (cached?.file === file && cached.stamp === stamp) return cached.allowed
  const set = allowedDigests(readFileSync(file, "utf8"))
  cached = { file, stamp, allowed: set }
  return set
}

/** Records a decision: one line appended (owner-only), so concurrent recorders never lose each other's. */
export const record = (file: string, decision: "allow" | "deny", digest: string, config = ""): void => {
  appendFileSync(file, decisionLine(decision, digest, Date.now(), config), { mode: 0o600 })
  cached = undefined
}

/** Whether the store exists yet: before a berth that asked for consent ever ran, it does not. */
export const started = (file: string): boolean => existsSync(file)

/**
 * Passes when the config may run its commands: its content was allowed, or the command's environment says yes
 * (BERTH_YES, for CI and agents: then it is recorded, so later commands without it pass too). Fails with what it
 * would run otherwise.
 */
export const requireConsent = (
  store: string,
  loaded: { readonly file: string; readonly digest: string; readonly config: CommandSource },
  env: Readonly<Record<string, string | undefined>>
): Effect.Effect<void, ConfigNotAllowed> =>
  Effect.suspend(() => {
    if (allowed(store).has(loaded.digest)) return Effect.void
    if (consentsByEnvironment(env)) {
      return Effect.sync(() => record(store, "allow", loaded.digest, loaded.file))
    }
    return Effect.fail(
      new ConfigNotAllowed({ file: loaded.file, digest: loaded.digest, commands: [...commandsOf(loaded.config)] })
    )
  })
