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
    // two files at a time: most of an end-to-end test is waiting on processes, and vitest's default on two cores
    // (cores - 1) runs the files one after another
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    reporters: ["default"]
  }
})
