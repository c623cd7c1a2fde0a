import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "adapters/**/*.test.ts"],
    // end-to-end tests spawn the built binary and real servers: give them room, but keep files parallel
    testTimeout: 60_000,
    // every repository a test makes is the test's own: its commands are allowed to run (test/e2e/consent.test.ts
    // takes this away to test the asking)
    env: { BERTH_YES: "1" },
    hookTimeout: 60_000,
    pool: "forks",
    // three files at a time on two cores: most of an end-to-end test is waiting on processes (health checks, a
    // failover's timers), and vitest's default (cores - 1) runs the files one after another. The suite passes at a
    // load average of 10 (measured while other work ran), so a third file costs no stability
    poolOptions: { forks: { maxForks: 3, minForks: 1 } },
    reporters: ["default"]
  }
})
