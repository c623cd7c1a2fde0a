/**
 * How berth is composed, in one place. Three ways to run it:
 * - `DaemonLive`-style: `runDaemon` (daemon/server.ts) serves `WorldsLive` over the socket — what the CLI talks to;
 * - `CliLive`: what the CLI's local commands (`check`, `init`) need; the world commands bring their daemon client;
 * - `EmbedLive`: the whole engine in the caller's process, for programs that drive worlds through `Worlds` directly
 *   (`EmbedClusterLive` with the cluster).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Layer from "effect/Layer"
import { ReconcilerLive } from "../actors/Reconciler.js"
import { Worlds } from "../actors/Worlds.js"
import { Cluster } from "../cluster/Cluster.js"
import { ConfigFilesLive } from "../services/ConfigFiles.js"
import { GitLive } from "../services/Git.js"
import { HealthLive } from "../services/Health.js"
import { Home } from "../services/Home.js"
import { PortsLive } from "../services/Ports.js"
import { ProcessesLive } from "../services/Processes.js"
import { RegistryLive } from "../services/Registry.js"
import { HostsKeeper } from "../services/proxy/HostsKeeper.js"
import { Router } from "../services/proxy/Router.js"
import { SliceLedgerLive } from "../services/slices/SliceLedger.js"
import { SlicesLive } from "../services/slices/Slices.js"
import { AdmissionLive } from "../services/Admission.js"
import { FenceLive } from "../services/Fence.js"
import { MachineLive } from "../services/Machine.js"
import { PlatformLive } from "../services/Platform.js"
import { WorktreeFilesLive } from "../services/worktree/WorktreeFiles.js"

/** The engine: worlds and every service they use, without Home (so a caller picks BERTH_HOME), on this machine only. */
export const EngineLive = Worlds.Default.pipe(
  Layer.provideMerge(
    Layer.mergeAll(PortsLive, SlicesLive, Router.Default, AdmissionLive, FenceLive, WorktreeFilesLive)
  ),
  Layer.provideMerge(Layer.merge(RegistryLive, SliceLedgerLive)),
  Layer.provideMerge(Layer.mergeAll(ConfigFilesLive, GitLive, HealthLive, ProcessesLive, MachineLive)),
  // the seam to the operating system: processes, listeners and memory are asked of it, never read directly
  Layer.provideMerge(PlatformLive),
  Layer.provideMerge(NodeContext.layer)
)

/** The engine as the daemon runs it: with the cluster (idle until one is joined) and the hosts file it keeps. */
export const WorldsLive = Layer.merge(Cluster.Default, HostsKeeper.Default).pipe(Layer.provideMerge(EngineLive))

/** The CLI's local services (in a file of their own, which the CLI loads without the engine). */
export { CliLive } from "./cli.js"

const homeLayer = (home: string | undefined) => (home === undefined ? Home.layer : Home.layerAt(home))

/**
 * berth embedded: the engine and its reconciler in this process, state under `home` (default: BERTH_HOME or
 * ~/.berth), on this machine only — a program that wants the cluster asks for `EmbedClusterLive`. Do not run it
 * beside a daemon of the same home: one supervisor per home.
 */
export const EmbedLive = (home?: string) =>
  ReconcilerLive.pipe(Layer.provideMerge(EngineLive), Layer.provideMerge(homeLayer(home)))

/** berth embedded with the cluster, as the daemon runs it (`Cluster` joins, lists and commands other machines). */
export const EmbedClusterLive = (home?: string) =>
  ReconcilerLive.pipe(Layer.provideMerge(WorldsLive), Layer.provideMerge(homeLayer(home)))
