/**
 * `berth trust [--remove]`: puts berth's CA into (or takes it out of) the trust stores that matter on this machine —
 * the system store (Debian/Ubuntu, Fedora/RHEL, Arch, openSUSE, macOS) and, where `certutil` exists, the NSS
 * databases Chrome/Chromium and Firefox read on Linux (they ignore the system store).
 *
 * Planning is pure (`planTrust` from `TrustFacts`); `gatherTrustFacts` reads the machine; `runTrust` carries a plan
 * out with argv arrays — never a shell — and reports what it did, what it skipped and why, and, when it is not root,
 * the exact commands to run with sudo for the system store.
 */
import { execFile } from "node:child_process"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import * as os from "node:os"
import { delimiter, join } from "node:path"
import * as Effect from "effect/Effect"
import { shellQuote } from "../../domain/tokens.js"

export type Distro = "debian" | "fedora" | "arch" | "suse"

export interface NssDatabase {
  /** the folder holding cert9.db */
  readonly path: string
  /** who reads it, for the report: "Chrome/Chromium", "Firefox (profile x)" */
  readonly reader: string
}

export interface TrustFacts {
  readonly platform: NodeJS.Platform
  /** The content of /etc/os-release, when there is one. */
  readonly osRelease: string | undefined
  /** Which of the tools berth uses are on PATH. */
  readonly commands: ReadonlySet<string>
  readonly home: string
  readonly nssDatabases: ReadonlyArray<NssDatabase>
  readonly isRoot: boolean
}

export interface TrustCa {
  readonly certPath: string
  readonly commonName: string
  /** SHA-256, lower-case hex */
  readonly fingerprint: string
  /** SHA-1, upper-case hex without colons (what macOS `security -Z` takes) */
  readonly sha1: string
}

export type StepKind = "run" | "nss-add" | "nss-remove"

export interface TrustStep {
  /** The store this step changes, e.g. "system store (Debian/Ubuntu)". */
  readonly store: string
  readonly kind: StepKind
  readonly argv: ReadonlyArray<string>
  readonly root: boolean
}

export interface Skipped {
  readonly store: string
  readonly reason: string
}

export interface TrustPlan {
  readonly action: "install" | "remove"
  readonly steps: ReadonlyArray<TrustStep>
  readonly skipped: ReadonlyArray<Skipped>
}

const TOOLS = ["update-ca-certificates", "update-ca-trust", "trust", "security", "certutil"] as const

