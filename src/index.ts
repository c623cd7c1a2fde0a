/**
 * berth for programs: everything the CLI can do, through Effect layers and services.
 *
 * ```ts
 * import { EmbedLive, Worlds } from "berth"
 * const program = Effect.gen(function* () {
 *   const worlds = yield* Worlds
 *   const world = yield* worlds.up({ cwd: "/path/to/repo", world: "login-fix" }, { services: [], groups: [] }, {})
 *   console.log(world.services.map((s) => s.url))
 *   // a new world whose slices are copies of login-fix's, data included (as `berth up review --from login-fix`)
 *   yield* worlds.up({ cwd: "/path/to/repo", world: "review" }, { services: [], groups: [] }, {}, true, { from: "login-fix" })
 *   // every observed move of every world (queued → starting → running, suspended, …) from now on
 *   yield* Stream.runForEach(worlds.changes, (c) => Console.log(`${c.world}: ${c.from} → ${c.to}`)).pipe(Effect.fork)
 * })
 * Effect.runPromise(program.pipe(Effect.provide(EmbedLive("/tmp/berth-home")), Effect.scoped))
 * ```
 */
export { Worlds, type WorldRef } from "./actors/Worlds.js"
export type { Selection, WorldChange } from "./actors/WorldActor.js"
export * as WorldProtocol from "./actors/protocol.js"
export { DaemonApi, type ServiceStatus, type WorldStatus, type Settings, WatchMessage } from "./daemon/api.js"
/** the daemon's state stream in-process: a snapshot, then every change (what `berth dash` and the web page read) */
export { watch } from "./daemon/watch.js"
export { DaemonClient, type DaemonClientService } from "./daemon/client.js"
export { DaemonClientInProcess, runDaemon } from "./daemon/server.js"
export * as Config from "./domain/config/model.js"
export { parseConfig } from "./domain/config/parse.js"
export { lintConfig } from "./domain/config/lint.js"
export * from "./domain/errors.js"
export { CliLive, EmbedClusterLive, EmbedLive, EngineLive, WorldsLive } from "./layers/index.js"
/** the cluster as the daemon uses it (written shape), and a machine in no cluster for tests and embedders */
export { Cluster, ClusterSolo, type ClusterService } from "./cluster/Cluster.js"
export { HostsKeeper } from "./services/proxy/HostsKeeper.js"
export { ConfigFiles } from "./services/ConfigFiles.js"
export { Home } from "./services/Home.js"
export { Ports } from "./services/Ports.js"
export { version } from "./version.js"
