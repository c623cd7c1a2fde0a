/**
 * `berth doctor [--json]`: looks at everything berth depends on — git, berth.toml, BERTH_HOME, the daemon and its
 * socket, the proxy's listeners, every server a slice names, `*.localhost` resolution, stale worktrees — and says
 * what is wrong with the fix for each. Starts no daemon: a doctor must not change what it examines.
 */
import { execFileSync } from "node:child_process"
import { lookup } from "node:dns/promises"
import { X509Certificate } from "node:crypto"
import { existsSync, statSync } from "node:fs"
import { join } from "node:path"
import * as net from "node:net"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { request } from "../../daemon/wire.js"
import * as Model from "../../domain/config/model.js"
import {
  bundleHolds,
  exitCodeOf,
  type Finding,
  fail,
  ok,
  portFindings,
  renderFindings,
  serverAddress,
  staleProcesses,
  warn
} from "../../domain/doctor.js"
import { defaultPortRange, type PortRange } from "../../domain/ports.js"
import { resolveTemplate, unresolvedIn } from "../../domain/tokens.js"
import { ConfigFiles } from "../../services/ConfigFiles.js"
import { homePaths, resolveHome } from "../../services/homePaths.js"
import { gatherTrustFacts, nssNickname, type TrustCa } from "../../services/proxy/trust.js"
import { knownMigrations } from "../../services/Registry.js"
import { isThisBuild } from "../../version.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"
import {
  ephemeralRange,
  fileText,
  listeners,
  nssHolds,
  readState,
  systemBundle,
  worldProcesses
} from "./doctor-facts.js"

