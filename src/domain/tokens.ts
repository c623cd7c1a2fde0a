/**
 * `${…}` tokens in config values, resolved by one pure function.
 *
 * The rules: `${self.port}`, `${self.url}`, `${self.host}`, `${self.ports.NAME}`, `${SVC.url|port|host}`,
 * `${SVC.ports.NAME}`, `${SLICE.url}`, `${env.NAME}`, `${world.name|slug|path}`, `${project.name}`. A token that names
 * nothing known is left exactly as written (and `check` warns). `$${` writes a literal `${`. When the value is placed
 * into a shell command, each substituted value is shell-quoted, because branch names may legally contain `$ ; ( ) ' " |
 * & < >` and backticks.
 */

export interface TokenPart {
  readonly _tag: "Token"
  /** the text between `${` and `}` */
  readonly expr: string
  readonly segments: ReadonlyArray<string>
  /** offset of `$` in the template */
  readonly start: number
  readonly end: number
}

export interface LiteralPart {
  readonly _tag: "Literal"
  readonly text: string
}

export type TemplatePart = TokenPart | LiteralPart

const tokenPattern = /\$\$\{|\$\{([^{}]*)\}/g

/** Splits a template into literal text and tokens. Unterminated `${` stays literal. */
export const parseTemplate = (template: string): ReadonlyArray<TemplatePart> => {
  const parts: Array<TemplatePart> = []
  let last = 0
  let literal = ""
  for (const m of template.matchAll(tokenPattern)) {
    literal += template.slice(last, m.index)
    last = m.index + m[0].length
    if (m[0] === "$${") {
      literal += "${"
      continue
    }
    if (literal !== "") parts.push({ _tag: "Literal", text: literal })
    literal = ""
    const expr = m[1]!.trim()
    parts.push({ _tag: "Token", expr, segments: expr.split("."), start: m.index, end: last })
  }
  literal += template.slice(last)
  if (literal !== "") parts.push({ _tag: "Literal", text: literal })
  return parts
}

export const tokensOf = (template: string): ReadonlyArray<TokenPart> =>
  parseTemplate(template).filter((p): p is TokenPart => p._tag === "Token")

/** What one service exposes to tokens. `url`/`host`/`port` are absent when it has no port. */
export interface ServiceCoordinates {
  readonly url?: string | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly ports?: Readonly<Record<string, number>> | undefined
}

export interface TokenContext {
  /** the service whose value is being resolved, for `${self.…}` */
  readonly self?: string | undefined
  /** processes and slices by name */
  readonly services: ReadonlyMap<string, ServiceCoordinates>
  readonly env: (name: string) => string | undefined
  readonly world?: { readonly name: string; readonly slug: string; readonly path: string } | undefined
  readonly project?: { readonly name: string } | undefined
}

export interface Resolved {
  readonly value: string
  /** tokens left as written because they name nothing known */
  readonly unresolved: ReadonlyArray<string>
  /** `${env.NAME}` tokens whose variable is not set */
  readonly missingEnv: ReadonlyArray<string>
  /** values substituted from `${env.…}`: credentials may hide there, so logs redact them */
  readonly secrets: ReadonlyArray<string>
}

/** The value a token stands for, or undefined when it names nothing known. Reports where the value came from. */
export const lookupToken = (
  segments: ReadonlyArray<string>,
  ctx: TokenContext
): { readonly value: string; readonly fromEnv: boolean } | undefined => {
  const [head, field, sub, ...rest] = segments
  if (head === undefined || field === undefined) return undefined
  if (head === "env") {
    if (sub !== undefined) return undefined
    const value = ctx.env(field)
    return value === undefined ? undefined : { value, fromEnv: true }
  }
  if (head === "world" && ctx.world !== undefined && sub === undefined) {
    const value = field === "name" || field === "slug" || field === "path" ? ctx.world[field] : undefined
    return value === undefined ? undefined : { value, fromEnv: false }
  }
  if (head === "project" && ctx.project !== undefined && sub === undefined) {
    return field === "name" ? { value: ctx.project.name, fromEnv: false } : undefined
  }
  const name = head === "self" ? ctx.self : head
  const service = name === undefined ? undefined : ctx.services.get(name)
  if (service === undefined || rest.length > 0) return undefined
  let value: string | number | undefined
  // own properties only: `${api.ports.constructor}` names nothing
  const ports = service.ports ?? {}
  if (field === "ports") value = sub !== undefined && Object.hasOwn(ports, sub) ? ports[sub] : undefined
  else if (sub !== undefined) value = undefined
  else if (field === "url") value = service.url
  else if (field === "host") value = service.host
  else if (field === "port") value = service.port
  return value === undefined ? undefined : { value: String(value), fromEnv: false }
}

/** Resolves every token of `template`. With `shell: true`, substituted values are quoted for `sh -c`. */
export const resolveTemplate = (
  template: string,
  ctx: TokenContext,
  options?: { readonly shell?: boolean }
): Resolved => {
  const unresolved: Array<string> = []
  const missingEnv: Array<string> = []
  const secrets: Array<string> = []
  let value = ""
  for (const part of parseTemplate(template)) {
    if (part._tag === "Literal") {
      // a literal `${` (written `$${`) must stay literal in a shell too
      value += part.text
      continue
    }
    const found = lookupToken(part.segments, ctx)
    if (found === undefined) {
      const written = template.slice(part.start, part.end)
      if (part.segments[0] === "env" && part.segments.length === 2) missingEnv.push(part.segments[1]!)
      else unresolved.push(written)
      value += written
      continue
    }
    if (found.fromEnv && found.value !== "") secrets.push(found.value)
    value += options?.shell === true ? shellQuote(found.value) : found.value
  }
  return { value, unresolved, missingEnv, secrets }
}

/** Every token of a resolution that named nothing, as written (`${env.X}` for an unset variable). */
export const unresolvedIn = (r: Resolved): ReadonlyArray<string> => [
  ...r.missingEnv.map((name) => `\${env.${name}}`),
  ...r.unresolved
]

const shellSafe = /^[A-Za-z0-9_@%+=:,./-]+$/

/** POSIX single-quoting: safe for any byte sequence in `sh -c`. Plain words are left bare for readable `ps`. */
export const shellQuote = (value: string): string =>
  shellSafe.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`
