/**
 * What a user asks of a world that runs anywhere, from whichever machine they ask on: `up --anywhere` (the branch
 * must be on `origin`, which the machine that runs it clones), `down`, `remove` or `up` again. Each is written to the
 * shared table first, then the world's entity on its owner (the placer's choice when nobody holds it) makes it so.
 * And the daemon's last act as a member: its worlds that run anywhere stop here when it stops (`drain`).
 */
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import type { WorldsService } from "../actors/Worlds.js"
import type { EnsureFailure } from "../daemon/api.js"
import { type AnywhereDesired, anywhereEntityId, ownedPlacements, type Room } from "../domain/cluster.js"
import {
  ClusterRefused,
  ClusterUnavailable,
  InternalError,
  InvalidRequest,
  InvalidWorldName,
  NoMachineAvailable,
  NotARepository,
  NotOnOrigin,
  WorldKeptHere
} from "../domain/errors.js"
import { slugify } from "../domain/names.js"
import type { GitService } from "../services/Git.js"
import { Anywhere, settle } from "./anywhere.js"
import { isTransportError } from "./remote.js"
import type { AnywhereRow, Machine, Store } from "./store.js"
import { anywhereNamed, type ClusterState, placeholder, updateView, withAnywhereRow } from "./view.js"

/** What a user asks of a world that runs anywhere, from the machine it was asked on. */
export interface UpAnywhereRequest {
  readonly cwd: string
  readonly world: string | undefined
  readonly selection: AnywhereRow["selection"]
  readonly env: Readonly<Record<string, string>>
  readonly wait: boolean
}

/** What the machine that runs a world anywhere can answer when asked to make it as wanted (`Ensure`). */
export type EnsureError = typeof EnsureFailure.Type

export interface AnywhereRequestsOptions {
  readonly state: ClusterState
  readonly worlds: WorldsService
  readonly git: GitService
  /** this machine's room, said to the cluster at once when the daemon stops */
  readonly room: Effect.Effect<Room>
  /** where a start asked not to wait goes on */
  readonly daemonScope: Scope.Scope
}

/** What a world that runs anywhere is told on a machine in no cluster. */
export const notInACluster = new ClusterRefused({
  reason: "a world runs anywhere only in a cluster, and this machine is not in one",
  hint: "`berth cluster join <postgres url>` makes it a member (`berth cluster init` makes the cluster)"
})

/**
 * Settles a world's row now, as the placer would (placed on the machine with the most room if no live machine holds
 * it), and answers what its owner's entity answered (`ask`): the world as it runs there, or null. A few times: the
 * placer may give the world a machine between this read and this placement, and a world that waits in one machine's
 * line moves to another with room (the answer there is the one wanted). `NoMachineAvailable` when none took it.
 */
export const settleNow = <A, E, R>(
  store: Pick<Store, "anywhere" | "machines" | "forget" | "reassign" | "note">,
  row: AnywhereRow,
  ask: (row: AnywhereRow, owner: Machine) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function* () {
    const internal = (e: { readonly message: string }) => new InternalError({ reason: e.message })
    for (let attempt = 0; attempt < 4; attempt++) {
      const rows = yield* store.anywhere().pipe(Effect.mapError(internal))
      const current = rows.find((r) => r.project === row.project && r.slug === row.slug)
      if (current === undefined) return null
      const machines = yield* store.machines.pipe(Effect.mapError(internal))
      let askedOwner: string | undefined
      const answer = yield* settle(
        store,
        machines,
        current,
        (r, owner) => {
          askedOwner = owner.name
          return ask(r, owner)
        },
        ownedPlacements(rows)
      ).pipe(
        Effect.mapError((e) => (e instanceof SqlError ? internal(e) : e)),
        Effect.either
      )
      if (answer._tag === "Right" && answer.right !== undefined) return answer.right
      if (answer._tag === "Left") {
        const [now] = yield* store.anywhere(row).pipe(Effect.mapError(internal))
        const moved = now !== undefined && now.desired === "up" && now.owner !== askedOwner
        if (!moved) return yield* Effect.fail(answer.left)
        continue
      }
      if (current.desired !== "up") return null
    }
    const [now] = yield* store.anywhere(row).pipe(Effect.mapError(internal))
    return yield* new NoMachineAvailable({ world: row.name, reason: now?.reason ?? null })
  })