/** The distribution family from /etc/os-release (ID, then ID_LIKE). */
export const detectDistro = (osRelease: string | undefined): Distro | undefined => {
  if (osRelease === undefined) return undefined
  const field = (name: string): Array<string> => {
    const m = new RegExp(`^${name}=(.*)$`, "m").exec(osRelease)
    return (m?.[1] ?? "")
      .replace(/^["']|["']$/g, "")
      .toLowerCase()
      .split(/\s+/)
      .filter(Boolean)
  }
  for (const id of [...field("ID"), ...field("ID_LIKE")]) {
    if (id === "debian" || id === "ubuntu") return "debian"
    if (id === "fedora" || id === "rhel" || id === "centos") return "fedora"
    if (id === "arch" || id === "archlinux") return "arch"
    if (id === "suse" || id.startsWith("opensuse") || id === "sles") return "suse"
  }
  return undefined
}

/** The nickname the CA gets in NSS databases: its name plus a fingerprint prefix, so two homes never clash. */
export const nssNickname = (ca: TrustCa): string => `${ca.commonName} ${ca.fingerprint.slice(0, 8)}`

/** The file name the CA gets in a system anchors folder. */
export const anchorName = (ca: TrustCa, extension: string): string =>
  `berth-${ca.fingerprint.slice(0, 16)}.${extension}`

const systemLabels: Record<Distro | "macos", string> = {
  debian: "system store (Debian/Ubuntu)",
  fedora: "system store (Fedora/RHEL)",
  arch: "system store (Arch)",
  suse: "system store (openSUSE)",
  macos: "system keychain (macOS)"
}

const MACOS_KEYCHAIN = "/Library/Keychains/System.keychain"

const systemSteps = (
  facts: TrustFacts,
  ca: TrustCa,
  action: "install" | "remove"
): { steps: Array<TrustStep>; skipped: Array<Skipped> } => {
  const install = action === "install"
  const needs = (store: string, tool: string, hint: string) =>
    facts.commands.has(tool) ? undefined : { store, reason: `${tool} is not installed (${hint})` }
  const anchorSteps = (store: string, dir: string, extension: string, refresh: ReadonlyArray<string>) => {
    const file = join(dir, anchorName(ca, extension))
    const first = install ? ["install", "-m", "0644", ca.certPath, file] : ["rm", "-f", file]
    return [first, [...refresh]].map((argv): TrustStep => ({ store, kind: "run", argv, root: true }))
  }
  if (facts.platform === "darwin") {
    const store = systemLabels.macos
    const missing = needs(store, "security", "it ships with macOS")
    if (missing !== undefined) return { steps: [], skipped: [missing] }
    const argvs = install
      ? [["security", "add-trusted-cert", "-d", "-r", "trustRoot", "-k", MACOS_KEYCHAIN, ca.certPath]]
      : [
          ["security", "remove-trusted-cert", "-d", ca.certPath],
          ["security", "delete-certificate", "-Z", ca.sha1, MACOS_KEYCHAIN]
        ]
    return { steps: argvs.map((argv) => ({ store, kind: "run", argv, root: true })), skipped: [] }
  }
  if (facts.platform !== "linux") {
    return {
      steps: [],
      skipped: [{ store: "system store", reason: `berth does not know the trust store of ${facts.platform}` }]
    }
  }
  const distro = detectDistro(facts.osRelease)
  switch (distro) {
    case "debian": {
      const store = systemLabels.debian
      const missing = needs(store, "update-ca-certificates", "apt install ca-certificates")
      if (missing !== undefined) return { steps: [], skipped: [missing] }
      const refresh = install ? ["update-ca-certificates"] : ["update-ca-certificates", "--fresh"]
      return { steps: anchorSteps(store, "/usr/local/share/ca-certificates", "crt", refresh), skipped: [] }
    }
    case "fedora": {
      const store = systemLabels.fedora
      const missing = needs(store, "update-ca-trust", "dnf install ca-certificates")
      if (missing !== undefined) return { steps: [], skipped: [missing] }
      return {
        steps: anchorSteps(store, "/etc/pki/ca-trust/source/anchors", "pem", ["update-ca-trust", "extract"]),
        skipped: []
      }
    }
    case "suse": {
      const store = systemLabels.suse
      const missing = needs(store, "update-ca-certificates", "zypper install ca-certificates")
      if (missing !== undefined) return { steps: [], skipped: [missing] }
      return { steps: anchorSteps(store, "/etc/pki/trust/anchors", "pem", ["update-ca-certificates"]), skipped: [] }
    }
    case "arch": {
      const store = systemLabels.arch
      const missing = needs(store, "trust", "pacman -S p11-kit")
      if (missing !== undefined) return { steps: [], skipped: [missing] }
      const argv = ["trust", "anchor", install ? "--store" : "--remove", ca.certPath]
      return { steps: [{ store, kind: "run", argv, root: true }], skipped: [] }
    }
    case undefined:
      return {
        steps: [],
        skipped: [
          {
            store: "system store",
            reason: `berth does not know this Linux distribution's trust store; add ${ca.certPath} to it by hand`
          }
        ]
      }
  }
}

/** The steps for `berth trust` (`install`) or `berth trust --remove` (`remove`) on the machine `facts` describe. */
export const planTrust = (facts: TrustFacts, ca: TrustCa, action: "install" | "remove"): TrustPlan => {
  const { steps, skipped } = systemSteps(facts, ca, action)
  if (facts.nssDatabases.length > 0 && !facts.commands.has("certutil")) {
    for (const db of facts.nssDatabases) {
      skipped.push({
        store: `NSS database of ${db.reader} (${db.path})`,
        reason: "certutil is not installed (libnss3-tools on Debian/Ubuntu, nss-tools on Fedora, nss on Arch/Homebrew)"
      })
    }
  } else {
    const nick = nssNickname(ca)
    for (const db of facts.nssDatabases) {
      const store = `NSS database of ${db.reader} (${db.path})`
      const argv =
        action === "install"
          ? ["certutil", "-A", "-d", `sql:${db.path}`, "-n", nick, "-t", "C,,", "-i", ca.certPath]
          : ["certutil", "-D", "-d", `sql:${db.path}`, "-n", nick]
      steps.push({ store, kind: action === "install" ? "nss-add" : "nss-remove", argv, root: false })
    }
  }
  if (facts.platform === "linux" && !facts.nssDatabases.some((db) => db.path === join(facts.home, ".pki", "nssdb"))) {
    skipped.push({
      store: `NSS database of Chrome/Chromium (${join(facts.home, ".pki", "nssdb")})`,
      reason: "it does not exist yet (Chrome and Chromium make it on their first start; run this again then)"
    })
  }
  return { action, steps, skipped }
}

/** NSS databases (cert9.db) in `home`: Chrome/Chromium's, and each Firefox profile's (also snap and flatpak). */
export const findNssDatabases = (home: string, platform: NodeJS.Platform = process.platform): Array<NssDatabase> => {
  const found: Array<NssDatabase> = []
  const add = (path: string, reader: string) => {
    if (existsSync(join(path, "cert9.db")) && !found.some((d) => d.path === path)) found.push({ path, reader })
  }
  add(join(home, ".pki", "nssdb"), "Chrome/Chromium")
  add(join(home, "snap", "chromium", "current", ".pki", "nssdb"), "Chromium (snap)")
  const firefoxRoots =
    platform === "darwin"
      ? [join(home, "Library", "Application Support", "Firefox", "Profiles")]
      : [
          join(home, ".mozilla", "firefox"),
          join(home, "snap", "firefox", "common", ".mozilla", "firefox"),
          join(home, ".var", "app", "org.mozilla.firefox", ".mozilla", "firefox")
        ]
  for (const root of firefoxRoots) {
    let entries: Array<string> = []
    try {
      entries = readdirSync(root)
    } catch {
      continue
    }
    for (const entry of entries.sort()) add(join(root, entry), `Firefox (profile ${entry})`)
  }
  return found
}

const onPath = (command: string): boolean =>
  (process.env.PATH ?? "")
    .split(delimiter)
    .filter(Boolean)
    .some((dir) => existsSync(join(dir, command)))

/** What `planTrust` needs to know about this machine. */
export const gatherTrustFacts = (home: string = os.homedir()): TrustFacts => {
  let osRelease: string | undefined
  try {
    osRelease = readFileSync("/etc/os-release", "utf8")
  } catch {
    osRelease = undefined
  }
  return {
    platform: process.platform,
    osRelease,
    commands: new Set(TOOLS.filter(onPath)),
    home,
    nssDatabases: findNssDatabases(home),
    isRoot: typeof process.getuid === "function" && process.getuid() === 0
  }
}

export interface Done {
  readonly store: string
  readonly command: string
}

export interface Failed {
  readonly store: string
  readonly command: string
  readonly message: string
}

export interface TrustReport {
  readonly action: "install" | "remove"
  readonly done: ReadonlyArray<Done>
  readonly failed: ReadonlyArray<Failed>
  readonly skipped: ReadonlyArray<Skipped>
  /** Commands berth did not run because they need root: one line per store, for the user to run. */
  readonly needsSudo: ReadonlyArray<{ readonly store: string; readonly command: string }>
}

export const commandLine = (argv: ReadonlyArray<string>): string => argv.map(shellQuote).join(" ")

interface RunResult {
  readonly code: number
  readonly output: string
}

const run = (argv: ReadonlyArray<string>) =>
  Effect.async<RunResult>((resume) => {
    execFile(argv[0]!, argv.slice(1), { timeout: 60_000 }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`.trim()
      if (error === null) return resume(Effect.succeed({ code: 0, output }))
      const code = typeof error.code === "number" ? error.code : -1
      resume(Effect.succeed({ code, output: output === "" ? error.message : output }))
    })
  })

/** Whether the CA's nickname is in the NSS database at `db` (`certutil -L -n` fails when it is not). */
const nssHas = (db: string, nick: string) =>
  Effect.map(run(["certutil", "-L", "-d", `sql:${db}`, "-n", nick]), (r) => r.code === 0)

/**
 * Carries out `plan`. Steps that need root run only when `isRoot`; otherwise they are collected, per store, as one
 * sudo command line. A failed step stops the rest of its store's steps.
 */
export const runTrust = Effect.fn("Trust.run")(function* (plan: TrustPlan, options: { readonly isRoot: boolean }) {
  const done: Array<Done> = []
  const failed: Array<Failed> = []
  const skipped: Array<Skipped> = [...plan.skipped]
  const sudo = new Map<string, Array<string>>()
  const brokenStores = new Set<string>()
  for (const step of plan.steps) {
    const command = commandLine(step.argv)
    if (brokenStores.has(step.store)) {
      skipped.push({ store: step.store, reason: `not run after an earlier step failed: ${command}` })
      continue
    }
    if (step.root && !options.isRoot) {
      const lines = sudo.get(step.store) ?? []
      lines.push(`sudo ${command}`)
      sudo.set(step.store, lines)
      continue
    }
    if (step.kind === "nss-remove") {
      const db = step.argv[3]!.slice("sql:".length)
      const nick = step.argv[5]!
      if (!(yield* nssHas(db, nick))) {
        skipped.push({ store: step.store, reason: "berth's CA is not in it" })
        continue
      }
      // a nickname can hold several certificates: delete until none is left
      let result: RunResult = { code: 0, output: "" }
      for (let i = 0; i < 10 && (yield* nssHas(db, nick)); i++) result = yield* run(step.argv)
      if (result.code === 0) done.push({ store: step.store, command })
      else failed.push({ store: step.store, command, message: result.output })
      continue
    }
    const result = yield* run(step.argv)
    if (result.code === 0) {
      done.push({ store: step.store, command })
    } else {
      failed.push({ store: step.store, command, message: result.output })
      brokenStores.add(step.store)
    }
  }
  const report: TrustReport = {
    action: plan.action,
    done,
    failed,
    skipped,
    needsSudo: [...sudo].map(([store, lines]) => ({ store, command: lines.join(" && ") }))
  }
  return report
})

/** The report as lines for a person. */
export const formatTrustReport = (report: TrustReport): string => {
  const verb = report.action === "install" ? "trusted by" : "removed from"
  const lines: Array<string> = []
  for (const d of report.done) lines.push(`✓ ${verb} the ${d.store}\n    ran: ${d.command}`)
  for (const f of report.failed)
    lines.push(`✗ ${f.store}: ${f.command} failed\n    ${f.message.split("\n").join("\n    ")}`)
  for (const s of report.needsSudo) lines.push(`! the ${s.store} needs root; run:\n    ${s.command}`)
  for (const s of report.skipped) lines.push(`- skipped the ${s.store}: ${s.reason}`)
  if (lines.length === 0) lines.push("nothing to do: no trust store found")
  return lines.join("\n")
}
