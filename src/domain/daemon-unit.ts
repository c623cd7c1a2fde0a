/**
 * `berth daemon install`: the file that has the user's service manager start berth's daemon at login — a systemd user
 * unit on Linux, a launchd agent on macOS — as text, from what the installing shell knows (its node, berth's entry,
 * BERTH_HOME and PATH). Pure: the command writes it and asks the manager to enable it.
 *
 * The daemon started so is the same `berth daemon run` a command starts on demand (the same Node flags, its output in
 * the daemon log). Stopping it must leave the worlds' services running, as `berth daemon stop` does — the next daemon
 * adopts them — so systemd stops only the daemon's own process (KillMode=process) and launchd leaves its process group
 * alone. A daemon that finds another one serving this BERTH_HOME exits 0, so neither manager starts it again then.
 */
import { shortHash } from "./hash.js"

export type ManagerPlatform = "linux" | "darwin"

export interface DaemonLaunch {
  /** the node binary */
  readonly node: string
  readonly nodeFlags: ReadonlyArray<string>
  /** berth's CommonJS entry (dist/berth.cjs) */
  readonly entry: string
  /** BERTH_HOME, absolute */
  readonly home: string
  /** the daemon log, where its output goes */
  readonly log: string
  /** PATH of the installing shell: what the worlds' commands are found on */
  readonly path: string
}

export interface UnitFile {
  /** `berth.service`, `berth-1a2b3c4d.service`, `dev.berth.daemon.plist` */
  readonly name: string
  /** what the manager calls it: the unit's name, or the agent's label */
  readonly label: string
  readonly text: string
}

/** A value the manager's file cannot carry as written: a line break or another control character. */
export const unwritable = (launch: DaemonLaunch): string | undefined => {
  const fields: ReadonlyArray<[string, string]> = [
    ["node", launch.node],
    ["entry", launch.entry],
    ["BERTH_HOME", launch.home],
    ["the daemon log", launch.log],
    ["PATH", launch.path],
    ...launch.nodeFlags.map((flag): [string, string] => ["a Node flag", flag])
  ]
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  const bad = fields.find(([, value]) => /[\u0000-\u001f\u007f]/.test(value))
  return bad === undefined ? undefined : `${bad[0]} holds a control character (${JSON.stringify(bad[1])})`
}

/**
 * One name per BERTH_HOME, so that two homes can each have their daemon: the default home's is plain `berth`, any
 * other's carries a hash of its path.
 */
export const unitStem = (home: string, defaultHome: string): string =>
  home === defaultHome ? "berth" : `berth-${shortHash(home, 8)}`

/** A systemd value in double quotes: `\` and `"` escaped, `%` (a specifier) doubled; `$` too where it expands. */
const systemdQuoted = (value: string, expands: boolean): string => {
  const escaped = value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("%", "%%")
  return `"${expands ? escaped.replaceAll("$", "$$$$") : escaped}"`
}

/** An `append:` path is taken as written up to the line's end: only `%` (a specifier) needs doubling. */
const systemdPath = (value: string): string => value.replaceAll("%", "%%")

export const systemdUnit = (launch: DaemonLaunch, stem: string): UnitFile => {
  const exec = [launch.node, ...launch.nodeFlags, launch.entry, "daemon", "run"]
  const text = [
    "# Written by `berth daemon install`; `berth daemon uninstall` removes it.",
    "[Unit]",
    `Description=berth daemon (BERTH_HOME=${systemdPath(launch.home)})`,
    "",
    "[Service]",
    "Type=simple",
    `Environment=${systemdQuoted(`BERTH_HOME=${launch.home}`, false)}`,
    `Environment=${systemdQuoted(`PATH=${launch.path}`, false)}`,
    `WorkingDirectory=${systemdPath(launch.home)}`,
    `ExecStart=${exec.map((part) => systemdQuoted(part, true)).join(" ")}`,
    `StandardOutput=append:${systemdPath(launch.log)}`,
    `StandardError=append:${systemdPath(launch.log)}`,
    // stopping the unit stops the daemon only: the worlds' services keep running, and the next daemon adopts them
    "KillMode=process",
    "Restart=on-failure",
    "RestartSec=2",
    "",
    "[Install]",
    "WantedBy=default.target",
    ""
  ].join("\n")
  return { name: `${stem}.service`, label: `${stem}.service`, text }
}

const xml = (value: string): string =>
  value
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&apos;")

/** The agent's label: reverse-DNS, as launchd's are, one per BERTH_HOME as `unitStem` makes it. */
export const agentLabel = (stem: string): string => `dev.berth.${stem === "berth" ? "daemon" : stem}`

export const launchdAgent = (launch: DaemonLaunch, stem: string): UnitFile => {
  const label = agentLabel(stem)
  const exec = [launch.node, ...launch.nodeFlags, launch.entry, "daemon", "run"]
  const text = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    "<!-- Written by `berth daemon install`; `berth daemon uninstall` removes it. -->",
    '<plist version="1.0">',
    "<dict>",
    "  <key>Label</key>",
    `  <string>${xml(label)}</string>`,
    "  <key>ProgramArguments</key>",
    "  <array>",
    ...exec.map((part) => `    <string>${xml(part)}</string>`),
    "  </array>",
    "  <key>EnvironmentVariables</key>",
    "  <dict>",
    "    <key>BERTH_HOME</key>",
    `    <string>${xml(launch.home)}</string>`,
    "    <key>PATH</key>",
    `    <string>${xml(launch.path)}</string>`,
    "  </dict>",
    "  <key>WorkingDirectory</key>",
    `  <string>${xml(launch.home)}</string>`,
    "  <key>StandardOutPath</key>",
    `  <string>${xml(launch.log)}</string>`,
    "  <key>StandardErrorPath</key>",
    `  <string>${xml(launch.log)}</string>`,
    "  <key>RunAtLoad</key>",
    "  <true/>",
    // started again only after a failure: a daemon that exits 0 found another serving this home, or was stopped
    "  <key>KeepAlive</key>",
    "  <dict>",
    "    <key>SuccessfulExit</key>",
    "    <false/>",
    "  </dict>",
    // the worlds' services outlive the daemon, as they do `berth daemon stop`
    "  <key>AbandonProcessGroup</key>",
    "  <true/>",
    "</dict>",
    "</plist>",
    ""
  ].join("\n")
  return { name: `${label}.plist`, label, text }
}

export const unitFile = (platform: ManagerPlatform, launch: DaemonLaunch, stem: string): UnitFile =>
  platform === "linux" ? systemdUnit(launch, stem) : launchdAgent(launch, stem)
