/**
 * This machine as an `@effect/cluster` runner: sharding over TCP on the machine's cluster address, runners and shard
 * locks kept in the cluster's PostgreSQL, with every setting given here rather than read from the environment (the
 * Node layer would take HOST, PORT and SHARDS_PER_GROUP from whatever shell started the daemon).
 *
 * Choices measured in ../shared/cluster.md: shard locks are rows with an expiry, not advisory locks (a frozen or cut-off
 * machine's database session would hold those for hours); no ping-based runner health (it has no majority: a cut-off
 * runner declared the healthy one dead); short lock, assignment and poll intervals; entities never idle out.
 */
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import {
  ANYWHERE_GROUP,
  allGroups,
  CLUSTER_TABLE_PREFIX,
  groupOfSlot,
  SHARDS_PER_GROUP,
  timings
} from "../domain/cluster.js"
import { type Hold, renewing } from "./fence.js"

export interface RunnerSpec {
  readonly address: string
  readonly port: number
  readonly slot: number
}

/** Every field of the engine's configuration, for this machine. */
export const shardingConfig = (spec: RunnerSpec | undefined): ShardingConfig.ShardingConfig["Type"] => ({
  ...ShardingConfig.defaults,
  runnerAddress: spec === undefined ? Option.none() : Option.some(RunnerAddress.make(spec.address, spec.port)),
  runnerListenAddress: spec === undefined ? Option.none() : Option.some(RunnerAddress.make(spec.address, spec.port)),
  runnerShardWeight: 1,
  shardsPerGroup: SHARDS_PER_GROUP,
  availableShardGroups: allGroups,
  // its own machine's group (its pinned worlds) and the group every machine shares
  assignedShardGroups: spec === undefined ? [] : [ANYWHERE_GROUP, groupOfSlot(spec.slot)],
  preemptiveShutdown: true,
  shardLockRefreshInterval: Duration.millis(timings.lockRefreshMs),
  shardLockExpiration: Duration.millis(timings.lockExpirationMs),
  shardLockDisableAdvisory: true,
  entityMailboxCapacity: 4096,
  entityMaxIdleTime: Duration.infinity,
  entityRegistrationTimeout: Duration.minutes(1),
  entityTerminationTimeout: Duration.seconds(15),
  entityMessagePollInterval: Duration.millis(timings.messagePollMs),
  entityReplyPollInterval: Duration.millis(200),
  sendRetryInterval: Duration.millis(timings.sendRetryMs),
  refreshAssignmentsInterval: Duration.millis(timings.refreshAssignmentsMs),
  // unused: runner health is the heartbeat in the shared tables (RunnerHealth.layerNoop below)
  runnerHealthCheckInterval: Duration.minutes(1),
  simulateRemoteSerialization: false
})

/**
 * The runner's sharding and its storage; needs an `SqlClient` on the cluster's database. Each lock refresh that keeps
 * every shard renews `hold` (the fence's lease, fence.ts).
 */
export const runnerLayer = (spec: RunnerSpec, hold: Hold) =>
  SocketRunner.layer.pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(RunnerHealth.layerNoop),
    Layer.provideMerge(SqlMessageStorage.layerWith({ prefix: CLUSTER_TABLE_PREFIX })),
    Layer.provide(
      renewing(hold).pipe(Layer.provide(Layer.orDie(SqlRunnerStorage.layerWith({ prefix: CLUSTER_TABLE_PREFIX }))))
    ),
    Layer.provide(ShardingConfig.layer(shardingConfig(spec))),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
