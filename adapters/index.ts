/**
 * The built-in adapter implementations, by family (aliases share one: see `src/domain/adapters.ts`). An adapter name
 * berth does not know is served by an external `berth-adapter-<name>` executable (`external/`).
 */
import type { Adapter } from "./contract.js"
import { dirAdapter } from "./dir/index.js"
import { mysqlAdapter } from "./mysql/index.js"
import { postgresAdapter } from "./postgres/index.js"
import { rabbitmqAdapter } from "./rabbitmq/index.js"
import { redisAdapter } from "./redis/index.js"
import { sqliteAdapter } from "./sqlite/index.js"

export const implementations: ReadonlyMap<string, Adapter> = new Map<string, Adapter>([
  ["sqlite", sqliteAdapter],
  ["dir", dirAdapter],
  ["postgres", postgresAdapter],
  ["mysql", mysqlAdapter],
  ["rabbitmq", rabbitmqAdapter],
  ["redis", redisAdapter]
])

export { AdapterError, type Adapter, type Slice } from "./contract.js"
