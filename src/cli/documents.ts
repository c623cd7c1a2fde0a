/**
 * The shapes of `--json` documents, as plain functions: the lean path (`fast.ts`) loads no Effect, and it must print
 * exactly what the full CLI prints, so both build their documents here. `json.ts` holds the Schemas they follow.
 */
import { splitHint } from "../domain/hint.js"

/** Bumped when a document changes incompatibly; `docs/json/CHANGELOG.md` says what changed. */
export const SCHEMA_VERSION = 1 as const

export const worldDocument = <W>(world: W) => ({ schema: SCHEMA_VERSION, world })

export const worldsDocument = <W>(worlds: ReadonlyArray<W>) => ({ schema: SCHEMA_VERSION, worlds })

export const envDocument = (
  world: string,
  vars: Readonly<Record<string, string>>,
  commands: Readonly<Record<string, string>>
) => ({ schema: SCHEMA_VERSION, world, vars, commands })

/** A failure: the advice berth writes after `\n  hint: ` in its messages is its own field, null when there is none. */
export const errorDocument = (tag: string, message: string) => {
  const split = splitHint(message)
  return { schema: SCHEMA_VERSION, error: { tag, message: split.message, hint: split.hint ?? null } }
}

/** Documents on stdout are indented for people reading them; an error on stderr is one line. */
export const formatDocument = (document: unknown): string => JSON.stringify(document, null, 2)

export const formatErrorLine = (tag: string, message: string): string => JSON.stringify(errorDocument(tag, message))
