/**
 * berth's tuning knobs (`BERTH_…` variables of the daemon's environment) as Effect `Config`: read from the
 * environment by default, and from whatever `ConfigProvider` a test or an embedding program gives, so nothing needs to
 * change `process.env` to turn one. A value that is missing, not a number or out of range is the default.
 */
import * as Config from "effect/Config"
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

/** `textKnob` read now: it never fails (what cannot be read is unset). */
export const readText = (name: string): Effect.Effect<string | undefined> =>
  Effect.orElseSucceed(textKnob(name), () => undefined)
