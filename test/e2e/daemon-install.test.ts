/**
 * `berth daemon install | uninstall` on Linux: the systemd user unit written owner-only under XDG_CONFIG_HOME, enabled
 * through `systemctl --user` where it answers, else the line to run. `systemctl` here is a stand-in first on PATH
 * that records what it was asked, so the machine's own user manager is never touched.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, sandbox } from "./harness.js"

const box = sandbox()
const user = join(box.dir, "..", "user")
const config = join(user, "config")
const fakeBin = join(box.dir, "..", "fake-bin")
const calls = join(fakeBin, "calls")
const answer = join(fakeBin, "answer")
mkdirSync(fakeBin, { recursive: true })
writeFileSync(
  join(fakeBin, "systemctl"),
  `#!/bin/sh\necho "$*" >> '${calls}'\nif [ "$(cat '${answer}')" = ok ]; then exit 0; fi\necho "Failed to connect to bus: No medium found" >&2\nexit 1\n`
)
chmodSync(join(fakeBin, "systemctl"), 0o755)
const path = `${fakeBin}:${process.env.PATH ?? ""}`
const env = { HOME: user, XDG_CONFIG_HOME: config, PATH: path }
const run = (args: ReadonlyArray<string>) => box.run(args, { env })
const systemctl = (mode: "ok" | "fails") => {
  writeFileSync(answer, mode)
  writeFileSync(calls, "")
}
const asked = () => readFileSync(calls, "utf8").trim().split("\n").filter(Boolean)

afterAll(() => box.cleanup())

interface InstallDocument {
  schema: number
  platform: string
  file: string
  name: string
  home: string
  text: string
  written: boolean
  enabled: boolean
  run: Array<string>
}

describe.skipIf(process.platform !== "linux")("berth daemon install on Linux", () => {
  it("--dry-run prints the unit and where it would go, and writes nothing", async () => {
    systemctl("ok")
    const r = await run(["daemon", "install", "--dry-run"])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const [first, ...unit] = r.stdout.split("\n")
    const file = first?.replace(/^# /, "") ?? ""
    expect(file).toMatch(new RegExp(`^${config}/systemd/user/berth-[0-9a-z]{8}\\.service$`))
    expect(unit.join("\n")).toContain(`Environment="BERTH_HOME=${box.home}"`)
    expect(unit.join("\n")).toContain(`Environment="PATH=${path}"`)
    expect(unit.join("\n")).toContain(`"${berthBin}.cjs" "daemon" "run"`)
    expect(existsSync(file)).toBe(false)
    expect(asked()).toEqual([])
  })

  it("writes the unit owner-only and says what to run when systemctl --user does not answer", async () => {
    systemctl("fails")
    const r = await run(["daemon", "install"])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const [wrote, notEnabled, command] = r.stdout.trim().split("\n")
    const file = /^wrote (\S+) /.exec(wrote ?? "")?.[1] ?? ""
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(readFileSync(file, "utf8")).toContain("KillMode=process")
    expect(notEnabled).toBe(
      "not enabled: systemctl --user did not answer (Failed to connect to bus: No medium found); to enable it, run:"
    )
    const name = file.split("/").pop()
    expect(command).toBe(`  systemctl --user daemon-reload && systemctl --user enable ${name}`)
  })

  it("enables the unit through systemctl --user where it answers (--json), and uninstall disables and removes it", async () => {
    systemctl("ok")
    const r = await run(["daemon", "install", "--json"])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const doc = JSON.parse(r.stdout) as InstallDocument
    expect(doc).toMatchObject({ schema: 1, platform: "linux", home: box.home, written: true, enabled: true, run: [] })
    expect(doc.file).toBe(`${config}/systemd/user/${doc.name}`)
    expect(readFileSync(doc.file, "utf8")).toBe(doc.text)
    expect(asked()).toEqual(["--user daemon-reload", `--user enable ${doc.name}`])

    systemctl("ok")
    const gone = await run(["daemon", "uninstall"])
    expect(gone.stderr).toBe("")
    expect(gone.code).toBe(0)
    expect(gone.stdout).toContain(`removed ${doc.file}`)
    expect(existsSync(doc.file)).toBe(false)
    expect(asked()).toEqual([`--user disable ${doc.name}`, "--user daemon-reload"])

    const again = await run(["daemon", "uninstall", "--json"])
    expect(again.code).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ removed: false, disabled: false, file: doc.file })
  })

  it("uninstall with no user manager removes the link that enabled the unit too", async () => {
    systemctl("fails")
    const installed = JSON.parse((await run(["daemon", "install", "--json"])).stdout) as InstallDocument
    const wants = join(config, "systemd", "user", "default.target.wants")
    mkdirSync(wants, { recursive: true })
    symlinkSync(installed.file, join(wants, installed.name))
    const r = await run(["daemon", "uninstall", "--json"])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ removed: true, disabled: false, run: [] })
    expect(existsSync(installed.file)).toBe(false)
    expect(existsSync(join(wants, installed.name))).toBe(false)
  })

  it("refuses a PATH the unit cannot carry, naming it, with a hint", async () => {
    const r = await box.run(["daemon", "install", "--dry-run"], { env: { ...env, PATH: `${path}\n[Service]` } })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("PATH holds a control character")
    expect(r.stderr).toContain("hint: ")
    expect(r.stderr).not.toMatch(/\n\s+at /)
  })
})
