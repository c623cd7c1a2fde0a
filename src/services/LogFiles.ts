/**
 * Per-service log files. A service writes its log through an O_APPEND descriptor it was given at spawn and that berth
 * cannot reopen, so rotation is copy-then-truncate: the writer keeps its descriptor and, thanks to O_APPEND, its next
 * write lands at the new end of the truncated file instead of leaving a hole of NUL bytes.
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import * as Chunk from "effect/Chunk"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { failureExcerpt, runMarker } from "../domain/log-excerpt.js"

export class LogFileFailed extends Data.TaggedError("LogFileFailed")<{
  readonly file: string
  readonly operation: "stat" | "rotate" | "read"
  readonly reason: string
}> {
  override get message(): string {
    return `cannot ${this.operation} log file ${this.file}: ${this.reason}`
  }
}

const CHUNK = 64 * 1024
/** the most `follow` reads in one go, so a burst of output never has to fit in memory at once */
const MAX_READ = 1024 * 1024
const FOLLOW_POLL = Duration.millis(200)

const isMissing = (e: unknown) => typeof e === "object" && e !== null && "code" in e && e.code === "ENOENT"

const attempt = <A>(file: string, operation: LogFileFailed["operation"], run: () => Promise<A>) =>
  Effect.tryPromise({
    try: run,
    catch: (e) => new LogFileFailed({ file, operation, reason: e instanceof Error ? e.message : String(e) })
  })

/** The file's size and last change, or an empty file's for a missing one. */
const standing = async (file: string): Promise<{ readonly size: number; readonly changed: number }> => {
  try {
    const stat = await fsp.stat(file)
    return { size: stat.size, changed: stat.mtimeMs }
  } catch (e) {
    if (isMissing(e)) return { size: 0, changed: 0 }
    throw e
  }
}

const sizeOrZero = async (file: string): Promise<number> => {
  try {
    return (await fsp.stat(file)).size
  } catch (e) {
    if (isMissing(e)) return 0
    throw e
  }
}

/**
 * The file's size in bytes, 0 when it does not exist yet: where `follow` starts to see only what comes next. One stat,
 * read at once: a trip through the thread pool costs more than the call, and a service's spawn waits on it.
 */
export const size = (file: string): Effect.Effect<number, LogFileFailed> =>
  Effect.try({
    try: () => fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0,
    catch: (e) => new LogFileFailed({ file, operation: "stat", reason: e instanceof Error ? e.message : String(e) })
  })

/**
 * Writes the marker of a new run into a log (`domain/log-excerpt.ts`), so that its runs read apart and a failure
 * quotes its own. Never fails: a log that cannot be written to is one the process cannot write to either.
 */
export const markRun = (file: string, what: string): Effect.Effect<void> =>
  Effect.sync(() => {
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
      fs.appendFileSync(file, `${runMarker(what, new Date())}\n`, { mode: 0o600 })
    } catch {
      // the run itself will say what is wrong with the file
    }
  })

/** lines read back for a failure's excerpt: enough to find the cause above a long stack */
const EXCERPT_SCAN = 400

/** What a failure quotes of a log: its current run's cause and last lines (`failureExcerpt`), at most `lines`. */
export const failureTail = (file: string, lines: number): Effect.Effect<ReadonlyArray<string>, LogFileFailed> =>
  Effect.map(tail(file, EXCERPT_SCAN), (all) => failureExcerpt(all, lines))

const exists = (file: string) =>
  fsp.stat(file).then(
    () => true,
    (e: unknown) => {
      if (isMissing(e)) return false
      throw e
    }
  )

/** Appends the bytes of `from` after `offset` to `to`: what the writer added while the copy ran. */
const appendTail = async (from: string, offset: number, to: string) => {
  const source = await fsp.open(from, "r")
  try {
    const target = await fsp.open(to, "a")
    try {
      const buffer = Buffer.alloc(CHUNK)
      for (let at = offset; ; ) {
        const { bytesRead } = await source.read(buffer, 0, CHUNK, at)
        if (bytesRead === 0) return
        await target.write(buffer, 0, bytesRead)
        at += bytesRead
      }
    } finally {
      await target.close()
    }
  } finally {
    await source.close()
  }
}

/**
 * When `file` is larger than `maxBytes`: shift `file.1` → `file.2` … (dropping what would become `file.<keep+1>`),
 * copy `file` → `file.1`, truncate `file` to 0. Returns whether it rotated. Lines written in the instant between the
 * last copied byte and the truncation are lost: that is the price of not owning the writer's descriptor.
 */
