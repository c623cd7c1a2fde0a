import { devServerIn, injectDevServer } from "../frameworks.js"
import { baseSlug } from "../names.js"
import { shellQuote } from "../tokens.js"
import { type InitResult, type ProcessDraft, todoCmd } from "./model.js"
import { renderConfig } from "./render.js"

interface PackageManager {
  readonly name: string
  readonly lockfile: string
  readonly setup: string
}

// In the order the lock files are preferred when several are present and package.json does not say.
const managers: ReadonlyArray<PackageManager> = [
  { name: "npm", lockfile: "package-lock.json", setup: "npm ci" },
  { name: "pnpm", lockfile: "pnpm-lock.yaml", setup: "pnpm install --frozen-lockfile" },
  { name: "yarn", lockfile: "yarn.lock", setup: "yarn install --frozen-lockfile" },
  { name: "bun", lockfile: "bun.lockb", setup: "bun install" },
  { name: "bun", lockfile: "bun.lock", setup: "bun install" }
]

interface PackageJson {
  readonly scripts: Readonly<Record<string, string>>
  /** The `packageManager` field's tool name, e.g. `pnpm` from `pnpm@9.1.0`. */
  readonly declaredManager: string | undefined
}

const parsePackageJson = (text: string): PackageJson | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined
  const record = parsed as Readonly<Record<string, unknown>>
  const rawScripts = typeof record.scripts === "object" && record.scripts !== null ? record.scripts : {}
  const scripts = Object.fromEntries(
    Object.entries(rawScripts).filter((entry): entry is [string, string] => typeof entry[1] === "string")
  )
  const declaredManager =
    typeof record.packageManager === "string" ? record.packageManager.split("@")[0]?.trim() : undefined
  return { scripts, declaredManager: declaredManager === "" ? undefined : declaredManager }
}

const pickManager = (
  lockfiles: ReadonlyArray<string>,
  declared: string | undefined,
  notes: Array<string>,
  /** what is left out of setup without a lock file: the whole command, or one package's part of it */
  left = "[project] has no setup command"
): { readonly name: string; readonly setup: string | undefined } => {
  const present = managers.filter((manager) => lockfiles.includes(manager.lockfile))
  const chosen = present.find((manager) => manager.name === declared) ?? present[0]
  if (present.length > 1 && chosen !== undefined) {
    notes.push(`several lock files found (${present.map((m) => m.lockfile).join(", ")}); using ${chosen.lockfile}`)
  }
  if (chosen !== undefined) return { name: chosen.name, setup: chosen.setup }
  const name = managers.find((manager) => manager.name === declared)?.name ?? "npm"
  notes.push(`no lock file found, so ${left}; add one once \`${name} install\` has made one`)
  return { name, setup: undefined }
}

const selfPort = `\${self.port}`

/**
 * What the draft says about the dev server the script starts: berth appends the port, strict-port and host flags to
 * one it recognises (so `npm run dev` works as written); inside a longer script it cannot, so the flags are given.
 */
const devServerComment = (manager: string, script: string, scripts: Readonly<Record<string, string>>) => {
  const command = `${manager} run ${script}`
  const injected = injectDevServer(command, selfPort, scripts)
  if (injected !== undefined) {
    return [
      `berth recognises ${injected.framework} here and starts it as \`${injected.command}\``,
      "(the leased port, on loopback); inject = false turns that off"
    ]
  }
  const inside = devServerIn(scripts[script] ?? "", selfPort)
  if (inside === undefined) return []
  const separator = manager === "npm" ? " --" : ""
  return [
    `hint: the ${script} script runs ${inside.framework} inside a longer script, which ignores PORT; pass its flags:`,
    `cmd = "${command}${separator} ${inside.flags.join(" ")}" (or give ${inside.framework} a script of its own)`
  ]
}

