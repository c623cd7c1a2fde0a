/**
 * `berth check`'s warnings: things that are valid TOML and a valid config but probably not what the user meant.
 * Pure: whatever needs the machine (is an adapter executable on PATH, is a variable set) comes in as a function.
 */
import { binkyAdapterCommand, builtinAdapters, copiesExisting, externalAdapterCommand } from "../adapters.js"
import { injectDevServer } from "../frameworks.js"
import { escapesWorktree, globBase } from "../golden.js"
import { closestName } from "../names.js"
import { howItLeaves, type Landing } from "../paths.js"
import { tokensOf } from "../tokens.js"
import { byPosition, type Diagnostic, didYouMean, formatPath, type KeyPath } from "./diagnostic.js"
import * as Model from "./model.js"
import { dirEscapes, type ParsedConfig } from "./parse.js"

export interface LintEnvironment {
  /** is an executable of this name on PATH? */
  readonly onPath: (command: string) => boolean
  /** the environment plus the project's `.env` */
  readonly env: (name: string) => string | undefined
  /**
   * where a path relative to the config's folder lands on disk, every link followed (`domain/paths.ts`); without
   * it, links are not looked at
   */
  readonly lands?: (path: string, options?: { readonly followLast?: boolean }) => Landing
}

const isTable = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date)

/** Every string in the document with its key path. */
const strings = (value: unknown, path: KeyPath, out: Array<{ path: KeyPath; value: string }>) => {
  if (typeof value === "string") out.push({ path, value })
  else if (Array.isArray(value)) for (const [i, v] of value.entries()) strings(v, [...path, i], out)
  else if (isTable(value)) for (const [k, v] of Object.entries(value)) strings(v, [...path, k], out)
  return out
}

/** The service a key path belongs to, for `${self.…}`. */
const ownerOf = (path: KeyPath): string | undefined => {
  if (path[0] === "services") return path[1] as string | undefined
  if (path[0] === "overrides" && path[2] === "services") return path[3] as string | undefined
  return undefined
}

const secretKey = /(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|_KEY$|^KEY$|CREDENTIAL)/i
const inlinePassword = /^[a-z][a-z0-9+.-]*:\/\/[^/@:\s]*:([^@/\s]+)@/i

type Finding = { readonly message: string; readonly hint?: string | undefined }

/** Why a token would stay unresolved, or undefined when it names something real. */
const tokenProblem = (
  segments: ReadonlyArray<string>,
  owner: string | undefined,
  services: ReadonlyMap<string, Model.Service>
): Finding | undefined => {
  const written = `\${${segments.join(".")}}`
  const [head, field, sub, ...rest] = segments
  if (head === "env")
    return field !== undefined && sub === undefined ? undefined : { message: `${written} is malformed` }
  if (head === "world") {
    return ["name", "slug", "path"].includes(field ?? "") && sub === undefined
      ? undefined
      : { message: `${written} is not a world token`, hint: "use ${world.name}, ${world.slug} or ${world.path}" }
  }
  if (head === "project") {
    return field === "name" && sub === undefined ? undefined : { message: `${written} is not a project token` }
  }
  const name = head === "self" ? owner : head
  const service = name === undefined ? undefined : services.get(name)
  if (service === undefined) {
    const guess = head === undefined ? undefined : closestName(head, services.keys())
    return {
      message: `${written} names no service; it will stay as written`,
      hint: guess === undefined ? undefined : `did you mean \${${[guess, ...segments.slice(1)].join(".")}}?`
    }
  }
  if (rest.length > 0) return { message: `${written} has too many parts` }
  if (service._tag === "Slice") {
    return field === "url" && sub === undefined
      ? undefined
      : { message: `${written}: a slice gives only \${${head}.url}` }
  }
  const self = head === "self"
  const noPort: Finding = {
    message: self
      ? `${written} is used in "${service.name}", which has neither url nor ports, so it gets no port`
      : `${written}: "${service.name}" has neither url nor ports, so it gets no port`,
    hint: `add url = "${service.name}" or ports = ["…"] to [services.${service.name}]`
  }
  if (field === "port" || field === "url" || field === "host") {
    return sub !== undefined
      ? { message: `${written} has too many parts` }
      : Model.hasPort(service)
        ? undefined
        : noPort
  }
  if (field === "ports" && sub !== undefined) {
    return service.ports.includes(sub)
      ? undefined
      : {
          message: `${written}: "${service.name}" declares no port named "${sub}"`,
          hint: service.ports.length > 0 ? `its ports: ${service.ports.join(", ")}` : `add ports = ["${sub}"]`
        }
  }
  return { message: `${written} is not a service token`, hint: "use .url, .port, .host or .ports.NAME" }
}