export const rotateIfLarger = (file: string, maxBytes: number, keep = 2): Effect.Effect<boolean, LogFileFailed> =>
  attempt(file, "rotate", async () => {
    const current = await sizeOrZero(file)
    if (current <= maxBytes) return false
    if (keep >= 1) {
      await fsp.rm(`${file}.${keep}`, { force: true })
      for (let i = keep - 1; i >= 1; i--) {
        if (await exists(`${file}.${i}`)) await fsp.rename(`${file}.${i}`, `${file}.${i + 1}`)
      }
      await fsp.copyFile(file, `${file}.1`)
      // catch up on what was appended during the copy, so only a tiny window remains
      await appendTail(file, (await fsp.stat(`${file}.1`)).size, `${file}.1`)
    }
    await fsp.truncate(file, 0)
    return true
  })

const splitLines = (text: string): Array<string> => text.split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l))

/**
 * The last `lines` lines of `file` (a final line without a newline counts), reading backwards in chunks so a large
 * log costs only the bytes shown. A missing file has no lines.
 */
export const tail = (file: string, lines: number): Effect.Effect<ReadonlyArray<string>, LogFileFailed> =>
  attempt(file, "read", async (): Promise<ReadonlyArray<string>> => {
    if (lines <= 0) return []
    let handle: fsp.FileHandle
    try {
      handle = await fsp.open(file, "r")
    } catch (e) {
      if (isMissing(e)) return []
      throw e
    }
    try {
      const end = (await handle.stat()).size
      const chunks: Array<Buffer> = []
      let newlines = 0
      let start = end
      // a trailing newline ends the last line, it does not start an empty one: need one newline more than lines
      while (start > 0 && newlines <= lines) {
        const length = Math.min(CHUNK, start)
        start -= length
        const buffer = Buffer.alloc(length)
        const { bytesRead } = await handle.read(buffer, 0, length, start)
        const chunk = buffer.subarray(0, bytesRead)
        for (const byte of chunk) if (byte === 0x0a) newlines++
        chunks.unshift(chunk)
      }
      // decoded only once all bytes are together: a multi-byte character may straddle two chunks
      const all = splitLines(Buffer.concat(chunks).toString("utf8"))
      if (all.at(-1) === "") all.pop()
      // when reading stopped before the file start, the first piece is a partial line
      if (start > 0) all.shift()
      return all.slice(-lines)
    } finally {
      await handle.close()
    }
  })

/**
 * New lines appended to `file` after byte `fromOffset`, polled every 200 ms; never ends by itself. When the file
 * shrinks (rotated, or truncated by someone) it starts again from byte 0, and so when it was changed but kept its
 * size (truncated and written to the same length between two polls: appending always grows it). A missing file is
 * waited for.
 */
export const follow = (file: string, fromOffset: number): Stream.Stream<string, LogFileFailed> =>
  Stream.suspend(() => {
    let offset = Math.max(0, fromOffset)
    // bytes of a line whose newline has not been written yet
    let pending: Buffer = Buffer.alloc(0)
    // more than one read's worth was waiting: read on without sleeping
    let behind = true
    // the file's change time when it was last read to its end
    let readAt: number | undefined

    const readNew = attempt(file, "read", async (): Promise<Array<string>> => {
      const { size: current, changed } = await standing(file)
      const out: Array<string> = []
      const rewritten = current === offset && readAt !== undefined && changed !== readAt
      if (current < offset || rewritten) {
        // rotated: the unfinished line went with the old content, show it rather than lose it
        if (pending.length > 0) out.push(...splitLines(pending.toString("utf8")))
        pending = Buffer.alloc(0)
        offset = 0
      }
      if (current === offset) {
        readAt = changed
        return out
      }
      const handle = await fsp.open(file, "r")
      try {
        const length = Math.min(MAX_READ, current - offset)
        const buffer = Buffer.alloc(length)
        const { bytesRead } = await handle.read(buffer, 0, length, offset)
        offset += bytesRead
        behind = offset < current
        // a write after the look leaves a later change time and a larger size: the next poll reads it
        readAt = behind ? undefined : changed
        const data = Buffer.concat([pending, buffer.subarray(0, bytesRead)])
        const lastNewline = data.lastIndexOf(0x0a)
        pending = data.subarray(lastNewline + 1)
        if (lastNewline >= 0) out.push(...splitLines(data.subarray(0, lastNewline).toString("utf8")))
        return out
      } finally {
        await handle.close()
      }
    })

    const poll = Effect.gen(function* () {
      if (!behind) yield* Effect.sleep(FOLLOW_POLL)
      behind = false
      return Chunk.fromIterable(yield* readNew)
    })

    return Stream.repeatEffectChunk(poll)
  })
