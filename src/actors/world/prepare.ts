/**
 * Getting a world's start ready: its worktree made and given what `[project] copy` and `link` bring, its config read
 * and allowed to run, the services selected and the paths they use checked (`prepare`, which changes nothing a
 * failure would leave behind); then what a start does before any service: the project's `setup` once per worktree,
 * every port leased, every slice provisioned and filled. The one-off commands (setup, migrate, seed) run here too.
 */
import * as Effect from "effect/Effect"
import * as Model from "../../domain/config/model.js"
import { identityVariables, portRequests, redact, withLocalBins, worldVariables } from "../../domain/coordinates.js"
import { StartFailed, UnsetVariable } from "../../domain/errors.js"
import { secretsOf, urlSecrets } from "../../domain/redact.js"
import { resolveTemplate, type ServiceCoordinates, type TokenContext, unresolvedIn } from "../../domain/tokens.js"
import type { ConfigFilesService, LoadedConfig } from "../../services/ConfigFiles.js"
import { requireConsent } from "../../services/Consent.js"
import type { HomePaths } from "../../services/Home.js"
import * as LogFiles from "../../services/LogFiles.js"
import type { PortsService } from "../../services/Ports.js"
import { ONESHOT_VARIABLE, type ProcessesService } from "../../services/Processes.js"
import type { RouterService } from "../../services/proxy/Router.js"
import type { RegistryService, WorldRow } from "../../services/Registry.js"
import type { SliceInit, SlicesService } from "../../services/slices/Slices.js"
import { trace } from "../../services/trace.js"
import { checkPaths, type WorktreeFilesService } from "../../services/worktree/WorktreeFiles.js"
import type * as Protocol from "../protocol.js"
import type { ReadRow } from "./life.js"
import { identity, loadConfig, selected, sliceWorld, tokenContext } from "./plan.js"
import { SETUP_LOG } from "../../domain/log-names.js"

/** The pseudo-service whose log holds the project's `setup` output (`berth logs -s setup`). */
export { SETUP_LOG }

