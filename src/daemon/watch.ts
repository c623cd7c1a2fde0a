/**
 * The daemon's state stream (`Watch`): a snapshot of the worlds, the line and the machine, then one message per
 * observed change. It follows what already announces change — the registry's writes, the gate's line, every world's
 * moves — and reads the machine, and each world's CPU and memory from the Platform, every few seconds only while someone
 * watches. A burst of changes (an `up` writes many rows) is read once, 100 ms after it began.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { Worlds } from "../actors/Worlds.js"
import { Cluster } from "../cluster/Cluster.js"
import { describeWait } from "../domain/admission.js"
import { remoteWorldId } from "../domain/cluster.js"
import { diffWorlds, type ProcUsage, sampleUsage, type UsageSample, usageBetween } from "../domain/dashboard.js"
import { Admission } from "../services/Admission.js"
import { Platform } from "../services/Platform.js"
import { Registry } from "../services/Registry.js"
import { Router } from "../services/proxy/Router.js"
import {
  EventAdded,
  LineChanged,
  LineEntry,
  MachineReadings,
  Readings,
  WatchedWorld,
  type WatchMessage,
  WatchSnapshot,
  WorldChanged,
  WorldGone,
  WorldUsage
} from "./api.js"
import { makeClusterViews } from "./cluster.js"

/** How often the machine and the worlds' processes are read while someone watches. */
export const READINGS_EVERY_MS = 2_000
/** How long a burst of changes is gathered before the worlds are read again. */
const GATHER_MS = 100
/** The Platform reads CPU in milliseconds and memory in bytes: the units `usageBetween` is given. */
const MS_PER_SECOND = 1000
const BYTE = 1

