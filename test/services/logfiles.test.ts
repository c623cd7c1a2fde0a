import { afterAll, afterEach, describe, expect, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { PlatformLive } from "../../src/services/Platform.js"
import * as LogFiles from "../../src/services/LogFiles.js"
import { type ProcessHandle, Processes, ProcessesLive } from "../../src/services/Processes.js"

const root = fs.mkdtempSync(path.join(os.tmpdir(), "berth-logfiles-"))
const started: Array<ProcessHandle> = []

afterEach(() => {
  for (const h of started.splice(0)) {
    try {
      process.kill(-h.pgid, "SIGKILL")
    } catch {
      // already gone
    }
  }
})

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true })
})

let counter = 0
const fresh = (content = "") => {
  const file = path.join(root, `${++counter}.log`)
  fs.writeFileSync(file, content)
  return file
}

const sleep = (ms: number) => Effect.promise(() => new Promise((r) => setTimeout(r, ms)))

const waitFor = (what: string, check: () => boolean, ms = 5_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + ms
    while (!check()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* sleep(20)
    }
  })

describe("rotateIfLarger", () => {
  it.live("leaves a small or missing file alone", () =>
    Effect.gen(function* () {
      const file = fresh("abc\n")
      expect(yield* LogFiles.rotateIfLarger(file, 4)).toBe(false)
      expect(yield* LogFiles.rotateIfLarger(path.join(root, "missing.log"), 0)).toBe(false)
      expect(fs.readFileSync(file, "utf8")).toBe("abc\n")
      expect(fs.existsSync(`${file}.1`)).toBe(false)
    })
  )

  it.live("shifts older copies and keeps only `keep` of them", () =>
    Effect.gen(function* () {
      const file = fresh()
      for (const n of [1, 2, 3, 4]) {
        fs.appendFileSync(file, `gen ${n}\n`)
        expect(yield* LogFiles.rotateIfLarger(file, 0, 2)).toBe(true)
      }
      expect(fs.readFileSync(file, "utf8")).toBe("")
      expect(fs.readFileSync(`${file}.1`, "utf8")).toBe("gen 4\n")
      expect(fs.readFileSync(`${file}.2`, "utf8")).toBe("gen 3\n")
      expect(fs.existsSync(`${file}.3`)).toBe(false)
    })
  )

  it.live("keeps a running process writing into the fresh file", () =>
    Effect.gen(function* () {
      const p = yield* Processes
      const file = path.join(root, "writer", "svc.log")
      const h = yield* p.spawn({
        command: "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.05; done",
        cwd: root,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        logFile: file
      })
      started.push(h)
      yield* waitFor("some lines", () => fs.readFileSync(file, "utf8").split("\n").length > 5)
      expect(yield* LogFiles.rotateIfLarger(file, 10)).toBe(true)
      yield* waitFor("lines after the rotation", () => fs.readFileSync(file, "utf8").split("\n").length > 3)
      expect(yield* p.stop(h, 1_000)).toEqual({ _tag: "Exited" })

      const old = fs.readFileSync(`${file}.1`, "utf8")
      const now = fs.readFileSync(file)
      // O_APPEND: the writer continued at the new end, not at its old offset behind a hole of NUL bytes
      expect(now.includes(0)).toBe(false)
      expect(old.startsWith("line 1\nline 2\n")).toBe(true)
      const lastOld = Number(/line (\d+)\n$/.exec(old)?.[1])
      const firstNew = Number(/^line (\d+)\n/.exec(now.toString("utf8"))?.[1])
      expect(firstNew).toBeGreaterThan(lastOld)
      expect(now.toString("utf8")).toMatch(/^(line \d+\n)+$/)
    }).pipe(Effect.provide(ProcessesLive.pipe(Layer.provide(PlatformLive))))
  )
})

