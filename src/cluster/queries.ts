/**
 * What one machine asks about a world that runs on another: its environment and its logs (followed, too). A second
 * entity beside `World`, with the same ids (`<slot>/<project label>/<world slug>`, in the world's machine's shard
 * group), because these are reads: they must not wait behind a command in the world's mailbox, and a followed log
 * is a stream that lasts as long as its reader does.
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { addressedWorld } from "../actors/WorldEntity.js"
import { Worlds } from "../actors/Worlds.js"
import { EnvReply, LogLine, QueryFailure, WorldStatus } from "../daemon/api.js"
import { shardGroupOf } from "../domain/cluster.js"
import { WorldNotFound } from "../domain/errors.js"

export const WorldQuery = Entity.make("WorldQuery", [
  /** the world as its machine sees it now (what another machine has read of it may be a second old) */
  Rpc.make("Status", { success: WorldStatus, error: QueryFailure.status }),
  Rpc.make("Env", { success: EnvReply, error: QueryFailure.env }),
  Rpc.make("Logs", {
    payload: { service: Schema.optional(Schema.String), follow: Schema.Boolean, lines: Schema.Number },
    success: LogLine,
    error: QueryFailure.logs,
    stream: true
  })
]).annotate(ClusterSchema.ShardGroup, shardGroupOf)

export const WorldQueryLive = WorldQuery.toLayer(
  Effect.gen(function* () {
    const worlds = yield* Worlds
    const { entityId } = yield* Entity.CurrentAddress
    const ref = Effect.suspend(() => addressedWorld(entityId, worlds.refOf))
    return WorldQuery.of({
      Status: () =>
        Effect.flatMap(ref, (r) =>
          Effect.flatMap(worlds.status(r.cwd), ({ worlds: all }) => {
            const found = all.find((w) => w.name === r.world)
            return found === undefined
              ? Effect.fail(new WorldNotFound({ project: "", name: r.world ?? "", known: [] }))
              : Effect.succeed(found)
          })
        ),
      Env: () => Effect.flatMap(ref, worlds.env),
      Logs: ({ payload }) => Stream.unwrap(Effect.map(ref, (r) => worlds.logs(r, payload)))
    })
  }),
  // reads run side by side (a followed log lasts); an idle one goes, as nothing of it needs to stay
  { concurrency: "unbounded", maxIdleTime: Duration.minutes(5) }
)
