/**
 * berth's block in the hosts file (`/etc/hosts`): the names of the live routes on loopback, for programs that ask
 * the system to resolve `*.localhost` and get nothing (glibc without nss-myhostname: Python, curl, Go). Pure text in,
 * text out; `berth hosts` reads and writes the file.
 */

const BEGIN = "# >>> berth routes (berth hosts clean removes this)"
const END = "# <<< berth routes"

/** The hosts file with berth's block listing `names` (sorted, once each); no block when there are none. */
export const withHosts = (text: string, names: ReadonlyArray<string>): string => {
  const kept = withoutHosts(text)
  const unique = [...new Set(names.map((n) => n.toLowerCase()))].sort()
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
