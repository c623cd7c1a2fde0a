/**
 * The built-in adapter implementations, by family (aliases share one: see `src/domain/adapters.ts`). A family not
 * here yet, or an adapter name berth does not know, is for an external `berth-adapter-<name>` executable.
 */
import type { Adapter } from "./contract.js"
import { dirAdapter } from "./dir/index.js"
import { postgresAdapter } from "./postgres/index.js"
import { redisAdapter } from "./redis/index.js"
import { sqliteAdapter } from "./sqlite/index.js"

export const implementations: ReadonlyMap<string, Adapter> = new Map<string, Adapter>([
  ["sqlite", sqliteAdapter],
  ["dir", dirAdapter],
  ["postgres", postgresAdapter],
  ["redis", redisAdapter]
])

export { AdapterError, type Adapter, type Slice } from "./contract.js"
