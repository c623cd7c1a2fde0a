/**
 * `berth dash` in a real terminal: tmux runs it against a daemon with two worlds, `send-keys` types, `capture-pane`
 * reads the screen. A tmux server of the test's own (`-L`), so no one else's sessions are touched.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, eventually, processesOf, sandboxes } from "./harness.js"

const boxes = sandboxes()
const server = `berth-dash-${process.pid}`
const tmux = (...args: ReadonlyArray<string>) => spawnSync("tmux", ["-L", server, ...args], { encoding: "utf8" })
afterAll(() => {
  tmux("kill-server")
  boxes.cleanup()
})

const hasTmux = spawnSync("sh", ["-c", "command -v tmux"]).status === 0

const pane = async () => tmux("capture-pane", "-p", "-t", "dash").stdout

describe.skipIf(!hasTmux)("berth dash in a terminal", () => {
  it("shows both worlds running, a world brought down from the CLI as stopped, brings it back on a key, quits cleanly", async () => {
    const box = await boxes.project({
      "berth.toml": `[services.web]\ncmd = "echo web of \${world.name} says hello && node server.mjs"\nurl = "web"\n`
    })
    for (const world of ["one", "two"]) {
      const r = await box.run(["up", world], { timeoutMs: 60_000 })
      expect(r.code, r.stderr).toBe(0)
    }
    const env = [
      `BERTH_HOME=${box.home}`,
      "BERTH_PROXY_PORT=off",
      "BERTH_HTTPS_PORT=off",
      "NO_COLOR=1",
      "TERM=xterm-256color"
    ]
    const started = tmux(
      "new-session",
      "-d",
      "-s",
      "dash",
      "-x",
      "100",
      "-y",
      "30",
      "-c",
      box.dir,
      `env ${env.join(" ")} ${berthBin} dash; echo "dash exited $?"; sleep 600`
    )
    expect(started.status, started.stderr).toBe(0)

    // CPU and memory come with the readings, every 2 s
    const both = await eventually(
      pane,
      (s) => /^▸ one +running +\d+\.\d% +[\d.]+ MiB/m.test(s) && /^ {2}two +running +\d+\.\d% +[\d.]+ MiB/m.test(s)
    )
    expect(both).toMatch(/^▸ one +running +\d+\.\d% +[\d.]+ MiB/m)
    expect(both).toMatch(/^▸ one +running/m)
    expect(both).toMatch(/^ {2}two +running/m)
    expect(both).toMatch(/^ {4}web +healthy +:\d+/m)
    expect(both).toContain("q:quit")
    // NO_COLOR: not one colour on the screen
    const escapes = tmux("capture-pane", "-p", "-e", "-t", "dash").stdout
    expect(escapes).not.toContain("\u001b[3")
    expect(escapes).not.toContain("\u001b[7m")

    // brought down from the CLI: the screen says so, without a key
    const down = await box.run(["down", "two"])
    expect(down.code, down.stderr).toBe(0)
    // the stream brings the change to the screen: within moments, with room for a loaded machine
    const stopped = await eventually(pane, (s) => /^ {2}two +stopped/m.test(s), 5_000)
    expect(stopped).toMatch(/^ {2}two +stopped/m)

    // select it (one, its web, two) and bring it up with u
    tmux("send-keys", "-t", "dash", "Down", "Down")
    expect(await eventually(pane, (s) => /^▸ two/m.test(s), 5_000)).toMatch(/^▸ two +stopped/m)
    tmux("send-keys", "-t", "dash", "u")
    expect(await eventually(pane, (s) => /^▸ two +running/m.test(s), 30_000)).toMatch(/^▸ two +running/m)
    const status = JSON.parse((await box.run(["status", "--json"])).stdout) as {
      worlds: ReadonlyArray<{ name: string; state: string }>
    }
    expect(status.worlds.find((w) => w.name === "two")?.state).toBe("running")

    // the daemon stopped (or replaced by another build): the dashboard connects to the next one by itself
    expect((await box.run(["daemon", "stop"])).code).toBe(0)
    expect(await eventually(pane, (s) => s.includes("connected to the daemon again"), 20_000)).toMatch(/^▸ two/m)
    expect((await box.run(["down", "one"])).code).toBe(0)
    expect(await eventually(pane, (s) => /^ {2}one +stopped/m.test(s), 5_000)).toMatch(/^ {2}one +stopped/m)

    // a smaller terminal: everything redrawn within 80 columns
    tmux("resize-window", "-t", "dash", "-x", "80", "-y", "24")
    const small = await eventually(pane, (s) => s.split("\n").length <= 25 && /^ {2}one +stopped/m.test(s), 5_000)
    for (const line of small.split("\n")) expect(line.length).toBeLessThanOrEqual(80)
    expect(small).toMatch(/^▸ two +running/m)

    // l follows the selected service's log (two's web, one down), q goes back
    tmux("send-keys", "-t", "dash", "Down", "l")
    expect(await eventually(pane, (s) => s.includes("web of two says hello"), 10_000)).toContain(
      "log of web in two, following"
    )
    tmux("send-keys", "-t", "dash", "q")
    expect(await eventually(pane, (s) => s.includes("q:quit"), 5_000)).toMatch(/^▸ {3}web/m)
    tmux("send-keys", "-t", "dash", "Up")

    // ? shows the keys, any key goes back
    tmux("send-keys", "-t", "dash", "?")
    expect(await eventually(pane, (s) => s.includes("remove the world"), 5_000)).toContain(
      "follow the selected service's log"
    )
    tmux("send-keys", "-t", "dash", "Escape")
    await eventually(pane, (s) => s.includes("q:quit"), 5_000)

    // q: the command ends with 0 and the terminal is as it was (main screen, cursor shown)
    tmux("send-keys", "-t", "dash", "q")
    const after = await eventually(pane, (s) => s.includes("dash exited"), 10_000)
    expect(after).toContain("dash exited 0")
    expect(after).not.toContain("berth dashboard")
    expect(tmux("display-message", "-p", "-t", "dash", "#{alternate_on} #{cursor_flag}").stdout.trim()).toBe("0 1")

    // ended by a signal instead: the terminal is given back all the same
    tmux("respawn-pane", "-k", "-t", "dash", `env ${env.join(" ")} ${berthBin} dash; echo "dash ended $?"; sleep 600`)
    await eventually(pane, (s) => s.includes("q:quit") && /two +running/.test(s))
    expect(tmux("display-message", "-p", "-t", "dash", "#{alternate_on}").stdout.trim()).toBe("1")
    const dash = processesOf(box.home).filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\u0000").includes("dash")
      } catch {
        return false
      }
    })
    expect(dash.length).toBeGreaterThan(0)
    for (const pid of dash) process.kill(pid, "SIGTERM")
    const ended = await eventually(pane, (s) => s.includes("dash ended"), 10_000)
    expect(ended).not.toContain("berth dashboard")
    expect(tmux("display-message", "-p", "-t", "dash", "#{alternate_on} #{cursor_flag}").stdout.trim()).toBe("0 1")
  })

  it("--project shows only that project's worlds", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    expect((await box.run(["up", "mine"], { timeoutMs: 60_000 })).code).toBe(0)
    // a second repository beside it, with a world of its own, in the same BERTH_HOME
    const other = join(dirname(box.dir), "other")
    mkdirSync(other)
    writeFileSync(
      join(other, "berth.toml"),
      `[project]\nname = "other"\n\n[services.web]\ncmd = "node server.mjs"\nurl = "web"\n`
    )
    writeFileSync(join(other, "server.mjs"), readFileSync(join(box.dir, "server.mjs")))
    for (const args of [
      ["init", "-q", "-b", "main"],
      ["add", "-A"],
      ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"]
    ]) {
      execFileSync("git", args, { cwd: other })
    }
    const theirs = await box.run(["up", "theirs"], { cwd: other, timeoutMs: 60_000 })
    expect(theirs.code, theirs.stderr).toBe(0)
    const env = [`BERTH_HOME=${box.home}`, "BERTH_PROXY_PORT=off", "BERTH_HTTPS_PORT=off", "NO_COLOR=1"]
    const shell = `env ${env.join(" ")} ${berthBin}`
    expect(
      tmux("new-session", "-d", "-s", "all", "-x", "100", "-y", "30", "-c", box.dir, `${shell} dash; sleep 600`).status
    ).toBe(0)
    expect(
      tmux(
        "new-session",
        "-d",
        "-s",
        "one",
        "-x",
        "100",
        "-y",
        "30",
        "-c",
        box.dir,
        `${shell} dash --project .; sleep 600`
      ).status
    ).toBe(0)
    const all = await eventually(
      async () => tmux("capture-pane", "-p", "-t", "all").stdout,
      (s) => /^[▸ ] mine +running/m.test(s) && /theirs +running/m.test(s)
    )
    // the selected world's line starts with the cursor
    expect(all).toMatch(/^[▸ ] mine +running/m)
    expect(all).toMatch(/theirs +running/m)
    expect(all).toMatch(/^app$/m)
    expect(all).toMatch(/^other$/m)
    const one = await eventually(
      async () => tmux("capture-pane", "-p", "-t", "one").stdout,
      (s) => /mine +running/m.test(s)
    )
    expect(one).not.toContain("theirs")
    expect(one).toContain("1 world, 1 running")
    tmux("send-keys", "-t", "all", "q")
    tmux("send-keys", "-t", "one", "q")
  })

  it("refuses --json and a terminal that is not one, as usage errors", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const json = await box.run(["dash", "--json"])
    expect(json.code).toBe(2)
    expect(json.stderr).toContain("berth status --json")
    const piped = await box.run(["dashboard"])
    expect(piped.code).toBe(2)
    expect(piped.stderr).toContain("needs a terminal")
  })

  it("o says the browser could not be opened when the opener fails (xdg-open exits 3 on a headless machine)", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    const up = await box.run(["up", "--json"], { timeoutMs: 60_000 })
    expect(up.code, up.stderr).toBe(0)
    const url = (JSON.parse(up.stdout) as { world: { services: Array<{ url: string }> } }).world.services[0]!.url
    const headless = join(dirname(box.dir), "xdg-open")
    writeFileSync(headless, "#!/bin/sh\nexit 3\n", { mode: 0o755 })
    const env = [`BERTH_HOME=${box.home}`, "BERTH_PROXY_PORT=off", "BERTH_HTTPS_PORT=off", "NO_COLOR=1"]
    const shell = `env ${env.join(" ")} BROWSER=${headless} ${berthBin}`
    expect(
      tmux("new-session", "-d", "-s", "open", "-x", "120", "-y", "30", "-c", box.dir, `${shell} dash; sleep 600`).status
    ).toBe(0)
    const shown = async () => tmux("capture-pane", "-p", "-t", "open").stdout
    await eventually(shown, (s) => /^▸ main +running/m.test(s))
    tmux("send-keys", "-t", "open", "o")
    const told = await eventually(shown, (s) => s.includes("in a browser"), 10_000)
    expect(told).toContain(`could not open ${url} in a browser (${headless} exited with code 3)`)
    expect(told).not.toContain("opened")
    tmux("send-keys", "-t", "open", "q")
  })

  it("draws the worlds from the daemon's snapshot, before its first readings tick (no CPU yet: …)", async () => {
    const box = await boxes.project({ "berth.toml": `[services.web]\ncmd = "node server.mjs"\nurl = "web"\n` })
    expect((await box.run(["up"], { timeoutMs: 60_000 })).code).toBe(0)
    const env = [`BERTH_HOME=${box.home}`, "BERTH_PROXY_PORT=off", "BERTH_HTTPS_PORT=off", "NO_COLOR=1"]
    expect(
      tmux(
        "new-session",
        "-d",
        "-s",
        "first",
        "-x",
        "100",
        "-y",
        "30",
        "-c",
        box.dir,
        `env ${env.join(" ")} ${berthBin} dash; sleep 600`
      ).status
    ).toBe(0)
    // the first frame that has the world: CPU needs two readings, so a frame drawn from the snapshot alone shows "…"
    // there, and one that waited for a readings tick would show a figure
    const first = await eventually(
      async () => tmux("capture-pane", "-p", "-t", "first").stdout,
      (s) => /^▸ main +running/m.test(s)
    )
    expect(first).toMatch(/^▸ main +running +… +[\d.]+ MiB/m)
    expect(first).not.toContain("waiting for the daemon")
    tmux("send-keys", "-t", "first", "q")
  })
})
