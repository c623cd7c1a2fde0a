/**
 * The daemon's machine-global answers: every setting with its value and where it comes from (`berth config`), the
 * gate's reserves (`berth reserve`), and what the swarm looks like now (`berth metrics`, and the Prometheus text of the
 * same numbers when the user opts in).
 */
import * as http from "node:http"
import * as Effect from "effect/Effect"
import { readText } from "../domain/knobs.js"
import * as Runtime from "effect/Runtime"
import { describeWait } from "../domain/admission.js"
import { InternalError, InvalidRequest } from "../domain/errors.js"
import { GOLDEN_GRACE_MS, parseGrace } from "../domain/gc.js"
import { formatPortRange } from "../domain/ports.js"
import { Admission } from "../services/Admission.js"
import { Ports } from "../services/Ports.js"
import { Registry } from "../services/Registry.js"
import { Router } from "../services/proxy/Router.js"
import { HostsKeeper } from "../services/proxy/HostsKeeper.js"
import type { ConfigReport, Metrics } from "./api.js"

const GB = 1024 ** 3

const envSource = (variable: string) => (process.env[variable] !== undefined ? "environment" : undefined)

/** How long a project's goldens outlive its last world, as written (`BERTH_GOLDEN_GRACE`), else the default. */
const goldenGrace = Effect.map(readText("BERTH_GOLDEN_GRACE"), (text): string => {
  if (text === undefined) return `${GOLDEN_GRACE_MS / 3_600_000}h`
  return parseGrace(text) === undefined
    ? `${GOLDEN_GRACE_MS / 3_600_000}h (BERTH_GOLDEN_GRACE "${text}" is not a duration)`
    : text
})

/** Every machine-global setting: reserves, ports, the lease range, the proxy. */
export const config = Effect.gen(function* () {
  const admission = yield* Admission
  const router = yield* Router
  const ports = yield* Ports
  const registry = yield* Registry
  const gate = yield* admission.settings
  const proxy = yield* router.info
  const range = yield* ports.range()
  const rangeSet = (yield* registry.getSetting("ports.range")) !== undefined
  const gateSource = gate.stored ? ("set" as const) : ("default" as const)
  const listener = (l: { wanted: unknown; port: number | undefined; error: string | undefined }) =>
    l.port !== undefined ? `${l.port}${l.wanted === "auto" ? " (auto)" : ""}` : `not listening (${String(l.wanted)})`
  const hosts = yield* (yield* HostsKeeper).status
  const settings: ConfigReport["settings"] = [
    { key: "max_parallel", value: String(gate.maxParallel), source: gateSource },
    { key: "ram_reserve", value: `${gate.ramReservePercent}%`, source: gateSource },
    { key: "disk_reserve", value: `${(gate.diskReserveBytes / GB).toFixed(1)} GB`, source: gateSource },
    { key: "resume_factor", value: String(gate.resumeFactor), source: gateSource },
    { key: "port_range", value: formatPortRange(range), source: rangeSet ? "set" : "default" },
    {
      key: "proxy_http",
      value: listener(proxy.http),
      source: envSource("BERTH_PROXY_PORT") ?? (proxy.http.wanted === "auto" ? "default" : "set")
    },
    {
      key: "proxy_https",
      value: listener(proxy.https),
      source: envSource("BERTH_HTTPS_PORT") ?? (proxy.https.wanted === "auto" ? "default" : "set")
    },
    { key: "https_urls", value: proxy.httpsUrls ? "on" : "off", source: proxy.httpsUrls ? "set" : "default" },
    { key: "ca", value: proxy.caPath, source: "default" },
    {
      key: "hosts_file",
      value:
        hosts.file === undefined
          ? "not kept (berth hosts sync --daemon)"
          : `${hosts.file}, kept by the daemon${hosts.failure === undefined ? "" : ` (failing: ${hosts.failure})`}`,
      source: hosts.file === undefined ? "default" : "set"
    },
    {
      key: "golden_grace",
      value: yield* goldenGrace,
      source: envSource("BERTH_GOLDEN_GRACE") ?? "default"
    },
    {
      key: "metrics_port",
      value: (yield* readText("BERTH_METRICS_PORT")) ?? String((yield* registry.getSetting(METRICS_SETTING)) ?? "off"),
      source:
        envSource("BERTH_METRICS_PORT") ??
        ((yield* registry.getSetting(METRICS_SETTING)) === undefined ? "default" : "set")
    }
  ]
  return { settings } satisfies ConfigReport
}).pipe(Effect.mapError((e) => new InternalError({ reason: e.message })))