/** The process that runs a package's dev (else start) script; `dir` when the package is in a folder of its own. */
const webService = (
  pkg: PackageJson | undefined,
  manager: string,
  notes: Array<string>,
  name = "web",
  dir?: string
): ProcessDraft => {
  const script = pkg?.scripts.dev !== undefined ? "dev" : pkg?.scripts.start !== undefined ? "start" : undefined
  const base = { _tag: "Process", name, url: name, dir } as const
  if (script === undefined) {
    if (pkg !== undefined) notes.push(`package.json has no dev or start script; set services.${name}.cmd in berth.toml`)
    return {
      ...base,
      cmdComments: [`TODO: set the command that starts the app; berth gives it a port in ${selfPort}`],
      cmd: todoCmd(name)
    }
  }
  return {
    ...base,
    cmdComments: devServerComment(manager, script, pkg?.scripts ?? {}),
    cmd: `${manager} run ${script}`,
    env: [["PORT", selfPort]]
  }
}

/** A minimal berth.toml for a project without a compose file: one web process from the package.json scripts. */
export const fromPackageJson = (input: {
  readonly packageJsonText: string | undefined
  readonly projectName: string
  readonly lockfiles: ReadonlyArray<string>
}): InitResult => {
  const notes: Array<string> = []
  const pkg = input.packageJsonText === undefined ? undefined : parsePackageJson(input.packageJsonText)
  if (input.packageJsonText === undefined) notes.push("no package.json found; set services.web.cmd in berth.toml")
  else if (pkg === undefined) notes.push("package.json is not a valid JSON object; set services.web.cmd in berth.toml")
  const manager = pickManager(input.lockfiles, pkg?.declaredManager, notes)
  const toml = renderConfig({
    header: [
      `Generated by \`berth init\` from ${input.packageJsonText === undefined ? "defaults" : "package.json"}.`,
      "Review the TODOs, then run `berth check`."
    ],
    project: { name: input.projectName, setup: manager.setup },
    services: [webService(pkg, manager.name, notes)]
  })
  return { toml, notes }
}

/** A package in a folder of the project's own (`api/`, `web/`), with its package.json and the lock files beside it. */
export interface SubPackage {
  readonly dir: string
  readonly packageJsonText: string
  readonly lockfiles: ReadonlyArray<string>
}

/** A service name (and route label) for a package's folder: lower-case letters, digits and "-", a letter first. */
const serviceNameOf = (dir: string): string => {
  const slug = baseSlug(dir)
  return /^[a-z]/.test(slug) ? slug : `app-${slug}`
}

/**
 * A berth.toml for a project whose packages each sit in a folder of their own, with no package.json above them: a
 * setup that installs each (in its folder, with its own lock file's tool), and a process per package that runs its
 * dev script there.
 */
export const fromPackages = (input: {
  readonly projectName: string
  readonly packages: ReadonlyArray<SubPackage>
}): InitResult => {
  const notes: Array<string> = []
  const setups: Array<string> = []
  const services: Array<ProcessDraft> = []
  const sorted = [...input.packages].sort((a, b) => a.dir.localeCompare(b.dir))
  for (const sub of sorted) {
    const own: Array<string> = []
    const pkg = parsePackageJson(sub.packageJsonText)
    if (pkg === undefined) own.push("package.json is not a valid JSON object")
    const manager = pickManager(sub.lockfiles, pkg?.declaredManager, own, "setup does not install it")
    if (manager.setup !== undefined) setups.push(`(cd ${shellQuote(sub.dir)} && ${manager.setup})`)
    services.push(webService(pkg, manager.name, own, serviceNameOf(sub.dir), sub.dir))
    notes.push(...own.map((note) => `${sub.dir}: ${note}`))
  }
  const toml = renderConfig({
    header: [
      `Generated by \`berth init\` from ${sorted.map((sub) => `${sub.dir}/package.json`).join(", ")}.`,
      "Review the TODOs, then run `berth check`."
    ],
    project: { name: input.projectName, setup: setups.length === 0 ? undefined : setups.join(" && ") },
    services
  })
  return { toml, notes }
}
