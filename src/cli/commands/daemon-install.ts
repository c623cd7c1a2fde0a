/**
 * `berth daemon install|uninstall`: the user's service manager starts the daemon at login — a systemd user unit on
 * Linux (enabled with `systemctl --user` where it answers), a launchd agent on macOS (loaded at the next login). The
 * file's text comes from `src/domain/daemon-unit.ts`; here it is written, owner-only, and the manager told.
 */
import { spawnSync } from "node:child_process"
import { chmodSync, existsSync, lstatSync, mkdirSync, rmSync, writeFileSync } from "node:fs"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { DAEMON_NODE_FLAGS } from "../../daemon/client.js"
import { type DaemonLaunch, type ManagerPlatform, unitFile, unitStem, unwritable } from "../../domain/daemon-unit.js"
import { InvalidRequest } from "../../domain/errors.js"
import { shellQuote } from "../../domain/tokens.js"
import { Home, resolveHome } from "../../services/Home.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"

const platformOf = (): Effect.Effect<ManagerPlatform, InvalidRequest> =>
  process.platform === "linux" || process.platform === "darwin"
    ? Effect.succeed(process.platform)
    : Effect.fail(
        new InvalidRequest({
          reason: `berth daemon install knows systemd (Linux) and launchd (macOS), not ${process.platform}\n  hint: start the daemon from your session's startup instead: berth daemon start`
        })
      )

/** `$HOME`, which the manager's folder is under; a home berth cannot tell is refused rather than guessed. */
const userHome = (): Effect.Effect<string, InvalidRequest> => {
  const home = process.env.HOME
  return home?.startsWith("/")
    ? Effect.succeed(home)
    : Effect.fail(
        new InvalidRequest({ reason: "HOME is not set to an absolute path\n  hint: run it from your login shell" })
      )
}

/** Where the manager reads the file from. */
const folderOf = (platform: ManagerPlatform, home: string): string => {
  if (platform === "darwin") return `${home}/Library/LaunchAgents`
  const config = process.env.XDG_CONFIG_HOME
  // the XDG spec says to ignore a relative XDG_CONFIG_HOME
  return `${config?.startsWith("/") ? config : `${home}/.config`}/systemd/user`
}

/** Runs `systemctl --user …`: undefined when it did what was asked, else why not (no user manager, say). */
const systemctl = (args: ReadonlyArray<string>): Effect.Effect<string | undefined> =>
  Effect.sync(() => {
    const run = spawnSync("systemctl", ["--user", ...args], { encoding: "utf8", timeout: 15_000 })
    if (run.error !== undefined) return run.error.message
    if (run.status === 0) return undefined
    return (run.stderr.trim().split("\n")[0] ?? "") || `exit ${run.status}`
  })

const describeFile = Effect.gen(function* () {
  const platform = yield* platformOf()
  const user = yield* userHome()
  const home = yield* Home
  const entry = process.argv[1]
  if (entry === undefined) return yield* new InvalidRequest({ reason: "cannot tell which berth to start" })
  const launch: DaemonLaunch = {
    node: process.execPath,
    nodeFlags: DAEMON_NODE_FLAGS,
    entry,
    home: home.root,
    log: home.daemonLog,
    path: process.env.PATH ?? ""
  }
  const refused = unwritable(launch)
  if (refused !== undefined) {
    return yield* new InvalidRequest({
      reason: `cannot write the daemon's ${platform === "linux" ? "systemd unit" : "launchd agent"}: ${refused}\n  hint: run it from a shell whose PATH and BERTH_HOME hold no line breaks or control characters`
    })
  }
  const unit = unitFile(platform, launch, unitStem(home.root, resolveHome({ HOME: user })))
  return { platform, home, unit, file: `${folderOf(platform, user)}/${unit.name}` }
})

const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription("print the file and where it would go; write and enable nothing")
)

