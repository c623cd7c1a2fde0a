/**
 * berth's tuning knobs (`BERTH_…` variables of the daemon's environment) as Effect `Config`: read from the
 * environment by default, and from whatever `ConfigProvider` a test or an embedding program gives, so nothing needs to
 * change `process.env` to turn one. A value that is missing, not a number or out of range is the default.
 */
import * as Config from "effect/Config"
import type * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"

/** A number of at least `min` (milliseconds, a count), or `fallback`. */
export const numberKnob = (name: string, fallback: number, min = 0): Config.Config<number> =>
  Config.number(name).pipe(
    Config.validate({ message: `must be ${min} or more`, validation: (n) => Number.isFinite(n) && n >= min }),
    Config.orElse(() => Config.succeed(fallback))
  )

/** A string as given (trimmed; empty is unset), or undefined. */
export const textKnob = (name: string): Config.Config<string | undefined> =>
  Config.string(name).pipe(
    Config.map((s) => (s.trim() === "" ? undefined : s.trim())),
    Config.orElse(() => Config.succeed(undefined))
  )

/**
 * Text knobs as each ConfigProvider gave them. A knob that is not set costs Config's whole failure path (errors with
 * stacks) on every read, and the daemon reads some on every trace mark and every start of a service: a provider is
 * asked once per name. The daemon's environment does not change while it runs; a test or an embedding program that
 * wants other values gives another provider.
 */
const readByProvider = new WeakMap<ConfigProvider.ConfigProvider, Map<string, string | undefined>>()

const readOf = (provider: ConfigProvider.ConfigProvider): Map<string, string | undefined> => {
  const known = readByProvider.get(provider)
  if (known !== undefined) return known
  const fresh = new Map<string, string | undefined>()
  readByProvider.set(provider, fresh)
  return fresh
}

/** `textKnob` read now, once per provider: it never fails (what cannot be read is unset). */
export const readText = (name: string): Effect.Effect<string | undefined> =>
  Effect.configProviderWith((provider) => {
    const read = readOf(provider)
    if (read.has(name)) return Effect.succeed(read.get(name))
    return Effect.map(
      Effect.orElseSucceed(textKnob(name), () => undefined),
      (value) => {
        read.set(name, value)
        return value
      }
    )
  })
