/**
 * The two adapter SDKs through the built binary: the JavaScript one (`berth/adapter-sdk`, dist/adapter-sdk.mjs) and
 * its Python twin (dist/berth_adapter.py), each driving its example adapter in a real world, and both answering the
 * same requests byte for byte. And the s3 adapter, whose driver the bundle leaves out, loaded by the daemon.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { GetObjectCommand, ListBucketsCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { startS3rver } from "../../adapters/s3/s3rver.js"
import { berthBin, type Sandbox, sandboxes, varsFrom } from "./harness.js"

const boxes = sandboxes()
const scratch = mkdtempSync(join(tmpdir(), "berth-sdks-"))
afterAll(() => {
  boxes.cleanup()
  rmSync(scratch, { recursive: true, force: true })
})

const examples = join(import.meta.dirname, "../../examples/adapters")
const dist = join(berthBin, "..")

const envOf = async (box: Sandbox, world: string, path: Record<string, string>) => {
  const r = await box.run(["env", world, "--json"], { env: path })
  expect(r.code, r.stderr).toBe(0)
  return varsFrom(r.stdout)
}

describe("adapter SDKs", () => {
  it("ships the Python SDK beside the CLI", () => {
    expect(readFileSync(join(dist, "berth_adapter.py"), "utf8")).toBe(
      readFileSync(join(import.meta.dirname, "../../src/adapter-sdk/berth_adapter.py"), "utf8")
    )
  })

  for (const [language, adapter, suffix] of [
    ["JavaScript", "notes", ".notes"],
    ["Python", "pynotes", ".pynotes"]
  ] as const) {
    it(`runs the ${language} example adapter: up makes the slice, env shows it, a golden is cloned, remove drops it`, async () => {
      const box = await boxes.project({
        "berth.toml": `[services.notes]
adapter = "${adapter}"
clone_from = "golden"
migrate = "u=\${notes.url}; echo 'from golden' > $\${u#file://}/first.txt"
`
      })
      // the daemon looks adapters up on its own PATH: start it with the example's folder on it
      await box.run(["daemon", "stop"])
      const path = { PATH: `${join(examples, adapter)}:${process.env.PATH}` }
      for (const world of ["one", "two"]) {
        const r = await box.run(["up", world], { timeoutMs: 60_000, env: path })
        expect(r.code, r.stderr).toBe(0)
      }
      const one = (await envOf(box, "one", path)).NOTES_URL ?? ""
      const two = (await envOf(box, "two", path)).NOTES_URL ?? ""
      expect(one).toMatch(new RegExp(`^file://.*/app_one_notes\\${suffix}/$`))
      expect(two).not.toBe(one)
      expect(readFileSync(join(fileURLToPath(two), "first.txt"), "utf8")).toBe("from golden\n")
      writeFileSync(join(fileURLToPath(one), "only-one.txt"), "")
      expect(existsSync(join(fileURLToPath(two), "only-one.txt"))).toBe(false)
      const removed = await box.run(["remove", "one", "--force"], { timeoutMs: 60_000, env: path })
      expect(removed.code, removed.stderr).toBe(0)
      expect(existsSync(fileURLToPath(one))).toBe(false)
      expect(existsSync(fileURLToPath(two))).toBe(true)
      const gone = await box.run(["env", "one", "--json"], { env: path })
      expect(gone.code).toBe(1)
    })
  }

  it("answers every request the same way in both SDKs", () => {
    // one adapter, written twice: its behaviour depends on the slice's name
    const js = join(scratch, "adapter.mjs")
    writeFileSync(
      js,
      `import { AdapterFailure, runAdapter } from ${JSON.stringify(pathToFileURL(join(dist, "adapter-sdk.mjs")).href)}
