/** berth's version and this build's id, injected by the build; "0.0.0-dev" and "dev" when run from source. */
declare const BERTH_VERSION: string
declare const BERTH_BUILD: string
export const version: string = typeof BERTH_VERSION === "string" ? BERTH_VERSION : "0.0.0-dev"
export const build: string = typeof BERTH_BUILD === "string" ? BERTH_BUILD : "dev"

/** Does a daemon's Ping answer come from this very build? A local rebuild of the same version is another build. */
export const isThisBuild = (pong: unknown): boolean => {
  const p = pong as { readonly version?: unknown; readonly build?: unknown } | null | undefined
  return p?.version === version && p.build === build
}
