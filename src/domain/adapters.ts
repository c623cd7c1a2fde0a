/**
 * What berth knows about each built-in adapter without loading it: its family (aliases share one implementation),
 * whether it can copy a slice server-side, and the adapter-specific keys its `[services.X]` table accepts.
 * Adding an adapter means adding a folder under `adapters/`, a line here and an entry in the conformance table
 * (`adapters/conformance.test.ts`); nothing else in the core changes.
 */
export interface AdapterInfo {
  readonly name: string
  /** the implementation that serves it: valkey → redis, mariadb and percona → mysql, minio → s3 */
  readonly family: string
  readonly canClone: boolean
  /** needs no server: the slice lives under BERTH_HOME */
  readonly embedded: boolean
  /**
   * adapter-specific keys, with the literal values each accepts (an empty list accepts any string; a flag lists
   * `true` and `false`, as TOML writes them)
   */
  readonly options: Readonly<Record<string, ReadonlyArray<string | boolean>>>
}

const info = (
  name: string,
  family: string,
  canClone: boolean,
  options: Record<string, ReadonlyArray<string | boolean>> = {},
  embedded = false
): AdapterInfo => ({ name, family, canClone, embedded, options })

const redisOptions = { mode: ["db", "prefix"] }
/** `bucket` names the shared bucket of mode "prefix"; `region` defaults to us-east-1 */
const s3Options = { mode: ["bucket", "prefix"], bucket: [], region: [] }

export const builtinAdapters: ReadonlyMap<string, AdapterInfo> = new Map(
  [
    info("postgres", "postgres", true),
    info("mysql", "mysql", true),
    info("mariadb", "mysql", true),
    info("percona", "mysql", true),
    info("redis", "redis", true, redisOptions),
    info("valkey", "redis", true, redisOptions),
    info("rabbitmq", "rabbitmq", false, { management_url: [] }),
    // a name prefix for JetStream streams and KV buckets; clone copies stream configurations, messages on request
    info("nats", "nats", true, { copy_messages: [true, false] }),
    info("clickhouse", "clickhouse", true),
    info("s3", "s3", true, s3Options),
    info("minio", "s3", true, s3Options),
    // a database per world; clone copies collections, indexes and views server-side ($out)
    info("mongodb", "mongodb", true),
    // an index prefix per world, over the REST API both speak; clone re-creates each index and reindexes into it
    info("elasticsearch", "elasticsearch", true),
    info("opensearch", "elasticsearch", true),
    // a collection prefix per world; clone re-creates each collection and copies its points (scroll, upsert)
    info("qdrant", "qdrant", true),
    // a topic (and consumer group) prefix per world; no clone: copying a golden would replay its messages
    info("kafka", "kafka", false),
    info("redpanda", "kafka", false),
    info("sqlite", "sqlite", true, {}, true),
    info("dir", "dir", true, {}, true)
  ].map((a) => [a.name, a])
)

/** The executable that serves an adapter berth has no built-in implementation for. */
export const externalAdapterCommand = (name: string): string => `berth-adapter-${name}`

/** An adapter written for binky, served through berth's compatibility layer when PATH has no `berth-adapter-<name>`. */
export const binkyAdapterCommand = (name: string): string => `binky-adapter-${name}`

export const isValidAdapterName = (name: string): boolean => /^[a-z][a-z0-9_-]*$/.test(name)

/** The families whose adapter can make a slice as a copy of a database already on its server (`clone_from = "<name>"`). */
export const copiesExisting: ReadonlySet<string> = new Set(["postgres", "mysql"])

/**
 * A database name `clone_from` may give: letters, digits, "_", "-" and "$", at most 63 long (PostgreSQL's limit, and
 * under MySQL's 64). It is still always quoted wherever it is written into SQL.
 */
export const SOURCE_DATABASE = /^[A-Za-z_][A-Za-z0-9_$-]{0,62}$/