/** `berth reserve`: the gate's settings, persisted and in force at once. */
export const reserve = (p: {
  readonly ramPercent?: number | undefined
  readonly diskGb?: number | undefined
  readonly maxParallel?: number | undefined
}) =>
  Effect.gen(function* () {
    const admission = yield* Admission
    if (p.ramPercent !== undefined && !(p.ramPercent >= 0 && p.ramPercent <= 90)) {
      return yield* new InvalidRequest({ reason: `--ram ${p.ramPercent}: expected a percentage from 0 to 90` })
    }
    if (p.diskGb !== undefined && !(p.diskGb >= 0 && Number.isFinite(p.diskGb))) {
      return yield* new InvalidRequest({ reason: `--disk ${p.diskGb}: expected gigabytes, 0 or more` })
    }
    if (p.maxParallel !== undefined && !(Number.isInteger(p.maxParallel) && p.maxParallel >= 1)) {
      return yield* new InvalidRequest({
        reason: `--max-parallel ${p.maxParallel}: expected a whole number, 1 or more`
      })
    }
    yield* admission.setSettings({
      ...(p.ramPercent === undefined ? {} : { ramReservePercent: p.ramPercent }),
      ...(p.diskGb === undefined ? {} : { diskReserveBytes: p.diskGb * GB }),
      ...(p.maxParallel === undefined ? {} : { maxParallel: p.maxParallel })
    })
    return yield* config
  }).pipe(Effect.catchTag("InternalError", (e) => Effect.fail(e)))

export const metrics = Effect.gen(function* () {
  const admission = yield* Admission
  const registry = yield* Registry
  const router = yield* Router
  const worlds = yield* registry.worlds()
  const byState: Record<string, number> = {}
  for (const w of worlds) byState[w.observed] = (byState[w.observed] ?? 0) + 1
  const queue = (yield* admission.queue).map((e) => {
    const w = worlds.find((x) => x.id === e.worldId)
    return {
      project: w?.projectName ?? "",
      world: w?.name ?? `#${e.worldId}`,
      position: e.position,
      waitingFor: e.reason === undefined ? "a permit" : describeWait(e.reason)
    }
  })
  const counters = yield* admission.counters
  const readings = yield* admission.readings
  const gate = yield* admission.settings
  const requests = [...(yield* router.requests)].map(([route, count]) => ({ route, count }))
  return {
    worlds: byState,
    running: yield* admission.running,
    queue,
    admission: {
      admitted: counters.admitted,
      queued: counters.queued,
      suspended: counters.suspended,
      resumed: counters.resumed,
      maxWaitMs: counters.maxWaitMs,
      meanWaitMs: counters.admitted === 0 ? 0 : Math.round(counters.totalWaitMs / counters.admitted)
    },
    readings: {
      memTotalBytes: readings.memTotalBytes,
      memAvailableBytes: readings.memAvailableBytes,
      memAvailablePercent:
        readings.memTotalBytes === 0
          ? 100
          : Math.round((1000 * readings.memAvailableBytes) / readings.memTotalBytes) / 10,
      disks: [...readings.disks]
    },
    reserves: {
      maxParallel: gate.maxParallel,
      ramPercent: gate.ramReservePercent,
      diskBytes: gate.diskReserveBytes,
      resumeFactor: gate.resumeFactor,
      recovering: yield* admission.recovering
    },
    proxy: { requests }
  } satisfies Metrics
}).pipe(Effect.mapError((e) => new InternalError({ reason: e.message })))

