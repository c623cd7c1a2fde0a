/**
 * The files a golden is built from: every file under the worktree that a `golden_inputs` glob matches
 * (`worktree/files.ts`), with a hash of its content. Nothing is read through a link out of the worktree.
 */
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { escapesWorktree } from "../../domain/golden.js"
import { GoldenInputsFailed } from "../../domain/errors.js"
import { matchingFiles } from "../worktree/files.js"
import { LandsOutside, outsideWorktree } from "../worktree/paths.js"

/** `[relative path, sha256]` of each matched file, sorted by path. */
export const goldenInputs = (
  worktree: string,
  globs: ReadonlyArray<string>,
  of: { readonly world: string; readonly service: string }
) =>
  Effect.try({
    try: (): ReadonlyArray<readonly [string, string]> => {
      if (globs.length === 0) return []
      const bad = globs.find(escapesWorktree)
      if (bad !== undefined) throw new Error(`golden_inputs ${JSON.stringify(bad)} reaches outside the worktree`)
      const files = matchingFiles(worktree, globs, "golden_inputs", `services.${of.service}.golden_inputs`)
      // paths are `/`-separated already: the walk builds them that way
      return files.map(
        (file) =>
          [
            file,
            createHash("sha256")
              .update(readFileSync(join(worktree, file)))
              .digest("hex")
          ] as const
      )
    },
    catch: (e) => {
      if (e instanceof LandsOutside) return outsideWorktree(of.world, e)
      const reason = e instanceof Error ? e.message : String(e)
      return new GoldenInputsFailed({
        world: of.world,
        slice: of.service,
        reason: reason.startsWith("golden_inputs") ? reason : `golden_inputs: ${reason}`
      })
    }
  })