export const makePrepare = (deps: {
  readonly worldId: number
  readonly row: ReadRow
  readonly registry: RegistryService
  readonly configs: ConfigFilesService
  readonly home: HomePaths
  readonly processes: ProcessesService
  readonly ports: PortsService
  readonly slices: SlicesService
  readonly router: RouterService
  readonly worktreeFiles: WorktreeFilesService
}) => {
  const { worldId, row, registry, configs, home, processes, ports, slices, router, worktreeFiles } = deps

  /**
   * A new worktree first gets what `[project] copy` and `link` bring from the main checkout (its gitignored `.env`,
   * say), before any `setup`. Marked ready once that is done, so it is done once.
   */
  const bringFiles = (w: WorldRow, project: Model.ProjectConfig) =>
    Effect.gen(function* () {
      if (w.worktreeReady) return
      if (!w.isMain && project.copy.length + project.link.length > 0) {
        const brought = yield* worktreeFiles.bring(w, project)
        const said = [
          brought.copied.length === 0 ? [] : [`copied ${brought.copied.join(", ")}`],
          brought.linked.length === 0 ? [] : [`linked ${brought.linked.join(", ")}`]
        ].flat()
        if (said.length > 0) {
          yield* registry.addEvent({
            worldId,
            service: null,
            kind: "worktree_files",
            message: `${said.join("; ")} from the main checkout`
          })
        }
      }
      yield* registry.markWorktreeReady(worldId)
    })

  /** The world's worktree, made when it is missing (and the world's history says what it branched from). */
  const ensureWorktreeFolder = (w: WorldRow) =>
    Effect.gen(function* () {
      const { madeBranch } = yield* worktreeFiles.ensure(w)
      // what a new world holds, said once: the main checkout's last commit, not what is uncommitted there
      if (madeBranch !== undefined) {
        yield* registry.addEvent({
          worldId: w.id,
          service: null,
          kind: "worktree_created",
          message: `branch ${madeBranch} made from the last commit of the main checkout (${w.mainRoot}); what is not committed there is not carried`
        })
      }
    })

  /**
   * Runs a one-off command of the world (setup, migrate, seed) to its end; its output goes to `<label>.log`. What a
   * failure quotes of that log has every known secret masked.
   */
  const runOnce = (
    w: WorldRow,
    label: string,
    command: string,
    env: Readonly<Record<string, string>>,
    secrets: ReadonlyArray<string>
  ) =>
    Effect.gen(function* () {
      const logFile = home.serviceLog(worldId, label)
      yield* LogFiles.markRun(logFile, label)
      const exit = yield* Effect.scoped(
        Effect.gen(function* () {
          const handle = yield* processes.spawnScoped(
            {
              command,
              cwd: w.path,
              env: { ...env, PATH: withLocalBins(env.PATH, w.path), [ONESHOT_VARIABLE]: home.root },
              logFile
            },
            10_000
          )
          return yield* processes.awaitExit(handle)
        })
      ).pipe(Effect.catchTag("SpawnFailed", (e) => Effect.succeed({ code: null, signal: e.reason })))
      if (exit.code === 0) return
      const logTail = (yield* LogFiles.failureTail(logFile, 20).pipe(Effect.orElseSucceed(() => []))).map((line) =>
        redact(line, secrets)
      )
      return yield* new StartFailed({
        world: w.name,
        service: label,
        reason: redact(
          `\`${command}\` failed (${exit.code === null ? `${exit.signal}` : `exit code ${exit.code}`})`,
          secrets
        ),
        logTail
      })
    })

  /**
   * The project's `setup`, once per worktree, its tokens resolved as a service's are, and told whose it is as a
   * service is (BERTH_WORLD, BERTH_PROJECT).
   */
  const runSetup = (w: WorldRow, command: string, given: Readonly<Record<string, string>>, ctx: TokenContext) =>
    Effect.gen(function* () {
      const env = { ...given, ...identityVariables(identity(w)) }
      const resolved = resolveTemplate(command, ctx, { shell: true })
      // a waiting `up` tells that setup runs (and the last line of its output) while these two bracket it
      yield* registry.addEvent({ worldId, service: SETUP_LOG, kind: "setup_start", message: "running setup" })
      const began = Date.now()
      yield* runOnce(w, SETUP_LOG, resolved.value, env, [...resolved.secrets, ...secretsOf(env)]).pipe(
        // suspended: the time is read when setup has ended, not when this effect is built
        Effect.ensuring(
          Effect.suspend(() =>
            registry.addEvent({
              worldId,
              service: SETUP_LOG,
              kind: "setup_done",
              message: `setup ended after ${((Date.now() - began) / 1000).toFixed(1)} s`
            })
          ).pipe(Effect.ignore)
        )
      )
      yield* registry.markSetupDone(worldId)
    })

  /** `migrate` then `seed` of a slice service, run in the world's environment with the slices at `urls`. */
  const sliceInit =
    (
      w: WorldRow,
      config: Model.Config,
      userEnv: Readonly<Record<string, string>>,
      lookup: (name: string) => string | undefined,
      coordsWith: (urls: ReadonlyMap<string, string>) => ReadonlyMap<string, ServiceCoordinates>
    ): SliceInit =>
    (s, urls) =>
      Effect.gen(function* () {
        const coords = coordsWith(urls)
        const env = { ...userEnv, ...worldVariables(config, coords) }
        // `${self.url}` in a migrate or seed is the slice being filled
        const ctx = tokenContext(w, coords, lookup, s.name)
        for (const command of [s.migrate, s.seed]) {
          if (command === undefined) continue
          const resolved = resolveTemplate(command, ctx, { shell: true })
          yield* runOnce(w, s.name, resolved.value, env, [...resolved.secrets, ...secretsOf(env), ...urlSecrets(urls)])
        }
      })

  /**
   * Every slice of the world, before any process starts. A slice made just now is filled — a copy of its golden,
   * or its `migrate` then `seed` — in the world's environment; if that fails, the slice is dropped again.
   */
  const provisionSlices = (
    w: WorldRow,
    config: Model.Config,
    userEnv: Readonly<Record<string, string>>,
    lookup: (name: string) => string | undefined,
    coordsWith: (urls: ReadonlyMap<string, string>) => ReadonlyMap<string, ServiceCoordinates>
  ) =>
    Effect.map(
      slices.provision(
        sliceWorld(worldId, w),
        Model.slices(config),
        lookup,
        sliceInit(w, config, userEnv, lookup, coordsWith)
      ),
      coordsWith
    )

  /** The config's commands may run: its content was allowed (or the command's environment allows it). */
  const mayRun = (loaded: LoadedConfig, env: Readonly<Record<string, string>>) =>
    requireConsent(home.consentFile, { file: loaded.file, digest: loaded.digest, config: loaded.parsed.config }, env)

  /**
   * What a start needs before anything is touched: the worktree, the config (and `.env`), the selected services, the
   * world's environment. Failing here changes nothing, so `reload` checks it before it stops what runs.
   */
  const prepare = (sel: Protocol.Selection, givenEnv: Readonly<Record<string, string>>) =>
    Effect.gen(function* () {
      const w = yield* row
      yield* ensureWorktreeFolder(w)
      yield* trace("actor: worktree ready")
      const { loaded, config, dotenv } = yield* loadConfig(configs, w)
      // nothing of a config runs before the user allowed its content (a freshly cloned repository, say)
      yield* mayRun(loaded, givenEnv)
      yield* bringFiles(w, config.project)
      const names = yield* selected(config, sel)
      yield* checkPaths(w, config, names)
      const routing = router.routing(config, w.projectName, w.slug)
      const userEnv = router.processEnv(givenEnv, routing)
      const lookup = (name: string) => userEnv[name] ?? dotenv.get(name)
      // an admin_url whose variables are not set would make berth act on the wrong server (or a literal
      // `${env.…}`): the world's command fails, naming the variable, before anything changes
      for (const s of Model.slices(config)) {
        if (s.adminUrl === undefined) continue
        const missing = unresolvedIn(resolveTemplate(s.adminUrl, { services: new Map(), env: lookup }))
        if (missing.length > 0) {
          return yield* new UnsetVariable({ world: w.name, slice: s.name, variables: missing, file: config.file })
        }
      }
      return { w, loaded, config, dotenv, names, routing, userEnv, lookup }
    })

  /** Every port of the world leased; a lease something outside berth took moved, and the world's history says so. */
  const allocatePorts = (w: WorldRow, config: Model.Config) =>
    Effect.gen(function* () {
      const { assigned, replaced } = yield* ports.allocate(
        { id: worldId, project: w.projectName, name: w.name },
        portRequests(config)
      )
      for (const r of replaced) {
        const now = assigned.find((a) => a.service === r.service && a.name === r.name)?.port
        const which = r.name === "" ? r.service : `${r.service}'s ${r.name}`
        yield* registry.addEvent({
          worldId,
          service: r.service,
          kind: "port_moved",
          message: `port ${r.port} is taken by ${r.holder ?? "a process outside berth"}; ${which} moved to port ${now}`
        })
      }
      return assigned
    })

  return { prepare, mayRun, runSetup, sliceInit, provisionSlices, allocatePorts }
}

export type Prepare = ReturnType<typeof makePrepare>

/** What `prepare` found: everything a start of the world needs, checked. */
export type Prepared = Effect.Effect.Success<ReturnType<Prepare["prepare"]>>
