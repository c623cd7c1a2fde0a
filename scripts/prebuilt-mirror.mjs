// The SQLite binding's prebuilt binary served from loopback, as better-sqlite3's install script downloads it from
// GitHub on a machine that reaches it: the same file name and layout, packed from the binding `npm ci` left in this
// checkout's node_modules (same version, same Node). A machine that cannot reach GitHub otherwise compiles SQLite,
// minutes on a small one; with the mirror, an install runs every script a user's does and only the download is local.
// Used by bench/install.mjs and test/e2e/install.test.ts.
import { execFileSync } from "node:child_process"
import { createReadStream, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The environment variable that points better-sqlite3's install script (prebuild-install) at another host */
export const bindingHostVariable = "npm_config_better_sqlite3_binary_host"

/**
 * Starts the mirror. `host(name)` is an address under a path of its own, so that an install given it is not served
 * from prebuild-install's cache of an earlier one (the cache is keyed by the address); `asked(name)` counts the
 * downloads made under it.
 */
export const startPrebuiltMirror = async (repo) => {
  const bindingDir = join(repo, "node_modules", "better-sqlite3")
  const binding = JSON.parse(readFileSync(join(bindingDir, "package.json"), "utf8"))
  // prebuild-install's name: {name}-v{version}-{runtime}-v{abi}-{platform}{libc}-{arch}.tar.gz (glibc: no libc part)
  const file = `${binding.name}-v${binding.version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`
  const dir = mkdtempSync(join(tmpdir(), "berth-prebuilt-"))
  execFileSync("tar", ["czf", join(dir, file), "-C", bindingDir, "build/Release/better_sqlite3.node"])
  const requests = []
  const server = createServer((request, response) => {
    const url = request.url ?? ""
    requests.push(url)
    if (!url.endsWith(`/v${binding.version}/${file}`)) return void response.writeHead(404).end()
    response.writeHead(200, { "content-type": "application/octet-stream" })
    createReadStream(join(dir, file)).pipe(response)
  })
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address()
  return {
    host: (name) => `http://127.0.0.1:${port}/${encodeURIComponent(name)}`,
    asked: (name) => requests.filter((url) => url.startsWith(`/${encodeURIComponent(name)}/`)).length,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve(undefined))
        server.closeAllConnections()
        rmSync(dir, { recursive: true, force: true })
      })
  }
}
