/**
 * The services of a world that runs, some at a time: those an `up` adds beside the running ones, `stop -s` and
 * `restart -s`/`-g` (a service and everything depending on it), and the world following them — `degraded` while one
 * is failed, `running` again once none is.
 */
import * as Effect from "effect/Effect"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Model from "../../domain/config/model.js"
import { UnknownGroup, UnknownService, WorldNotRunning } from "../../domain/errors.js"
import { dependentsClosure } from "../../domain/graph.js"
import { WorldEvent } from "../../domain/world-state.js"
import type { RegistryError, RegistryService } from "../../services/Registry.js"
import type * as Protocol from "../protocol.js"
import type { Generations } from "./generation.js"
import { type Apply, type Generation, generationOf, type Life, type ReadRow } from "./life.js"
import type { Prepare } from "./prepare.js"

export const makeServices = (deps: {
  readonly worldId: number
  readonly row: ReadRow
  readonly registry: RegistryService
  /** the world's life as the actor holds it now */
  readonly life: Effect.Effect<Life>
  readonly apply: Apply
  /** the environment of the world's last `up` */
  readonly lastEnv: () => Readonly<Record<string, string>>
  /** the world's selection replaced, and written (the actor's own) */
  readonly select: (selection: Protocol.Selection) => ReturnType<RegistryService["setSelection"]>
  readonly prepare: Prepare["prepare"]
  readonly generations: Pick<Generations, "start" | "stopServices">
  /** the stop of these services written down before it begins (fails on a full disk: see rows.ts) */
  readonly markStopping: (names: ReadonlyArray<string>) => Effect.Effect<void, RegistryError>
}) => {
  const { worldId, row, registry, life, apply, prepare } = deps
  const { start, stopServices } = deps.generations
  const currentRun = Effect.map(life, (l) => l.run)
  const currentGeneration = Effect.map(currentRun, generationOf)

  /**
   * The world follows its services: `degraded` (with the failed ones as its reason) while one of the running
   * generation is failed, `running` again once none is. Runs on the mailbox, so the state keeps one writer.
   */
  const followServices = Effect.gen(function* () {
    const g = yield* currentGeneration
    if (g === undefined) return
    const failed: Array<string> = []
    for (const [name, s] of g.services) {
      const snap = yield* SubscriptionRef.get(s.rt.snapshot)
      if (snap.state === "failed") failed.push(`${name}: ${snap.reason ?? "failed"}`)
    }
    const now = (yield* life).state
    if (failed.length > 0 && now === "running") {
      const why = failed.join("; ")
      yield* apply(WorldEvent.Degrade({ reason: why }), why)
      yield* registry.addEvent({ worldId, service: null, kind: "degraded", message: why })
    } else if (failed.length === 0 && now === "degraded") {
      yield* apply(WorldEvent.Restore())
    }
  })

  /**
   * Services a running generation lacks, started beside the others on the actor's own fiber (the world stays
   * `running`); one that fails to start goes again, and the rest keeps running.
   */
  const addServices = (g: Generation, sel: Protocol.Selection) =>
    Effect.gen(function* () {
      const ready = yield* prepare(sel, deps.lastEnv())
      yield* start(g, true, ready)
      g.envBefore.clear()
    }).pipe(Effect.ensuring(Effect.ignore(followServices)))

  /** The services of the running generation among `names` that are failed: what an `up` starts again. */
  const failedAmong = (g: Generation, names: ReadonlyArray<string>) =>
    Effect.filter(names, (name) => {
      const s = g.services.get(name)
      return s === undefined
        ? Effect.succeed(false)
        : Effect.map(SubscriptionRef.get(s.rt.snapshot), (snap) => snap.state === "failed")
    })

  /**
   * The named services of a running world — and the processes of the named groups — and everything depending on
   * them, in dependency order.
   */
  const withDependents = (names: ReadonlyArray<string>, groups: ReadonlyArray<string> = []) =>
    Effect.gen(function* () {
      const run = yield* currentRun
      const w = yield* row
      if (run._tag !== "Running") return yield* new WorldNotRunning({ world: w.name })
      const g = run.generation
      const processes = Model.processes(g.config)
      const known = processes.map((s) => s.name)
      const unknown = names.filter((n) => !known.includes(n))
      if (unknown.length > 0 || names.length + groups.length === 0) {
        return yield* new UnknownService({ world: w.name, names: unknown, file: g.config.file, known })
      }
      const inGroups = processes.filter((s) => s.groups.some((x) => groups.includes(x))).map((s) => s.name)
      const empty = groups.filter((x) => !processes.some((s) => s.groups.includes(x)))
      if (empty.length > 0) {
        const all = [...new Set(processes.flatMap((s) => s.groups))].sort()
        return yield* new UnknownGroup({ world: w.name, names: empty, file: g.config.file, known: all })
      }
      const affected = new Set(dependentsClosure(g.config.graph, [...names, ...inGroups]))
      return { g, w, order: g.config.graph.order.filter((n) => affected.has(n)) }
    })

  /**
   * `stop -s`: those services and their dependents stop, and stay out of the world's selection until an `up -s`.
   * Everything it writes is written before anything stops: on a full disk it fails having stopped nothing.
   */
  const stopSome = (names: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const { g, order } = yield* withDependents(names)
      const left = g.config.graph.order.filter((n) => g.services.has(n) && !order.includes(n))
      yield* deps.select({ services: left, groups: [] })
      yield* registry.addEvent({ worldId, service: null, kind: "stopped", message: `stopped ${order.join(", ")}` })
      yield* deps.markStopping(order)
      yield* stopServices(g, order)
      yield* followServices
    })

  /** `restart -s`/`-g`: those services and their dependents stop, then start again beside the rest (written first). */
  const restartSome = (names: ReadonlyArray<string>, groups: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const { g, order } = yield* withDependents(names, groups)
      yield* registry.addEvent({
        worldId,
        service: null,
        kind: "restarted",
        message: `restarted ${order.join(", ")}`
      })
      yield* deps.markStopping(order)
      yield* stopServices(g, order)
      yield* addServices(g, { services: order, groups: [] })
    })

  return { followServices, addServices, failedAmong, stopSome, restartSome }
}

export type Services = ReturnType<typeof makeServices>
