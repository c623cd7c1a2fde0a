/**
 * Turns an `effect/Schema` ParseIssue tree into flat findings with key paths and messages written for people:
 * "expected a list of service names, got 5", "unknown key", "missing required key". Unions are reported as one
 * finding at their path (their member-by-member failures would only confuse).
 */
import * as Option from "effect/Option"
import type * as ParseResult from "effect/ParseResult"
import * as AST from "effect/SchemaAST"
import type { KeyPath, PathSegment } from "./diagnostic.js"

export interface Finding {
  readonly path: KeyPath
  readonly kind: "invalid" | "unknown-key" | "missing"
  readonly message: string
  /** for unknown keys: the keys that would have been accepted here */
  readonly known: ReadonlyArray<string>
  /** for a wrong literal: the literals that would have been accepted */
  readonly literals: ReadonlyArray<string>
  readonly actual: unknown
}

const describeAst = (ast: AST.AST): string => {
  const own = Option.getOrUndefined(AST.getDescriptionAnnotation(ast))
  if (own !== undefined) return own
  switch (ast._tag) {
    case "StringKeyword":
      return "a string"
    case "NumberKeyword":
      return "a number"
    case "BooleanKeyword":
      return "true or false"
    case "Literal":
      return JSON.stringify(ast.literal)
    case "TupleType":
      return "a list"
    case "TypeLiteral":
      return "a table"
    case "Refinement":
      return describeAst(ast.from)
    case "Transformation":
      return describeAst(ast.to)
    case "Union":
      return ast.types
        .filter((t) => t._tag !== "UndefinedKeyword")
        .map(describeAst)
        .join(" or ")
    default:
      return String(ast)
  }
}

/** How a value looks in TOML, for "got …" in messages. */
export const showValue = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (Array.isArray(value)) return "a list"
  if (value instanceof Date) return "a date"
  if (value !== null && typeof value === "object") return "a table"
  return String(value)
}

const literalsOf = (ast: AST.AST): ReadonlyArray<string> => {
  if (ast._tag === "Literal") return typeof ast.literal === "string" ? [ast.literal] : []
  if (ast._tag === "Union") return ast.types.flatMap(literalsOf)
  if (ast._tag === "Refinement") return literalsOf(ast.from)
  return []
}

const keysOf = (ast: AST.AST): ReadonlyArray<string> => {
  if (ast._tag === "TypeLiteral") return ast.propertySignatures.map((p) => String(p.name))
  if (ast._tag === "Refinement") return keysOf(ast.from)
  if (ast._tag === "Transformation") return keysOf(ast.from)
  return []
}

const segment = (key: PropertyKey): PathSegment => (typeof key === "number" ? key : String(key))

export const flattenIssue = (issue: ParseResult.ParseIssue): ReadonlyArray<Finding> => {
  const out: Array<Finding> = []
  const invalid = (path: KeyPath, ast: AST.AST, actual: unknown, message?: string) => {
    out.push({
      path,
      kind: "invalid",
      message: message ?? `expected ${describeAst(ast)}, got ${showValue(actual)}`,
      known: [],
      literals: literalsOf(ast),
      actual
    })
  }
  const walk = (issue: ParseResult.ParseIssue, path: KeyPath, known: ReadonlyArray<string>): void => {
    switch (issue._tag) {
      case "Pointer": {
        const more = Array.isArray(issue.path) ? issue.path.map(segment) : [segment(issue.path as PropertyKey)]
        walk(issue.issue, [...path, ...more], known)
        return
      }
      case "Composite": {
        if (issue.ast._tag === "Union") {
          // `Schema.optional(X)` is `X | undefined`: report X's own problem, not the union's
          const members = (Array.isArray(issue.issues) ? issue.issues : [issue.issues]) as Array<ParseResult.ParseIssue>
          const defined = members.filter((m) => !(m._tag === "Type" && m.ast._tag === "UndefinedKeyword"))
          if (defined.length === 1 && defined.length < members.length) walk(defined[0]!, path, known)
          else invalid(path, issue.ast, issue.actual)
          return
        }
        const keys = keysOf(issue.ast)
        const issues = Array.isArray(issue.issues) ? issue.issues : [issue.issues as ParseResult.ParseIssue]
        for (const inner of issues) walk(inner, path, keys.length > 0 ? keys : known)
        return
      }
      case "Refinement":
        // a failed predicate carries our own message in its inner Type issue
        walk(issue.issue, path, known)
        return
      case "Transformation":
        walk(issue.issue, path, known)
        return
      case "Type":
        invalid(path, issue.ast, issue.actual, issue.message)
        return
      case "Forbidden":
        invalid(path, issue.ast, issue.actual, issue.message)
        return
      case "Missing":
        out.push({ path, kind: "missing", message: "missing required key", known, literals: [], actual: undefined })
        return
      case "Unexpected":
        out.push({ path, kind: "unknown-key", message: "unknown key", known, literals: [], actual: issue.actual })
        return
    }
  }
  walk(issue, [], [])
  return out
}
