/**
 * The machine-global gate and what it sees: `berth reserve` (the RAM and disk reserves and max_parallel), `berth
 * config` (every machine-global setting, its value and where it comes from) and `berth metrics`.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ConfigReport, Metrics } from "../../daemon/api.js"
import { DaemonClient } from "../../daemon/client.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"
import { viaDaemon, withDaemon } from "./worlds.js"

const GiB = 1024 ** 3

const renderConfig = (report: ConfigReport): string => {
  const width = Math.max(...report.settings.map((s) => s.key.length))
  const valueWidth = Math.max(...report.settings.map((s) => s.value.length))
  return report.settings.map((s) => `${s.key.padEnd(width)}  ${s.value.padEnd(valueWidth)}  (${s.source})`).join("\n")
}

export const reserve = Command.make(
  "reserve",
  {
    ram: Options.float("ram").pipe(
      Options.withDescription("keep this share of memory free (percent, 0-90): no world starts below it"),
      Options.optional
    ),
    disk: Options.float("disk").pipe(
      Options.withDescription("keep this much disk free (GB) on BERTH_HOME's and the worktrees' filesystems"),
      Options.optional
    ),
    maxParallel: Options.integer("max-parallel").pipe(
      Options.withDescription("at most this many worlds run at once"),
      Options.optional
    ),
    json
  },
  ({ disk, json, maxParallel, ram }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const report = yield* client.Reserve({
          ramPercent: Option.getOrUndefined(ram),
          diskGb: Option.getOrUndefined(disk),
          maxParallel: Option.getOrUndefined(maxParallel)
        })
        if (json) return yield* printDocument("reserve", report)
        yield* Console.log(renderConfig({ settings: report.settings.slice(0, 4) }))
      })
    )
).pipe(
  Command.withDescription(
    "Set how much of the machine berth leaves alone: worlds start only while memory and disk are above these reserves and fewer than max-parallel run; persisted, in force at once"
  ),
  withDaemon
)

export const config = Command.make("config", { json }, ({ json }) =>
  viaDaemon(
    Effect.gen(function* () {
      const client = yield* DaemonClient
      const report = yield* client.Config()
      if (json) return yield* printDocument("config", report)
      yield* Console.log(renderConfig(report))
    })
  )
).pipe(
  Command.withDescription("Show every machine-global setting: reserves, ports, the lease range and the proxy"),
  withDaemon
)

const renderMetrics = (m: Metrics): string => {
  const states = Object.entries(m.worlds)
    .map(([state, n]) => `${n} ${state}`)
    .join(", ")
  const lines = [
    `worlds: ${states === "" ? "none" : states}`,
    `running: ${m.running} of at most ${m.reserves.maxParallel}`,
    `memory: ${m.readings.memAvailablePercent}% free of ${(m.readings.memTotalBytes / GiB).toFixed(1)} GB (reserve ${m.reserves.ramPercent}%${m.reserves.recovering ? `, recovering: needs ${m.reserves.ramPercent * m.reserves.resumeFactor}%` : ""})`,
    ...m.readings.disks.map(
      (d) =>
        `disk: ${(d.freeBytes / GiB).toFixed(1)} GB free on ${d.path} (reserve ${(m.reserves.diskBytes / GiB).toFixed(1)} GB)`
    ),
    `queue: ${m.queue.length === 0 ? "empty" : m.queue.map((q) => `${q.position}. ${q.project}/${q.world} (${q.waitingFor})`).join("; ")}`,
    `admitted ${m.admission.admitted}, suspended ${m.admission.suspended}, resumed ${m.admission.resumed}; wait mean ${(m.admission.meanWaitMs / 1000).toFixed(1)} s, max ${(m.admission.maxWaitMs / 1000).toFixed(1)} s`
  ]
  if (m.proxy.requests.length > 0) {
    lines.push("proxy requests:", ...m.proxy.requests.map((r) => `  ${r.route}  ${r.count}`))
  }
  return lines.join("\n")
}

export const metrics = Command.make("metrics", { json }, ({ json }) =>
  viaDaemon(
    Effect.gen(function* () {
      const client = yield* DaemonClient
      const m = yield* client.Metrics()
      if (json) return yield* printDocument("metrics", m)
      yield* Console.log(renderMetrics(m))
    })
  )
).pipe(
  Command.withDescription(
    "Worlds by state, the line and its waits, suspensions, the machine's readings against the reserves, proxy requests per route (BERTH_METRICS_PORT in the daemon's environment serves the same as Prometheus text on 127.0.0.1)"
  ),
  withDaemon
)
