/**
 * One world's life: a fiber with a mailbox, so commands on one world run one at a time while different worlds run
 * in parallel. It owns the world's current "generation" — a scoped resource: its service fibers (and so their process
 * groups) live in its scope, and closing the scope is its one release. Ports are leased for the world's whole life
 * (they survive `down`); processes for one generation.
 *
 * Its life (observed state, what runs, its last start's outcome) is one value with one writer, the actor's fiber:
 * `apply` moves the state only along `domain/world-state.ts`'s `transition` (an illegal event is ignored) and announces
 * every move to whoever watches (`Worlds.changes`). A start runs on a fiber of its own, which writes nothing: it posts
 * `Admitted` and `Settled` to the mailbox.
 *
 * This file is the actor itself: its life and `apply`, its mailbox and what each command does, `up`, `down`,
 * `suspend` and `resume`. Its parts live in `world/`, each made here with what it needs and the few writers of the
 * actor's it may call: `plan.ts` (what needs none of the actor's state), `prepare.ts` (getting a start ready),
 * `generation.ts` (a run of the world's processes, acquired and released), `launch.ts` (a start through the gate, on
 * its own fiber), `services.ts` (some services of a running world), `recovery.ts` (after a daemon restart),
 * `removal.ts`, `slices.ts` (reset, copy, golden), `rows.ts` (what it writes, kept while the disk is full) and
 * `life.ts` (the types of what it holds).
 */
import type * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Queue from "effect/Queue"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Model from "../domain/config/model.js"
import { InternalError, WorldNotFound } from "../domain/errors.js"
import { covers, widen } from "../domain/selection.js"
import { step, transition, WorldEvent } from "../domain/world-state.js"
import { Admission } from "../services/Admission.js"
import { ConfigFiles, type LoadedConfig } from "../services/ConfigFiles.js"
import { Fence } from "../services/Fence.js"
import { Git } from "../services/Git.js"
import type { Health } from "../services/Health.js"
import { Home } from "../services/Home.js"
import { Ports } from "../services/Ports.js"
import { Processes } from "../services/Processes.js"
import { Router } from "../services/proxy/Router.js"
import { Registry } from "../services/Registry.js"
import { Slices } from "../services/slices/Slices.js"
import { trace } from "../services/trace.js"
import { WorktreeFiles } from "../services/worktree/WorktreeFiles.js"
import type { ServiceSnapshot } from "./ServiceActor.js"
import type * as Protocol from "./protocol.js"
import { makeGeneration } from "./world/generation.js"
import { makeLaunch } from "./world/launch.js"
import { generationOf, IDLE, type Life, type Message, type Run } from "./world/life.js"
import { daemonEnv, loadConfig, selected } from "./world/plan.js"
import { makePrepare } from "./world/prepare.js"
import { makeStopOrphans } from "./world/recorded.js"
import { makeRecovery } from "./world/recovery.js"
import { makeRemoval } from "./world/removal.js"
import { makeRows } from "./world/rows.js"
import { makeServices } from "./world/services.js"
import { makeSliceCommands } from "./world/slices.js"

export type Selection = Protocol.Selection
export type WorldCommand = Protocol.WorldCommand
export type WorldError = Protocol.WorldError

/** One move of a world's observed state, as `Worlds.changes` tells it. */
export type WorldChange = Protocol.WorldChange

export type { Life, Run } from "./world/life.js"
export { worktreesFolder } from "./world/plan.js"
export { SETUP_LOG } from "./world/prepare.js"
export { recordedProcesses } from "./world/recorded.js"

