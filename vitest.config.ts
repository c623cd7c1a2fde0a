import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "adapters/**/*.test.ts"],
    // end-to-end tests spawn the built binary and real servers: give them room, but keep files parallel
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default"]
  }
})
