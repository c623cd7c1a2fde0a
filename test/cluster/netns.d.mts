export declare const PG_SOCKET_DIR: string
export declare const hostsUnavailable: () => string | undefined
export declare const freezeUnavailable: () => string | undefined
export declare const killHome: (home: string) => void
export interface HostSpec {
  readonly name: string
  readonly ns: string
  readonly address: string
  readonly home: string
  readonly link: string
  /** the host's cgroup (v2), which every process started on it lives in; absent where none can be made */
  readonly cgroup?: string
}
export declare const onHost: (
  host: { readonly ns: string; readonly cgroup?: string },
  argv: ReadonlyArray<string>
) => Array<string>
export declare const thawWatching: (
  host: { readonly cgroup?: string },
  pids: ReadonlyArray<number>,
  timeoutMs?: number
) => { readonly at: number; readonly ended: ReadonlyArray<number | null> }
export declare const freezeHost: (host: { readonly cgroup?: string }, frozen: boolean) => void
export declare const createHosts: (
  count: number,
  options?: { readonly network?: boolean }
) => {
  readonly hosts: ReadonlyArray<HostSpec>
  readonly url: string
  readonly base: string
  readonly cleanup: () => void
}
