/**
 * The worlds of other machines: a command or a query for one goes through the running session's sharding to the
 * machine that runs it, and every way the cluster's engine did not take it (no session, the machine's heartbeat too
 * old, a full mailbox, a timeout) is one `MachineUnreachable`.
 */
import type { AlreadyProcessingMessage, MailboxFull, PersistenceError } from "@effect/cluster/ClusterError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import * as Stream from "effect/Stream"
import type { FailureOf, WorldCommand } from "../actors/protocol.js"
import { WorldEntity } from "../actors/WorldEntity.js"
import { machineState, worldEntityId } from "../domain/cluster.js"
import { MachineUnreachable } from "../domain/errors.js"
import { WorldQuery } from "./queries.js"
import type { ClusterState, RemoteWorld } from "./view.js"

/** How long a command for a world of another machine may wait for that machine before berth says it is unreachable. */
const REMOTE_TIMEOUT = Duration.seconds(10)

export type TransportError = MailboxFull | AlreadyProcessingMessage | PersistenceError

/** The engine's own failures of a request: each means the machine never took it. */
export const isTransportError = (e: unknown): e is TransportError =>
  typeof e === "object" &&
  e !== null &&
  "_tag" in e &&
  (e._tag === "MailboxFull" || e._tag === "AlreadyProcessingMessage" || e._tag === "PersistenceError")

/** What the cluster's client adds to a request's failures: all of them mean the machine did not take it. */
const transport = <A, E, R>(
  effect: Effect.Effect<A, E | TransportError, R>,
  unreachable: MachineUnreachable
): Effect.Effect<A, Exclude<E, TransportError> | MachineUnreachable, R> =>
  effect.pipe(
    Effect.timeoutFail({ duration: REMOTE_TIMEOUT, onTimeout: () => unreachable }),
    Effect.catchIf(isTransportError, () => Effect.fail(unreachable))
  ) as Effect.Effect<A, Exclude<E, TransportError> | MachineUnreachable, R>

export const makeRemote = (state: ClusterState) => {
  /** The session's sharding, when `remote`'s machine can be reached through it; else why not. */
  const reach = (remote: RemoteWorld) =>
    Effect.gen(function* () {
      const unreachable = new MachineUnreachable({
        world: remote.status.name,
        machine: remote.machine.name,
        lastSeenSeconds: Math.round(remote.machine.heartbeatAgeMs / 1000)
      })
      const connected = yield* Ref.get(state.connected)
      if (connected === undefined || machineState(remote.machine.heartbeatAgeMs) === "unreachable") {
        return yield* unreachable
      }
      return {
        context: connected.sharding,
        unreachable,
        id: worldEntityId(remote.machine.slot, remote.status.project, remote.status.slug)
      }
    })

  /** One of the actor protocol's requests, to a world of another machine. */
  const tell = <C extends WorldCommand>(remote: RemoteWorld, command: C) =>
    Effect.gen(function* () {
      const { context, id, unreachable } = yield* reach(remote)
      const client = yield* WorldEntity.client.pipe(Effect.provide(context))
      // every request of the protocol answers void with its own failures; the client's methods are keyed by tag
      const send = client(id)[command._tag] as unknown as (
        request: C
      ) => Effect.Effect<void, FailureOf<C> | TransportError>
      yield* transport(send(command), unreachable)
    })

  /** A world of another machine as that machine sees it now. */
  const statusOf = (remote: RemoteWorld) =>
    Effect.gen(function* () {
      const { context, id, unreachable } = yield* reach(remote)
      const client = yield* WorldQuery.client.pipe(Effect.provide(context))
      return yield* transport(client(id).Status(), unreachable)
    })

  /** The environment of a world of another machine, as that machine computes it. */
  const env = (remote: RemoteWorld) =>
    Effect.gen(function* () {
      const { context, id, unreachable } = yield* reach(remote)
      const client = yield* WorldQuery.client.pipe(Effect.provide(context))
      return yield* transport(client(id).Env(), unreachable)
    })

  /** The logs of a world of another machine, read (and followed) there. */
  const logs = (remote: RemoteWorld, options: { service?: string | undefined; follow: boolean; lines: number }) =>
    Stream.unwrap(
      Effect.gen(function* () {
        const { context, id, unreachable } = yield* reach(remote)
        const client = yield* WorldQuery.client.pipe(Effect.provide(context))
        return client(id)
          .Logs(options)
          .pipe(Stream.catchAll((e) => Stream.fail(isTransportError(e) ? unreachable : e)))
      })
    )

  return { reach, tell, statusOf, env, logs }
}
