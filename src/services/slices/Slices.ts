/**
 * A world's slices: provisioned before any of its processes starts (and reused on every later `up`), their addresses
 * handed to tokens and `berth env`, torn down on `remove`; golden templates built once and copied; gc of what a crash
 * or a vanished world left behind. Every slice is recorded in the registry before it is made, so a slice half-made by
 * a crash is still known. The adapters themselves live in `adapters/`.
 */
import { randomBytes } from "node:crypto"
import { appendFileSync, mkdirSync, realpathSync } from "node:fs"
import { dirname, join } from "node:path"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import { readText } from "../../domain/knobs.js"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import type { ExternalAdapter } from "../../../adapters/external/index.js"
import type { Adapter, AdapterError, Slice } from "../../../adapters/index.js"
import { builtinAdapters } from "../../domain/adapters.js"
import type * as Model from "../../domain/config/model.js"
import {
  type DiskFull,
  type DriverMissing,
  type GoldenInputsFailed,
  type InternalError,
  type PathOutsideWorktree,
  SliceCopyUnsupported,
  SliceServerFailed,
  type StartFailed,
  UnsetVariable,
  WorldMovedAway
} from "../../domain/errors.js"
import {
  forgetPlan,
  GOLDEN_GRACE_MS,
  type GcAction,
  gcInFlightKey,
  gcPlan,
  type GcRow,
  parseGrace,
  serverKey
} from "../../domain/gc.js"
import { goldenKey, goldenName } from "../../domain/golden.js"
import { shortHash } from "../../domain/hash.js"
import { sliceIdentifier } from "../../domain/names.js"
import { hidePassword } from "../../domain/redact.js"
import { resolveTemplate, unresolvedIn } from "../../domain/tokens.js"
import { Home } from "../Home.js"
import { type NewSlice, Registry, type SliceRow, type WorldRow } from "../Registry.js"
import { goldenInputs } from "./golden-inputs.js"
import { implementation } from "./implementations.js"
import { type SharedSlices, SliceLedger } from "./SliceLedger.js"

/** the setting that says when gc first found each project with goldens but no world */
const GOLDEN_IDLE = "golden-idle"

/** Identifiers stay within the shortest common limit (PostgreSQL's 63). */
const NAME_LIMIT = 63

export interface SliceWorld {
  readonly id: number
  readonly project: string
  readonly name: string
  readonly slug: string
  /** the worktree: where `golden_inputs` are read */
  readonly path: string
}

/** Runs a slice service's `migrate` then `seed` with the world's environment pointed at `urls`. */
export type SliceInit = (
  service: Model.SliceService,
  urls: ReadonlyMap<string, string>
) => Effect.Effect<void, StartFailed | InternalError | DiskFull>

type SliceError =
  | StartFailed
  | UnsetVariable
  | SliceCopyUnsupported
  | WorldMovedAway
  | GoldenInputsFailed
  | SliceServerFailed
  | InternalError
  | DiskFull
  | PathOutsideWorktree
  | DriverMissing

interface Golden {
  readonly slice: Slice
  readonly rowId: number
  readonly key: string
}

export interface GcEntry {
  readonly reason: GcAction["reason"]
  readonly adapter: string
  /** the server (password hidden) or storage folder */
  readonly where: string
  readonly name: string
  /** what became of it: dropped, would be dropped (dry run) or why it could not be */
  readonly outcome: "dropped" | "would drop" | "failed"
  readonly error: string | undefined
}

export interface GcReport {
  readonly entries: ReadonlyArray<GcEntry>
  /** servers that could not be asked what they hold (unreachable, say): nothing there was touched */
  readonly unreachable: ReadonlyArray<{ readonly adapter: string; readonly where: string; readonly error: string }>
  /** records of an adapter nothing serves (a mistyped name) that gc forgot, or would forget: nothing was on a server */
  readonly forgotten: ReadonlyArray<GcForgotten>
}

export interface GcForgotten {
  readonly adapter: string
  readonly where: string
  /** the slice whose record it is; none for the record of a server */
  readonly name: string | undefined
  readonly outcome: "forgotten" | "would forget"
  readonly reason: string
}

/** The owner mark of this installation: stable for one BERTH_HOME, different for another. */
export const ownerOf = (root: string): string => {
  let real = root
  try {
    real = realpathSync(root)
  } catch {
    // a home that does not exist yet is named by its path
  }
  return `b${shortHash(real, 11)}`
}

/** an adapter served by an executable, which knows its capabilities only once it has asked */
const isExternal = (adapter: Adapter): adapter is ExternalAdapter => "askCapabilities" in adapter

const familyOf = (adapter: string) => builtinAdapters.get(adapter)?.family ?? adapter
const isEmbedded = (adapter: string) => builtinAdapters.get(adapter)?.embedded === true

export interface SlicesService {
  /** this installation's owner mark (a hash of BERTH_HOME) */
  readonly owner: string
  /**
   * Provisions (or finds) every slice of the world and fills the new ones (`init` runs migrate and seed); returns each
   * one's address by service. A slice whose filling fails is dropped again, so the next `up` starts clean.
   */
  readonly provision: (
    world: SliceWorld,
    services: ReadonlyArray<Model.SliceService>,
    env: (name: string) => string | undefined,
    init: SliceInit
  ) => Effect.Effect<Map<string, string>, SliceError>
  /** The addresses of slices already provisioned (for `env` of a world that is down). */
  readonly addresses: (worldId: number) => Effect.Effect<Map<string, string>, InternalError | DiskFull>
  /**
   * Drops every slice recorded for the world (or those of `only`); answers the services whose slice is left because
   * it could not be dropped (with `keepOnFailure`; without it, that fails the call).
   */
  readonly teardown: (
    world: Pick<SliceWorld, "id" | "name">,
    options?: { readonly only?: ReadonlySet<string>; readonly keepOnFailure?: boolean }
  ) => Effect.Effect<ReadonlyArray<string>, SliceServerFailed | DriverMissing | InternalError | DiskFull>
  /** Fails (naming the slice) unless every ready slice of world `from` can be copied into a new world `to`. */
  readonly canCopy: (
    from: Pick<SliceWorld, "id" | "name">,
    to: string,
    searchPath: string | undefined
  ) => Effect.Effect<void, SliceCopyUnsupported | SliceServerFailed | InternalError | DiskFull | DriverMissing>
  /**
   * Copies every ready slice of world `from`, data included, into the new world `to` (`berth up <to> --from <from>`),
   * recorded as `to`'s, ready; refuses before anything is made when an adapter cannot clone. Whatever was made goes
   * again when a copy fails. The caller keeps `from`'s processes stopped meanwhile.
   */
  readonly copyWorld: (
    from: SliceWorld,
    to: SliceWorld,
    searchPath: string | undefined
  ) => Effect.Effect<void, SliceCopyUnsupported | SliceServerFailed | InternalError | DiskFull | DriverMissing>
  /** Rebuilds the golden of one slice service now, from the world's worktree and environment; answers its name. */
  readonly rebuildGolden: (
    world: SliceWorld,
    service: Model.SliceService,
    env: (name: string) => string | undefined,
    init: SliceInit
  ) => Effect.Effect<string, SliceError>
  /**
   * What a crash or a vanished world left behind (`domain/gc.ts`): dropped, or only listed with `dryRun`. `env`
   * resolves old rows' `${env.…}`; `automatic` (the daemon's own sweep) keeps slices whose service left berth.toml.
   */
  readonly gc: (
    dryRun: boolean,
    env?: Readonly<Record<string, string>>,
    automatic?: boolean,
    /** `berth gc --goldens`: the goldens and spares of projects with no world left go now, not after the grace */
    goldens?: boolean
  ) => Effect.Effect<GcReport, InternalError | DiskFull>
}

