/**
 * berth's git hook: a marked block in `post-checkout` that brings a new worktree's world up in the background, so
 * `git worktree add` gives an agent a running world. Pure text in, text out; the command reads and writes the file.
 */
import { shellQuote } from "./tokens.js"

const BEGIN = "# >>> berth: brings a new worktree's world up (berth hooks uninstall removes this)"
const END = "# <<< berth"
/** git passes the null object id as the previous HEAD when it checks out a new worktree (or a fresh clone). */
const NULL_ID = "0000000000000000000000000000000000000000"

/** The block: skipped with BERTH_NO_UP=1 or when berth is gone; never holds git up (it runs detached, silent). */
export const hookBlock = (berth: string): string =>
  [
    BEGIN,
    `if [ "$1" = "${NULL_ID}" ] && [ "\${BERTH_NO_UP:-}" != "1" ] && [ -x ${shellQuote(berth)} ]; then`,
    `  (${shellQuote(berth)} up --no-wait >/dev/null 2>&1 &)`,
    "fi",
    END
  ].join("\n")

export const hasHook = (text: string): boolean => text.includes(BEGIN)

/** The hook file with berth's block in it (replacing an older one), or a new file when there was none. */
export const withHook = (existing: string | undefined, berth: string): string => {
  const kept = existing === undefined ? undefined : withoutHook(existing)
  if (kept === undefined || kept.trim() === "") return `#!/bin/sh\n${hookBlock(berth)}\n`
  return `${kept.replace(/\n*$/, "\n")}${hookBlock(berth)}\n`
}

/** The hook file without berth's block; undefined when nothing else is left in it (the file can go). */
export const withoutHook = (text: string): string | undefined => {
  const lines = text.split("\n")
  const out: Array<string> = []
  let inBlock = false
  for (const line of lines) {
    if (line === BEGIN) inBlock = true
    else if (inBlock && line === END) inBlock = false
    else if (!inBlock) out.push(line)
  }
  const left = out.join("\n")
  return left.replace(/^#!\/bin\/sh\s*/, "").trim() === "" ? undefined : left
}