const install = Command.make("install", { dryRun, json }, ({ dryRun, json }) =>
  Effect.gen(function* () {
    const { file, home, platform, unit } = yield* describeFile
    const document = { platform, file, name: unit.label, text: unit.text, home: home.root }
    if (dryRun) {
      if (json) return yield* printDocument("daemon-install", { ...document, written: false, enabled: false, run: [] })
      return yield* Console.log(`# ${file}\n${unit.text}`)
    }
    yield* Effect.try({
      try: () => {
        mkdirSync(file.slice(0, file.lastIndexOf("/")), { recursive: true, mode: 0o700 })
        writeFileSync(file, unit.text, { mode: 0o600 })
        // a file left by an earlier install keeps its mode through the write
        chmodSync(file, 0o600)
      },
      catch: (e) =>
        new InvalidRequest({
          reason: `cannot write ${file}: ${e instanceof Error ? e.message : String(e)}\n  hint: check that folder's owner and permissions`
        })
    })
    const label = shellQuote(unit.label)
    let enabled = false
    let why: string | undefined
    let run: Array<string> = []
    if (platform === "linux") {
      why = (yield* systemctl(["daemon-reload"])) ?? (yield* systemctl(["enable", unit.label]))
      enabled = why === undefined
      if (!enabled) run = [`systemctl --user daemon-reload && systemctl --user enable ${label}`]
    } else {
      // launchd loads the agents of ~/Library/LaunchAgents at login; this starts it under launchd now
      run = [`launchctl bootstrap gui/$(id -u) ${shellQuote(file)}`]
    }
    if (json) return yield* printDocument("daemon-install", { ...document, written: true, enabled, run })
    const lines = [`wrote ${file} (BERTH_HOME ${home.root}, and this shell's PATH for the worlds' commands)`]
    if (platform === "linux") {
      lines.push(
        enabled
          ? `enabled: systemd starts the daemon at your login (systemctl --user status ${label})`
          : `not enabled: systemctl --user did not answer (${why}); to enable it, run:\n  ${run[0]}`
      )
    } else {
      lines.push(`launchd starts the daemon at your next login; to have it start it now, run:\n  ${run[0]}`)
    }
    yield* Console.log(lines.join("\n"))
  })
).pipe(
  Command.withDescription("Have your service manager start the daemon at login (systemd user unit, launchd agent)")
)

const uninstall = Command.make("uninstall", { json }, ({ json }) =>
  Effect.gen(function* () {
    const { file, home, platform, unit } = yield* describeFile
    const label = shellQuote(unit.label)
    const present = existsSync(file)
    let disabled = false
    let run: Array<string> = []
    if (present && platform === "linux") disabled = (yield* systemctl(["disable", unit.label])) === undefined
    if (present) {
      yield* Effect.try({
        try: () => {
          // with no user manager to ask, what `disable` removes goes here: the link that enabled the unit
          if (platform === "linux" && !disabled) {
            const wants = `${file.slice(0, file.lastIndexOf("/"))}/default.target.wants/${unit.name}`
            if (lstatSync(wants, { throwIfNoEntry: false })?.isSymbolicLink() === true) rmSync(wants)
          }
          rmSync(file, { force: true })
        },
        catch: (e) =>
          new InvalidRequest({
            reason: `cannot remove ${file}: ${e instanceof Error ? e.message : String(e)}\n  hint: check that folder's owner and permissions`
          })
      })
      if (platform === "linux" && disabled) yield* systemctl(["daemon-reload"])
      // a loaded agent runs until logout: this stops it now (the worlds' services keep running)
      if (platform === "darwin") run = [`launchctl bootout gui/$(id -u)/${label}`]
    }
    if (json) {
      return yield* printDocument("daemon-uninstall", {
        platform,
        file,
        name: unit.label,
        home: home.root,
        removed: present,
        disabled,
        run
      })
    }
    if (!present) return yield* Console.log(`not installed: no ${file}`)
    const lines = [`removed ${file}; the daemon runs on until it is stopped, and commands start it as before`]
    if (platform === "linux") lines.push("systemd no longer starts it at login")
    else lines.push(`if launchd runs it now, this stops it (the worlds' services keep running):\n  ${run[0]}`)
    yield* Console.log(lines.join("\n"))
  })
).pipe(Command.withDescription("Undo daemon install: the service manager no longer starts the daemon at login"))

export const daemonInstall = [install, uninstall] as const
