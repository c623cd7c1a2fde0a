export declare const PG_SOCKET_DIR: string
export declare const hostsUnavailable: () => string | undefined
export declare const killHome: (home: string) => void
export interface HostSpec {
  readonly name: string
  readonly ns: string
  readonly address: string
  readonly home: string
  readonly link: string
}
export declare const createHosts: (
  count: number,
  options?: { readonly network?: boolean }
) => {
  readonly hosts: ReadonlyArray<HostSpec>
  readonly url: string
  readonly base: string
  readonly cleanup: () => void
}
