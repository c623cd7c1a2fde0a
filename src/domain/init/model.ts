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
  readonly groups?: ReadonlyArray<string> | undefined
}

/** A private slice of a shared data server (a database, a vhost, a bucket prefix, ...). */
export interface SliceDraft {
  readonly _tag: "Slice"
  readonly name: string
  readonly adapter: string
  /** Comment line above `admin_url` showing the expected URL form; never carries a password. */
  readonly adminUrlHint: string
  readonly adminUrl: string
  readonly mode?: string | undefined
  readonly groups?: ReadonlyArray<string> | undefined
}

export type ServiceDraft = ProcessDraft | SliceDraft

export interface ConfigDraft {
  /** Comment lines at the top of the file. */
  readonly header: ReadonlyArray<string>
  readonly project: { readonly name: string; readonly setup?: string | undefined }
  readonly services: ReadonlyArray<ServiceDraft>
}

/** The command written when berth cannot know how to start a service: it fails loudly instead of guessing. */
export const todoCmd = (name: string): string => `echo 'berth: set services.${name}.cmd in berth.toml' >&2; exit 1`
