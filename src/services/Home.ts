/**
 * BERTH_HOME: where one daemon keeps its socket, state, logs and keys. Default `~/.berth`. Everything in it is
 * owner-only (folders 0700, files 0600) whatever the umask: it holds logs that may carry a service's secrets, the
 * state database with the slices' admin URLs, and the CA key.
 */
import { chmodSync, closeSync, fchmodSync, fstatSync, mkdirSync, openSync, statSync } from "node:fs"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type HomePaths, homePaths, resolveHome } from "./homePaths.js"

export { type HomePaths, homePaths, resolveHome }

/** the folders berth makes in BERTH_HOME besides `logs`: slice storage, the CA, the `*.localhost` resolver hook */
const otherFolders = ["slices", "ca", "node"]
/** berth's CA: the key, and the certificate (public, but nobody else needs to read it) */
const caFiles = ["ca.key", "ca.crt"]

/** `chmod` to `mode` when `path` exists and is looser: a file or folder left by an older berth, or a crash. */
const tighten = (path: string, mode: number) => {
  try {
    if ((statSync(path).mode & 0o777) !== mode) chmodSync(path, mode)
  } catch {
    // not there: whoever makes it makes it owner-only
  }
}

/**
 * The state database is made here, empty and 0600, before SQLite opens it: SQLite gives the `-wal` and `-shm` files
 * it creates the database file's mode, and those hold what the database does. (An empty file is an empty database.)
 */
const ensureDatabase = (file: string) => {
  const fd = openSync(file, "a", 0o600)
  try {
    if ((fstatSync(fd).mode & 0o777) !== 0o600) fchmodSync(fd, 0o600)
  } finally {
    closeSync(fd)
  }
  for (const companion of ["-wal", "-shm", "-journal"]) tighten(`${file}${companion}`, 0o600)
}

export class Home extends Context.Tag("berth/Home")<Home, HomePaths>() {
  /** Creates the folders owner-only (and tightens them, and the state files, if they already existed looser). */
  static readonly layerAt = (root: string) =>
    Layer.effect(
      Home,
      Effect.sync(() => {
        const paths = homePaths(root)
        for (const dir of [paths.root, paths.logs]) {
          mkdirSync(dir, { recursive: true, mode: 0o700 })
          chmodSync(dir, 0o700)
        }
        for (const dir of otherFolders) tighten(`${paths.root}/${dir}`, 0o700)
        for (const file of [
          paths.daemonLog,
          paths.pidFile,
          paths.socket,
          ...caFiles.map((f) => `${paths.root}/ca/${f}`)
        ]) {
          tighten(file, 0o600)
        }
        ensureDatabase(paths.database)
        return paths
      })
    )

  static readonly layer = Layer.suspend(() => Home.layerAt(resolveHome()))
}
