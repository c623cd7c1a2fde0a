/** Small pieces every adapter needs: reading an error's code and message, and refusing unsafe slice names. */
import * as Effect from "effect/Effect"
import { AdapterError } from "./contract.js"

/** The `code` of a Node or driver error (`ENOENT`, `SQLITE_BUSY`, a PostgreSQL SQLSTATE), if it has one. */
export const errorCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/** Error codes that mean the server could not be reached at all (kind "unreachable"). */
export const NETWORK_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE"
])

export const describeCause = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/**
 * Slice names arrive as safe identifiers already; embedded stores check again before using one as a file name, so
 * that no name can leave (or be) their storage folder.
 */
export const checkStorageName = (adapter: string, name: string): Effect.Effect<string, AdapterError> =>
  name === "" ||
  name.includes("/") ||
  name.includes("\\") ||
  name.includes("..") ||
  name.includes("\0") ||
  name.startsWith(".")
    ? Effect.fail(
        new AdapterError({
          adapter,
          kind: "invalid",
          message: `refusing slice name ${JSON.stringify(name)}: it could escape the storage folder`
        })
      )
    : Effect.succeed(name)
