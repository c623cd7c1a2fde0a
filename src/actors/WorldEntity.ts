/**
 * A world's actor as an `@effect/cluster` entity: the actor protocol's requests (`protocol.ts`) are its messages, each
 * handed to the world's actor as it is, so the same world answers whether a command comes through the daemon's socket
 * or through a cluster's sharding. On one machine the entity id is the world's row id in the state database; across
 * machines it becomes the world's stable name (`<project label>/<world slug>`), with the state it needs in shared
 * tables (../shared/cluster.md). Worlds never idle out: an entity that stopped would leave its processes unwatched.
 */
import * as Entity from "@effect/cluster/Entity"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { InvalidRequest } from "../domain/errors.js"
import type { WorldCommand } from "./protocol.js"
import { WorldRpcs } from "./protocol.js"
import { Worlds } from "./Worlds.js"

export const WorldEntity = Entity.fromRpcGroup("World", WorldRpcs)

export const WorldEntityLive = WorldEntity.toLayer(
  Effect.gen(function* () {
    const worlds = yield* Worlds
    const { entityId } = yield* Entity.CurrentAddress
    const worldId = Number(entityId)
    const tell = (request: { readonly payload: WorldCommand }) =>
      Number.isSafeInteger(worldId) && worldId > 0
        ? worlds.tell(worldId, request.payload)
        : Effect.fail(new InvalidRequest({ reason: `no world has the entity id ${JSON.stringify(entityId)}` }))
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
      StopServices: tell,
      RestartServices: tell
    })
  }),
  // one message at a time, as the actor's own mailbox takes them; never reaped for idleness
  { concurrency: 1, maxIdleTime: Duration.infinity }
)