/** The stream of one watcher: of every world, or of the project `cwd` is in. */
export const watch = (cwd: string | undefined) =>
  Stream.unwrap(
    Effect.gen(function* () {
      const worlds = yield* Worlds
      const registry = yield* Registry
      const admission = yield* Admission
      const router = yield* Router
      const platform = yield* Platform
      /** every process's cost, in the units of `ProcUsage` the dashboard sums (ticks of 1 ms, pages of 1 byte) */
      const readProcesses: Effect.Effect<ReadonlyArray<ProcUsage>> = Effect.map(platform.costs, (costs) =>
        costs.map((c) => ({ pid: c.pid, pgrp: c.pgid, ticks: c.cpuMs, rssPages: c.rssBytes }))
      )

      // an engine without the cluster (EmbedLive) watches its own worlds only
      const cluster = yield* Effect.serviceOption(Cluster)
      const remote =
        cluster._tag === "Some" ? makeClusterViews(worlds, cluster.value, router).remote : () => Effect.succeed([])

      // another machine's world is acted on through this machine's checkout of its project, when there is one (the
      // daemon sends the command on to the world's machine)
      const readWorlds = Effect.gen(function* () {
        const views = yield* worlds.views(cwd)
        const roots = new Map(views.map((v) => [v.status.project, v.mainRoot]))
        const others = (yield* remote(cwd)).map((status) => ({
          id: remoteWorldId(status.machine ?? "", status.project, status.slug),
          mainRoot: roots.get(status.project) ?? "",
          selection: { services: [], groups: [] },
          status
        }))
        return [...views, ...others].map((v) => ({ text: JSON.stringify(v), world: new WatchedWorld(v) }))
      })

      const readLine = (shown: ReadonlyArray<WatchedWorld>) =>
        Effect.map(admission.queue, (queue) =>
          queue.flatMap((e) => {
            const w = shown.find((x) => x.id === e.worldId)
            return w === undefined
              ? []
              : [
                  new LineEntry({
                    worldId: e.worldId,
                    project: w.status.project,
                    world: w.status.name,
                    position: e.position,
                    waitingFor: e.reason === undefined ? "a permit" : describeWait(e.reason)
                  })
                ]
          })
        )

      const readMachine = Effect.gen(function* () {
        const r = yield* admission.readings
        const gate = yield* admission.settings
        return new MachineReadings({
          memTotalBytes: r.memTotalBytes,
          memAvailableBytes: r.memAvailableBytes,
          memAvailablePercent:
            r.memTotalBytes === 0 ? 100 : Math.round((1000 * r.memAvailableBytes) / r.memTotalBytes) / 10,
          disks: [...r.disks],
          running: yield* admission.running,
          reserves: {
            maxParallel: gate.maxParallel,
            ramPercent: gate.ramReservePercent,
            diskBytes: gate.diskReserveBytes,
            resumeFactor: gate.resumeFactor,
            recovering: yield* admission.recovering
          }
        })
      })

      /** The shown worlds' process groups, read from their services' rows: pgid → world id. */
      const readUsage = (shown: ReadonlyArray<WatchedWorld>, before: UsageSample | undefined) =>
        Effect.gen(function* () {
          const rows = yield* registry.services()
          const ids = new Set(shown.map((w) => w.id))
          const groups = new Map<number, number>()
          for (const s of rows) if (s.pgid !== null && ids.has(s.worldId)) groups.set(s.pgid, s.worldId)
          const sample = sampleUsage(Date.now(), groups.size === 0 ? [] : yield* readProcesses, groups)
          return {
            sample,
            usage: usageBetween(before, sample, MS_PER_SECOND, BYTE).map((u) => new WorldUsage(u))
          }
        })

      let known = new Map<number, { readonly text: string; readonly world: WatchedWorld }>()
      let lineText = ""
      let sample: UsageSample | undefined

      const snapshot = Effect.gen(function* () {
        const read = yield* readWorlds
        known = new Map(read.map((r) => [r.world.id, r]))
        const shown = read.map((r) => r.world)
        const line = yield* readLine(shown)
        lineText = JSON.stringify(line)
        const usage = yield* readUsage(shown, undefined)
        sample = usage.sample
        return new WatchSnapshot({
          worlds: shown,
          line,
          machine: yield* readMachine,
          usage: usage.usage,
          dashboard: (yield* router.dashboardOrigins).map((o) => `${o}/`)[0] ?? null,
          at: Date.now()
        })
      })

      /** What changed since the last step; with `readings`, the machine and the worlds' usage too. */
      const step = (readings: boolean) =>
        Effect.gen(function* () {
          const out: Array<WatchMessage> = []
          const read = yield* readWorlds
          for (const m of diffWorlds(known, read)) {
            if (m._tag === "WorldChanged") out.push(new WorldChanged({ world: m.world }))
            else if (m._tag === "WorldGone") out.push(new WorldGone({ id: m.id }))
            else out.push(new EventAdded({ worldId: m.worldId, world: m.world, event: m.event }))
          }
          known = new Map(read.map((r) => [r.world.id, r]))
          const shown = read.map((r) => r.world)
          const line = yield* readLine(shown)
          const text = JSON.stringify(line)
          if (text !== lineText) out.push(new LineChanged({ line }))
          lineText = text
          // CPU needs time between two samples: a reading asked for too soon after the last one waits for the next
          if (readings && (sample === undefined || Date.now() - sample.at >= READINGS_EVERY_MS / 2)) {
            const usage = yield* readUsage(shown, sample)
            sample = usage.sample
            out.push(new Readings({ machine: yield* readMachine, usage: usage.usage }))
          }
          return out
        })

      const changed = Stream.mergeAll(
        [
          registry.changes.changes.pipe(Stream.as(false)),
          admission.changes.changes.pipe(Stream.as(false)),
          worlds.changes.pipe(Stream.as(false)),
          Stream.tick(`${READINGS_EVERY_MS} millis`).pipe(Stream.as(true))
        ],
        { concurrency: "unbounded" }
      )
      const updates = changed.pipe(
        Stream.groupedWithin(10_000, `${GATHER_MS} millis`),
        Stream.filter((chunk) => Chunk.size(chunk) > 0),
        Stream.mapEffect((chunk) => step(Chunk.some(chunk, (readings) => readings))),
        Stream.flattenIterables
      )
      return Stream.concat(Stream.fromEffect(snapshot), updates)
    })
  )
