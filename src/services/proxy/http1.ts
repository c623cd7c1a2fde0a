/**
 * Just enough HTTP/1.1 for the proxy's fast path: read a request head, decide where it goes, rewrite it (hop-by-hop
 * headers out, X-Forwarded-* and the hop count in) and follow message framing — Content-Length, chunked, until
 * close — without ever holding a body. Response heads are read only to know where each response ends; their bytes
 * pass untouched. Anything this module is unsure of is refused (400) rather than guessed: a proxy and a backend that
 * frame one message differently is how request smuggling works.
 */

export const CRLFCRLF = Buffer.from("\r\n\r\n", "latin1")
/** The largest request or response head the fast path reads (node's own default is 16 KiB). */
export const MAX_HEAD_BYTES = 64 * 1024
export const HOP_HEADER = "x-berth-hops"

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([\x21-\x7e]+) HTTP\/1\.([01])$/
/** Control characters other than horizontal tab are not allowed in a field value. */
const hasControlCharacter = (value: string): boolean => {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if ((c < 32 && c !== 9) || c === 127) return true
  }
  return false
}
const DIGITS = /^\d{1,15}$/

export interface RequestHead {
  readonly method: string
  readonly target: string
  readonly minor: 0 | 1
  /** The Host header as sent (with its port), or undefined. */
  readonly host: string | undefined
  /** -1 when absent */
  readonly contentLength: number
  readonly chunked: boolean
  /** The protocol asked for, when this is an upgrade (Connection names upgrade and Upgrade is set). */
  readonly upgrade: string | undefined
  /** The client wants the connection closed after this exchange. */
  readonly close: boolean
  /** An HTTP/1.0 client asked to keep the connection. */
  readonly keepAlive: boolean
  readonly hops: number
  readonly accept: string | undefined
  readonly forwardedFor: string | undefined
  /** The header lines to pass on, as received, each ending in CRLF. */
  readonly kept: string
}

export type HeadResult =
  | { readonly ok: true; readonly head: RequestHead }
  | { readonly ok: false; readonly status: 400 | 431; readonly reason: string }

const bad = (reason: string): HeadResult => ({ ok: false, status: 400, reason })

/** Headers that belong to one connection; never forwarded as received. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "upgrade",
  "trailer",
  "http2-settings"
])

/** Headers the proxy sets itself. */
const REPLACED = new Set(["x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", HOP_HEADER])

/** Never dropped because Connection names them: they frame the message or route it. */
const PROTECTED = new Set(["host", "content-length", "transfer-encoding"])

/** Parses a request head: `text` is everything before the blank line, in latin1. */
export const parseRequestHead = (text: string): HeadResult => {
  const lines = text.split("\r\n")
  const requestLine = REQUEST_LINE.exec(lines[0] ?? "")
  if (requestLine === null) return bad("malformed request line")
  let host: string | undefined
  let contentLength = -1
  let transferEncoding: string | undefined
  let connection = ""
  let upgradeValue: string | undefined
  let hops = 0
  let accept: string | undefined
  let forwardedFor: string | undefined
  let trailer: string | undefined
  const keptNames: Array<string> = []
  const keptLines: Array<string> = []
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!
    const colon = line.indexOf(":")
    if (colon <= 0) return bad(line.length === 0 ? "empty header line" : "header line without a colon")
    const first = line.charCodeAt(0)
    if (first === 32 || first === 9) return bad("folded header line")
    const name = line.slice(0, colon)
    if (!TOKEN.test(name)) return bad("invalid header name")
    const value = line.slice(colon + 1).trim()
    if (hasControlCharacter(value)) return bad(`invalid character in ${name}`)
    const lower = name.toLowerCase()
    switch (lower) {
      case "host":
        if (host !== undefined) return bad("more than one Host header")
        host = value
        break
      case "content-length": {
        if (!DIGITS.test(value)) return bad("invalid Content-Length")
        const n = Number(value)
        if (contentLength !== -1 && contentLength !== n) return bad("conflicting Content-Length headers")
        if (contentLength !== -1) continue
        contentLength = n
        break
      }
      case "transfer-encoding":
        transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`
        break
      case "connection":
        connection = connection === "" ? value : `${connection},${value}`
        continue
      case "upgrade":
        upgradeValue = value
        continue
      case "trailer":
        trailer = value
        continue
      case "accept":
        accept = value
        break
      case HOP_HEADER: {
        const n = Number.parseInt(value, 10)
        hops = Number.isFinite(n) && n > 0 ? Math.max(hops, n) : hops
        continue
      }
      case "x-forwarded-for":
        forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`
        continue
    }
    if (HOP_BY_HOP.has(lower) || REPLACED.has(lower) || lower.startsWith("proxy-")) continue
    keptNames.push(lower)
    keptLines.push(line)
  }
  const minor = requestLine[3] === "1" ? 1 : 0
  if (minor === 1 && host === undefined) return bad("no Host header")
  let chunked = false
  if (transferEncoding !== undefined) {
    if (contentLength !== -1) return bad("both Content-Length and Transfer-Encoding")
    if (minor === 0) return bad("Transfer-Encoding in an HTTP/1.0 request")
    const codings = transferEncoding.toLowerCase().split(",")
    if (codings[codings.length - 1]?.trim() !== "chunked") return bad("Transfer-Encoding does not end in chunked")
    chunked = true
  }
  let close = false
  let keepAlive = false
  let wantsUpgrade = false
  let dropped: Set<string> | undefined
  if (connection !== "") {
    for (const raw of connection.split(",")) {
      const token = raw.trim().toLowerCase()
      if (token === "") continue
      if (token === "close") close = true
      else if (token === "keep-alive") keepAlive = true
      else if (token === "upgrade") wantsUpgrade = true
      else if (!PROTECTED.has(token)) {
        dropped ??= new Set()
        dropped.add(token)
      }
    }
  }
  let kept = ""
  for (let i = 0; i < keptLines.length; i++) {
    if (dropped?.has(keptNames[i]!) === true) continue
    kept += `${keptLines[i]}\r\n`
  }
  // trailers travel inside the chunked body, which passes as it is
  if (chunked && trailer !== undefined) kept += `Trailer: ${trailer}\r\n`
  // an h2c upgrade needs HTTP2-Settings, which is hop-by-hop: it is not offered to the backend
  const upgrade =
    wantsUpgrade && upgradeValue !== undefined && upgradeValue !== "" && upgradeValue.toLowerCase() !== "h2c"
      ? upgradeValue
      : undefined
  return {
    ok: true,
    head: {
      method: requestLine[1]!,
      target: requestLine[2]!,
      minor,
      host,
      contentLength,
      chunked,
      upgrade,
      close: minor === 1 ? close : !keepAlive || close,
      keepAlive,
      hops,
      accept,
      forwardedFor,
      kept
    }
  }
}

