/**
 * What the tests of the cluster's parts share (no database, no network namespace, no root): worlds and machines as a
 * store hands them back, and this machine's worlds as a fake `Worlds` answers them.
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type { WorldChange } from "../../src/actors/protocol.js"
import type { WorldsService } from "../../src/actors/Worlds.js"
import type { WorldStatus } from "../../src/daemon/api.js"
import type { AnywhereRow, Machine, SharedWorld } from "../../src/cluster/store.js"

export const statusOf = (project: string, slug: string, state = "running"): WorldStatus => ({
  project,
  name: slug,
  slug,
  path: `/w/${slug}`,
  branch: slug,
  main: false,
  desired: "up",
  state,
  reason: null,
  services: [
    {
      name: "web",
      kind: "process",
      state: "healthy",
      pid: 100,
      port: 4000,
      ports: { "": 4000 },
      url: `http://web.${slug}.${project}.localhost`,
      restarts: 0,
      reason: null,
      logTail: ["a line the owner keeps"],
      command: "node server.mjs"
    }
  ],
  events: []
})

export const machineNamed = (name: string, slot: number, heartbeatAgeMs = 500): Machine => ({
  name,
  machineId: `${name}-id`,
  slot,
  address: `10.0.0.${slot}`,
  runnerPort: 7450,
  proxyPort: 7452,
  version: "0.1.0",
  heartbeatAgeMs,
  joinedAt: 0,
  room: undefined
})

export const rowOf = (project: string, slug: string, owner: string | null, desired: AnywhereRow["desired"] = "up") =>
  ({
    project,
    slug,
    name: slug,
    branch: slug,
    remote: "/origin.git",
    selection: { services: [], groups: [] },
    env: {},
    desired,
    generation: 1,
    owner,
    reason: null
  }) satisfies AnywhereRow

export const sharedOf = (machine: string, status: WorldStatus): SharedWorld => ({ machine, status })

/** This machine's worlds as `Worlds` answers `status`, and a change stream the test pushes to. */
export const fakeWorlds = Effect.gen(function* () {
  let listed: ReadonlyArray<WorldStatus> = []
  // a queue, not a hub: what is pushed before the reader starts is read all the same
  const changes = yield* Queue.unbounded<WorldChange>()
  const worlds: Pick<WorldsService, "status" | "changes"> = {
    status: () => Effect.sync(() => ({ worlds: listed })),
    changes: Stream.fromQueue(changes)
  }
  return {
    worlds,
    set: (next: ReadonlyArray<WorldStatus>) => {
      listed = next
    },
    changed: (change: WorldChange) => Queue.offer(changes, change)
  }
})
