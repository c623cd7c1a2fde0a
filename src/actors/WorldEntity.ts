/**
 * A world's actor as an `@effect/cluster` entity: the actor protocol's requests (`protocol.ts`) are its messages, each
 * handed to the world's actor as it is, so the same world answers whether a command comes through the daemon's socket
 * or through a cluster's sharding. Two kinds of entity id name a world: its row id in this machine's state database
 * (one machine), and, across machines, `<slot>/<project label>/<world slug>` (`domain/cluster.ts`), whose slot's shard
 * group only the world's own machine takes — a world stays on the machine that holds its worktree. Worlds never idle
 * out: an entity that stopped would leave its processes unwatched.
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { parseWorldEntityId, shardGroupOf } from "../domain/cluster.js"
import { type DiskFull, type InternalError, WorldNotFound } from "../domain/errors.js"
import type { WorldCommand } from "./protocol.js"
import { WorldRpcs } from "./protocol.js"
import { Worlds } from "./Worlds.js"

export const WorldEntity = Entity.fromRpcGroup("World", WorldRpcs).annotate(ClusterSchema.ShardGroup, shardGroupOf)

/**
 * What a cluster entity id (`<slot>/<project>/<slug>`) names on this machine, as `find` looks it up; typed failures
 * for an id that names no world here.
 */
export const addressedWorld = <A>(
  entityId: string,
  find: (project: string, slug: string) => Effect.Effect<A | undefined, InternalError | DiskFull>
): Effect.Effect<A, WorldNotFound | InternalError | DiskFull> => {
  const address = parseWorldEntityId(entityId)
  // an id that is no world's address names no world
  if (address === undefined) return Effect.fail(new WorldNotFound({ project: "", name: entityId, known: [] }))
  return Effect.flatMap(find(address.project, address.slug), (found) =>
    found === undefined
      ? Effect.fail(new WorldNotFound({ project: address.project, name: address.slug, known: [] }))
      : Effect.succeed(found)
  )
}

export const WorldEntityLive = WorldEntity.toLayer(
  Effect.gen(function* () {
    const worlds = yield* Worlds
    const { entityId } = yield* Entity.CurrentAddress
    /** the world this entity is: looked up on each message, since a world can be made after its entity started */
    const worldId = Effect.suspend(
      (): Effect.Effect<number, WorldNotFound | InternalError | DiskFull> =>
        /^[1-9]\d{0,14}$/.test(entityId) ? Effect.succeed(Number(entityId)) : addressedWorld(entityId, worlds.idOf)
    )
    const tell = <C extends WorldCommand>(request: { readonly payload: C }) =>
      Effect.flatMap(worldId, (id) => worlds.tell(id, request.payload))
    return WorldEntity.of({
      Up: tell,
      Down: tell,
      Reload: tell,
      Remove: tell,
      Vanished: tell,
      RebuildGolden: tell,
      Suspend: tell,
      Wake: tell,
      Withdraw: tell,
      Reset: tell,
      CopySlices: tell,
      StopServices: tell,
      RestartServices: tell,
      ServicesChanged: tell
    })
  }),
  // one message at a time, as the actor's own mailbox takes them; never reaped for idleness
  { concurrency: 1, maxIdleTime: Duration.infinity }
)