/** The head sent to the backend. */
export const rewriteRequestHead = (
  head: RequestHead,
  clientAddress: string,
  proto: "http" | "https",
  hops: number
): string => {
  let out = `${head.method} ${head.target} HTTP/1.${head.minor}\r\n${head.kept}`
  out += `X-Forwarded-For: ${head.forwardedFor === undefined ? clientAddress : `${head.forwardedFor}, ${clientAddress}`}\r\n`
  if (head.host !== undefined) out += `X-Forwarded-Host: ${head.host}\r\n`
  out += `X-Forwarded-Proto: ${proto}\r\nX-Berth-Hops: ${hops}\r\n`
  if (head.upgrade !== undefined) out += `Connection: upgrade\r\nUpgrade: ${head.upgrade}\r\n`
  else if (head.close && head.minor === 1) out += "Connection: close\r\n"
  else if (!head.close && head.minor === 0) out += "Connection: keep-alive\r\n"
  return `${out}\r\n`
}

export interface ResponseHead {
  readonly status: number
  /** -1 when absent */
  readonly contentLength: number
  readonly chunked: boolean
  /** The backend will close the connection after this response. */
  readonly close: boolean
}

/** Whether the bytes at `at` spell `name` (lower case letters and dashes), ignoring case. */
const nameAt = (buf: Buffer, at: number, name: string): boolean => {
  for (let i = 0; i < name.length; i++) if ((buf[at + i]! | 0x20) !== name.charCodeAt(i)) return false
  return true
}

const isOws = (c: number | undefined): boolean => c === 32 || c === 9

/**
 * Reads what framing needs from the response head in `buf[start, end)` (`end` is where the blank line starts),
 * without making strings of it: every response passes here. Undefined when it is not HTTP/1.x.
 */
export const scanResponseHead = (buf: Buffer, start: number, end: number): ResponseHead | undefined => {
  // HTTP/1.x SSS
  if (end - start < 12 || !nameAt(buf, start, "http/1.") || buf[start + 8] !== 32) return undefined
  const minorDigit = buf[start + 7]
  if (minorDigit !== 48 && minorDigit !== 49) return undefined
  let status = 0
  for (let i = start + 9; i < start + 12; i++) {
    const d = buf[i]! - 48
    if (d < 0 || d > 9) return undefined
    status = status * 10 + d
  }
  if (start + 12 < end && buf[start + 12] !== 32) return undefined
  let contentLength = -1
  let chunked = false
  let transferEncoding = false
  let close = minorDigit === 48
  let line = buf.indexOf(10, start)
  line = line === -1 || line >= end ? end : line + 1
  while (line < end) {
    let lineEnd = buf.indexOf(13, line)
    if (lineEnd === -1 || lineEnd > end) lineEnd = end
    const first = buf[line]! | 0x20
    // only content-length, connection and transfer-encoding matter
    if (first === 0x63 || first === 0x74) {
      let colon = line
      while (colon < lineEnd && buf[colon] !== 58) colon++
      let v = colon + 1
      while (v < lineEnd && isOws(buf[v])) v++
      let vEnd = lineEnd
      while (vEnd > v && isOws(buf[vEnd - 1])) vEnd--
      const nameLength = colon - line
      if (nameLength === 14 && nameAt(buf, line, "content-length")) {
        if (vEnd === v || vEnd - v > 15) return undefined
        let n = 0
        for (let i = v; i < vEnd; i++) {
          const d = buf[i]! - 48
          if (d < 0 || d > 9) return undefined
          n = n * 10 + d
        }
        contentLength = n
      } else if (nameLength === 17 && nameAt(buf, line, "transfer-encoding")) {
        transferEncoding = true
        chunked = buf.toString("latin1", v, vEnd).toLowerCase().split(",").at(-1)?.trim() === "chunked"
        if (!chunked) close = true
      } else if (nameLength === 10 && nameAt(buf, line, "connection")) {
        const tokens = buf.toString("latin1", v, vEnd).toLowerCase()
        if (tokens.includes("close")) close = true
        else if (minorDigit === 48 && tokens.includes("keep-alive")) close = false
      }
    }
    line = lineEnd + 2
  }
  // a body with a transfer coding other than chunked runs until the connection closes
  if (transferEncoding && !chunked) contentLength = -1
  return { status, contentLength, chunked, close }
}

