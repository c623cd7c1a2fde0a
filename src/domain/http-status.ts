/**
 * The status of an HTTP/1.x answer, read from its first bytes: all a health check needs of it. Interim answers (1xx)
 * are skipped to the final one. Headers are not looked at: a check asks whether the service answers, and how.
 */

/** How far into an answer the final status line must come: past this, the answer is not one. */
export const MAX_STATUS_SEARCH_BYTES = 64 * 1024

const STATUS_LINE = /^HTTP\/1\.[01] ([1-5]\d\d)(?: |\r?$)/

/**
 * The final status in `text` (the answer's bytes so far, as latin1), `null` while more bytes are needed, `undefined`
 * when the bytes are no HTTP/1.x answer.
 */
export const finalStatus = (text: string): number | null | undefined => {
  let at = 0
  for (;;) {
    const lf = text.indexOf("\n", at)
    if (lf === -1) return text.length - at > MAX_STATUS_SEARCH_BYTES ? undefined : null
    const match = STATUS_LINE.exec(text.slice(at, lf))
    if (match === null) return undefined
    const status = Number(match[1])
    if (status >= 200) return status
    // an interim answer (100 Continue, 103 Early Hints): its head ends at a blank line, then the next answer begins
    const blank = /\r?\n\r?\n/g
    blank.lastIndex = at
    const end = blank.exec(text)
    if (end === null) return text.length - at > MAX_STATUS_SEARCH_BYTES ? undefined : null
    at = end.index + end[0].length
  }
}