export class Slices extends Context.Tag("berth/Slices")<Slices, SlicesService>() {}

const make = Effect.gen(function* () {
  const home = yield* Home
  const registry = yield* Registry
  const ledger = yield* SliceLedger
  const owner = ownerOf(home.root)
  /** `server\0name` of every slice being made, cloned or built in this daemon right now: gc leaves them alone */
  const inFlight = new Map<string, number>()
  /** what gc is dropping right now: a provision of the same name waits */
  const dropping = new Set<string>()
  /**
   * Rows of dropped slices whose forgetting a full disk put off (`forgetDropped`), by slice. Holding the slice again
   * takes it out: a world's row is rewritten in place when the world provisions it anew, and is then the new one's.
   */
  const putOff = new Map<string, number>()
  /** one gc at a time (see `gc` below) */
  const gcLock = yield* Effect.makeSemaphore(1)
  /** goldens being built, by project/service/key: concurrent first `up`s wait for one build */
  const builds = new Map<string, Deferred.Deferred<Golden, SliceError>>()

  /** made once per project and daemon, not on every `up` */
  const storages = new Set<string>()
  const storageOf = (project: string) => {
    const storage = join(home.root, "slices", project)
    if (!storages.has(storage)) {
      mkdirSync(storage, { recursive: true, mode: 0o700 })
      storages.add(storage)
    }
    return storage
  }

  const serverOf = (s: Pick<Slice, "adapter" | "adminUrl" | "storage" | "options">) =>
    serverKey(familyOf(s.adapter), isEmbedded(s.adapter), s.adminUrl ?? null, s.storage) +
    `\u0000${JSON.stringify(s.options)}`

  const where = (s: Pick<Slice, "adapter" | "adminUrl" | "storage">) =>
    isEmbedded(s.adapter) ? s.storage : s.adminUrl === undefined ? "(no admin_url)" : hidePassword(s.adminUrl)

  const adapterFailure = (world: string, service: string, adapter: string) => (e: AdapterError) =>
    new SliceServerFailed({ world, slice: service, adapter, kind: e.kind, reason: e.message })

  /** a name with this installation's mark appended: what it uses where the usual name is someone else's */
  const apartName = (name: string) => sliceIdentifier([name, owner], NAME_LIMIT)

  /**
   * `slice` under the name this installation uses for it: the one it recorded; else its usual name, unless the server
   * holds that name for someone else (another berth installation with the same project: two users, or two
   * BERTH_HOMEs, on one server) — then a name of this installation's own, so that both work side by side.
   */
  const ownName = (world: SliceWorld, slice: Slice, adapter: Adapter, recorded?: string) =>
    Effect.gen(function* () {
      // a slice that moves with its world (the cluster's mark) has one name on every member
      if (slice.owner !== owner) return slice
      const apart: Slice = { ...slice, name: apartName(slice.name) }
      if (recorded === apart.name) return apart
      if (recorded === slice.name || adapter.standing === undefined) return slice
      const standing = yield* adapter
        .standing(slice)
        .pipe(Effect.mapError(adapterFailure(world.name, slice.service, slice.adapter)))
      if (standing !== "foreign") return slice
      yield* event(
        world,
        slice.service,
        "slice_named_apart",
        `${slice.name} on ${where(slice)} is not this installation's (another berth installation's, or not berth's): this one is ${apart.name}`
      )
      return apart
    })

  /** The slice of `service` for the world; one that moves with its world (`shared`) carries the cluster's mark. */
  const describe = (
    world: SliceWorld,
    service: Model.SliceService,
    env: (name: string) => string | undefined,
    shared?: SharedSlices
  ): Slice => ({
    adapter: service.adapter,
    project: world.project,
    world: world.name,
    service: service.name,
    name: sliceIdentifier([world.project, world.slug, service.name], NAME_LIMIT),
    owner: shared?.owner ?? owner,
    storage: storageOf(world.project),
    adminUrl:
      service.adminUrl === undefined
        ? undefined
        : resolveTemplate(service.adminUrl, { services: new Map(), env }).value,
    options: service.options
  })

  /** The slice a registry row describes: the server recorded when it was made wins over today's config. */
  const fromRow = (row: SliceRow, world: string): Slice => ({
    adapter: row.adapter,
    project: row.project,
    world,
    service: row.service,
    name: row.name,
    owner,
    storage: row.storage === "" ? storageOf(row.project) : row.storage,
    adminUrl: row.adminUrl ?? undefined,
    options: row.options
  })

  /** servers already recorded by this daemon: the registry write is needed once, not on every `up` */
  const recorded = new Set<string>()
  const recordServer = (slice: Slice) => {
    const key = shortHash(serverOf(slice), 12)
    if (recorded.has(key)) return Effect.void
    return Effect.zipRight(
      registry.recordSliceServer({
        key,
        adapter: slice.adapter,
        adminUrl: slice.adminUrl ?? null,
        storage: slice.storage,
        options: slice.options
      }),
      Effect.sync(() => recorded.add(key))
    )
  }

  /** the spares' copies, and forgets a full disk put off: ended with the layer */
  const background = yield* FiberSet.make()

  /**
   * Marks a slice busy until the scope closes, so that gc never drops it half-way (and waits while gc drops it). A
   * world's slice is held from before its row is written until it is ready: in between, its row says `provisioning`,
   * which gc would otherwise take for a crash's leftover.
   */
  const hold = (slice: Slice): Effect.Effect<void, never, Scope.Scope> => {
    const key = gcInFlightKey(serverOf(slice), slice.name)
    const enter: Effect.Effect<void> = Effect.suspend(() => {
      if (dropping.has(key)) return Effect.zipRight(Effect.sleep("50 millis"), enter)
      putOff.delete(key)
      inFlight.set(key, (inFlight.get(key) ?? 0) + 1)
      return Effect.void
    })
    const leave = Effect.sync(() => {
      const n = (inFlight.get(key) ?? 1) - 1
      if (n <= 0) inFlight.delete(key)
      else inFlight.set(key, n)
    })
    return Effect.acquireRelease(enter, () => leave)
  }

  /** `effect` with its slice held (see `hold`). */
  const busy = <A, E, R>(slice: Slice, effect: Effect.Effect<A, E, R>) =>
    Effect.scoped(Effect.zipRight(hold(slice), effect))

  /** gc's side of `busy`: false (and nothing held) when the slice is being made right now. */
  const claimForDrop = (slice: Slice) =>
    Effect.sync(() => {
      const key = gcInFlightKey(serverOf(slice), slice.name)
      if (inFlight.has(key) || dropping.has(key)) return undefined
      dropping.add(key)
      return key
    })

  /**
   * Forgets the row of a slice a failed step has just dropped. A full disk can refuse that write as well: it is tried
   * again in the background each second until space is back, so no row is left `provisioning` (gc's
   * "half-provisioned") for the next slice sweep, minutes later, to find. Each try claims the slice as gc does, and
   * none is made once the slice has been held again (`putOff`): the row is no longer the one dropped. A try forgets
   * the row only while it names the slice: gc may have forgotten it meanwhile, and another slice's taken its id.
   */
  const forgetDropped = (slice: Slice, id: number): Effect.Effect<void> => {
    const key = gcInFlightKey(serverOf(slice), slice.name)
    /** true once there is nothing more to do */
    const again: Effect.Effect<boolean> = Effect.suspend(() =>
      putOff.get(key) !== id
        ? Effect.succeed(true)
        : Effect.flatMap(claimForDrop(slice), (claimed) =>
            claimed === undefined
              ? Effect.succeed(false)
              : registry.forgetSlice(id, slice.name).pipe(
                  Effect.as(true),
                  Effect.catchAll((e) => Effect.succeed(e._tag !== "DiskFull")),
                  Effect.ensuring(Effect.sync(() => dropping.delete(claimed)))
                )
          )
    )
    const later = Effect.delay(again, "1 second").pipe(
      Effect.repeat({ until: (done) => done }),
      Effect.ensuring(
        Effect.sync(() => {
          if (putOff.get(key) === id) putOff.delete(key)
        })
      )
    )
    return registry.forgetSlice(id).pipe(
      Effect.catchTag("DiskFull", () =>
        Effect.zipRight(
          Effect.sync(() => putOff.set(key, id)),
          FiberSet.run(background, later)
        )
      ),
      Effect.ignore
    )
  }

  const event = (world: SliceWorld, service: string, kind: string, message: string) =>
    Effect.gen(function* () {
      yield* registry.addEvent({ worldId: world.id, service, kind, message })
      // the slice's log (where migrate and seed write) tells the same story
      yield* Effect.sync(() => {
        try {
          const log = home.serviceLog(world.id, service)
          mkdirSync(dirname(log), { recursive: true, mode: 0o700 })
          appendFileSync(log, `[berth] ${kind}: ${message}\n`, { mode: 0o600 })
        } catch {
          // the event row is what status shows; a log line is a courtesy
        }
      })
    })

  /**
   * Writes the row of a slice about to be made, before anything is made: a crash mid-way leaves a row that teardown
   * or gc can act on. Which world it is (none for a golden or a spare) and the golden it copies come with it.
   */
  const recordRow = (
    slice: Slice,
    of: Pick<NewSlice, "worldId" | "goldenKey"> & { readonly role?: "golden" | "spare" }
  ) =>
    registry.recordSlice({
      worldId: of.worldId,
      project: slice.project,
      service: slice.service,
      adapter: slice.adapter,
      name: slice.name,
      adminUrl: slice.adminUrl ?? null,
      storage: slice.storage,
      options: slice.options,
      goldenKey: of.goldenKey,
      ...(of.role === undefined ? {} : { role: of.role })
    })

  /** Builds (or finds, or waits for) the golden of `service`: provision, then migrate and seed, on a slice of no world. */
  const ensureGolden = (
    world: SliceWorld,
    service: Model.SliceService,
    target: Slice,
    urls: ReadonlyMap<string, string>,
    init: SliceInit,
    force: boolean,
    /** the world's PATH, where an external adapter is looked for first */
    searchPath: string | undefined
  ): Effect.Effect<Golden, SliceError> =>
    Effect.gen(function* () {
      const inputs = yield* goldenInputs(world.path, service.goldenInputs, { world: world.name, service: service.name })
      const key = goldenKey({
        adapter: service.adapter,
        // a golden is always this installation's; for a slice that moves with its world (the cluster's mark) it is
        // named apart, so that the members sharing one server never build the same name
        server: target.owner === owner ? where(target) : `${where(target)}\u0000${owner}`,
        migrate: service.migrate,
        seed: service.seed,
        inputs
      })
      const flight = `${world.project}\u0000${service.name}\u0000${key}`
      const running = builds.get(flight)
      if (running !== undefined) {
        yield* event(world, service.name, "golden_wait", "waiting for the golden being built by another world")
        return yield* Deferred.await(running)
      }
      const usual: Slice = {
        ...target,
        owner,
        world: "(golden)",
        name: goldenName(world.project, service.name, key, NAME_LIMIT)
      }
      const rows = yield* registry.goldens(world.project, service.name, key)
      // made under its usual name, or under this installation's own where the usual one was someone else's
      const ready = rows.find((r) => r.state === "ready" && (r.name === usual.name || r.name === apartName(usual.name)))
      if (ready !== undefined && !force) return { slice: fromRow(ready, "(golden)"), rowId: ready.id, key }
      const done = yield* Deferred.make<Golden, SliceError>()
      builds.set(flight, done)
      const adapter = yield* implementation(service.adapter, searchPath)
      const failure = adapterFailure(world.name, service.name, service.adapter)
      const build = Effect.gen(function* () {
        const golden = yield* ownName(world, usual, adapter)
        return yield* busy(
          golden,
          Effect.gen(function* () {
            // an older attempt (a crash mid-build, or the golden being rebuilt) goes first, and copies made of it
            for (const row of [...(yield* registry.spares(world.project, service.name, key)), ...rows]) {
              yield* adapter.teardown(fromRow(row, "(golden)")).pipe(Effect.mapError(failure))
              yield* registry.forgetSlice(row.id)
            }
            yield* event(world, service.name, "golden_build", `building the golden ${golden.name}`)
            const row = yield* recordRow(golden, { worldId: null, goldenKey: key })
            yield* recordServer(golden)
            const made = yield* adapter.provision(golden).pipe(Effect.mapError(failure))
            if (!made) {
              // ours but unrecorded: what is in it is unknown, so start again from empty
              yield* adapter.teardown(golden).pipe(Effect.mapError(failure))
              yield* adapter.provision(golden).pipe(Effect.mapError(failure))
            }
            const url = yield* adapter.resolve(golden).pipe(Effect.mapError(failure))
            yield* registry.setSliceUrl(row.id, url)
            yield* init(service, new Map([...urls, [service.name, url]])).pipe(
              Effect.tapError(() =>
                Effect.zipRight(Effect.ignore(adapter.teardown(golden)), forgetDropped(golden, row.id))
              )
            )
            yield* registry.markSliceReady(row.id)
            yield* event(world, service.name, "golden_ready", `golden ${golden.name} is ready`)
            return { slice: golden, rowId: row.id, key }
          })
        )
      })
      return yield* build.pipe(
        Effect.exit,
        Effect.tap((exit) => Deferred.done(done, exit)),
        Effect.ensuring(Effect.sync(() => builds.delete(flight))),
        Effect.flatten
      )
    })

  /** Fails unless something serves the slice's adapter now (for an external one: an executable on PATH). */
  const present = (world: Pick<SliceWorld, "name">, service: Model.SliceService, searchPath: string | undefined) =>
    Effect.flatMap(implementation(service.adapter, searchPath), (adapter) =>
      adapter.present === undefined
        ? Effect.void
        : adapter.present.pipe(Effect.mapError(adapterFailure(world.name, service.name, service.adapter)))
    )

  /** ids of spares being renamed into a world right now: each goes to one world */
  const claimed = new Set<number>()

  /** Renames a ready spare of the golden into `target`; false when there is none (or it cannot be used). */
  const takeSpare = (service: Model.SliceService, adapter: Adapter, golden: Golden, target: Slice) =>
    Effect.gen(function* () {
      // a spare carries this installation's mark; a slice that moves with its world needs the cluster's
      if (adapter.rename === undefined || target.owner !== owner) return false
      const spare = (yield* registry.spares(target.project, service.name, golden.key)).find(
        (r) => r.state === "ready" && !claimed.has(r.id)
      )
      if (spare === undefined) return false
      claimed.add(spare.id)
      const slice = fromRow(spare, "(spare)")
      const renamed = yield* busy(slice, adapter.rename(slice, target)).pipe(
        Effect.either,
        Effect.ensuring(Effect.sync(() => claimed.delete(spare.id)))
      )
      if (renamed._tag === "Right") {
        yield* registry.forgetSlice(spare.id)
        return true
      }
      // an unusable spare goes; the world gets a copy the ordinary way
      yield* Effect.logWarning(`spare ${spare.name}: ${renamed.left.message}`)
      yield* adapter.teardown(slice).pipe(Effect.ignore)
      yield* registry.forgetSlice(spare.id)
      return false
    })

  /** Makes one spare copy of the golden in the background, when the adapter can rename and there is none. */
  const replenish = (service: Model.SliceService, adapter: Adapter, golden: Golden) =>
    Effect.gen(function* () {
      if (adapter.rename === undefined) return
      const existing = yield* registry.spares(golden.slice.project, service.name, golden.key)
      if (existing.length > 0) return
      const spare: Slice = {
        ...golden.slice,
        world: "(spare)",
        name: sliceIdentifier(
          ["spare", golden.slice.project, service.name, golden.key.slice(0, 10), randomBytes(3).toString("hex")],
          NAME_LIMIT
        )
      }
      // held from before its row is written (a `provisioning` spare row nobody holds is a crash's leftover to gc)
      // until the background copy ends; the row is written here, so a second world's replenish sees it
      const held = yield* Scope.make()
      yield* Scope.extend(hold(spare), held)
      const row = yield* recordRow(spare, { worldId: null, goldenKey: golden.key, role: "spare" }).pipe(
        Effect.onError(() => Scope.close(held, Exit.void))
      )
      const copy = Effect.zipRight(adapter.clone(golden.slice, spare), registry.markSliceReady(row.id)).pipe(
        Effect.catchAll((e) =>
          Effect.zipRight(
            Effect.logWarning(`spare of ${golden.slice.name}: ${e.message}`),
            Effect.zipRight(Effect.ignore(adapter.teardown(spare)), forgetDropped(spare, row.id))
          )
        ),
        Effect.ensuring(Scope.close(held, Exit.void))
      )
      yield* FiberSet.run(background, copy)
    })

  /**
   * Whether the golden is gone from its server: its adapter says so where it can tell whose a name is, else the golden
   * is not among what the server lists as this installation's. A server that cannot answer says nothing is gone.
   */
  const goldenGone = (adapter: Adapter, golden: Slice) =>
    (adapter.standing === undefined
      ? Effect.map(adapter.list(golden), (names) => !names.includes(golden.name))
      : Effect.map(adapter.standing(golden), (standing) => standing === "missing")
    ).pipe(Effect.orElseSucceed(() => false))

  /** Fills a slice that was just made (or left half-made): a copy of the golden where it can, else migrate + seed. */
  const initialize = (
    world: SliceWorld,
    service: Model.SliceService,
    adapter: Adapter,
    slice: Slice,
    urls: ReadonlyMap<string, string>,
    init: SliceInit,
    /** passes while this machine may still overwrite the slice (a slice that moves with its world: see SliceLedger) */
    guard: Effect.Effect<void, SliceError>,
    /** the world's PATH, where an external adapter is looked for first */
    searchPath: string | undefined
  ): Effect.Effect<void, SliceError> =>
    Effect.gen(function* () {
      const failure = adapterFailure(world.name, service.name, service.adapter)
      if (service.cloneSource !== undefined) {
        // the user's own database, seeded by hand: copied, then the branch's migrate runs on the copy (no seed: the
        // data came with it). There is no falling back: migrate and seed would not make that data
        if (adapter.copyExisting === undefined) {
          return yield* new SliceCopyUnsupported({
            world: world.name,
            slice: service.name,
            adapter: service.adapter,
            database: service.cloneSource
          })
        }
        yield* guard
        yield* adapter.copyExisting(service.cloneSource, slice).pipe(
          Effect.mapError((e) =>
            e.kind === "invalid"
              ? new SliceServerFailed({
                  world: world.name,
                  slice: service.name,
                  adapter: service.adapter,
                  kind: e.kind,
                  reason: e.message,
                  hint: "make and seed that database on the server, or name another in clone_from"
                })
              : failure(e)
          )
        )
        yield* event(
          world,
          service.name,
          "slice_copied",
          `slice ${service.name} (${slice.name}) is a copy of ${service.cloneSource} on ${where(slice)}`
        )
        return yield* init({ ...service, seed: undefined }, urls)
      }
      if (service.cloneFrom === "golden") {
        if (!adapter.capabilities.clone) {
          yield* event(
            world,
            service.name,
            "clone_fallback",
            `the ${service.adapter} adapter cannot clone: running migrate and seed for this world`
          )
          return yield* init(service, urls)
        }
        const made = yield* ensureGolden(world, service, slice, urls, init, false, searchPath)
        const golden = made.slice
        // a spare copy made ahead of time is renamed into place: the new world costs a rename, not a copy
        const fromSpare = yield* takeSpare(service, adapter, made, slice)
        if (!fromSpare) yield* guard
        // the golden is held while it is copied: gc never drops it from under the copy
        const cloned = fromSpare
          ? Either.right(undefined)
          : yield* busy(golden, adapter.clone(golden, slice)).pipe(Effect.either)
        if (cloned._tag === "Right") {
          yield* registry.touchSlice(made.rowId)
          if (slice.owner === owner) yield* replenish(service, adapter, made)
          return
        }
        let failed: string = `cloning ${golden.name} failed (${cloned.left.kind}: ${cloned.left.message})`
        // a golden dropped from its server behind berth's back is built again, as a first build does, and copied
        if (yield* goldenGone(adapter, golden)) {
          yield* event(
            world,
            service.name,
            "golden_gone",
            `golden ${golden.name} is gone from ${where(golden)}: it is marked not ready and built again`
          )
          yield* registry.markSliceProvisioning(made.rowId)
          const again = yield* Effect.either(ensureGolden(world, service, slice, urls, init, false, searchPath))
          if (again._tag === "Right") {
            yield* guard
            const rebuilt = again.right
            const copied = yield* busy(rebuilt.slice, adapter.clone(rebuilt.slice, slice)).pipe(Effect.either)
            if (copied._tag === "Right") {
              yield* registry.touchSlice(rebuilt.rowId)
              if (slice.owner === owner) yield* replenish(service, adapter, rebuilt)
              return
            }
            failed = `cloning ${rebuilt.slice.name} failed (${copied.left.kind}: ${copied.left.message})`
          } else failed = `building the golden again failed (${again.left.message})`
        }
        // correctness never depends on cloning: an empty slice plus migrate and seed gives the same world
        yield* event(world, service.name, "clone_fallback", `${failed}; running migrate and seed instead`)
        yield* guard
        yield* adapter.teardown(slice).pipe(Effect.mapError(failure))
        yield* adapter.provision(slice).pipe(Effect.mapError(failure))
      }
      yield* init(service, urls)
    })

  /** Which server a slice is on, as the cluster's record of slices that move with their worlds names it. */
  const sliceServer = (slice: Slice) => shortHash(serverOf(slice), 12)

  /** This machine was given up on the world meanwhile: it leaves the world's slices to the machine that runs it now. */
  const lost = (world: SliceWorld, service: string) => new WorldMovedAway({ world: world.name, slice: service })

  /** Fails unless this machine still holds the world: read right before a slice that moves with it is overwritten. */
  const stillHeld = (world: SliceWorld, service: string, shared: SharedSlices) =>
    Effect.flatMap(shared.holds, (held) => (held ? Effect.void : Effect.fail(lost(world, service))))

  /**
   * Provisions (or finds) every slice of the world and fills the new ones; returns each one's address. A slice
   * whose filling fails is dropped again, so the next `up` starts clean.
   */
  const provision = Effect.fn("Slices.provision")(function* (
    world: SliceWorld,
    services: ReadonlyArray<Model.SliceService>,
    env: (name: string) => string | undefined,
    init: SliceInit
  ) {
    const urls = new Map<string, string>()
    const pending: Array<{ service: Model.SliceService; adapter: Adapter; slice: Slice; rowId: number }> = []
    // a world that runs anywhere: its slices are the cluster's, and the cluster's record says which are made
    const shared = Option.getOrUndefined(yield* ledger.of(world.project, world.slug))
    const guard = (service: string) => (shared === undefined ? Effect.void : stillHeld(world, service, shared))
    const rowsBefore = yield* registry.slices(world.id)
    const before = new Map(rowsBefore.map((r) => [r.service, r]))
    // a slice whose service left berth.toml is not this world's any more: kept on its server (never dropped on a
    // config edit) and handed to gc, which drops it on its next sweep; the world's status no longer lists it
    const configured = new Set(services.map((s) => s.name))
    for (const row of rowsBefore) {
      if (configured.has(row.service)) continue
      yield* registry.detachSlice(row.id)
      yield* event(
        world,
        row.service,
        "slice_detached",
        `slice ${row.service} (${row.adapter} ${row.name}) is no longer in berth.toml: kept on its server; only an explicit \`berth gc\` drops it`
      )
    }
    // an adapter nothing serves (a mistyped name) fails the up before anything is recorded for any slice
    for (const service of services) yield* present(world, service, env("PATH"))
    for (const service of services) {
      const adapter = yield* implementation(service.adapter, env("PATH"))
      if (service.adminUrl !== undefined) {
        const missing = unresolvedIn(resolveTemplate(service.adminUrl, { services: new Map(), env }))
        if (missing.length > 0) {
          return yield* new UnsetVariable({ world: world.name, slice: service.name, variables: missing })
        }
      }
      const previous = before.get(service.name)
      const slice = yield* ownName(world, describe(world, service, env, shared), adapter, previous?.name)
      const failure = adapterFailure(world.name, service.name, service.adapter)
      // for a slice that moves with its world, the cluster's record decides (another machine may have made it)
      const claimed =
        shared === undefined ? undefined : yield* shared.claim(service.name, slice.name, sliceServer(slice))
      if (shared !== undefined && claimed === undefined) return yield* lost(world, service.name)
      const wasReady =
        claimed === undefined ? previous?.state === "ready" && previous.name === slice.name : claimed === "ready"
      // made under another server, which may be this one written another way: what is there is never replaced
      const moved = claimed === "moved"
      // a new slice with a golden is made by copying it: no empty slice first (the copy replaces what is there)
      const copyable =
        ((service.cloneFrom === "golden" && adapter.capabilities.clone) ||
          (service.cloneSource !== undefined && adapter.copyExisting !== undefined)) &&
        !wasReady &&
        !moved
      // held until the provision ends: a row left `provisioning` while another slice fills is not a crash's
      yield* hold(slice)
      const { row, fresh } = yield* Effect.gen(function* () {
        const row = yield* recordRow(slice, { worldId: world.id, goldenKey: null })
        yield* recordServer(slice)
        if (copyable) return { row, fresh: true }
        const created = yield* adapter.provision(slice).pipe(Effect.mapError(failure))
        if (created || wasReady) return { row, fresh: created }
        if (moved && shared !== undefined) {
          yield* event(
            world,
            service.name,
            "slice_kept",
            `slice ${service.name} (${slice.name}) was made on a server written otherwise in the cluster's record; the one found here is used as it is`
          )
          if (!(yield* shared.ready(service.name))) return yield* lost(world, service.name)
          return { row, fresh: false }
        }
        // a crash left it half-filled: drop what is there and start from empty
        yield* guard(service.name)
        yield* adapter.teardown(slice).pipe(Effect.mapError(failure))
        yield* adapter.provision(slice).pipe(Effect.mapError(failure))
        return { row, fresh: true }
      })
      // a slice made now by an executable: the world's history says which one, and which protocol berth spoke to it
      const served =
        (fresh || previous === undefined) && adapter.served !== undefined ? yield* adapter.served : undefined
      if (served !== undefined) {
        yield* event(
          world,
          service.name,
          "slice_adapter",
          served.protocol === "binky"
            ? `slice ${service.name} (${service.adapter}) is served by ${served.executable}, written for binky: berth speaks binky's protocol to it`
            : `slice ${service.name} (${service.adapter}) is served by ${served.executable}, in berth's adapter protocol 1`
        )
      }
      // a slice still to be copied may not have an address yet (a Redis DB is numbered when it is made)
      const url = copyable
        ? Option.getOrUndefined(yield* Effect.option(adapter.resolve(slice)))
        : yield* adapter.resolve(slice).pipe(Effect.mapError(failure))
      if (url !== undefined) {
        yield* registry.setSliceUrl(row.id, url)
        urls.set(service.name, url)
      }
      if (fresh) {
        yield* registry.markSliceProvisioning(row.id)
        pending.push({ service, adapter, slice, rowId: row.id })
      }
    }
    for (const p of pending) {
      yield* initialize(world, p.service, p.adapter, p.slice, urls, init, guard(p.service.name), env("PATH")).pipe(
        Effect.tapError(() =>
          Effect.zipRight(
            // a slice that moves with its world is dropped only while this machine still holds the world
            Effect.ignore(Effect.zipRight(guard(p.service.name), p.adapter.teardown(p.slice))),
            forgetDropped(p.slice, p.rowId)
          )
        )
      )
      // the address may have moved (a fallback re-provisioned it)
      const url = yield* p.adapter
        .resolve(p.slice)
        .pipe(Effect.mapError(adapterFailure(world.name, p.service.name, p.service.adapter)))
      yield* registry.setSliceUrl(p.rowId, url)
      urls.set(p.service.name, url)
      yield* registry.markSliceReady(p.rowId)
      if (shared !== undefined && !(yield* shared.ready(p.service.name))) return yield* lost(world, p.service.name)
    }
    return urls
  }, Effect.scoped)

  /** The addresses of slices already provisioned (for `env` of a world that is down). */
  const addresses = Effect.fn("Slices.addresses")(function* (worldId: number) {
    const out = new Map<string, string>()
    for (const row of yield* registry.slices(worldId)) if (row.url !== null) out.set(row.service, row.url)
    return out
  })

  /**
   * Drops every slice recorded for the world (idempotent); the registry row goes once the slice is gone. With
   * `keepOnFailure`, a slice that cannot be dropped now (its server is down) stays recorded for gc instead of
   * failing the caller.
   */
  const teardown = Effect.fn("Slices.teardown")(function* (
    world: Pick<SliceWorld, "id" | "name">,
    options: { readonly only?: ReadonlySet<string>; readonly keepOnFailure?: boolean } = {}
  ) {
    const left: Array<string> = []
    const rows = yield* registry.slices(world.id)
    const of =
      rows.length === 0 ? undefined : yield* registry.world(world.id).pipe(Effect.orElseSucceed(() => undefined))
    const shared = of === undefined ? undefined : Option.getOrUndefined(yield* ledger.of(of.projectName, of.slug))
    for (const row of rows) {
      if (options.only !== undefined && !options.only.has(row.service)) continue
      const slice =
        shared === undefined ? fromRow(row, world.name) : { ...fromRow(row, world.name), owner: shared.owner }
      if (shared !== undefined && !(yield* shared.mayDrop(row.service, slice.name, sliceServer(slice)))) {
        // the world runs on another machine now, on this very slice: only this machine's record of it goes
        yield* registry.forgetSlice(row.id)
        yield* Effect.logInfo(`world ${world.name}: slice ${row.service} is kept: another machine runs the world on it`)
        continue
      }
      // the world's own PATH, where its external adapter was found at its up
      const dropped = yield* implementation(row.adapter, of?.env?.PATH).pipe(
        Effect.flatMap((adapter) =>
          adapter.teardown(slice).pipe(Effect.mapError(adapterFailure(world.name, row.service, row.adapter)))
        ),
        Effect.as(true),
        // a client missing now (`DriverMissing`) keeps the slice, as a server that is down does
        Effect.catchAll((e) =>
          options.keepOnFailure === true ? Effect.as(Effect.logWarning(e.message), false) : Effect.fail(e)
        )
      )
      if (dropped) {
        yield* registry.forgetSlice(row.id)
        if (shared !== undefined) yield* shared.dropped(row.service)
      } else left.push(row.service)
    }
    return left
  })

  /** `berth up <to> --from <from>`: see `SlicesService.copyWorld`. */
  /** The ready slices of `from` with their adapters; fails, naming the first, when an adapter cannot clone. */
  const copyPlans = Effect.fn("Slices.copyPlans")(function* (
    from: Pick<SliceWorld, "id" | "name">,
    to: string,
    searchPath: string | undefined
  ) {
    const rows = (yield* registry.slices(from.id)).filter((r) => r.state === "ready")
    const plans: Array<{ readonly row: SliceRow; readonly adapter: Adapter }> = []
    for (const row of rows) {
      const adapter = yield* implementation(row.adapter, searchPath)
      const capabilities = isExternal(adapter) ? yield* adapter.askCapabilities : adapter.capabilities
      if (!capabilities.clone) {
        return yield* new SliceCopyUnsupported({ world: from.name, slice: row.service, adapter: row.adapter, to })
      }
      plans.push({ row, adapter })
    }
    return plans
  })

  const copyWorld = Effect.fn("Slices.copyWorld")(function* (
    from: SliceWorld,
    to: SliceWorld,
    searchPath: string | undefined
  ) {
    // every adapter must be able to copy before anything is made
    const plans = yield* copyPlans(from, to.name, searchPath)
    const made: Array<{ readonly adapter: Adapter; readonly slice: Slice; readonly rowId: number }> = []
    const copyOne = ({ adapter, row }: (typeof plans)[number]) =>
      Effect.gen(function* () {
        const failure = adapterFailure(to.name, row.service, row.adapter)
        const source = fromRow(row, from.name)
        const named: Slice = {
          ...source,
          world: to.name,
          name: sliceIdentifier([to.project, to.slug, row.service], NAME_LIMIT)
        }
        const target = yield* ownName(to, named, adapter)
        yield* busy(
          source,
          busy(
            target,
            Effect.gen(function* () {
              const recordedRow = yield* recordRow(target, { worldId: to.id, goldenKey: null })
              made.push({ adapter, slice: target, rowId: recordedRow.id })
              yield* recordServer(target)
              yield* adapter.clone(source, target).pipe(Effect.mapError(failure))
              const url = yield* adapter.resolve(target).pipe(Effect.mapError(failure))
              yield* registry.setSliceUrl(recordedRow.id, url)
              yield* registry.markSliceReady(recordedRow.id)
            })
          )
        )
        yield* event(
          to,
          row.service,
          "slice_copied",
          `slice ${row.service} (${target.name}) is a copy of world ${from.name}'s (${source.name}), data included`
        )
      })
    yield* Effect.forEach(plans, copyOne, { discard: true }).pipe(
      Effect.tapError(() =>
        Effect.forEach(
          made,
          (m) => Effect.ignore(Effect.zipRight(m.adapter.teardown(m.slice), forgetDropped(m.slice, m.rowId))),
          { discard: true }
        )
      )
    )
  })

  /** Rebuilds the golden of one slice service now, from the given world's worktree and environment. */
  const rebuildGolden = Effect.fn("Slices.rebuildGolden")(function* (
    world: SliceWorld,
    service: Model.SliceService,
    env: (name: string) => string | undefined,
    init: SliceInit
  ) {
    yield* present(world, service, env("PATH"))
    const urls = yield* addresses(world.id)
    // the golden the world's own slices copy: for a world that runs anywhere, the one named apart
    const shared = Option.getOrUndefined(yield* ledger.of(world.project, world.slug))
    const golden = yield* ensureGolden(
      world,
      service,
      describe(world, service, env, shared),
      urls,
      init,
      true,
      env("PATH")
    )
    return golden.slice.name
  })

  /** What a crash or a vanished world left behind: see `domain/gc.ts`. */
  const collect = Effect.fn("Slices.gc")(function* (
    dryRun: boolean,
    env: Readonly<Record<string, string>> = {},
    /** the daemon's own sweep: a slice whose service left berth.toml waits for the user's explicit `berth gc` */
    automatic = false,
    goldens = false
  ) {
    const rows = yield* registry.slices()
    const idleSince = yield* goldenIdleSince
    const worldEnvs = new Map((yield* registry.worlds()).map((w) => [w.id, w.env ?? {}]))
    const servers = new Map<string, Slice>()
    /**
     * A row recorded by an older berth may hold an unresolved `${env.…}` admin_url: it is resolved with its world's
     * environment, else the caller's; one that still cannot be resolved is skipped, never guessed.
     */
    const sliceOfRow = (row: SliceRow) => {
      const slice = fromRow(row, "(gc)")
      if (slice.adminUrl === undefined || !slice.adminUrl.includes("${")) return slice
      const own = row.worldId === null ? undefined : worldEnvs.get(row.worldId)
      const resolved = resolveTemplate(slice.adminUrl, {
        services: new Map(),
        env: (name) => own?.[name] ?? env[name]
      })
      return { ...slice, adminUrl: resolved.value }
    }
    for (const row of rows) servers.set(serverOf(sliceOfRow(row)), sliceOfRow(row))
    /** the keys under which each server is recorded apart from its rows */
    const records = new Map<string, Array<string>>()
    for (const s of yield* registry.sliceServers()) {
      const scope: Slice = {
        adapter: s.adapter,
        project: "(gc)",
        world: "(gc)",
        service: "(gc)",
        name: "(gc)",
        owner,
        storage: s.storage,
        adminUrl: s.adminUrl ?? undefined,
        options: s.options
      }
      records.set(serverOf(scope), [...(records.get(serverOf(scope)) ?? []), s.key])
      if (!servers.has(serverOf(scope))) servers.set(serverOf(scope), scope)
    }
    const listings: Array<{ server: string; names: ReadonlyArray<string> }> = []
    const unreachable: Array<GcReport["unreachable"][number] & { readonly server: string }> = []
    /** servers whose adapter nothing serves now (a mistyped name): what is missing */
    const unknown = new Map<string, string>()
    for (const [server, scope] of servers) {
      const adapter = yield* implementation(scope.adapter, env.PATH).pipe(Effect.option)
      if (adapter._tag === "None") continue
      const missing =
        adapter.value.present === undefined ? undefined : yield* Effect.flip(adapter.value.present).pipe(Effect.option)
      if (missing?._tag === "Some") {
        unknown.set(server, missing.value.message)
        unreachable.push({ server, adapter: scope.adapter, where: where(scope), error: missing.value.message })
        continue
      }
      if (scope.adminUrl?.includes("${")) {
        const missing = unresolvedIn(resolveTemplate(scope.adminUrl, { services: new Map(), env: () => undefined }))
        unreachable.push({
          server,
          adapter: scope.adapter,
          where: scope.adminUrl,
          error: `${missing.join(", ")} not set: export it and run \`berth gc\` again`
        })
        continue
      }
      const listed = yield* adapter.value.list(scope).pipe(Effect.either)
      if (listed._tag === "Left") {
        unreachable.push({ server, adapter: scope.adapter, where: where(scope), error: listed.left.message })
        continue
      }
      // golden names are this installation's too; only names the registry does not know are candidates
      listings.push({ server, names: listed.right })
    }
    const down = new Set(unreachable.map((u) => u.where))
    const gcRow = (row: SliceRow): GcRow => ({
      id: row.id,
      worldId: row.worldId,
      project: row.project,
      service: row.service,
      name: row.name,
      server: serverOf(sliceOfRow(row)),
      golden: row.role === "golden",
      spare: row.role === "spare",
      detached: row.role === "detached",
      key: row.goldenKey,
      state: row.state,
      usedAt: row.usedAt
    })
    const now = Date.now()
    const graceMs = parseGrace(yield* readText("BERTH_GOLDEN_GRACE")) ?? GOLDEN_GRACE_MS
    const draw = (rows: ReadonlyArray<SliceRow>, worlds: ReadonlyArray<WorldRow>) =>
      gcPlan({
        idle: {
          projectsWithWorlds: new Set(worlds.map((w) => w.projectName)),
          idleSince,
          now,
          graceMs,
          force: goldens
        },
        rows: rows.map(gcRow),
        listings,
        inFlight: new Set(inFlight.keys()),
        // the names of every existing world's slices begin so: such a name is never taken for an orphan
        livePrefixes: worlds.map((w) => `${sliceIdentifier([w.projectName, w.slug], NAME_LIMIT)}_`)
      })
    const worldsNow = yield* registry.worlds()
    const plan = draw(rows, worldsNow)
    // the grace of a project's goldens counts from the first sweep that finds it without a world
    if (!dryRun) yield* markIdle(rows, worldsNow, idleSince, now)
    /**
     * The plan was drawn from rows read before the servers were asked: a provision may have ended (or begun) since.
     * With the slice claimed, nothing can start making it, so a plan drawn again from the registry as it is now says
     * whether the drop is still due.
     */
    const stillDue = (action: GcAction) =>
      Effect.map(Effect.zip(registry.slices(), registry.worlds()), ([rows, worlds]) =>
        draw(rows, worlds).some(
          (a) => a.server === action.server && a.name === action.name && a.reason === action.reason
        )
      )
    const entries: Array<GcEntry> = []
    for (const action of plan) {
      if (automatic && action.reason === "no longer in berth.toml") continue
      const scope = servers.get(action.server)
      if (scope === undefined || down.has(where(scope))) continue
      const slice: Slice = { ...scope, name: action.name }
      const base = { reason: action.reason, adapter: scope.adapter, where: where(scope), name: action.name }
      if (dryRun) {
        entries.push({ ...base, outcome: "would drop", error: undefined })
        continue
      }
      const found = yield* Effect.either(implementation(scope.adapter, env.PATH))
      if (found._tag === "Left") {
        entries.push({ ...base, outcome: "failed", error: found.left.message })
        continue
      }
      const adapter = found.right
      const claimed = yield* claimForDrop(slice)
      // made busy since the plan was drawn: a world is provisioning it now
      if (claimed === undefined) continue
      const result = yield* Effect.gen(function* () {
        if (!(yield* stillDue(action))) return undefined
        const dropped = yield* Effect.either(adapter.teardown(slice))
        if (dropped._tag === "Right" && action.rowId !== undefined) yield* registry.forgetSlice(action.rowId)
        return dropped
      }).pipe(Effect.ensuring(Effect.sync(() => dropping.delete(claimed))))
      if (result === undefined) continue
      if (result._tag === "Left") {
        entries.push({ ...base, outcome: "failed", error: result.left.message })
        continue
      }
      entries.push({ ...base, outcome: "dropped", error: undefined })
    }
    entries.push(...(yield* dropOrphans(servers, down, dryRun, env.PATH)))
    const forgotten = yield* forgetUnknown(rows.map(gcRow), unknown, records, servers, dryRun)
    const gone = new Set(forgotten.flatMap((f) => (f.name === undefined ? [f.server] : [])))
    return {
      entries,
      unreachable: unreachable.filter((u) => !gone.has(u.server)).map(({ server: _, ...u }) => u),
      forgotten: forgotten.map(({ server: _, ...f }) => f)
    } satisfies GcReport
  })

  /**
   * One gc at a time: the daemon's sweep and a user's `berth gc` read the same servers, and one that began while the
   * other was dropping a slice would pass it by (claimed) and answer while it still exists.
   */
  const gc: SlicesService["gc"] = (...args) => gcLock.withPermits(1)(collect(...args))

  /** when gc first found each project with goldens but no world (a setting, so a daemon's restart keeps it) */
  const goldenIdleSince = Effect.map(registry.getSetting(GOLDEN_IDLE), (value) => {
    const out = new Map<string, number>()
    if (typeof value === "object" && value !== null) {
      for (const [project, at] of Object.entries(value)) if (typeof at === "number") out.set(project, at)
    }
    return out
  })

  /** Records projects found without a world now, and forgets those with a world again (or no golden left). */
  const markIdle = (
    rows: ReadonlyArray<SliceRow>,
    worlds: ReadonlyArray<WorldRow>,
    before: ReadonlyMap<string, number>,
    now: number
  ) =>
    Effect.gen(function* () {
      const withWorlds = new Set(worlds.map((w) => w.projectName))
      const next: Record<string, number> = {}
      for (const row of rows) {
        if ((row.role !== "golden" && row.role !== "spare") || withWorlds.has(row.project)) continue
        next[row.project] = before.get(row.project) ?? now
      }
      const same =
        Object.keys(next).length === before.size && Object.entries(next).every(([p, at]) => before.get(p) === at)
      if (!same) yield* registry.setSetting(GOLDEN_IDLE, next)
    })

  /**
   * Forgets what an adapter nothing serves left in the registry (`forgetPlan`): nothing of it can be asked or
   * dropped, so without this every gc would say it skipped that server, and nothing would ever clear it.
   */
  const forgetUnknown = (
    rows: ReadonlyArray<GcRow>,
    unknown: ReadonlyMap<string, string>,
    records: ReadonlyMap<string, ReadonlyArray<string>>,
    servers: ReadonlyMap<string, Slice>,
    dryRun: boolean
  ) =>
    Effect.gen(function* () {
      const out: Array<GcForgotten & { readonly server: string }> = []
      if (unknown.size === 0) return out
      const plan = forgetPlan({ rows, unknown: new Set(unknown.keys()), servers: [...records.keys()] })
      const outcome = dryRun ? "would forget" : "forgotten"
      for (const row of plan.rows) {
        const scope = servers.get(row.server)
        if (scope === undefined || inFlight.has(gcInFlightKey(row.server, row.name))) continue
        if (!dryRun) yield* registry.forgetSlice(row.id)
        const reason = `its world is gone and it was never made, and ${unknown.get(row.server)}`
        out.push({ server: row.server, adapter: scope.adapter, where: where(scope), name: row.name, outcome, reason })
      }
      for (const server of plan.servers) {
        const scope = servers.get(server)
        if (scope === undefined) continue
        if (!dryRun) {
          for (const key of records.get(server) ?? []) yield* registry.forgetSliceServer(key)
          recorded.delete(sliceServer(scope))
        }
        const reason = `no world uses it, and ${unknown.get(server)}`
        out.push({ server, adapter: scope.adapter, where: where(scope), name: undefined, outcome, reason })
      }
      return out
    })

  /**
   * The cluster's orphans (`SliceOrphans`) on the servers this machine knows, dropped: slices that worlds which ran
   * anywhere left behind when they were removed while their machine was away. One whose name a world has claimed
   * since is that world's: only its record goes.
   */
  const dropOrphans = (
    servers: ReadonlyMap<string, Slice>,
    down: ReadonlySet<string>,
    dryRun: boolean,
    searchPath: string | undefined
  ) =>
    Effect.gen(function* () {
      const entries: Array<GcEntry> = []
      const orphans = Option.getOrUndefined(yield* ledger.orphans)
      if (orphans === undefined) return entries
      const recorded = yield* orphans.list.pipe(Effect.orElseSucceed(() => []))
      if (recorded.length === 0) return entries
      const byServer = new Map([...servers.values()].map((scope) => [sliceServer(scope), scope]))
      for (const orphan of recorded) {
        if (orphan.claimed) {
          if (!dryRun) yield* Effect.ignore(orphans.cleared(orphan.name, orphan.server))
          continue
        }
        const scope = byServer.get(orphan.server)
        if (scope === undefined || down.has(where(scope))) continue
        const slice: Slice = { ...scope, name: orphan.name, owner: orphans.owner }
        const reason = "left by a removed world"
        const base = { reason, adapter: scope.adapter, where: where(scope), name: orphan.name } as const
        if (dryRun) {
          entries.push({ ...base, outcome: "would drop", error: undefined })
          continue
        }
        const claimed = yield* claimForDrop(slice)
        if (claimed === undefined) continue
        const result = yield* Effect.gen(function* () {
          // read again right before the drop: a world may have claimed the name meanwhile (one that claims it in the
          // instant between loses only the empty slice it just made: its fill fails, and its next up makes it again)
          const now = (yield* orphans.list).find((o) => o.name === orphan.name && o.server === orphan.server)
          if (now === undefined || now.claimed) return undefined
          const adapter = yield* implementation(scope.adapter, searchPath)
          const dropped = yield* Effect.either(adapter.teardown(slice))
          if (dropped._tag === "Right") yield* orphans.cleared(orphan.name, orphan.server)
          return dropped
        }).pipe(
          Effect.catchAll(() => Effect.succeed(undefined)),
          Effect.ensuring(Effect.sync(() => dropping.delete(claimed)))
        )
        if (result === undefined) continue
        entries.push(
          result._tag === "Left"
            ? { ...base, outcome: "failed", error: result.left.message }
            : { ...base, outcome: "dropped", error: undefined }
        )
      }
      return entries
    })

  const canCopy = (from: Pick<SliceWorld, "id" | "name">, to: string, searchPath: string | undefined) =>
    Effect.asVoid(copyPlans(from, to, searchPath))

  return { owner, provision, addresses, teardown, canCopy, copyWorld, rebuildGolden, gc } satisfies SlicesService
})

export const SlicesLive: Layer.Layer<Slices, never, Home | Registry | SliceLedger> = Layer.scoped(Slices, make)
