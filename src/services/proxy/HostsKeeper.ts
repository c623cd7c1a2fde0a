/**
 * The hosts file kept in step by the daemon, when a user asks for it (`berth hosts sync --daemon`): after every change
 * of the route table, berth's block in the file lists every routed name on loopback, so programs that cannot resolve
 * `*.localhost` themselves reach every world without a `berth hosts sync` run by hand. The file to keep is a setting
 * (it survives restarts); a write that fails is logged once per distinct reason and told by `berth config`, and the
 * block is written again at the next change.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import { InvalidRequest } from "../../domain/errors.js"
import { hostsIn, withHosts, withoutHosts } from "../../domain/hosts.js"
import { Registry } from "../Registry.js"
import { Router } from "./Router.js"

export const HOSTS_SETTING = "hosts.file"

/** Rewrites the file's block with `names` (the text without it when `names` is undefined), only when it changes. */
const rewrite = (file: string, names: ReadonlyArray<string> | undefined): string | undefined => {
  try {
    const before = existsSync(file) ? readFileSync(file, "utf8") : ""
    const after = names === undefined ? withoutHosts(before) : withHosts(before, names)
    // writeFileSync keeps the file's inode, owner and mode: the system's hosts file stays what it was but for the block
    if (after !== before) writeFileSync(file, after)
    return undefined
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    return code === "EACCES" || code === "EPERM"
      ? `the daemon may not write ${file}`
      : `cannot write ${file}: ${e instanceof Error ? e.message : String(e)}`
  }
}

export class HostsKeeper extends Effect.Service<HostsKeeper>()("berth/HostsKeeper", {
  scoped: Effect.gen(function* () {
    const registry = yield* Registry
    const router = yield* Router
    const stored = yield* registry.getSetting(HOSTS_SETTING)
    let file = typeof stored === "string" ? stored : undefined
    let failure: string | undefined

    const write = (names: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        if (file === undefined) return
        const error = rewrite(file, names)
        if (error !== undefined && error !== failure) yield* Effect.logWarning(`hosts: ${error}`)
        failure = error
      })

    yield* router.hostNames.changes.pipe(Stream.runForEach(write), Effect.forkScoped)

    /**
     * Keeps `path` from now on (written at once: a file the daemon may not write is refused, and nothing is kept), or
     * with undefined, stops keeping it and takes the block out.
     */
    const keep = Effect.fn("HostsKeeper.keep")(function* (path: string | undefined) {
      if (path === undefined) {
        const was = file
        file = undefined
        failure = undefined
        yield* registry.setSetting(HOSTS_SETTING, null)
        const error = was === undefined ? undefined : rewrite(was, undefined)
        if (error !== undefined) return yield* new InvalidRequest({ reason: error })
        return { file: null, names: [] as ReadonlyArray<string> }
      }
      const names = yield* SubscriptionRef.get(router.hostNames)
      const error = rewrite(path, names)
      if (error !== undefined) {
        return yield* new InvalidRequest({
          reason: `${error}\n  hint: give the daemon's user write access to ${path}, or run \`berth hosts sync --watch\` as root in a terminal of its own`
        })
      }
      file = path
      failure = undefined
      yield* registry.setSetting(HOSTS_SETTING, path)
      return { file: path as string | null, names: hostsIn(readFileSync(path, "utf8")) }
    })

    return {
      keep,
      /** the file kept (undefined: none) and why the last write failed, if it did */
      status: Effect.sync(() => ({ file, failure }))
    } as const
  }),
  dependencies: []
}) {}
