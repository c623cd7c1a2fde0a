import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  type DaemonLaunch,
  agentLabel,
  launchdAgent,
  systemdUnit,
  unitFile,
  unitStem,
  unwritable
} from "../../src/domain/daemon-unit.js"

/** a home with every character the two formats treat specially: a space, %, $, quotes, a backslash, & < > */
const home = `/home/u/my berth %h $HOME "q" 'a' \\b & <x>`
const launch: DaemonLaunch = {
  node: process.execPath,
  nodeFlags: ["--max-semi-space-size=1", "--optimize-for-size"],
  entry: "/opt/berth/dist/berth.cjs",
  home,
  log: `${home}/logs/daemon.log`,
  path: "/home/u/.local/bin:/usr/local/bin:/usr/bin:/bin"
}

const has = (command: string) => spawnSync(command, ["--version"], { stdio: "ignore" }).status === 0

describe("the daemon's login unit", () => {
  it("names one per BERTH_HOME: berth for the default, a hash of the path for any other", () => {
    expect(unitStem("/home/u/.berth", "/home/u/.berth")).toBe("berth")
    const other = unitStem("/tmp/h", "/home/u/.berth")
    expect(other).toMatch(/^berth-[0-9a-z]{8}$/)
    expect(unitStem("/tmp/h", "/home/u/.berth")).toBe(other)
    expect(unitStem("/tmp/g", "/home/u/.berth")).not.toBe(other)
    expect(agentLabel("berth")).toBe("dev.berth.daemon")
    expect(agentLabel(other)).toBe(`dev.berth.${other}`)
  })

  it("systemd: runs berth daemon run with the recorded BERTH_HOME and PATH, and stops only the daemon", () => {
    const unit = systemdUnit(launch, "berth")
    expect(unit.name).toBe("berth.service")
    const lines = unit.text.split("\n")
    // % is a specifier everywhere; $ expands in ExecStart only; quotes and backslashes escaped inside quotes
    expect(lines).toContain(`Environment="BERTH_HOME=/home/u/my berth %%h $HOME \\"q\\" 'a' \\\\b & <x>"`)
    expect(lines).toContain(`Environment="PATH=${launch.path}"`)
    expect(lines).toContain(
      `ExecStart="${process.execPath}" "--max-semi-space-size=1" "--optimize-for-size" "/opt/berth/dist/berth.cjs" "daemon" "run"`
    )
    expect(lines).toContain(`StandardOutput=append:/home/u/my berth %%h $HOME "q" 'a' \\b & <x>/logs/daemon.log`)
    expect(lines).toContain("KillMode=process")
    expect(lines).toContain("Restart=on-failure")
    expect(lines).toContain("WantedBy=default.target")
    expect(systemdUnit({ ...launch, entry: "/opt/$x/berth.cjs" }, "berth").text).toContain('"/opt/$$x/berth.cjs"')
  })

  it.skipIf(!has("systemd-analyze"))("systemd: systemd-analyze verify finds nothing wrong with the unit", () => {
    const dir = mkdtempSync(join(tmpdir(), "berth-unit-"))
    try {
      // verify wants the paths it runs and writes to be plausible: this node, this file, a home under the folder
      const entry = join(dir, "berth.cjs")
      writeFileSync(entry, "")
      const unit = systemdUnit({ ...launch, entry, home: join(dir, "home %h"), log: join(dir, "daemon.log") }, "berth")
      const file = join(dir, unit.name)
      writeFileSync(file, unit.text)
      const verified = spawnSync("systemd-analyze", ["verify", file], { encoding: "utf8" })
      expect(verified.stderr).toBe("")
      expect(verified.status).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("launchd: the agent is a property list that runs the same command at load, kept alive only after a failure", () => {
    const agent = launchdAgent(launch, "berth")
    expect(agent.name).toBe("dev.berth.daemon.plist")
    expect(agent.label).toBe("dev.berth.daemon")
    expect(agent.text.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist')).toBe(true)
    expect(agent.text).toContain("&amp; &lt;x&gt;")
  })

  it.skipIf(!has("python3"))("launchd: the agent parses as an XML property list with every value as given", () => {
    const agent = launchdAgent(launch, "berth-1234abcd")
    const parsed = spawnSync(
      "python3",
      ["-c", "import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))"],
      { input: agent.text, encoding: "utf8" }
    )
    expect(parsed.stderr).toBe("")
    expect(JSON.parse(parsed.stdout)).toEqual({
      Label: "dev.berth.berth-1234abcd",
      ProgramArguments: [process.execPath, ...launch.nodeFlags, launch.entry, "daemon", "run"],
      EnvironmentVariables: { BERTH_HOME: home, PATH: launch.path },
      WorkingDirectory: home,
      StandardOutPath: launch.log,
      StandardErrorPath: launch.log,
      RunAtLoad: true,
      KeepAlive: { SuccessfulExit: false },
      AbandonProcessGroup: true
    })
  })

  it("refuses a value neither file can carry: a line break or another control character", () => {
    expect(unwritable(launch)).toBeUndefined()
    expect(unwritable({ ...launch, path: "/bin\n[Service]" })).toContain("PATH")
    expect(unwritable({ ...launch, home: "/tmp/a\u0007" })).toContain("BERTH_HOME")
  })

  it("picks the file by platform", () => {
    expect(unitFile("linux", launch, "berth").name).toBe("berth.service")
    expect(unitFile("darwin", launch, "berth").name).toBe("dev.berth.daemon.plist")
  })
})
