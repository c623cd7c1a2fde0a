/**
 * berth's block in the hosts file (`/etc/hosts`): the names of the live routes on loopback, for programs that ask
 * the system to resolve `*.localhost` and get nothing (glibc without nss-myhostname: Python, Go; curl 7.88 and later
 * resolve it themselves). Pure text in,
 * text out; `berth hosts` reads and writes the file.
 */

const BEGIN = "# >>> berth routes (berth hosts clean removes this)"
const END = "# <<< berth routes"

/** A DNS host name (labels of letters, digits and hyphens): nothing else may become a line of the hosts file. */
const HOST_NAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"])

/**
 * The names the proxy routes, from the worlds' statuses: the host of each process's http(s) URL. A slice's address is
 * never one — a sqlite file has no host, an S3 URL names a bucket, and a database on another machine must not be
 * pinned to loopback — nor is a direct URL (loopback, an address).
 */
export const routedNames = (
  worlds: ReadonlyArray<{
    readonly services: ReadonlyArray<{ readonly kind: string; readonly url: string | null }>
  }>
): ReadonlyArray<string> =>
  worlds.flatMap((w) =>
    w.services.flatMap((s) => {
      if (s.kind !== "process" || s.url === null) return []
      let url: URL
      try {
        url = new URL(s.url)
      } catch {
        return []
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") return []
      const host = url.hostname.toLowerCase()
      return LOOPBACK.has(host) || /^[\d.]+$/.test(host) || !HOST_NAME.test(host) ? [] : [host]
    })
  )

/** The hosts file with berth's block listing `names` (sorted, once each); no block when there are none. */
export const withHosts = (text: string, names: ReadonlyArray<string>): string => {
  const kept = withoutHosts(text)
  const unique = [...new Set(names.map((n) => n.toLowerCase()).filter((n) => HOST_NAME.test(n)))].sort()
  if (unique.length === 0) return kept
  const block = [BEGIN, ...unique.map((name) => `127.0.0.1 ${name}`), END].join("\n")
  return `${kept === "" ? "" : kept.replace(/\n*$/, "\n")}${block}\n`
}

/** The hosts file without berth's block. */
export const withoutHosts = (text: string): string => {
  const out: Array<string> = []
  let inBlock = false
  for (const line of text.split("\n")) {
    if (line === BEGIN) inBlock = true
    else if (inBlock && line === END) inBlock = false
    else if (!inBlock) out.push(line)
  }
  return out.join("\n")
}

/** The names in berth's block now. */
export const hostsIn = (text: string): ReadonlyArray<string> => {
  const names: Array<string> = []
  let inBlock = false
  for (const line of text.split("\n")) {
    if (line === BEGIN) inBlock = true
    else if (line === END) inBlock = false
    else if (inBlock) {
      const name = line.split(/\s+/)[1]
      if (name !== undefined) names.push(name)
    }
  }
  return names
}
