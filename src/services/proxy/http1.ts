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

const isOws = (c: number | undefined): boolean => c === 32 || c === 9

/** Characters allowed in a token (a method, a header name): RFC 9110's tchar. */
export const TCHAR = new Uint8Array(256)
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
  TCHAR[c.charCodeAt(0)] = 1

export interface RequestHead {
  readonly ok: true
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
  /** X-Forwarded-Proto as received: believed only from a peer's proxy (the cluster listener), dropped otherwise. */
  readonly forwardedProto: string | undefined
  /** The header lines to pass on, as received, each ending in CRLF. */
  readonly kept: string
}

export interface HeadRefusal {
  readonly ok: false
  readonly status: 400 | 431
  readonly reason: string
}

export type HeadResult = RequestHead | HeadRefusal

const bad = (reason: string): HeadRefusal => ({ ok: false, status: 400, reason })

/** What the parser does with a header line, by its name. */
enum Field {
  Kept,
  /** hop-by-hop or set by the proxy: never forwarded as received */
  Dropped,
  Host,
  ContentLength,
  TransferEncoding,
  Connection,
  Upgrade,
  Trailer,
  Accept,
  Hops,
  ForwardedFor,
  ForwardedProto
}

/** Whether `t` at `at` spells `lower` (lower case letters, digits, dashes) in any case; `t` there holds tchars. */
const spells = (t: string, at: number, lower: string): boolean => {
  for (let i = 0; i < lower.length; i++) if ((t.charCodeAt(at + i) | 0x20) !== lower.charCodeAt(i)) return false
  return true
}

/**
 * The role of the header named `t[at, at + length)`, told without making a string of the name: every header line of
 * every request passes here. Hop-by-hop: Connection, Keep-Alive, Proxy-*, TE, Upgrade, Trailer, HTTP2-Settings;
 * set by the proxy: X-Forwarded-*, the hop counter.
 */
const fieldOf = (t: string, at: number, length: number): Field => {
  switch (length) {
    case 2:
      if (spells(t, at, "te")) return Field.Dropped
      break
    case 4:
      if (spells(t, at, "host")) return Field.Host
      break
    case 6:
      if (spells(t, at, "accept")) return Field.Accept
      break
    case 7:
      if (spells(t, at, "upgrade")) return Field.Upgrade
      if (spells(t, at, "trailer")) return Field.Trailer
      break
    case 10:
      if (spells(t, at, "connection")) return Field.Connection
      if (spells(t, at, "keep-alive")) return Field.Dropped
      break
    case 12:
      if (spells(t, at, HOP_HEADER)) return Field.Hops
      break
    case 14:
      if (spells(t, at, "content-length")) return Field.ContentLength
      if (spells(t, at, "http2-settings")) return Field.Dropped
      break
    case 15:
      if (spells(t, at, "x-forwarded-for")) return Field.ForwardedFor
      break
    case 16:
      if (spells(t, at, "x-forwarded-host")) return Field.Dropped
      break
    case 17:
      if (spells(t, at, "transfer-encoding")) return Field.TransferEncoding
      if (spells(t, at, "x-forwarded-proto")) return Field.ForwardedProto
      break
  }
  return length >= 6 && spells(t, at, "proxy-") ? Field.Dropped : Field.Kept
}

/** Never dropped because Connection names them: they frame the message or route it. */
const PROTECTED = new Set(["host", "content-length", "transfer-encoding"])

/** `kept` without the lines whose (lower case) name is in `names`: what Connection names is hop-by-hop. */
const withoutNamed = (kept: string, names: ReadonlySet<string>): string => {
  let out = ""
  for (const line of kept.split("\r\n")) {
    if (line === "" || names.has(line.slice(0, line.indexOf(":")).toLowerCase())) continue
    out += `${line}\r\n`
  }
  return out
}

/**
 * Parses a request head: `t` is everything before the blank line, in latin1. One pass over the characters, strings
 * made only of what is used (method, target, a few values, and the kept lines as runs of the original text).
 */
