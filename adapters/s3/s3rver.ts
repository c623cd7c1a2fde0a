/**
 * A throwaway S3 server for tests: s3rver in a child process on a free loopback port, its data in a temporary folder.
 * A child process, not in-process, for two reasons: s3rver's continuation tokens use DES, which Node 20's OpenSSL 3
 * only has with `--openssl-legacy-provider` (without it every truncated listing is a 500), and killing it is the
 * honest way to take a server away mid-verb.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** s3rver's built-in account */
export const S3RVER_KEY = "S3RVER"

export interface S3rverHandle {
  /** `http://S3RVER:S3RVER@127.0.0.1:<port>`, the service's `admin_url` */
  readonly adminUrl: string
  readonly port: number
  readonly child: ChildProcess
  /** kills the server at once (connections reset), without cleaning up */
  readonly kill: () => void
  /** kills it and removes its data */
  readonly close: () => Promise<void>
}

const SCRIPT = `
const S3rver = require(process.argv[1])
new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory: process.argv[2] })
  .run()
  .then((address) => process.stdout.write(JSON.stringify({ port: address.port }) + "\\n"))
  .catch((error) => { console.error(error); process.exit(1) })
`

export const startS3rver = (): Promise<S3rverHandle> => {
  const directory = mkdtempSync(join(tmpdir(), "berth-s3rver-"))
  const entry = createRequire(import.meta.url).resolve("s3rver")
  const child = spawn(process.execPath, ["--openssl-legacy-provider", "-e", SCRIPT, entry, directory], {
    stdio: ["ignore", "pipe", "pipe"]
  })
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      kill()
      await exited
    }
    rmSync(directory, { recursive: true, force: true })
  }
  return new Promise((resolve, reject) => {
    let output = ""
    let errors = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      errors += chunk.toString()
    })
    child.once("exit", (code) => reject(new Error(`s3rver exited (${code}) before listening: ${errors}`)))
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString()
      const line = output.split("\n")[0]
      if (!output.includes("\n") || line === undefined) return
      const { port } = JSON.parse(line) as { readonly port: number }
      resolve({ adminUrl: `http://${S3RVER_KEY}:${S3RVER_KEY}@127.0.0.1:${port}`, port, child, kill, close })
    })
  })
}
