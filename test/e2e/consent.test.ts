/**
 * Consent before a repository's commands run: a fresh clone's berth.toml runs nothing until its content is allowed
 * (`berth allow`, `--yes`, the prompt at a terminal, or BERTH_YES=1), and a changed one asks again.
 */
import { spawnSync } from "node:child_process"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { berthBin, sandboxes } from "./harness.js"

const boxes = sandboxes()
afterAll(() => boxes.cleanup())

/** what the config runs leaves a mark beside the repository, so a test can tell whether anything ran */
const toml = (marker: string, cmd = "node server.mjs") => `[project]
setup = "echo setup >> ${marker}"

[services.api]
cmd = "${cmd}"
url = "api"

[services.check]
cmd = "sleep 1000"
health = { cmd = "echo health >> ${marker}" }

[agents]
verify = ["echo verify >> ${marker}"]
`

/** a sandbox whose commands are not allowed: BERTH_YES taken away from every run */
const asking = async () => {
  const box = await boxes.project({})
  const marker = join(box.dir, "..", "ran.txt")
  box.write("berth.toml", toml(marker))
  box.git("add", "-A")
  box.git("commit", "-qm", "config")
  const run = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
    box.run(args, { env: { BERTH_YES: undefined, ...env }, timeoutMs: 60_000 })
  return { box, marker, run }
}

describe("consent", () => {
  it("runs nothing of a new berth.toml until it is allowed, and shows what it would run", async () => {
    const { box, marker, run } = await asking()
    const refused = await run(["up", "feat"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain("may not run commands here yet")
    for (const field of [
      "project.setup: echo setup",
      "services.api.cmd: node server.mjs",
      "services.check.health.cmd"
    ]) {
      expect(refused.stderr).toContain(field)
    }
    expect(refused.stderr).toContain("agents.verify[0]")
    expect(refused.stderr).toMatch(/hint: read them, then `berth allow /)
    expect(existsSync(marker)).toBe(false)
    const json = await run(["up", "feat", "--json"])
    expect(JSON.parse(json.stderr).error.tag).toBe("ConfigNotAllowed")
    // verify runs the config's commands too
    const verify = await run(["verify", "feat"])
    expect(verify.code).toBe(1)
    expect(verify.stderr).toContain("may not run commands here yet")
    expect(existsSync(marker)).toBe(false)

    const allowed = await run(["allow"])
    expect(allowed.code, allowed.stderr).toBe(0)
    expect(allowed.stdout).toMatch(/^allowed .*berth\.toml as it is now/)
    const up = await run(["up", "feat"])
    expect(up.code, up.stderr).toBe(0)
    expect(readFileSync(marker, "utf8")).toContain("setup")
    void box
  })

  it("asks again once berth.toml changed; --yes and BERTH_YES=1 allow it", async () => {
    const { box, marker, run } = await asking()
    expect((await run(["allow"])).code).toBe(0)
    expect((await run(["up", "first"])).code).toBe(0)
    box.write("berth.toml", toml(marker, "node server.mjs --changed"))
    box.git("commit", "-qam", "changed cmd")
    const changed = await run(["up", "second"])
    expect(changed.code).toBe(1)
    expect(changed.stderr).toContain("services.api.cmd: node server.mjs --changed")
    const yes = await run(["up", "second", "--yes"])
    expect(yes.code, yes.stderr).toBe(0)
    // deny takes it back: the next start of that content asks again
    expect((await run(["down", "second"])).code).toBe(0)
    const denied = await run(["deny"])
    expect(denied.code, denied.stderr).toBe(0)
    expect((await run(["up", "second"])).code).toBe(1)
    const env = await run(["up", "second"], { BERTH_YES: "1" })
    expect(env.code, env.stderr).toBe(0)
    // and BERTH_YES recorded it: the next command needs no switch
    expect((await run(["reload", "second"])).code).toBe(0)
  })

  it("asks at a terminal, shows the commands, and goes on when the person says yes", async () => {
    const { box, marker } = await asking()
    // `script` gives berth a terminal, whose input is the answer
    const env: Record<string, string | undefined> = {
      ...process.env,
      ...box.env,
      BERTH_HOME: box.home,
      NO_COLOR: "1",
      BERTH_PROXY_PORT: "off",
      BERTH_YES: undefined
    }
    const answered = (answer: string, world: string) =>
      spawnSync("script", ["-qec", `${berthBin} up ${world}`, "/dev/null"], {
        cwd: box.dir,
        input: answer,
        encoding: "utf8",
        env: { ...env, BERTH_HTTPS_PORT: "off" },
        timeout: 60_000
      })
    const no = answered("n\n", "asked")
    expect(no.stdout).toMatch(/services\.api\.cmd: node server\.mjs[\s\S]*\[y\/N\]/)
    expect(no.status).toBe(1)
    expect(existsSync(marker)).toBe(false)
    const yes = answered("y\n", "asked")
    expect(yes.status, yes.stdout).toBe(0)
    expect(readFileSync(marker, "utf8")).toContain("setup")
  })

  it("leaves the worlds of a berth that did not ask running as they are", async () => {
    const { box, marker, run } = await asking()
    expect((await run(["up", "old"], { BERTH_YES: "1" })).code).toBe(0)
    // as after an upgrade: no store yet, the world's config ran with the user's leave
    rmSync(join(box.home, "allowed"))
    expect((await run(["daemon", "stop"])).code).toBe(0)
    expect((await run(["reload", "old"])).code, readFileSync(marker, "utf8")).toBe(0)
  })
})