/** `scanResponseHead` over text (everything before the blank line). */
export const parseResponseHead = (text: string): ResponseHead | undefined => {
  const buf = Buffer.from(text, "latin1")
  return scanResponseHead(buf, 0, buf.length)
}

enum Chunk {
  Size,
  SizeSpace,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  TrailerLine,
  TrailerLf,
  EndLf
}

const MAX_SIZE_DIGITS = 12
const MAX_LINE = 8 * 1024

/** -1: the body goes on past this buffer; -2: the framing is broken. */
export const MORE = -1
export const MALFORMED = -2

/**
 * Follows chunked framing across buffers without copying: `scan` answers the index just past the body's end (the
 * blank line after the last chunk and trailers), or `MORE`, or `MALFORMED`.
 */
export class ChunkedScanner {
  private state = Chunk.Size
  private digits = 0
  private size = 0
  private remaining = 0
  private lineLength = 0

  reset(): void {
    this.state = Chunk.Size
    this.digits = 0
    this.size = 0
    this.remaining = 0
    this.lineLength = 0
  }

  scan(buf: Buffer, start: number): number {
    let i = start
    const end = buf.length
    while (i < end) {
      switch (this.state) {
        case Chunk.Data: {
          const n = Math.min(this.remaining, end - i)
          this.remaining -= n
          i += n
          if (this.remaining === 0) this.state = Chunk.DataCr
          continue
        }
        case Chunk.Size: {
          const c = buf[i]!
          const v = hexValue(c)
          if (v >= 0) {
            if (++this.digits > MAX_SIZE_DIGITS) return MALFORMED
            this.size = this.size * 16 + v
          } else if (this.digits === 0) {
            return MALFORMED
          } else if (c === 13) {
            this.state = Chunk.SizeLf
          } else if (c === 59) {
            this.state = Chunk.Extension
            this.lineLength = 0
          } else if (c === 32 || c === 9) {
            this.state = Chunk.SizeSpace
          } else {
            return MALFORMED
          }
          break
        }
        case Chunk.SizeSpace: {
          const c = buf[i]!
          if (c === 13) this.state = Chunk.SizeLf
          else if (c === 59) {
            this.state = Chunk.Extension
            this.lineLength = 0
          } else if (c !== 32 && c !== 9) return MALFORMED
          break
        }
        case Chunk.Extension: {
          const c = buf[i]!
          if (c === 13) this.state = Chunk.SizeLf
          else if (c === 10 || ++this.lineLength > MAX_LINE) return MALFORMED
          break
        }
        case Chunk.SizeLf:
          if (buf[i] !== 10) return MALFORMED
          if (this.size === 0) {
            this.state = Chunk.TrailerStart
            this.lineLength = 0
          } else {
            this.state = Chunk.Data
            this.remaining = this.size
          }
          this.size = 0
          this.digits = 0
          break
        case Chunk.DataCr:
          if (buf[i] !== 13) return MALFORMED
          this.state = Chunk.DataLf
          break
        case Chunk.DataLf:
          if (buf[i] !== 10) return MALFORMED
          this.state = Chunk.Size
          break
        case Chunk.TrailerStart:
          if (buf[i] === 13) this.state = Chunk.EndLf
          else if (buf[i] === 10) return MALFORMED
          else this.state = Chunk.TrailerLine
          break
        case Chunk.TrailerLine: {
          const c = buf[i]!
          if (c === 13) this.state = Chunk.TrailerLf
          else if (c === 10 || ++this.lineLength > MAX_LINE) return MALFORMED
          break
        }
        case Chunk.TrailerLf:
          if (buf[i] !== 10) return MALFORMED
          this.state = Chunk.TrailerStart
          break
        case Chunk.EndLf:
          if (buf[i] !== 10) return MALFORMED
          this.reset()
          return i + 1
      }
      i++
    }
    return MORE
  }
}

const hexValue = (c: number): number => {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 97 && c <= 102) return c - 87
  if (c >= 65 && c <= 70) return c - 55
  return -1
}
