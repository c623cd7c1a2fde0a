/**
 * The MCP server's way to its daemon: the same typed client the CLI uses, made on first use and made again when the
 * connection is lost. An MCP server lives as long as the agent's session, and the daemon may be replaced meanwhile
 * (a rebuilt berth, `daemon stop`, a crash): the next call starts or finds the new one instead of failing forever.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as SynchronizedRef from "effect/SynchronizedRef"
import { DaemonClient } from "../daemon/client.js"
import { DaemonUnavailable } from "../domain/errors.js"
import { Home } from "../services/Home.js"

interface Connected {
  readonly client: DaemonClient
  readonly scope: Scope.CloseableScope
}

const isTransportError = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { _tag?: unknown })._tag === "RpcClientError"

const unavailable = (e: unknown) =>
  new DaemonUnavailable({ reason: String((e as { message?: unknown }).message ?? "connection lost") })

export class DaemonSession extends Context.Tag("berth/mcp/DaemonSession")<
  DaemonSession,
  {
    /**
     * Runs `f` with a connected client. When the connection turns out to be gone, the client is made again and `f`
     * runs once more (every request an agent's tool sends is safe to repeat: up and down are idempotent, the rest
     * read); a second loss is a DaemonUnavailable.
     */
    readonly use: <A, E>(f: (client: DaemonClient) => Effect.Effect<A, E>) => Effect.Effect<A, E | DaemonUnavailable>
  }
>() {
  static readonly layer = Layer.scoped(
    DaemonSession,
    Effect.gen(function* () {
      const home = yield* Home
      const current = yield* SynchronizedRef.make<Connected | undefined>(undefined)
      yield* Effect.addFinalizer(() =>
        Effect.flatMap(SynchronizedRef.get(current), (c) =>
          c === undefined ? Effect.void : Scope.close(c.scope, Exit.void)
        )
      )
      const connect = Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(DaemonClient.Default, scope).pipe(
          Effect.provideService(Home, home),
          Effect.tapErrorCause(() => Scope.close(scope, Exit.void)),
          Effect.mapError((e) => (e._tag === "DaemonUnavailable" ? e : unavailable(e)))
        )
        return { client: Context.get(context, DaemonClient), scope } satisfies Connected
      })
      const client = SynchronizedRef.modifyEffect(current, (c) =>
        c === undefined ? Effect.map(connect, (made) => [made, made] as const) : Effect.succeed([c, c] as const)
      )
      const forget = (lost: Connected) =>
        SynchronizedRef.updateEffect(current, (c) =>
          c === lost ? Effect.as(Scope.close(lost.scope, Exit.void), undefined) : Effect.succeed(c)
        )
      const attempt = <A, E>(f: (client: DaemonClient) => Effect.Effect<A, E>) =>
        Effect.flatMap(client, (c) =>
          f(c.client).pipe(Effect.tapError((e) => (isTransportError(e) ? forget(c) : Effect.void)))
        )
      const use = <A, E>(f: (client: DaemonClient) => Effect.Effect<A, E>): Effect.Effect<A, E | DaemonUnavailable> =>
        attempt(f).pipe(
          Effect.catchIf(isTransportError, () => attempt(f)),
          Effect.catchIf(isTransportError, (e) => Effect.fail(unavailable(e)))
        )
      return { use }
    })
  )
}
