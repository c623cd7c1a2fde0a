/**
 * The status of an HTTP/1.x answer, read from its first bytes: all a health check needs of it. Interim answers (1xx)
 * are skipped to the final one. Of the headers only the body's framing is read (`finalHead`), so that a check can
 * close its connection as soon as the whole answer is in, rather than wait for the server to close it.
 */

/** How far into an answer the final status line must come: past this, the answer is not one. */
export const MAX_STATUS_SEARCH_BYTES = 64 * 1024

const STATUS_LINE = /^HTTP\/1\.[01] ([1-5]\d\d)(?: |\r?$)/

/**
 * The final status in `text` (the answer's bytes so far, as latin1), `null` while more bytes are needed, `undefined`
 * when the bytes are no HTTP/1.x answer.
 */
export const finalStatus = (text: string): number | null | undefined => {
  const final = finalStart(text)
  return final === null || final === undefined ? final : final.status
}

/** Where the final answer begins in `text`, and its status; as `finalStatus` for the rest. */
const finalStart = (text: string): { readonly status: number; readonly at: number } | null | undefined => {
  let at = 0
  for (;;) {
    const lf = text.indexOf("\n", at)
    if (lf === -1) return text.length - at > MAX_STATUS_SEARCH_BYTES ? undefined : null
    const match = STATUS_LINE.exec(text.slice(at, lf))
    if (match === null) return undefined
    const status = Number(match[1])
    if (status >= 200) return { status, at }
    // an interim answer (100 Continue, 103 Early Hints): its head ends at a blank line, then the next answer begins
    const blank = /\r?\n\r?\n/g
    blank.lastIndex = at
    const end = blank.exec(text)
    if (end === null) return text.length - at > MAX_STATUS_SEARCH_BYTES ? undefined : null
    at = end.index + end[0].length
  }
}

/** How an answer's body ends: after `length` bytes, at its last chunk, or only when the connection closes. */
export type BodyFraming =
  | { readonly _tag: "Length"; readonly length: number }
  | { readonly _tag: "Chunked" }
  | { readonly _tag: "UntilClose" }

/**
 * The final answer's head, once it is whole in `text`: where its body begins and how the body ends (RFC 9112 §6.3:
 * 204 and 304 have none; a chunked transfer coding wins over a length; with neither, the body runs to the close).
 * `null` while the head is not whole or is no HTTP/1.x head.
 */
export const finalHead = (text: string): { readonly bodyAt: number; readonly framing: BodyFraming } | null => {
  const final = finalStart(text)
  if (final === null || final === undefined) return null
  const blank = /\r?\n\r?\n/g
  blank.lastIndex = final.at
  const end = blank.exec(text)
  if (end === null) return null
  const bodyAt = end.index + end[0].length
  if (final.status === 204 || final.status === 304) return { bodyAt, framing: { _tag: "Length", length: 0 } }
  let length: number | undefined
  let chunked = false
  for (const line of text.slice(final.at, end.index).split(/\r?\n/).slice(1)) {
    const colon = line.indexOf(":")
    if (colon === -1) continue
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    if (name === "transfer-encoding") chunked = /(?:^|,)\s*chunked\s*$/i.test(value)
    else if (name === "content-length" && /^\d{1,15}$/.test(value)) length = Number(value)
  }
  const framing: BodyFraming = chunked
    ? { _tag: "Chunked" }
    : length !== undefined
      ? { _tag: "Length", length }
      : { _tag: "UntilClose" }
  return { bodyAt, framing }
}

/**
 * Whether `body` (the bytes after the head so far) is the whole body `framing` describes. A chunked body is whole
 * once its last (empty) chunk and the trailer section after it are in; a body that runs to the close never is.
 */
export const bodyComplete = (framing: BodyFraming, body: string): boolean => {
  switch (framing._tag) {
    case "Length":
      return body.length >= framing.length
    case "UntilClose":
      return false
    case "Chunked": {
      let at = 0
      for (;;) {
        const lf = body.indexOf("\n", at)
        if (lf === -1) return false
        const digits = body.slice(at, lf).split(";")[0]!.trim()
        if (!/^[0-9a-fA-F]{1,12}$/.test(digits)) return false
        const size = Number.parseInt(digits, 16)
        if (size === 0) {
          // trailer fields, then a blank line
          let line = lf + 1
          for (;;) {
            const next = body.indexOf("\n", line)
            if (next === -1) return false
            if (body.slice(line, next).replace(/\r$/, "") === "") return true
            line = next + 1
          }
        }
        // the chunk's data, then its CRLF
        const after = lf + 1 + size
        const crlf = body.startsWith("\r\n", after) ? 2 : body.startsWith("\n", after) ? 1 : -1
        if (crlf === -1) return false
        at = after + crlf
      }
    }
  }
}