runAdapter({
  provision: (slice) => {
    if (slice.name === "crash") throw new Error("boom")
    if (slice.name === "refuse") throw new AdapterFailure("taken", "held by someone else")
    if (slice.name === "strange") throw new AdapterFailure("weird", "an unknown kind")
    if (slice.name === "wrong") return "yes"
    return slice.name === "new"
  },
  resolve: (slice, config) => (slice.name === "empty" ? "" : \`mem://\${slice.name}?\${config.mode ?? ""}&\${slice.adminUrl ?? "-"}\`),
  teardown: () => undefined,
  list: (scope) => (scope.owner === "wrong" ? [1] : [scope.owner, scope.storage]),
  standing: (slice) => (slice.name === "wrong" ? "perhaps" : slice.owner === "o1" ? "ours" : "foreign")
})
`
    )
    const py = join(scratch, "adapter.py")
    writeFileSync(
      py,
      `import sys
sys.path.insert(0, ${JSON.stringify(dist)})
from berth_adapter import AdapterFailure, run_adapter

def provision(slice, config):
    if slice.name == "crash":
        raise RuntimeError("boom")
    if slice.name == "refuse":
        raise AdapterFailure("taken", "held by someone else")
    if slice.name == "strange":
        raise AdapterFailure("weird", "an unknown kind")
    if slice.name == "wrong":
        return "yes"
    return slice.name == "new"

def resolve(slice, config):
    if slice.name == "empty":
        return ""
    return f"mem://{slice.name}?{config.get('mode', '')}&{slice.admin_url or '-'}"

def list_slices(scope, config):
    return [1] if scope.owner == "wrong" else [scope.owner, scope.storage]

def standing(slice, config):
    if slice.name == "wrong":
        return "perhaps"
    return "ours" if slice.owner == "o1" else "foreign"

run_adapter(provision=provision, resolve=resolve, teardown=lambda slice, config: None, list=list_slices, standing=standing)
`
    )
    const slice = (name: string, extra: Record<string, unknown> = {}) => ({
      adapter: "mem",
      project: "acme",
      world: "main",
      service: "store",
      name,
      owner: "o1",
      storage: "/tmp/s",
      options: { mode: "x" },
      ...extra
    })
    const request = (verb: string, body: Record<string, unknown>) =>
      JSON.stringify({ protocol: 1, verb, config: { mode: "x" }, ...body })
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["capabilities", request("capabilities", {})],
      ["provision", request("provision", { slice: slice("new") })],
      ["provision", request("provision", { slice: slice("old") })],
      ["provision", request("provision", { slice: slice("refuse") })],
      ["provision", request("provision", { slice: slice("strange") })],
      ["provision", request("provision", { slice: slice("wrong") })],
      ["provision", request("provision", { slice: slice("crash") })],
      ["resolve", request("resolve", { slice: slice("s", { adminUrl: "pg://u:pw@h/db", future: { key: 1 } }) })],
      ["resolve", request("resolve", { slice: slice("empty") })],
      ["teardown", request("teardown", { slice: slice("s") })],
      ["clone", request("clone", { slice: slice("s"), from: slice("t") })],
      ["list", request("list", { scope: { adapter: "mem", owner: "o1", storage: "/tmp/s", options: {} } })],
      ["list", request("list", { scope: { adapter: "mem", owner: "wrong", storage: "/tmp/s", options: {} } })],
      ["list", request("list", { scope: { adapter: "mem", owner: 7, storage: "/tmp/s", options: {} } })],
      ["standing", request("standing", { slice: slice("s") })],
      ["standing", request("standing", { slice: slice("s", { owner: "o2" }) })],
      ["standing", request("standing", { slice: slice("wrong") })],
      ["standing", request("standing", {})],
      ["provision", "not json"],
      ["provision", "[1]"],
      ["provision", JSON.stringify({ protocol: 2, verb: "provision" })],
      ["provision", JSON.stringify({ protocol: true, verb: "provision" })],
      ["provision", JSON.stringify({ protocol: 1 })],
      ["provision", JSON.stringify({ protocol: 1, verb: "drop", config: {} })],
      ["provision", request("resolve", { slice: slice("s") })],
      ["provision", JSON.stringify({ protocol: 1, verb: "provision", slice: slice("s") })],
      ["provision", request("provision", { slice: { ...slice("s"), options: [] } })],
      ["provision", request("provision", { slice: { ...slice("s"), adminUrl: null } })],
      ["clone", request("clone", { slice: slice("s") })]
    ]
    for (const [verb, input] of cases) {
      const [a, b] = [
        ["node", js],
        ["python3", py]
      ].map(([command, file]) => {
        const r = spawnSync(command ?? "", [file ?? "", verb], { input, encoding: "utf8", timeout: 10_000 })
        return { code: r.status, stdout: r.stdout, crashed: r.stderr.includes("boom") }
      })
      expect(b, `${verb} ${input}`).toEqual(a)
      expect(a?.stdout.endsWith("\n") && a.stdout.split("\n").length, input).toBe(2)
    }
  })
})

describe("the s3 adapter in the built binary", () => {
  it("gives a world a bucket whose s3:// URL a client uses, and drops it on remove", async () => {
    const server = await startS3rver()
    try {
      const box = await boxes.project({
        "berth.toml": `[services.files]\nadapter = "minio"\nadmin_url = "\${env.S3_ADMIN_URL}"\n`
      })
      const env = { S3_ADMIN_URL: server.adminUrl }
      const up = await box.run(["up", "one"], { timeoutMs: 60_000, env })
      expect(up.code, up.stderr).toBe(0)
      const url = new URL((await envOf(box, "one", env)).FILES_URL ?? "")
      expect(url.hostname).toBe("app-one-files")
      const client = new S3Client({
        endpoint: url.searchParams.get("endpoint") ?? "",
        region: url.searchParams.get("region") ?? "",
        forcePathStyle: url.searchParams.get("use_path_style") === "true",
        credentials: { accessKeyId: url.username, secretAccessKey: decodeURIComponent(url.password) }
      })
      await client.send(new PutObjectCommand({ Bucket: url.hostname, Key: "a.txt", Body: "hello" }))
      const read = await client.send(new GetObjectCommand({ Bucket: url.hostname, Key: "a.txt" }))
      expect(await read.Body?.transformToString()).toBe("hello")
      const removed = await box.run(["remove", "one", "--force"], { timeoutMs: 60_000, env })
      expect(removed.code, removed.stderr).toBe(0)
      const buckets = await client.send(new ListBucketsCommand({}))
      expect((buckets.Buckets ?? []).map((bucket) => bucket.Name)).not.toContain("app-one-files")
      client.destroy()
    } finally {
      await server.close()
    }
  })
})
