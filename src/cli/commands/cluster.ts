/**
 * `berth cluster init|join|leave|status`: this machine as a member of a cluster of berth daemons whose shared state is
 * in a PostgreSQL database. Without a cluster berth needs no PostgreSQL at all.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ClusterStatus } from "../../daemon/api.js"
import { DaemonClient } from "../../daemon/client.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"
import { viaDaemon, withDaemon } from "./worlds.js"

const seconds = (ms: number) => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`)

/** What a machine says of its room for one more world that runs anywhere. */
const roomText = (room: ClusterStatus["machines"][number]["room"]): string => {
  if (room === undefined || room === null) return "room ?"
  if (room.draining) return "stopping"
  if (room.admits) return "has room"
  return room.waiting > 0 ? `full, ${room.waiting} waiting` : "full"
}

export const renderCluster = (c: ClusterStatus): string => {
  if (c.state === "solo") return "this machine is not in a cluster (berth cluster join <postgres url> makes it one)"
  const head = [
    `cluster: ${c.url ?? "?"}`,
    `this machine: ${c.name ?? "?"}${c.slot === null ? "" : ` (slot ${c.slot})`} at ${c.address ?? "?"}:${c.runnerPort ?? "?"}, ${c.state}${c.error === null || c.state === "member" ? "" : `: ${c.error}`}`
  ]
  const rows = c.machines.map((m) => [
    `${m.self ? "*" : " "} ${m.name}`,
    m.state,
    `${m.address}:${m.runnerPort}`,
    m.proxyPort === null ? "no proxy" : `proxy :${m.proxyPort}`,
    `${m.worlds} world${m.worlds === 1 ? "" : "s"}`,
    roomText(m.room),
    `seen ${seconds(m.lastSeenMs)} ago`,
    m.version
  ])
  const widths = rows.reduce<Array<number>>((w, row) => row.map((cell, i) => Math.max(w[i] ?? 0, cell.length)), [])
  return [
    ...head,
    ...rows.map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd()
    )
  ].join("\n")
}

const print = (json: boolean, report: ClusterStatus) =>
  json ? printDocument("cluster", report) : Console.log(renderCluster(report))

const membership = {
  url: Args.text({ name: "postgres-url" }).pipe(
    Args.withDescription("the PostgreSQL database the cluster keeps its state in (postgres://user@host/db)")
  ),
  name: Options.text("name").pipe(
    Options.withDescription("this machine's name in the cluster (default: its host name)"),
    Options.optional
  ),
  address: Options.text("address").pipe(
    Options.withDescription("the address other machines reach this one at (default: its first non-loopback IPv4)"),
    Options.optional
  ),
  runnerPort: Options.integer("runner-port").pipe(
    Options.withDescription("the TCP port berth listens on for its peers, on that address (default 7357)"),
    Options.optional
  ),
  replace: Options.boolean("replace").pipe(
    Options.withDescription("take over the name of a machine that left the cluster without saying so")
  ),
  json
}

const joinCommand = (name: "init" | "join", description: string) =>
  Command.make(name, membership, (o) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const report = yield* client.ClusterJoin({
          url: o.url,
          name: Option.getOrUndefined(o.name),
          address: Option.getOrUndefined(o.address),
          runnerPort: Option.getOrUndefined(o.runnerPort),
          init: name === "init",
          replace: o.replace
        })
        yield* print(o.json, report)
      })
    )
  ).pipe(Command.withDescription(description), withDaemon)

const leave = Command.make("leave", { json }, ({ json }) =>
  viaDaemon(
    Effect.gen(function* () {
      const client = yield* DaemonClient
      yield* print(json, yield* client.ClusterLeave())
    })
  )
).pipe(
  Command.withDescription(
    "Leave the cluster: this machine's worlds keep running here, other machines stop listing them"
  ),
  withDaemon
)

const status = Command.make("status", { json }, ({ json }) =>
  viaDaemon(
    Effect.gen(function* () {
      const client = yield* DaemonClient
      yield* print(json, yield* client.ClusterStatus())
    })
  )
).pipe(Command.withDescription("This machine's membership and every machine of the cluster"), withDaemon)

export const cluster = Command.make("cluster").pipe(
  Command.withDescription(
    "Run worlds across several machines: daemons that share a PostgreSQL database form a cluster"
  ),
  Command.withSubcommands([
    joinCommand("init", "Make a cluster in this PostgreSQL database (berth's tables) and join it"),
    joinCommand("join", "Join the cluster whose state is in this PostgreSQL database"),
    leave,
    status
  ])
)
