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

/** The hooks git runs by name (githooks(5)); a file of any other name in a hooks folder is never run. */
const HOOK_NAMES: ReadonlySet<string> = new Set([
  "applypatch-msg",
  "pre-applypatch",
  "post-applypatch",
  "pre-commit",
  "pre-merge-commit",
  "prepare-commit-msg",
  "commit-msg",
  "post-commit",
  "pre-rebase",
  "post-checkout",
  "post-merge",
  "pre-push",
  "pre-receive",
  "update",
  "proc-receive",
  "post-receive",
  "post-update",
  "reference-transaction",
  "push-to-checkout",
  "pre-auto-gc",
  "post-rewrite",
  "sendemail-validate",
  "fsmonitor-watchman",
  "p4-changelist",
  "p4-prepare-changelist",
  "p4-post-changelist",
  "p4-pre-submit",
  "post-index-change"
])

/** A file of a hooks folder: its name, whether git may execute it, and (for post-checkout) its text. */
export interface HookFile {
  readonly name: string
  readonly executable: boolean
  readonly text?: string | undefined
}

/**
 * What pointing git at a hooks folder (`core.hooksPath`) would run besides berth's block, sorted: every file named
 * as a git hook that git may execute, and `post-checkout` when it holds more than berth's block (berth makes it
 * executable).
 */
export const otherHooks = (files: ReadonlyArray<HookFile>): ReadonlyArray<string> =>
  files
    .filter((f) =>
      f.name === "post-checkout"
        ? f.text !== undefined && withoutHook(f.text) !== undefined
        : HOOK_NAMES.has(f.name) && f.executable
    )
    .map((f) => f.name)
    .sort()