export interface WorldActor {
  readonly worldId: number
  /** the world's life: its observed state and why (as `apply` last moved it), what runs, its last start's outcome */
  readonly state: SubscriptionRef.SubscriptionRef<Life>
  /** answers what the command's own failure union says it can (`protocol.ts`) */
  readonly send: <C extends WorldCommand>(command: C) => Effect.Effect<void, Protocol.FailureOf<C>>
  /** the outcome of the world's current start (queue, then ports, slices, services, ready); void when none runs */
  readonly started: Effect.Effect<void, Protocol.StartError>
  /** the world's live service snapshots (empty when nothing runs) */
  readonly snapshots: Effect.Effect<ReadonlyMap<string, ServiceSnapshot>>
  /** completes when the actor has ended (its world was removed) */
  readonly done: Effect.Effect<void>
  /**
   * set while the world runs a berth.toml that was edited since: what to do about it. `seen`: the config a caller
   * read a moment ago, used when it is the file the world runs
   */
  readonly configNote: (seen?: LoadedConfig) => Effect.Effect<string | undefined>
  /** writes what could not be written when it happened (a full disk): the reconciler's pass asks every actor */
  readonly flush: Effect.Effect<void>
  /** whether `flush` has anything to write (a plain read: an idle swarm's looks cost no effect per world) */
  readonly unwrittenLeft: () => boolean
}

