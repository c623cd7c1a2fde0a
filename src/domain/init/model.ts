import * as Data from "effect/Data"

/** What `berth init` hands to the CLI: the berth.toml text and human-readable notes to print. */
export interface InitResult {
  readonly toml: string
  readonly notes: ReadonlyArray<string>
}

export class InitError extends Data.TaggedError("InitError")<{
  readonly message: string
  readonly file: string
  readonly line?: number
}> {}

export type Health =
  | { readonly http: string }
  | { readonly tcp: true }
  | { readonly cmd: string }
  | { readonly log: string }

/** An app process berth supervises. Optional fields are left out of the output when undefined or empty. */
export interface ProcessDraft {
  readonly _tag: "Process"
  readonly name: string
  /** Comment lines written right above the service's table (what the source said that berth.toml cannot). */
  readonly comments?: ReadonlyArray<string> | undefined
  /** Comment lines written right above `cmd` (TODOs, hints). */
  readonly cmdComments?: ReadonlyArray<string> | undefined
  readonly cmd: string
  readonly dir?: string | undefined
  readonly url?: string | undefined
  readonly ports?: ReadonlyArray<string> | undefined
  readonly dependsOn?: ReadonlyArray<string> | undefined
  readonly env?: ReadonlyArray<readonly [string, string]> | undefined
  readonly envFile?: string | ReadonlyArray<string> | undefined
  readonly health?: Health | undefined
  readonly setup?: string | undefined
  readonly groups?: ReadonlyArray<string> | undefined
}

/** A private slice of a shared data server (a database, a vhost, a bucket prefix, ...). */
export interface SliceDraft {
  readonly _tag: "Slice"
  readonly name: string
  /** Comment lines written right above the slice's table. */
  readonly comments?: ReadonlyArray<string> | undefined
  readonly adapter: string
  /** Comment line above `admin_url` showing the expected URL form; never carries a password. */
  readonly adminUrlHint?: string | undefined
  readonly adminUrl?: string | undefined
  readonly mode?: string | undefined
  readonly cloneFrom?: "golden" | undefined
  readonly migrate?: string | undefined
  /** Comment lines written right above `seed`. */
  readonly seedComments?: ReadonlyArray<string> | undefined
  readonly seed?: string | undefined
  readonly groups?: ReadonlyArray<string> | undefined
}

export type ServiceDraft = ProcessDraft | SliceDraft

export interface ProjectDraft {
  /** Comment lines written right above `[project]`. */
  readonly comments?: ReadonlyArray<string> | undefined
  readonly name: string
  readonly setup?: string | undefined
  readonly https?: boolean | undefined
  readonly copy?: ReadonlyArray<string> | undefined
}

/** `[overrides."<pattern>".services.<name>]`: what one branch (or glob of them) runs differently. */
export interface OverrideDraft {
  readonly pattern: string
  /** Comment lines written right above the override's first table. */
  readonly comments?: ReadonlyArray<string> | undefined
  readonly services: ReadonlyArray<{
    readonly name: string
    readonly cmd?: string | undefined
    readonly env?: ReadonlyArray<readonly [string, string]> | undefined
  }>
}

export interface ConfigDraft {
  /** Comment lines at the top of the file. */
  readonly header: ReadonlyArray<string>
  readonly project: ProjectDraft
  readonly services: ReadonlyArray<ServiceDraft>
  readonly overrides?: ReadonlyArray<OverrideDraft> | undefined
}

/** The command written when berth cannot know how to start a service: it fails loudly instead of guessing. */
export const todoCmd = (name: string): string => `echo 'berth: set services.${name}.cmd in berth.toml' >&2; exit 1`
