/**
 * The built-in adapter implementations, by family (aliases share one: see `src/domain/adapters.ts`). An adapter name
 * berth does not know is served by an external `berth-adapter-<name>` executable (`external/`).
 */
import type { Adapter } from "./contract.js"

/**
 * Each is loaded on first use: a daemon whose projects use no MySQL never loads its driver (the drivers together
 * are tens of MiB of the daemon's memory).
 */
export const implementations: ReadonlyMap<string, () => Promise<Adapter>> = new Map<string, () => Promise<Adapter>>([
  ["sqlite", () => import("./sqlite/index.js").then((m) => m.sqliteAdapter)],
  ["dir", () => import("./dir/index.js").then((m) => m.dirAdapter)],
  ["postgres", () => import("./postgres/index.js").then((m) => m.postgresAdapter)],
  ["mysql", () => import("./mysql/index.js").then((m) => m.mysqlAdapter)],
  ["rabbitmq", () => import("./rabbitmq/index.js").then((m) => m.rabbitmqAdapter)],
  ["redis", () => import("./redis/index.js").then((m) => m.redisAdapter)],
  ["nats", () => import("./nats/index.js").then((m) => m.natsAdapter)],
  ["clickhouse", () => import("./clickhouse/index.js").then((m) => m.clickhouseAdapter)],
  ["s3", () => import("./s3/index.js").then((m) => m.s3Adapter)],
  ["mongodb", () => import("./mongodb/index.js").then((m) => m.mongodbAdapter)],
  ["elasticsearch", () => import("./elasticsearch/index.js").then((m) => m.elasticsearchAdapter)],
  ["qdrant", () => import("./qdrant/index.js").then((m) => m.qdrantAdapter)],
  ["kafka", () => import("./kafka/index.js").then((m) => m.kafkaAdapter)]
])

export { AdapterError, type Adapter, type Slice } from "./contract.js"