const label = (v: string) => v.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n")

/** The same numbers in Prometheus' text format. */
export const prometheusText = (m: Metrics): string => {
  const lines: Array<string> = []
  const metric = (name: string, help: string, type: "gauge" | "counter", samples: Array<[string, number]>) => {
    lines.push(`# HELP berth_${name} ${help}`, `# TYPE berth_${name} ${type}`)
    for (const [labels, value] of samples) lines.push(`berth_${name}${labels} ${value}`)
  }
  metric(
    "worlds",
    "Worlds by observed state.",
    "gauge",
    Object.entries(m.worlds).map(([state, n]) => [`{state="${label(state)}"}`, n])
  )
  metric("worlds_running", "Worlds holding a permit of the gate.", "gauge", [["", m.running]])
  metric("queue_length", "Worlds waiting in the gate's line.", "gauge", [["", m.queue.length]])
  metric("admitted_total", "Worlds admitted by the gate.", "counter", [["", m.admission.admitted]])
  metric("suspended_total", "Worlds suspended under memory pressure.", "counter", [["", m.admission.suspended]])
  metric("resumed_total", "Suspended worlds resumed.", "counter", [["", m.admission.resumed]])
  metric("wait_max_seconds", "The longest wait in line so far.", "gauge", [["", m.admission.maxWaitMs / 1000]])
  metric("memory_available_bytes", "Available memory.", "gauge", [["", m.readings.memAvailableBytes]])
  metric("memory_total_bytes", "Total memory.", "gauge", [["", m.readings.memTotalBytes]])
  metric(
    "disk_free_bytes",
    "Free disk on the filesystems worlds live on.",
    "gauge",
    m.readings.disks.map((d) => [`{path="${label(d.path)}"}`, d.freeBytes])
  )
  metric("ram_reserve_ratio", "The RAM reserve, as a share of the total.", "gauge", [["", m.reserves.ramPercent / 100]])
  metric("disk_reserve_bytes", "The disk reserve.", "gauge", [["", m.reserves.diskBytes]])
  metric("max_parallel", "At most this many worlds run at once.", "gauge", [["", m.reserves.maxParallel]])
  metric(
    "proxy_requests_total",
    "Requests the proxy routed, per route.",
    "counter",
    m.proxy.requests.map((r) => [`{route="${label(r.route)}"}`, r.count])
  )
  return `${lines.join("\n")}\n`
}

export const METRICS_SETTING = "metrics-port"

/**
 * The opt-in Prometheus endpoint: `http://127.0.0.1:<metrics_port>/metrics` (loopback only), served while the daemon
 * runs when the setting (`berth metrics --serve PORT`) or BERTH_METRICS_PORT names a port.
 */
export const serveMetrics = Effect.gen(function* () {
  const registry = yield* Registry
  const stored = yield* registry.getSetting(METRICS_SETTING)
  const port = Number((yield* readText("BERTH_METRICS_PORT")) ?? stored)
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return
  const runPromise = Runtime.runPromise(yield* Effect.runtime<Admission | Registry | Router>())
  const server = http.createServer((req, res) => {
    if (req.url !== "/metrics") {
      res.writeHead(404).end("try /metrics\n")
      return
    }
    runPromise(metrics).then(
      (m) => res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(prometheusText(m)),
      () => res.writeHead(500).end("metrics unavailable\n")
    )
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.once("error", (e) => {
        runPromise(Effect.logWarning(`metrics endpoint on port ${port}: ${e.message}`)).catch(() => {})
        resume(Effect.void)
      })
      server.listen(port, "127.0.0.1", () => resume(Effect.void))
    }),
    () => Effect.sync(() => server.close())
  )
})