export const makeWorldActor = (
  worldId: number,
  onEnd: Effect.Effect<void>,
  onChange: (change: WorldChange) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function* () {
    const registry = yield* Registry
    const configs = yield* ConfigFiles
    const git = yield* Git
    const ports = yield* Ports
    const slices = yield* Slices
    const router = yield* Router
    const home = yield* Home
    const processes = yield* Processes
    const admission = yield* Admission
    const fence = yield* Fence
    const worktreeFiles = yield* WorktreeFiles
    const context = yield* Effect.context<Processes | Health>()
    const mailbox = yield* Queue.unbounded<Message>()
    const done = yield* Deferred.make<void>()
    // what the last `up` asked for; after a daemon restart, the persisted selection and the daemon's own environment
    // (inherited from the CLI that started it) stand in
    const initial = yield* registry.world(worldId)
    let selection: Selection = initial?.selection ?? { services: [], groups: [] }
    // every later action on the world — adoption, restarts, removal — uses the environment of the command that
    // brought it up, never the daemon's own (which came from whichever shell started it); only a world of an older
    // berth, which kept none, falls back to the daemon's
    let lastEnv: Readonly<Record<string, string>> = initial?.env ?? daemonEnv()
    /** the world has an environment of its own: kept from an `up` (or `reload`) */
    let hasOwnEnv = initial?.env !== null && initial?.env !== undefined
    /** what a world's later commands (reset, golden rebuild) run with: its own environment, the caller's until it has one */
    const envFor = (caller: Readonly<Record<string, string>>) => (hasOwnEnv ? lastEnv : caller)
    /** the world's selection replaced: held here, and written */
    const select = (sel: Selection) =>
      Effect.suspend(() => {
        selection = sel
        return registry.setSelection(worldId, selection)
      })
    /** the name the actor started with: the world's, even once its row is gone */
    const worldName = initial?.name ?? `#${worldId}`

    const row = Effect.flatMap(registry.world(worldId), (w) =>
      w === undefined
        ? Effect.fail(
            new WorldNotFound({ project: initial?.projectName ?? "", name: initial?.name ?? `#${worldId}`, known: [] })
          )
        : Effect.succeed(w)
    )

    const life = yield* SubscriptionRef.make<Life>({
      state: initial?.observed ?? "stopped",
      reason: initial?.reason ?? null,
      run: IDLE,
      outcome: undefined
    })
    const currentLife = SubscriptionRef.get(life)
    const currentRun = Effect.map(currentLife, (l) => l.run)
    const currentGeneration = Effect.map(currentRun, generationOf)
    /** What runs changes (on the actor's fiber only), the state staying where it is. */
    const setRun = (run: Run) => SubscriptionRef.update(life, (l) => ({ ...l, run }))

    /** The world's rows: its observed state and its services', and what of them waits for a full disk to have room. */
    const rows = makeRows({ worldId, registry, observed: currentLife })
    const { saveRow } = rows

    /**
     * The only writer of the world's observed state: the event moves it as `transition` allows, or is ignored (so a
     * late verdict never undoes what a user asked for). What changes is `step`'s (pure, `domain/world-state.ts`); its
     * effects — the row written, the move told — are carried out here, in the same step as the change (nothing reads
     * the state between them), and what runs (`run`, when given) changes with it. Answers whether it moved.
     */
    const apply = (event: WorldEvent, reason: string | null = null, run?: Run) =>
      Effect.gen(function* () {
        // an event that moves nothing writes and publishes nothing (what runs may still change): every writer is on
        // this fiber, so nothing moves the state between this look and the step below
        const looked = step(yield* SubscriptionRef.get(life), event, reason, run)
        if (looked.effects.length === 0) {
          if (run !== undefined) yield* setRun(run)
          return false
        }
        const moves = yield* SubscriptionRef.modifyEffect(life, (now) => {
          const next = step(now, event, reason, run)
          return Effect.as(
            Effect.forEach(next.effects, (effect) =>
              effect._tag === "Record"
                ? // the world moves whether or not its row can be written now (a full disk): the row follows at the
                  // next `flush`, so that a command cut short never leaves the world where it was, with nothing to
                  // move it on
                  rows.writeObserved(effect.state, effect.reason)
                : Effect.void
            ),
            [next.effects.flatMap((e) => (e._tag === "Announce" ? [e] : [])), next.life] as const
          )
        })
        for (const move of moves) {
          yield* onChange({
            worldId,
            project: initial?.projectName ?? "",
            world: initial?.name ?? `#${worldId}`,
            from: move.from,
            to: move.to,
            event: event._tag,
            reason,
            at: Date.now()
          })
        }
        return moves.length > 0
      })

    /** set once the loop has ended: later commands are answered at once, never queued to no one */
    let closed = false
    /** Tells the world's own mailbox something (no one waits for the answer); nothing once the actor has ended. */
    function post(message: WorldCommand | Exclude<Message, { readonly _tag: "Command" }>) {
      return Effect.flatMap(Deferred.make<void, WorldError>(), (reply) =>
        Effect.sync(() => {
          if (closed) return
          mailbox.unsafeOffer(
            message._tag === "Admitted" || message._tag === "Settled"
              ? message
              : { _tag: "Command", command: message, reply }
          )
        })
      )
    }

    // the actor's parts (`world/`), each given what it needs: the world, its services, and the few writers of the
    // actor's it may call. Those of its life and its wishes (`apply`, `setRun`, the outcome, `select`) are called on
    // this actor's fiber only; `saveRow` is the one writer of its service rows (a service's fiber records through
    // it), and `post` only tells the mailbox
    const preparing = makePrepare({
      worldId,
      row,
      registry,
      configs,
      home,
      processes,
      ports,
      slices,
      router,
      worktreeFiles
    })
    const { prepare, mayRun } = preparing
    const stopOrphans = makeStopOrphans({ worldId, registry, processes, saveRow })
    const generations = makeGeneration({
      worldId,
      worldName,
      registry,
      slices,
      home,
      processes,
      admission,
      fence,
      router,
      worktreeFiles,
      context,
      life: currentLife,
      setRun,
      post,
      rows,
      prepare: preparing,
      stopOrphans
    })
    const { stopServices, stopRun, halt } = generations
    const running = makeServices({
      worldId,
      row,
      registry,
      life: currentLife,
      apply,
      lastEnv: () => lastEnv,
      select,
      prepare,
      generations,
      markStopping: rows.markStopping
    })
    const { followServices, addServices, failedAmong, stopSome, restartSome } = running
    const { launchStart, admitted, settled } = makeLaunch({
      worldId,
      row,
      registry,
      admission,
      life: currentLife,
      apply,
      setRun,
      setOutcome: (outcome) => SubscriptionRef.update(life, (l) => ({ ...l, outcome })),
      post,
      generations,
      services: running
    })
    const { forget, remove } = makeRemoval({
      worldId,
      row,
      registry,
      configs,
      git,
      ports,
      slices,
      home,
      worktreeFiles,
      apply,
      halt
    })
    const { reset, copySlices, rebuildGolden } = makeSliceCommands({
      worldId,
      row,
      registry,
      configs,
      slices,
      router,
      currentRun,
      selection: () => selection,
      envFor,
      prepare: preparing,
      stopRun,
      launchStart
    })
    const { settle } = makeRecovery({
      worldId,
      registry,
      processes,
      admission,
      home,
      currentRun,
      selection: () => selection,
      lastEnv: () => lastEnv,
      apply,
      prepare,
      launchStart,
      forget,
      stopOrphans
    })

    const up = (sel: Selection, env: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        const run = yield* currentRun
        if (run._tag === "Launching") {
          // asked again while on its way up: the same start answers; what this up names beyond it (checked now: an
          // unknown name is still an error) starts once the world runs (`settled`)
          if (covers(selection, sel)) return
          yield* selected(run.generation.config, sel)
          selection = widen(selection, sel)
          yield* setRun({ ...run, asked: run.asked === undefined ? sel : widen(run.asked, sel) })
          return yield* registry.setSelection(worldId, selection)
        }
        if (run._tag === "Running") {
          // a running world: an unknown name is still an error, and a selection starts only what is missing
          const g = run.generation
          const w = yield* row
          const { loaded, config } = yield* loadConfig(configs, w)
          const names = yield* selected(config, sel)
          yield* registry.setDesired(worldId, "up")
          // a service that failed after the start is started again, as one that is missing
          const failed = yield* failedAmong(g, names)
          const missing = names.some((n) => !g.services.has(n) && Model.processes(config).some((s) => s.name === n))
          // what starts now runs the config as it is: only once its content is allowed
          if (failed.length > 0 || missing) yield* mayRun(loaded, env)
          if (failed.length > 0) {
            yield* registry.addEvent({
              worldId,
              service: null,
              kind: "restarted",
              message: `starting failed ${failed.join(", ")} again`
            })
            yield* stopServices(g, failed)
          }
          if (names.every((n) => g.services.has(n) || !Model.processes(config).some((s) => s.name === n))) return
          selection = widen(selection, sel)
          yield* registry.setSelection(worldId, selection)
          return yield* addServices(g, sel)
        }
        // checked before anything is recorded: an up that cannot resolve its tokens changes nothing
        yield* trace("actor: up")
        const ready = yield* prepare(sel, env)
        yield* recordUp(sel, env)
        yield* launchStart(ready, { since: Date.now(), resuming: false })
      })

    /** What an up records before it starts anything: the world wanted up, with this selection and environment. */
    const recordUp = (sel: Selection, env: Readonly<Record<string, string>>) =>
      Effect.gen(function* () {
        yield* registry.setDesired(worldId, "up")
        yield* registry.setSelection(worldId, sel)
        yield* registry.setEnv(worldId, env)
        selection = sel
        lastEnv = env
        hasOwnEnv = true
      })

    const down = Effect.gen(function* () {
      yield* registry.setDesired(worldId, "down")
      yield* apply(WorldEvent.Stop())
      yield* halt
      yield* apply(WorldEvent.Stopped())
    })

    /** Memory is short: the processes stop as in `down`; ports, slices, files and routes stay; it queues to resume. */
    const suspend = (reason: string, requeue: boolean) =>
      Effect.gen(function* () {
        const w = yield* row
        const { run, state } = yield* currentLife
        if (w.desired !== "up" || run._tag === "Idle" || transition(state, WorldEvent.Suspend()) === undefined) return
        // a stop it could not write down is one a crash would lose (rows.ts): on a full disk the world runs on
        const g = generationOf(run)
        if (g !== undefined) yield* rows.markStopping([...g.services.keys()])
        if (!(yield* apply(WorldEvent.Suspend(), reason))) return
        yield* halt
        if (requeue) yield* admission.suspended
        // asleep for idleness: it stays so (a new daemon too) until a request or an `up` wakes it
        else yield* registry.setWakesOnRequest(worldId, true)
        yield* apply(WorldEvent.Suspended(), reason)
        yield* registry.addEvent({ worldId, service: null, kind: "suspended", message: reason })
        // suspended for memory: back in line at once; suspended for idleness: back on its next request
        if (requeue) yield* resume(Date.now())
      })

    /** Queues a suspended (or crash-stopped) world to come back, in the one fair line, at its suspension time. */
    const resume = (since: number) =>
      Effect.gen(function* () {
        const ready = yield* prepare(selection, lastEnv)
        yield* launchStart(ready, { since, resuming: true })
      })

    /** What command `C` may answer: its own failure union (`protocol.ts`), which each case below is held to. */
    type Answer<C extends WorldCommand> = Effect.Effect<void, Protocol.FailureOf<C>>

    const handle = (command: WorldCommand): Effect.Effect<void, WorldError> => {
      switch (command._tag) {
        case "Up":
          return up(command.selection, command.env) satisfies Answer<Protocol.Up>
        case "Down":
          return down satisfies Answer<Protocol.Down>
        case "Reload":
          return Effect.gen(function* () {
            // what the new start needs is checked, and everything it writes written, before anything stops: a reload
            // that cannot start (or cannot record its stop: a full disk) leaves the world running. It keeps its permit
            // (the same world, started again)
            const ready = yield* prepare(selection, command.env)
            yield* recordUp(selection, command.env)
            const g = yield* currentGeneration
            if (g !== undefined) yield* rows.markStopping([...g.services.keys()])
            yield* stopRun
            yield* launchStart(ready, { since: Date.now(), resuming: false })
          }) satisfies Answer<Protocol.Reload>
        case "Remove":
          return remove(command.force) satisfies Answer<Protocol.Remove>
        case "Vanished":
          return forget(false, true) satisfies Answer<Protocol.Vanished>
        case "RebuildGolden":
          return rebuildGolden(command.service, command.env) satisfies Answer<Protocol.RebuildGolden>
        case "Suspend":
          return suspend(command.reason, command.requeue) satisfies Answer<Protocol.Suspend>
        case "Wake":
          return Effect.gen(function* () {
            const w = yield* row
            const launching = (yield* currentRun)._tag === "Launching"
            if (w.desired === "up" && w.observed === "suspended" && !launching) yield* resume(Date.now())
          }) satisfies Answer<Protocol.Wake>
        case "Reset":
          return reset(command.slices, command.env) satisfies Answer<Protocol.Reset>
        case "CopySlices":
          return copySlices(command.to, command.env) satisfies Answer<Protocol.CopySlices>
        case "StopServices":
          return stopSome(command.services) satisfies Answer<Protocol.StopServices>
        case "RestartServices":
          return restartSome(command.services, command.groups ?? []) satisfies Answer<Protocol.RestartServices>
        case "ServicesChanged":
          return followServices satisfies Answer<Protocol.ServicesChanged>
        case "Withdraw":
          return Effect.gen(function* () {
            // only a world still in line: one already starting keeps starting
            if ((yield* currentRun)._tag !== "Launching" || admission.holds(worldId)) return
            const w = yield* row
            if (w.observed !== "queued") return
            yield* down
          }) satisfies Answer<Protocol.Withdraw>
      }
    }

    /** A failure while moving the state on a start fiber's word: a defect of berth's, logged; the actor goes on. */
    const logInternal = (what: string) => (cause: Cause.Cause<unknown>) =>
      Effect.logError(`world ${worldId}: ${what}`, cause)

    const ended = (command: WorldCommand) => command._tag === "Remove" || command._tag === "Vanished"

    const gone = Effect.suspend(() =>
      Effect.flatMap(registry.world(worldId), (w) =>
        Effect.fail(
          // the row is gone by now: the names the actor started with say which world it was
          new WorldNotFound({
            project: w?.projectName ?? initial?.projectName ?? "",
            name: w?.name ?? initial?.name ?? `#${worldId}`,
            known: []
          })
        )
      )
    )
    const end = Effect.gen(function* () {
      // no offer succeeds once `closed` is set, so what is in the mailbox now is all there will ever be
      yield* Effect.sync(() => {
        closed = true
      })
      const rest = yield* Queue.takeAll(mailbox)
      yield* Effect.forEach(rest, (m) => (m._tag === "Command" ? Deferred.completeWith(m.reply, gone) : Effect.void), {
        discard: true
      })
    })

    const loop = Effect.gen(function* () {
      const removed = yield* settle.pipe(
        Effect.catchAllCause((cause) => Effect.as(Effect.logWarning(`world ${worldId}: settling`, cause), false))
      )
      if (removed) {
        yield* end
        yield* onEnd
        return
      }
      for (;;) {
        const envelope = yield* Queue.take(mailbox)
        // what the world's start fiber tells: only the actor moves the state
        if (envelope._tag === "Admitted") {
          yield* admitted(envelope.token, envelope.resuming).pipe(Effect.catchAllCause(logInternal("admitting")))
          continue
        }
        if (envelope._tag === "Settled") {
          yield* settled(envelope.token, envelope.exit).pipe(Effect.catchAllCause(logInternal("settling its start")))
          continue
        }
        const exit = yield* Effect.exit(
          handle(envelope.command).pipe(
            Effect.catchAllDefect((d) =>
              Effect.fail(
                new InternalError({ reason: `world ${worldId}: ${d instanceof Error ? d.message : String(d)}` })
              )
            )
          )
        )
        if (Exit.isSuccess(exit) && ended(envelope.command)) {
          // commands queued behind a remove are answered (there is no such world any more), never left waiting
          yield* end
          yield* onEnd
          yield* Deferred.complete(envelope.reply, exit)
          return
        }
        yield* Deferred.complete(envelope.reply, exit)
      }
    }).pipe(
      Effect.ensuring(
        Effect.all([
          // a detached daemon's release writes nothing and stops no process (`releaseGeneration`)
          stopRun,
          Effect.ignore(end),
          Deferred.succeed(done, undefined)
        ])
      ),
      Effect.catchAllCause((cause) => Effect.logError("world actor ended", cause))
    )

    const actor: WorldActor = {
      worldId,
      state: life,
      // the reply is `handle`'s, held per command to its own union, or the world gone, or a defect as an
      // InternalError: every command's union has those two
      send: <C extends WorldCommand>(command: C) =>
        Effect.gen(function* () {
          const reply = yield* Deferred.make<void, WorldError>()
          // checked and queued in one step: the loop's end drains the mailbox in one step too, so nothing slips between
          const queued = yield* Effect.sync(() => !closed && mailbox.unsafeOffer({ _tag: "Command", command, reply }))
          if (!queued) return yield* gone
          return yield* Deferred.await(reply)
        }) as Effect.Effect<void, Protocol.FailureOf<C>>,
      started: Effect.flatMap(SubscriptionRef.get(life), ({ outcome }) =>
        outcome === undefined ? Effect.void : Deferred.await(outcome)
      ),
      snapshots: Effect.flatMap(currentGeneration, (g) => {
        if (g === undefined) return Effect.succeed(new Map<string, ServiceSnapshot>())
        return Effect.map(
          Effect.forEach([...g.services], ([name, s]) =>
            Effect.map(SubscriptionRef.get(s.rt.snapshot), (snap) => [name, snap] as const)
          ),
          (entries) => new Map(entries)
        )
      }),
      done: Deferred.await(done),
      flush: rows.flush,
      unwrittenLeft: rows.unwrittenLeft,
      configNote: (seen) =>
        Effect.flatMap(currentGeneration, (g) => {
          if (g === undefined) return Effect.succeed(undefined)
          const name = initial?.name ?? `#${worldId}`
          // the file a status read a moment ago is not read again (two stats a world, a hundred worlds a status)
          const now = seen?.root === g.source.root ? Effect.succeed(seen) : configs.load(g.source.root)
          return now.pipe(
            Effect.map((now) =>
              now.digest === g.source.digest
                ? undefined
                : `${now.file} changed since world ${name} started: berth reload ${name} applies it`
            ),
            Effect.orElseSucceed(() => undefined)
          )
        })
    }
    return { actor, loop }
  })