export const parseRequestHead = (t: string): HeadResult => {
  const n = t.length
  // request line: method SP target SP HTTP/1.x
  let i = 0
  while (i < n && TCHAR[t.charCodeAt(i)] === 1) i++
  if (i === 0 || t.charCodeAt(i) !== 32) return bad("malformed request line")
  const method = t.slice(0, i)
  const targetStart = ++i
  for (let c = t.charCodeAt(i); c > 0x20 && c < 0x7f; c = t.charCodeAt(++i));
  if (i === targetStart || t.charCodeAt(i) !== 32 || !t.startsWith("HTTP/1.", i + 1)) {
    return bad("malformed request line")
  }
  const minorDigit = t.charCodeAt(i + 8)
  if (minorDigit !== 48 && minorDigit !== 49) return bad("malformed request line")
  const target = t.slice(targetStart, i)
  const minor = minorDigit === 49 ? 1 : 0
  i += 9
  if (i < n && (t.charCodeAt(i) !== 13 || t.charCodeAt(i + 1) !== 10)) return bad("malformed request line")
  let host: string | undefined
  let contentLength = -1
  let transferEncoding: string | undefined
  let connection = ""
  let upgradeValue: string | undefined
  let hops = 0
  let accept: string | undefined
  let forwardedFor: string | undefined
  let forwardedProto: string | undefined
  let trailer: string | undefined
  let kept = ""
  /** where the lines being kept began (they pass as one slice), or -1 */
  let run = -1
  for (let line = i + 2; line < n; ) {
    let lineEnd = t.indexOf("\r\n", line)
    if (lineEnd === -1) lineEnd = n
    const first = t.charCodeAt(line)
    if (first === 32 || first === 9) return bad("folded header line")
    let colon = line
    while (colon < lineEnd && TCHAR[t.charCodeAt(colon)] === 1) colon++
    if (colon === lineEnd) return bad("header line without a colon")
    if (colon === line || t.charCodeAt(colon) !== 58) return bad("invalid header name")
    let v = colon + 1
    while (v < lineEnd && isOws(t.charCodeAt(v))) v++
    let vEnd = lineEnd
    while (vEnd > v && isOws(t.charCodeAt(vEnd - 1))) vEnd--
    // control characters other than horizontal tab (a bare CR or LF among them) are not allowed in a value
    for (let k = v; k < vEnd; k++) {
      const c = t.charCodeAt(k)
      if ((c < 32 && c !== 9) || c === 127) return bad(`invalid character in ${t.slice(line, colon)}`)
    }
    const field = fieldOf(t, line, colon - line)
    let keep = false
    switch (field) {
      case Field.Kept:
        keep = true
        break
      case Field.Host:
        if (host !== undefined) return bad("more than one Host header")
        host = t.slice(v, vEnd)
        keep = true
        break
      case Field.ContentLength: {
        if (vEnd === v || vEnd - v > 15) return bad("invalid Content-Length")
        let length = 0
        for (let k = v; k < vEnd; k++) {
          const d = t.charCodeAt(k) - 48
          if (d < 0 || d > 9) return bad("invalid Content-Length")
          length = length * 10 + d
        }
        if (contentLength !== -1 && contentLength !== length) return bad("conflicting Content-Length headers")
        // a repeated, equal one is sent once
        keep = contentLength === -1
        contentLength = length
        break
      }
      case Field.TransferEncoding: {
        const value = t.slice(v, vEnd)
        transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`
        keep = true
        break
      }
      case Field.Connection: {
        const value = t.slice(v, vEnd)
        connection = connection === "" ? value : `${connection},${value}`
        break
      }
      case Field.Upgrade:
        upgradeValue = t.slice(v, vEnd)
        break
      case Field.Trailer:
        trailer = t.slice(v, vEnd)
        break
      case Field.Accept:
        accept = t.slice(v, vEnd)
        keep = true
        break
      case Field.Hops: {
        const count = Number.parseInt(t.slice(v, vEnd), 10)
        if (Number.isFinite(count) && count > hops) hops = count
        break
      }
      case Field.ForwardedFor: {
        const value = t.slice(v, vEnd)
        forwardedFor = forwardedFor === undefined ? value : `${forwardedFor}, ${value}`
        break
      }
      case Field.ForwardedProto:
        forwardedProto = t.slice(v, vEnd)
        break
    }
    if (keep) {
      if (run === -1) run = line
    } else if (run !== -1) {
      kept += t.slice(run, line)
      run = -1
    }
    line = lineEnd + 2
  }
  // the last line has no CRLF of its own: the blank line took it
  if (run !== -1) kept += `${t.slice(run)}\r\n`
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
  if (connection !== "") {
    let named: Set<string> | undefined
    for (const raw of connection.split(",")) {
      const token = raw.trim().toLowerCase()
      if (token === "") continue
      if (token === "close") close = true
      else if (token === "keep-alive") keepAlive = true
      else if (token === "upgrade") wantsUpgrade = true
      else if (!PROTECTED.has(token)) {
        named ??= new Set()
        named.add(token)
      }
    }
    if (named !== undefined) kept = withoutNamed(kept, named)
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
    method,
    target,
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
    forwardedProto,
    kept
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
  /** Where the head's bytes end, past the blank line. */
  readonly end: number
}

/** Whether the bytes at `at` spell `name` (lower case letters and dashes), ignoring case. */
export const nameAt = (buf: Buffer, at: number, name: string): boolean => {
  for (let i = 0; i < name.length; i++) if ((buf[at + i]! | 0x20) !== name.charCodeAt(i)) return false
  return true
}

/** Whether `buf[from, to)` holds `word` (lower case letters and dashes), ignoring case. */
const holds = (buf: Buffer, from: number, to: number, word: string): boolean => {
  for (let i = from; i + word.length <= to; i++) if (nameAt(buf, i, word)) return true
  return false
}

/**
 * The status line `HTTP/1.x SSS[ reason]CRLF` at `buf[start, end)`: its status, whether it is HTTP/1.0, and where the
 * next line starts. Null when the line does not end within the bytes; undefined when it is no such line.
 */
export const statusLineAt = (
  buf: Buffer,
  start: number,
  end: number
): { readonly status: number; readonly http10: boolean; readonly next: number } | null | undefined => {
  let lf = start
  while (lf < end && buf[lf] !== 10) lf++
  if (lf === end) return null
  if (lf - start < 13 || buf[lf - 1] !== 13 || !nameAt(buf, start, "http/1.") || buf[start + 8] !== 32) {
    return undefined
  }
  const minorDigit = buf[start + 7]
  if (minorDigit !== 48 && minorDigit !== 49) return undefined
  let status = 0
  for (let i = start + 9; i < start + 12; i++) {
    const d = buf[i]! - 48
    if (d < 0 || d > 9) return undefined
    status = status * 10 + d
  }
  if (start + 13 < lf && buf[start + 12] !== 32) return undefined
  return { status, http10: minorDigit === 48, next: lf + 1 }
}

/**
 * Reads the response head at `buf[start…]` for what framing needs, in one pass over its bytes and without making
 * strings of them (every response passes here, and a call into Buffer's native methods per line costs more than the
 * loop). Null when the head does not end within `buf`; undefined when it is not HTTP/1.x or a line does not end in
 * CRLF.
 */
export const scanResponseHead = (buf: Buffer, start: number): ResponseHead | null | undefined => {
  const length = buf.length
  const statusLine = statusLineAt(buf, start, length)
  if (statusLine === null || statusLine === undefined) return statusLine
  const { status } = statusLine
  let lf: number
  let contentLength = -1
  let chunked = false
  let transferEncoding = false
  let close = statusLine.http10
  let line = statusLine.next
  for (;;) {
    lf = line
    while (lf < length && buf[lf] !== 10) lf++
    if (lf === length) return null
    if (lf === line || buf[lf - 1] !== 13) return undefined
    const lineEnd = lf - 1
    // the blank line
    if (lineEnd === line) break
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
        if (holds(buf, v, vEnd, "close")) close = true
        else if (statusLine.http10 && holds(buf, v, vEnd, "keep-alive")) close = false
      }
    }
    line = lf + 1
  }
  // a body with a transfer coding other than chunked runs until the connection closes
  if (transferEncoding && !chunked) contentLength = -1
  return { status, contentLength, chunked, close, end: lf + 1 }
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
 * blank line after the last chunk and trailers), or `MORE`, or `MALFORMED`. `onData` is handed each run of the chunks'
 * data as it passes, for a reader that takes the framing off (the h2 path); the fast path passes the bytes on as
 * they are.
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

  scan(
    buf: Buffer,
    start: number,
    end: number = buf.length,
    onData?: (buf: Buffer, from: number, to: number) => void
  ): number {
    let i = start
    while (i < end) {
      switch (this.state) {
        case Chunk.Data: {
          const n = Math.min(this.remaining, end - i)
          onData?.(buf, i, i + n)
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
