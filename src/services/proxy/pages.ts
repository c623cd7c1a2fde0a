/**
 * The proxy's own answers (404, 502, 508, 400) rendered from a `PageModel`: HTML for browsers, plain text for curl
 * and scripts. Pure; the result is a complete HTTP/1.1 response or the parts an `http`/`http2` response needs.
 */
import type { PageModel } from "../../domain/routes.js"

const reasons: Record<number, string> = {
  400: "Bad Request",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
  502: "Bad Gateway",
  503: "Service Unavailable",
  508: "Loop Detected"
}

export const reasonPhrase = (status: number): string => reasons[status] ?? "Error"

/** Browsers send `text/html` in Accept; curl sends `*\/*`, which gets text. */
export const wantsHtml = (accept: string | undefined): boolean => accept?.toLowerCase().includes("text/html") === true

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c)

/** `code` spans: the text between backticks. */
const inlineCode = (s: string): string => escapeHtml(s).replace(/`([^`]*)`/g, "<code>$1</code>")

const worldLabel = (w: PageModel["worlds"][number]): string =>
  w.worldName !== undefined && w.worldName !== w.world ? `${w.worldName} (${w.world})` : w.world

export const renderText = (page: PageModel): string => {
  const lines = [`${page.status} ${page.title}`, "", page.message]
  if (page.hint !== undefined) lines.push(page.hint)
  if (page.worlds.length > 0) {
    lines.push("", `Worlds of ${page.project}:`)
    for (const w of page.worlds) {
      lines.push(`  ${worldLabel(w)} — ${w.state}`)
      for (const s of w.services) lines.push(`    ${s.service.padEnd(12)} ${s.state.padEnd(10)} ${s.url}`)
    }
  }
  return `${lines.join("\n")}\n`
}

export const renderHtml = (page: PageModel): string => {
  const worlds = page.worlds
    .map((w) => {
      const services = w.services
        .map(
          (s) =>
            `<li>${s.ready ? `<a href="${escapeHtml(s.url)}">${escapeHtml(s.service)}</a>` : escapeHtml(s.service)}` +
            ` <span class="state">${escapeHtml(s.state)}</span> <span class="url">${escapeHtml(s.url)}</span></li>`
        )
        .join("")
      return `<li><b>${escapeHtml(worldLabel(w))}</b> <span class="state">${escapeHtml(w.state)}</span><ul>${services}</ul></li>`
    })
    .join("")
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">',
    page.retryAfter === undefined ? "" : `<meta http-equiv="refresh" content="${page.retryAfter}">`,
    `<title>${page.status} ${escapeHtml(page.title)} · berth</title>`,
    "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem;color:#222}",
    "h1{font-size:1.4rem}code{background:#f3f3f3;padding:0 .2em}.state{color:#666;font-size:.9em}",
    ".url{color:#999;font-size:.85em}ul{padding-left:1.2rem}</style></head><body>",
    `<h1>${page.status} ${escapeHtml(page.title)}</h1>`,
    `<p>${inlineCode(page.message)}</p>`,
    page.hint === undefined ? "" : `<p>${inlineCode(page.hint)}</p>`,
    page.worlds.length === 0 ? "" : `<h2>Worlds of ${escapeHtml(page.project ?? "")}</h2><ul>${worlds}</ul>`,
    "<p><small>berth proxy</small></p></body></html>",
    ""
  ].join("\n")
}

export interface RenderedPage {
  readonly status: number
  readonly retryAfter?: number | undefined
  readonly contentType: string
  readonly body: Buffer
}

export const renderPage = (page: PageModel, accept: string | undefined): RenderedPage =>
  wantsHtml(accept)
    ? {
        status: page.status,
        retryAfter: page.retryAfter,
        contentType: "text/html; charset=utf-8",
        body: Buffer.from(renderHtml(page))
      }
    : {
        status: page.status,
        retryAfter: page.retryAfter,
        contentType: "text/plain; charset=utf-8",
        body: Buffer.from(renderText(page))
      }

/** A whole HTTP/1.1 response; `close` adds `Connection: close` (the proxy then ends the connection). */
export const rawResponse = (
  page: RenderedPage,
  options: { readonly close: boolean; readonly head: boolean }
): Buffer => {
  const head =
    `HTTP/1.1 ${page.status} ${reasonPhrase(page.status)}\r\n` +
    `Content-Type: ${page.contentType}\r\n` +
    `Content-Length: ${page.body.length}\r\n` +
    "Cache-Control: no-store\r\n" +
    (page.retryAfter === undefined ? "" : `Retry-After: ${page.retryAfter}\r\n`) +
    `Connection: ${options.close ? "close" : "keep-alive"}\r\n\r\n`
  return options.head ? Buffer.from(head, "latin1") : Buffer.concat([Buffer.from(head, "latin1"), page.body])
}

/** A bare error answer with no page model (malformed requests). */
export const rawError = (status: 400 | 408 | 431 | 502, message: string): Buffer =>
  rawResponse(
    {
      status,
      contentType: "text/plain; charset=utf-8",
      body: Buffer.from(`${status} ${reasonPhrase(status)}: ${message}\n`)
    },
    { close: true, head: false }
  )