export const makeAnywhereRequests = (options: AnywhereRequestsOptions) => {
  const { state, worlds, git } = options

  /** The session's store and sharding, or why a world cannot run anywhere now. */
  const connectedNow = Effect.gen(function* () {
    const connected = yield* Ref.get(state.connected)
    if (connected !== undefined) return connected
    const view = yield* state.view.get
    if (view.state === "solo" || view.url === undefined) return yield* notInACluster
    return yield* new ClusterUnavailable({
      url: view.url,
      reason: `this machine is not connected to its cluster now${view.error === undefined ? "" : ` (${view.error})`}; berth keeps trying (\`berth cluster status\` shows the connection)`
    })
  })

  /** The world's row settled now (`settleNow`), its owner's entity asked over the session's sharding. */
  const ensure = (row: AnywhereRow, asked: boolean) =>
    Effect.gen(function* () {
      const { sharding, store } = yield* connectedNow
      const client = yield* Anywhere.client.pipe(Effect.provide(sharding))
      const ask = (r: AnywhereRow, owner: Machine) =>
        client(anywhereEntityId(owner.slot, r.project, r.slug))
          .Ensure({ asked })
          .pipe(
            Effect.catchIf(isTransportError, (e) =>
              Effect.fail(new InternalError({ reason: `the cluster did not take the request: ${e._tag}` }))
            )
          )
      return yield* settleNow(store, row, ask)
    })

  /** `berth up --anywhere <branch>`: the world wanted up in the shared table; its entity, wherever it lives, starts it. */
  const upAnywhere = (request: UpAnywhereRequest) =>
    Effect.gen(function* () {
      const { store } = yield* connectedNow
      const gitFailed = (e: { readonly message: string }) => new InternalError({ reason: e.message })
      const repo = yield* git.repo(request.cwd).pipe(
        Effect.catchTags({
          GitFailed: (e) => Effect.fail(gitFailed(e)),
          // the error of the daemon's API, not git's own
          NotARepository: () => Effect.fail(new NotARepository({ path: request.cwd }))
        })
      )
      const branch = request.world ?? repo.branch
      if (branch === undefined) {
        return yield* new InvalidRequest({
          reason: "berth up --anywhere needs a branch: name it, or run it in a worktree that has one checked out"
        })
      }
      yield* git
        .validateBranch(branch)
        .pipe(Effect.mapError((e) => new InvalidWorldName({ name: e.name, reason: e.reason })))
      const info = yield* worlds.projectInfo(request.cwd)
      const slug = slugify(branch)
      const local = yield* worlds.status(request.cwd)
      const already = anywhereNamed(yield* state.view.get, [info.label], branch) !== undefined
      if (!already && local.worlds.some((w) => w.name === branch || w.slug === slug)) {
        return yield* new WorldKeptHere({ world: branch })
      }
      const remote = yield* git.remoteUrl(repo.mainRoot, "origin").pipe(Effect.mapError(gitFailed))
      if (remote === undefined) return yield* new NotOnOrigin({ path: repo.mainRoot, branch, remote: null })
      if (!(yield* git.remoteHasBranch(remote, branch).pipe(Effect.mapError(gitFailed)))) {
        return yield* new NotOnOrigin({ path: repo.mainRoot, branch, remote })
      }
      const row: AnywhereRow = {
        project: info.label,
        slug,
        name: branch,
        branch,
        remote,
        selection: request.selection,
        env: request.env,
        desired: "up",
        generation: 0,
        owner: null,
        reason: null
      }
      yield* store.want({ ...row, desired: "up" }).pipe(Effect.mapError(gitFailed))
      yield* updateView(state, (v) => withAnywhereRow(v, row))
      if (!request.wait) {
        yield* ensure(row, true).pipe(Effect.ignore, Effect.forkIn(options.daemonScope))
        return placeholder(row, "starting", "a machine of the cluster is starting it")
      }
      const answer = yield* ensure(row, true)
      return answer ?? placeholder(row, "stopped", "it was taken down meanwhile")
    })

  /** `down` or `remove` (or `up` again) of a world that runs anywhere: the shared table first, then its entity. */
  const setAnywhere = (row: AnywhereRow, desired: AnywhereDesired) =>
    Effect.gen(function* () {
      const { store } = yield* connectedNow
      yield* store
        .setDesired(row.project, row.slug, desired)
        .pipe(Effect.mapError((e) => new InternalError({ reason: e.message })))
      yield* updateView(state, (v) => withAnywhereRow(v, { ...row, desired }))
      const answer = yield* ensure({ ...row, desired }, true)
      if (desired === "up") return answer ?? placeholder({ ...row, desired }, "starting", null)
      return placeholder({ ...row, desired }, desired === "removed" ? "removed" : "stopped", null)
    })

  /**
   * Before the daemon lets go of its processes (it stops, or a new build replaces it): the worlds that run anywhere
   * stop here, since another machine starts them as soon as this one's shards are free, and nothing more starts here.
   */
  const drain = Effect.gen(function* () {
    yield* Ref.set(state.draining, true)
    const connected = yield* Ref.get(state.connected)
    if (connected === undefined) return
    const { machine, store } = connected
    // said at once, so that the placer gives this machine nothing more while it stops
    yield* options.room.pipe(
      Effect.flatMap((r) => store.setRoom(machine, r)),
      Effect.ignore
    )
    yield* Effect.forEach(
      (yield* state.view.get).anywhere,
      (row) =>
        Effect.gen(function* () {
          const ref = yield* worlds.refOf(row.project, row.slug)
          if (ref === undefined) return
          yield* worlds.down(ref, false)
          yield* store.letGo(
            row.project,
            row.slug,
            machine,
            row.desired === "up" ? `${machine}'s daemon stopped` : undefined
          )
        }).pipe(Effect.ignore),
      { concurrency: "unbounded", discard: true }
    )
  })

  return { upAnywhere, setAnywhere, drain }
}