describe("tail", () => {
  it.live("returns the last lines of a multi-megabyte file quickly", () =>
    Effect.gen(function* () {
      const lines = Array.from({ length: 200_000 }, (_, i) => `line ${i} ${"x".repeat(i % 40)}`)
      const file = fresh(`${lines.join("\n")}\n`)
      expect(fs.statSync(file).size).toBeGreaterThan(5_000_000)
      expect(yield* LogFiles.tail(file, 10)).toEqual(lines.slice(-10))
      expect(yield* LogFiles.tail(file, 1_000)).toEqual(lines.slice(-1_000))
    })
  )

  it.live("reads only the end of a file: 1 GiB (sparse) takes no longer than a small one", () =>
    Effect.gen(function* () {
      const file = fresh()
      fs.truncateSync(file, 1024 ** 3)
      fs.appendFileSync(file, "\nsecond to last\nlast\n")
      const t0 = performance.now()
      // reading it all would take seconds and exceed the largest string node can build
      expect(yield* LogFiles.tail(file, 2)).toEqual(["second to last", "last"])
      expect(performance.now() - t0).toBeLessThan(500)
    })
  )

  it.live("handles short files, a last line without newline, CRLF and empty lines", () =>
    Effect.gen(function* () {
      expect(yield* LogFiles.tail(fresh("a\nb\n"), 10)).toEqual(["a", "b"])
      expect(yield* LogFiles.tail(fresh("a\nb\nc"), 2)).toEqual(["b", "c"])
      expect(yield* LogFiles.tail(fresh("a\r\nb\r\n"), 1)).toEqual(["b"])
      expect(yield* LogFiles.tail(fresh("a\n\n\nb\n"), 3)).toEqual(["", "", "b"])
      expect(yield* LogFiles.tail(fresh(""), 3)).toEqual([])
      expect(yield* LogFiles.tail(fresh("a\n"), 0)).toEqual([])
      expect(yield* LogFiles.tail(path.join(root, "missing.log"), 3)).toEqual([])
    })
  )

  it.live("never splits a multi-byte character at a chunk boundary", () =>
    Effect.gen(function* () {
      // 3-byte characters across several 64 KiB chunks, on one long line
      const long = "é€".repeat(50_000)
      expect(yield* LogFiles.tail(fresh(`first\n${long}\nlast\n`), 2)).toEqual([long, "last"])
    })
  )

  it.live("fails with LogFileFailed on a folder", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(LogFiles.tail(root, 3))
      expect(error._tag).toBe("LogFileFailed")
      expect(error.message).toContain(`cannot read log file ${root}`)
    })
  )
})

describe("follow", () => {
  const collect = (file: string, from: number, n: number) =>
    Effect.fork(Stream.runCollect(Stream.take(LogFiles.follow(file, from), n)).pipe(Effect.map(Chunk.toArray)))

  it.live("streams the lines appended after the offset, holding back an unfinished one", () =>
    Effect.gen(function* () {
      const file = fresh("before\n")
      const fiber = yield* collect(file, yield* LogFiles.size(file), 3)
      yield* sleep(50)
      fs.appendFileSync(file, "one\ntw")
      yield* sleep(300)
      fs.appendFileSync(file, "o\nthree\nfour\n")
      expect(yield* Fiber.join(fiber)).toEqual(["one", "two", "three"])
    })
  )

  it.live("starts again from the top when the file is truncated", () =>
    Effect.gen(function* () {
      const file = fresh("old 1\nold 2\n")
      const fiber = yield* collect(file, 0, 4)
      yield* sleep(300)
      fs.truncateSync(file, 0)
      yield* sleep(300)
      fs.appendFileSync(file, "new 1\nnew 2\n")
      expect(yield* Fiber.join(fiber)).toEqual(["old 1", "old 2", "new 1", "new 2"])
    })
  )

  // a rewrite of the same length between two polls leaves the size as it was: only the change time tells
  it.live("starts again from the top when the file is rewritten to the length it had", () =>
    Effect.gen(function* () {
      const file = fresh("old 1\nold 2\n")
      const fiber = yield* collect(file, 0, 4)
      yield* sleep(300)
      fs.truncateSync(file, 0)
      fs.appendFileSync(file, "new 1\nnew 2\n")
      expect(yield* Fiber.join(fiber).pipe(Effect.timeout("5 seconds"))).toEqual(["old 1", "old 2", "new 1", "new 2"])
    })
  )

  it.live("waits for a file that does not exist yet", () =>
    Effect.gen(function* () {
      const file = path.join(root, "later.log")
      const fiber = yield* collect(file, 0, 1)
      yield* sleep(300)
      fs.writeFileSync(file, "hello\n")
      expect(yield* Fiber.join(fiber)).toEqual(["hello"])
    })
  )

  // under the test clock a poll's sleep never ends: the burst is read whole only if no read waits for one
  it.effect("reads a large burst without waiting a poll per megabyte", () =>
    Effect.gen(function* () {
      const file = fresh()
      const lines = Array.from({ length: 100_000 }, (_, i) => `burst ${i} ${"y".repeat(30)}`)
      fs.writeFileSync(file, `${lines.join("\n")}\n`)
      const fiber = yield* collect(file, 0, lines.length)
      let done = yield* Fiber.poll(fiber)
      for (let i = 0; i < 2_000 && Option.isNone(done); i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
        done = yield* Fiber.poll(fiber)
      }
      expect(Option.isSome(done), "the reader waited for a poll while more was to read").toBe(true)
      expect(yield* Fiber.join(fiber)).toEqual(lines)
    })
  )
})
