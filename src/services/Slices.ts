/**
 * A world's slices: provisioned before any of its processes starts (and reused on every later `up`), their addresses
 * handed to tokens and `berth env`, torn down on `remove`. Ownership is recorded in the registry first, so a slice
 * half-made by a crash is still known and can be dropped. The adapters themselves live in `adapters/`.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import * as Effect from "effect/Effect"
import { type Adapter, implementations, type Slice } from "../../adapters/index.js"
import { builtinAdapters } from "../domain/adapters.js"
import type * as Model from "../domain/config/model.js"
import { InvalidRequest } from "../domain/errors.js"
import { sliceIdentifier } from "../domain/names.js"
import { resolveTemplate } from "../domain/tokens.js"
import { Home } from "./Home.js"
import { Registry } from "./Registry.js"

/** Identifiers stay within the shortest common limit (PostgreSQL's 63). */
const NAME_LIMIT = 63

export interface SliceWorld {
  readonly id: number
  readonly project: string
  readonly name: string
  readonly slug: string
}

export class Slices extends Effect.Service<Slices>()("berth/Slices", {
  effect: Effect.gen(function* () {
    const home = yield* Home
    const registry = yield* Registry

    const implementation = (adapter: string): Effect.Effect<Adapter, InvalidRequest> => {
      const family = builtinAdapters.get(adapter)?.family
      const found = family === undefined ? undefined : implementations.get(family)
      return found === undefined
        ? Effect.fail(
            new InvalidRequest({
              reason: `adapter "${adapter}" is not available in this berth yet (built in today: ${[...implementations.keys()].join(", ")})`
            })
          )
        : Effect.succeed(found)
    }

    const describe = (
      world: SliceWorld,
      service: Model.SliceService,
      env: (name: string) => string | undefined
    ): Slice => {
      const storage = join(home.root, "slices", world.project)
      mkdirSync(storage, { recursive: true, mode: 0o700 })
      return {
        adapter: service.adapter,
        project: world.project,
        world: world.name,
        service: service.name,
        name: sliceIdentifier([world.project, world.slug, service.name], NAME_LIMIT),
        storage,
        adminUrl:
          service.adminUrl === undefined
            ? undefined
            : resolveTemplate(service.adminUrl, { services: new Map(), env }).value,
        options: service.options
      }
    }

    /** Provisions (or finds) every slice of the world; returns each one's address and whether it is new. */
    const provision = Effect.fn("Slices.provision")(function* (
      world: SliceWorld,
      services: ReadonlyArray<Model.SliceService>,
      env: (name: string) => string | undefined
    ) {
      const out = new Map<string, { readonly url: string; readonly created: boolean }>()
      for (const service of services) {
        const adapter = yield* implementation(service.adapter)
        const slice = describe(world, service, env)
        // recorded before it exists: a crash mid-provision leaves a row that teardown (or gc) can act on
        const row = {
          worldId: world.id,
          service: service.name,
          adapter: service.adapter,
          name: slice.name,
          adminUrl: slice.adminUrl ?? null
        }
        yield* registry.recordSlice({ ...row, url: null })
        const created = yield* adapter
          .provision(slice)
          .pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
        const url = yield* adapter
          .resolve(slice)
          .pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
        yield* registry.recordSlice({ ...row, url })
        out.set(service.name, { url, created })
      }
      return out
    })

    /** The addresses of slices already provisioned (for `env` of a world that is down). */
    const addresses = Effect.fn("Slices.addresses")(function* (worldId: number) {
      const out = new Map<string, string>()
      for (const row of yield* registry.slices(worldId)) if (row.url !== null) out.set(row.service, row.url)
      return out
    })

    /** Drops every slice recorded for the world (idempotent); the registry row goes once the slice is gone. */
    const teardown = Effect.fn("Slices.teardown")(function* (
      world: SliceWorld,
      services: ReadonlyArray<Model.SliceService>,
      env: (name: string) => string | undefined,
      only?: ReadonlySet<string>
    ) {
      const byName = new Map(services.map((s) => [s.name, s]))
      for (const row of yield* registry.slices(world.id)) {
        if (only !== undefined && !only.has(row.service)) continue
        const adapter = yield* implementation(row.adapter)
        const service = byName.get(row.service)
        // the server recorded at provision time wins: the config or the environment may have changed since
        const described = service === undefined ? undefined : describe(world, service, env)
        const slice: Slice = {
          adapter: row.adapter,
          project: world.project,
          world: world.name,
          service: row.service,
          name: row.name,
          storage: join(home.root, "slices", world.project),
          adminUrl: row.adminUrl ?? described?.adminUrl,
          options: described?.options ?? {}
        }
        yield* adapter.teardown(slice).pipe(Effect.mapError((e) => new InvalidRequest({ reason: e.message })))
        yield* registry.forgetSlice(world.id, row.service)
      }
    })

    return { provision, addresses, teardown } as const
  })
}) {}