export const lintConfig = (parsed: ParsedConfig, environment: LintEnvironment): ReadonlyArray<Diagnostic> => {
  const { config, positions, raw } = parsed
  const warnings: Array<Diagnostic> = []
  const warn = (path: KeyPath, finding: Finding, offset?: number) => {
    const key = positions.find(path)
    const value = positions.value(path)
    // point into the string when the value sits on one line
    const at =
      offset !== undefined && value !== undefined ? { line: value.line, column: value.column + 1 + offset } : key
    warnings.push({ severity: "warning", file: config.file, ...at, path: formatPath(path), ...finding })
  }
  const services = new Map(config.services.map((s) => [s.name, s]))

  for (const { path, value } of strings(raw, [], [])) {
    const owner = ownerOf(path)
    const missing = new Set<string>()
    for (const token of tokensOf(value)) {
      const problem = tokenProblem(token.segments, owner, services)
      if (problem !== undefined) warn(path, problem, token.start)
      const [head, name] = token.segments
      if (head === "env" && name !== undefined && environment.env(name) === undefined && !missing.has(name)) {
        missing.add(name)
        warn(
          path,
          { message: `\${env.${name}} is not set`, hint: `set ${name} in your environment or in the project's .env` },
          token.start
        )
      }
    }
    const password = inlinePassword.exec(value)
    if (password !== null && !password[1]!.includes("${")) {
      warn(path, {
        message: "a password is written inline in this URL",
        hint: "put the URL in .env and write ${env.NAME} here, so the credential stays out of the repository"
      })
    }
    const key = path[path.length - 1]
    const inEnv = path[path.length - 2] === "env"
    if (inEnv && typeof key === "string" && secretKey.test(key) && value !== "" && tokensOf(value).length === 0) {
      warn(path, {
        message: `${key} has a literal value: credentials do not belong in berth.toml`,
        hint: `put it in .env and write ${key} = "\${env.${key}}"`
      })
    }
  }

  if (config.services.length === 0) {
    warn([], {
      message: "this file defines no services: berth up would start nothing",
      hint: 'add a [services.<name>] table with cmd = "…" (or adapter = "…" for a slice), or run berth init'
    })
  }
  /** A path of the checkout that a link it holds leads out of it: what to say, or undefined. */
  const linkedOut = (
    key: string,
    written: string,
    path: string,
    consequence: string,
    options?: { readonly followLast?: boolean }
  ): Finding | undefined => {
    const l = environment.lands?.(path, options)
    if (l === undefined || l.inside) return undefined
    return {
      message: `${key} ${JSON.stringify(written)} ${howItLeaves(written, l)}, outside the worktree; ${consequence}`,
      hint:
        l.link === undefined
          ? "name a path inside the worktree"
          : `berth writes and reads only inside the worktree: make ${l.link} a file or folder of its own, or name another path`
    }
  }
  const isGlob = (pattern: string) => /[*?{}[\]]/.test(pattern)
  for (const key of ["copy", "link"] as const) {
    config.project[key].forEach((pattern, i) => {
      if (!escapesWorktree(pattern)) {
        // a literal path is brought as it is (a link as the link); a glob's fixed folder is walked
        const path = isGlob(pattern) ? globBase(pattern) : pattern
        const out =
          path === "" || path === "."
            ? undefined
            : linkedOut(`[project] ${key}`, pattern, path, "berth up will refuse to bring it", {
                followLast: isGlob(pattern)
              })
        if (out !== undefined) warn(["project", key, i], out)
        return
      }
      warn(["project", key, i], {
        message: `[project] ${key} "${pattern}" reaches outside the repository: berth skips it`,
        hint: "name paths relative to the repository root, without .."
      })
    })
  }
  const urls = new Map<string, string>()
  for (const service of config.services) {
    const at = ["services", service.name]
    if (service._tag === "Process") {
      const refuses = `berth up will refuse to start "${service.name}"`
      const dirOut = service.dir !== undefined && dirEscapes(service.dir)
      for (const file of service.envFiles) {
        if (!dirEscapes(file)) {
          const fromRoot = service.dir === undefined ? file : `${service.dir}/${file}`
          const out = dirOut ? undefined : linkedOut("env_file", file, fromRoot, refuses)
          if (out !== undefined) warn([...at, "env_file"], out)
          continue
        }
        warn([...at, "env_file"], {
          message: `env_file "${file}" is outside the worktree; ${refuses}`,
          hint: "name a file in the service's folder, such as .env"
        })
      }
      // with inject = false, a dev server that ignores PORT listens where it likes: the route points at nothing
      const server = service.inject ? undefined : injectDevServer(service.cmd, "${self.port}")
      if (server !== undefined && Model.hasPort(service) && !/\$\{self\.port\}/.test(service.cmd)) {
        warn([...at, "inject"], {
          message: `"${service.name}" runs ${server.framework}, which ignores PORT, and inject = false: it will not listen on the port berth leases it`,
          hint: `remove inject = false, or pass the port yourself: ${server.flags.join(" ")}`
        })
      }
      if (dirOut) {
        warn([...at, "dir"], {
          message: `dir "${service.dir}" is outside the worktree; ${refuses}`,
          hint: "use a path relative to the repository root that stays inside it"
        })
      } else if (service.dir !== undefined) {
        const out = linkedOut("dir", service.dir, service.dir, refuses)
        if (out !== undefined) warn([...at, "dir"], out)
      }
      if (service.url !== undefined) {
        const first = urls.get(service.url)
        if (first !== undefined) {
          warn([...at, "url"], {
            message: `url "${service.url}" is also used by "${first}": only one of them can be routed`,
            hint: `give "${service.name}" its own url`
          })
        } else urls.set(service.url, service.name)
      }
      continue
    }
    service.goldenInputs.forEach((glob, i) => {
      const base = escapesWorktree(glob) ? "" : globBase(glob)
      const out =
        base === "" ? undefined : linkedOut("golden_inputs", glob, base, "berth will refuse to build the golden")
      if (out !== undefined) warn([...at, "golden_inputs", i], out)
    })
    const adapter = builtinAdapters.get(service.adapter)
    const own = externalAdapterCommand(service.adapter)
    const binky = binkyAdapterCommand(service.adapter)
    if (adapter === undefined && !environment.onPath(own) && environment.onPath(binky)) {
      // it works, but not as a berth adapter would: say which protocol serves it, and what that leaves out
      warn([...at, "adapter"], {
        message: `berth has no built-in adapter "${service.adapter}": ${binky} serves it, and berth speaks binky's protocol to it (no clone: every world runs migrate and seed; gc sees only the slices it lists with this installation as owner)`,
        hint: `a ${own} on PATH would be used instead, in berth's own protocol`
      })
    } else if (adapter === undefined && !environment.onPath(own)) {
      warn([...at, "adapter"], {
        message: `berth has no built-in adapter "${service.adapter}" and ${externalAdapterCommand(service.adapter)} is not on PATH`,
        hint:
          didYouMean(closestName(service.adapter, builtinAdapters.keys())) ??
          `built-in adapters: ${[...builtinAdapters.keys()].join(", ")}`
      })
    }
    if (service.cloneFrom !== undefined && adapter !== undefined && !adapter.canClone) {
      warn([...at, "clone_from"], {
        message: `the ${service.adapter} adapter cannot clone: every world runs migrate and seed itself`,
        hint: "remove clone_from"
      })
    }
    if (service.cloneSource !== undefined && adapter !== undefined && !copiesExisting.has(adapter.family)) {
      warn([...at, "clone_from"], {
        message: `the ${service.adapter} adapter cannot copy a database already on its server: up will fail`,
        hint: 'clone_from = "<database>" works with postgres and mysql; use clone_from = "golden" or remove it'
      })
    }
    if (service.cloneFrom !== undefined && service.migrate === undefined && service.seed === undefined) {
      warn([...at, "clone_from"], {
        message: "clone_from without migrate or seed copies an empty golden",
        hint: "add migrate and/or seed, or remove clone_from"
      })
    }
  }
  return warnings.sort(byPosition)
}
