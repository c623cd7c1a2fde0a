/** berth's version, injected by the build (`BERTH_VERSION`); "0.0.0-dev" when run from source. */
declare const BERTH_VERSION: string
export const version: string = typeof BERTH_VERSION === "string" ? BERTH_VERSION : "0.0.0-dev"
