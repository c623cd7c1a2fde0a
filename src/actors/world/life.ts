/**
 * What a world's actor holds (`../WorldActor.ts`): its life — the observed state and why, what runs, its last start's
 * outcome — as one value, and what its mailbox takes. Only the actor writes the life, on its own fiber; the parts in
 * this folder are handed the few writers they may call (`Apply`, `SetRun`) and the mailbox's `Post`.
 */
import type * as Deferred from "effect/Deferred"
import type * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type * as Model from "../../domain/config/model.js"
import type { WorldNotFound } from "../../domain/errors.js"
import type { WorldEvent, WorldState } from "../../domain/world-state.js"
import type { RegistryError, WorldRow } from "../../services/Registry.js"
import type { ServiceRuntime } from "../ServiceActor.js"
import type * as Protocol from "../protocol.js"

/**
 * What the world's mailbox holds: a command (someone may wait for its answer), or what the world's own start fiber
 * tells it. That fiber never writes the world's state: it posts, and the actor, on its one fiber, moves the state.
 */
export type Message =
  | {
      readonly _tag: "Command"
      readonly command: Protocol.WorldCommand
      readonly reply: Deferred.Deferred<void, Protocol.WorldError>
    }
  /** the start `token` got its permit after waiting in line */
  | { readonly _tag: "Admitted"; readonly token: number; readonly resuming: boolean }
  /** the start `token` ended: its generation runs whole, or it failed */
  | { readonly _tag: "Settled"; readonly token: number; readonly exit: Exit.Exit<void, Protocol.StartError> }

/** Tells the world's own mailbox something (no one waits for the answer); nothing once the actor has ended. */
export type Post = (
  message: Protocol.WorldCommand | Exclude<Message, { readonly _tag: "Command" }>
) => Effect.Effect<void>

/**
 * One run of the world's processes: a scoped resource. Closing `scope` is its release, written once (in
 * `newGeneration`, `generation.ts`): services stop in reverse dependency order, a layer at a time, then what they left
 * is written, and a start that never completed takes back the `env_file`s it wrote.
 */
export interface Generation {
  readonly scope: Scope.CloseableScope
  /** where the service fibers (and their row writers) live: closed after the services were stopped, layer by layer */
  readonly fibers: Scope.CloseableScope
  readonly config: Model.Config
  /** the berth.toml it started from: its folder and digest, to tell an edit made since */
  readonly source: { readonly root: string; readonly digest: string }
  readonly layers: ReadonlyArray<ReadonlyArray<string>>
  readonly services: Map<string, { readonly rt: ServiceRuntime; readonly fiber: Fiber.RuntimeFiber<never, unknown> }>
  /** env_files as they were before this generation first wrote them (undefined: the file did not exist) */
  readonly envBefore: Map<string, string | undefined>
}

/**
 * What runs of a world besides its observed state: nothing; a start on its way (in line for a permit, or starting),
 * as a fiber the actor can interrupt; or a generation that started whole.
 */
export type Run =
  | { readonly _tag: "Idle" }
  | {
      readonly _tag: "Launching"
      /** tells this start's messages from those of a start cancelled since */
      readonly token: number
      readonly generation: Generation
      /** the start's own fiber; undefined while the actor runs it itself (adopting what outlived a daemon) */
      readonly fiber: Fiber.RuntimeFiber<void, never> | undefined
      /**
       * what an `up` asked for while this start was on its way, beyond what it starts: started beside it once it runs.
       * Only what was asked: a service the start leaves out on purpose (one that ended while no daemon watched, whose
       * policy does not restart it) stays out.
       */
      readonly asked?: Protocol.Selection
    }
  | { readonly _tag: "Running"; readonly generation: Generation }

/**
 * A world's life, in one value with one writer (the actor's fiber): its observed state and why, what runs, and the
 * outcome of its last start (what a waiting `up` hears).
 */
export interface Life {
  readonly state: WorldState
  readonly reason: string | null
  readonly run: Run
  readonly outcome: Deferred.Deferred<void, Protocol.StartError> | undefined
}

export const IDLE: Run = { _tag: "Idle" }

/** The generation that runs or is starting, if any. */
export const generationOf = (run: Run): Generation | undefined => (run._tag === "Idle" ? undefined : run.generation)

/**
 * The actor's one writer of the world's observed state (`apply` in `../WorldActor.ts`): the event moves it as
 * `transition` allows, or is ignored; what runs changes with it when `run` is given. Answers whether it moved.
 */
export type Apply = (event: WorldEvent, reason?: string | null, run?: Run) => Effect.Effect<boolean>

/** What runs changes (on the actor's fiber only), the state staying where it is. */
export type SetRun = (run: Run) => Effect.Effect<void>

/** The world's row as the registry has it now, or `WorldNotFound` once it is gone. */
export type ReadRow = Effect.Effect<WorldRow, WorldNotFound | RegistryError>