const git = (args: ReadonlyArray<string>, cwd?: string) =>
  execFileSync("git", [...args], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()

const reachable = (host: string, port: number, timeoutMs = 2_000) =>
  new Promise<string | undefined>((done) => {
    const socket = net.connect({ host, port })
    const finish = (why: string | undefined) => {
      socket.destroy()
      done(why)
    }
    socket.setTimeout(timeoutMs, () => finish(`no answer within ${timeoutMs / 1000} s`))
    socket.once("connect", () => finish(undefined))
    socket.once("error", (e: NodeJS.ErrnoException) => finish(e.code ?? e.message))
  })

/** The main checkout of the repository `dir` is in (the first worktree git lists); undefined outside one. */
const mainCheckout = (dir: string): string | undefined => {
  try {
    return /^worktree (.*)$/m.exec(git(["worktree", "list", "--porcelain"], dir))?.[1]
  } catch {
    return undefined
  }
}

const mode = (path: string) => statSync(path).mode & 0o777

const checkGit = (cwd: string): ReadonlyArray<Finding> => {
  try {
    const version = git(["--version"])
    try {
      const top = git(["rev-parse", "--show-toplevel"], cwd)
      const prunable = git(["worktree", "list", "--porcelain"], cwd)
        .split("\n\n")
        .filter((entry) => /^prunable/m.test(entry))
        .map((entry) => /^worktree (.*)$/m.exec(entry)?.[1] ?? "?")
      return [
        ok("git", `${version}; repository ${top}`),
        prunable.length === 0
          ? ok("worktrees", "every worktree git knows is there")
          : warn(
              "worktrees",
              `git lists worktrees whose folders are gone: ${prunable.join(", ")}`,
              "git worktree prune"
            )
      ]
    } catch {
      return [ok("git", version), warn("repository", `${cwd} is not in a git repository`, "run berth in your project")]
    }
  } catch {
    return [fail("git", "git is not on PATH", "install git (apt-get install git, brew install git)")]
  }
}

/** Where berth's CA is trusted: the system store, each NSS database (Chrome, Firefox), and Node's extra CAs. */
const trustFindings = (certPath: string, pem: string): ReadonlyArray<Finding> => {
  let ca: TrustCa
  try {
    const cert = new X509Certificate(pem)
    ca = {
      certPath,
      commonName: /CN=([^\n,]+)/.exec(cert.subject)?.[1] ?? "berth local CA",
      fingerprint: cert.fingerprint256.replaceAll(":", "").toLowerCase(),
      sha1: cert.fingerprint.replaceAll(":", "").toUpperCase()
    }
  } catch (e) {
    return [
      fail(
        "ca",
        `${certPath} is not a certificate (${e instanceof Error ? e.message : String(e)})`,
        "berth daemon stop; berth daemon start makes it again"
      )
    ]
  }
  const findings: Array<Finding> = []
  const system = systemBundle()
  findings.push(
    system === undefined
      ? warn("ca: system", "no system CA bundle found here", "berth trust says what it can do on this system")
      : bundleHolds(system.text, pem)
        ? ok("ca: system", `trusted (${system.path})`)
        : warn(
            "ca: system",
            `not in ${system.path}: programs using the system store refuse berth's HTTPS`,
            "berth trust"
          )
  )
  const facts = gatherTrustFacts()
  for (const db of facts.nssDatabases) {
    const held = nssHolds(db.path, nssNickname(ca))
    const check = `ca: ${db.reader}`
    findings.push(
      held === undefined
        ? warn(
            check,
            `certutil is not installed, so ${db.path} cannot be read`,
            "apt-get install libnss3-tools, then berth trust"
          )
        : held
          ? ok(check, `trusted (${db.path})`)
          : warn(check, `not in ${db.path}: the browser warns on berth's HTTPS`, "berth trust")
    )
  }
  const extra = process.env.NODE_EXTRA_CA_CERTS
  const extraText = extra === undefined || extra === "" ? undefined : fileText(extra)
  findings.push(
    extraText !== undefined && bundleHolds(extraText, pem)
      ? ok("ca: node", `trusted through NODE_EXTRA_CA_CERTS (${extra})`)
      : ok(
          "ca: node",
          `the worlds' Node processes trust it (berth sets NODE_EXTRA_CA_CERTS for them); for Node outside a world: export NODE_EXTRA_CA_CERTS=${certPath}`
        )
  )
  return findings
}

export const doctor = Command.make("doctor", { json }, ({ json }) =>
  Effect.gen(function* () {
    const cwd = process.cwd()
    const findings: Array<Finding> = [...checkGit(cwd)]

    // berth.toml, and the servers its slices name
    const files = yield* ConfigFiles
    const loaded = yield* Effect.either(files.load(cwd))
    if (loaded._tag === "Left") {
      const e = loaded.left
      findings.push(
        e._tag === "ConfigNotFound"
          ? warn("config", "no berth.toml here or above", "berth init writes one")
          : fail("config", e.message.split("\n")[0] ?? e.message, "berth check lists every error with its line")
      )
    } else {
      const warnings = yield* files.lint(loaded.right)
      findings.push(
        warnings.length === 0
          ? ok("config", `${loaded.right.file} is valid`)
          : warn(
              "config",
              `${loaded.right.file} is valid, with ${warnings.length} warning(s)`,
              "berth check shows them"
            )
      )
      // `${env.…}` as up reads it: the environment, then the main checkout's .env overlaid by this worktree's
      const main = mainCheckout(loaded.right.root)
      const dotenv =
        main === undefined || main === loaded.right.root
          ? loaded.right.dotenv
          : new Map([...(yield* files.dotenv(main)), ...loaded.right.dotenv])
      const env = (name: string) => process.env[name] ?? dotenv.get(name)
      for (const slice of Model.slices(loaded.right.parsed.config)) {
        if (slice.adminUrl === undefined) continue
        const resolved = resolveTemplate(slice.adminUrl, { services: new Map(), env })
        const missing = unresolvedIn(resolved)
        const check = `slice ${slice.name}`
        if (missing.length > 0) {
          const name = /^\$\{env\.(.+)\}$/.exec(missing[0] ?? "")?.[1] ?? missing[0]
          findings.push(
            fail(
              check,
              `admin_url needs ${missing.join(", ")}, set neither here nor in .env`,
              `set ${name} in .env (or export it)`
            )
          )
          continue
        }
        const address = serverAddress(resolved.value)
        if (address === undefined) continue
        const why = yield* Effect.promise(() => reachable(address.host, address.port))
        findings.push(
          why === undefined
            ? ok(check, `${slice.adapter} server at ${address.host}:${address.port} answers`)
            : fail(
                check,
                `${slice.adapter} server at ${address.host}:${address.port} does not answer (${why})`,
                `start it, or point admin_url at one that runs`
              )
        )
      }
    }

    // BERTH_HOME and the daemon
    const home = homePaths(resolveHome())
    if (!existsSync(home.root)) findings.push(ok("home", `${home.root} (made on first use)`))
    else {
      const m = mode(home.root)
      findings.push(
        (m & 0o077) === 0
          ? ok("home", `${home.root}, owner-only`)
          : fail(
              "home",
              `${home.root} is mode ${m.toString(8)}: others can read berth's state`,
              `chmod 700 ${home.root}`
            )
      )
    }
    // the state database, read-only (the daemon may hold it: WAL lets both read)
    const state = existsSync(home.database) ? readState(home.database) : undefined
    if (state === undefined) findings.push(ok("state", `${home.database} (made on first use)`))
    else if (typeof state === "string") {
      findings.push(fail("state", `${home.database} cannot be read: ${state}`, "berth daemon start says what to do"))
    } else if (state.integrity !== "ok") {
      findings.push(
        fail(
          "state",
          `${home.database} is corrupt (${state.integrity})`,
          `move it aside (mv ${home.database} ${home.database}.broken) and start again: worlds are found anew`
        )
      )
    } else if (state.migrations > knownMigrations) {
      findings.push(
        fail(
          "state",
          `${home.database} was written by a newer berth (schema ${state.migrations}, this one knows ${knownMigrations})`,
          "upgrade berth"
        )
      )
    } else {
      findings.push(
        ok(
          "state",
          `${home.database}, intact, schema ${state.migrations}${state.migrations < knownMigrations ? ` (the daemon brings it to ${knownMigrations} when it starts)` : ""}`
        )
      )
    }
    const sockets = listeners()
    const holderOf = (port: number) => {
      const held = sockets.find((l) => l.port === port && l.pid !== undefined)
      return held === undefined ? "" : `; ${held.command ?? "a process"} (pid ${held.pid}) holds ${port}`
    }
    let range = typeof state === "object" ? state.range : defaultPortRange
    const proxyPorts: Array<number> = []

    const pong = yield* Effect.promise(() => request(home.socket, "Ping", undefined, 3_000))
    if (pong._tag !== "Success") {
      findings.push(ok("daemon", "not running: any command starts it"))
    } else {
      const info = pong.value as { readonly version: string; readonly pid: number }
      findings.push(
        isThisBuild(pong.value)
          ? ok("daemon", `running, pid ${info.pid}, berth ${info.version}`)
          : warn("daemon", `pid ${info.pid} is another build (berth ${info.version})`, "the next command replaces it")
      )
      const m = mode(home.socket)
      if ((m & 0o077) !== 0) {
        findings.push(
          fail("socket", `${home.socket} is mode ${m.toString(8)}`, "berth daemon stop; berth daemon start")
        )
      }
      const settings = yield* Effect.promise(() => request(home.socket, "GetSettings", undefined, 3_000))
      if (settings._tag === "Success") {
        const value = settings.value as {
          readonly portRange: PortRange
          readonly proxy: Record<
            "http" | "https",
            { readonly wanted: number | string; readonly port: number | null; readonly error: string | null }
          >
        }
        range = value.portRange
        for (const scheme of ["http", "https"] as const) {
          const l = value.proxy[scheme]
          const check = `proxy ${scheme}`
          if (l.port !== null) proxyPorts.push(l.port)
          if (l.wanted === "off") findings.push(ok(check, "off"))
          else if (l.port !== null) findings.push(ok(check, `listening on 127.0.0.1:${l.port}`))
          else {
            // who holds the port it wanted, where /proc tells
            const held = typeof l.wanted === "number" ? holderOf(l.wanted) : ""
            findings.push(
              fail(
                check,
                `not listening (${l.wanted}): ${l.error ?? "unknown"}${held}`,
                `free the port, or berth port --${scheme === "http" ? "proxy" : "https"} auto`
              )
            )
          }
        }
      }
    }

    // ports: the lease range against the kernel's, and who else holds ports in it
    const leases = typeof state === "object" ? state.leases : new Map<number, string>()
    const groups = typeof state === "object" ? state.groups : new Set<number>()
    findings.push(
      ...portFindings({ range, ephemeral: ephemeralRange(), listeners: sockets, leases, groups, proxyPorts })
    )
    if (typeof state === "object") findings.push(staleProcesses(worldProcesses(), state.worlds, state.groups))

    // berth's CA, where HTTPS made one: trusted by the system, the browsers' NSS databases and Node
    const caPem = fileText(join(home.root, "ca", "ca.crt"))
    if (caPem === undefined) findings.push(ok("ca", "none yet (made when HTTPS is first used)"))
    else findings.push(...trustFindings(join(home.root, "ca", "ca.crt"), caPem))

    // *.localhost: browsers and berth's Node processes resolve it themselves; other programs ask the system
    const resolved = yield* Effect.promise(() =>
      lookup("berth-doctor.localhost").then(
        (r) => r.address,
        () => undefined
      )
    )
    const hook = join(home.root, "node", "localhost-resolver.cjs")
    findings.push(
      existsSync(hook)
        ? ok("*.localhost (worlds)", `the worlds' Node processes resolve it through berth's hook (${hook})`)
        : ok("*.localhost (worlds)", "berth's hook for the worlds' Node processes is written when the daemon starts")
    )
    findings.push(
      resolved !== undefined
        ? ok("*.localhost", `the system resolves it (${resolved})`)
        : warn(
            "*.localhost",
            "the system does not resolve *.localhost: programs that ask it (Python, Go, older curl) cannot reach routes by name",
            "berth hosts sync writes the route names into /etc/hosts (or install libnss-myhostname)"
          )
    )

    if (json) yield* printDocument("doctor", { ok: exitCodeOf(findings) === 0, findings })
    else yield* Console.log(renderFindings(findings))
    process.exitCode = exitCodeOf(findings)
  })
).pipe(Command.withDescription("Find what is wrong with berth on this machine, with the fix for each finding"))
