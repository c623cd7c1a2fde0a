/**
 * A `.env` file → variables. The common dialect: `KEY=value`, an optional `export `, `#` comments, single quotes
 * (literal), double quotes (with \n, \t, \" and \\ escapes, may span lines), and unquoted values with trailing
 * comments. No interpolation: a value is what is written.
 */
export const parseDotenv = (text: string): ReadonlyMap<string, string> => {
  const vars = new Map<string, string>()
  // blank lines before a key are skipped, but around `=` only spaces and tabs: `KEY=` on its own line is empty
  const line = /^\s*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*/
  let rest = text.replace(/\r\n?/g, "\n")
  while (rest.length > 0) {
    const m = line.exec(rest)
    if (m === null) {
      const nl = rest.indexOf("\n")
      rest = nl === -1 ? "" : rest.slice(nl + 1)
      continue
    }
    rest = rest.slice(m[0].length)
    const quote = rest[0]
    let value: string
    if (quote === '"' || quote === "'") {
      const end = findClosingQuote(rest, quote)
      const body = rest.slice(1, end === -1 ? undefined : end)
      value = quote === '"' ? unescapeDouble(body) : body
      rest = end === -1 ? "" : rest.slice(end + 1)
      const nl = rest.indexOf("\n")
      rest = nl === -1 ? "" : rest.slice(nl + 1)
    } else {
      const nl = rest.indexOf("\n")
      const raw = nl === -1 ? rest : rest.slice(0, nl)
      rest = nl === -1 ? "" : rest.slice(nl + 1)
      value = raw.replace(/\s+#.*$/, "").trim()
    }
    vars.set(m[1]!, value)
  }
  return vars
}

const findClosingQuote = (s: string, quote: string): number => {
  for (let i = 1; i < s.length; i++) {
    if (quote === '"' && s[i] === "\\") i++
    else if (s[i] === quote) return i
  }
  return -1
}

const escapes: Record<string, string> = { n: "\n", t: "\t", r: "\r", '"': '"', "\\": "\\" }

const unescapeDouble = (s: string): string => s.replace(/\\(.)/g, (_, c: string) => escapes[c] ?? `\\${c}`)
