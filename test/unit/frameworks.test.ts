import { describe, expect, it } from "@effect/vitest"
import { allowedHostsEnv, injectDevServer } from "../../src/domain/frameworks.js"

const vite = "--port 4123 --strictPort --host 127.0.0.1"

describe("dev servers that ignore PORT", () => {
  it("adds the port, a strict port and the loopback host to a dev server named directly", () => {
    expect(injectDevServer("vite", 4123)).toMatchObject({ framework: "vite", command: `vite ${vite}` })
    expect(injectDevServer("vite dev", 4123)?.command).toBe(`vite dev ${vite}`)
    expect(injectDevServer("npx vite", 4123)?.command).toBe(`npx vite ${vite}`)
    expect(injectDevServer("./node_modules/.bin/vite --open", 4123)?.command).toBe(
      `./node_modules/.bin/vite --open ${vite}`
    )
    expect(injectDevServer("NODE_ENV=development exec vite", 4123)?.command).toBe(
      `NODE_ENV=development exec vite ${vite}`
    )
    expect(injectDevServer("next dev", 4123)?.command).toBe("next dev -p 4123 -H 127.0.0.1")
    expect(injectDevServer("ng serve", 4123)?.command).toBe("ng serve --port 4123 --host 127.0.0.1")
    expect(injectDevServer("astro dev", 4123)?.command).toBe("astro dev --port 4123 --host 127.0.0.1")
    expect(injectDevServer("storybook dev", 4123)?.command).toBe("storybook dev -p 4123 --host 127.0.0.1 --exact-port")
    expect(injectDevServer("react-router dev", 4123)?.command).toBe(`react-router dev ${vite}`)
    expect(injectDevServer("expo start", 4123)?.command).toBe("expo start --port 4123 --localhost")
  })

  it("reads the script a package runner runs, and passes the flags the way that runner does", () => {
    const scripts = { dev: "vite", start: "next start", build: "vite build", both: "vite & node api.js" }
    expect(injectDevServer("npm run dev", 4123, scripts)?.command).toBe(`npm run dev -- ${vite}`)
    expect(injectDevServer("npm run dev -- --open", 4123, scripts)?.command).toBe(`npm run dev -- --open ${vite}`)
    expect(injectDevServer("pnpm dev", 4123, scripts)?.command).toBe(`pnpm dev ${vite}`)
    expect(injectDevServer("yarn run dev", 4123, scripts)?.command).toBe(`yarn run dev ${vite}`)
    expect(injectDevServer("bun run dev", 4123, scripts)?.command).toBe(`bun run dev ${vite}`)
    expect(injectDevServer("npm start", 4123, scripts)?.command).toBe("npm start -- -p 4123 -H 127.0.0.1")
    // not a server, more than one command, or a script nobody wrote
    expect(injectDevServer("npm run build", 4123, scripts)).toBeUndefined()
    expect(injectDevServer("npm run both", 4123, scripts)).toBeUndefined()
    expect(injectDevServer("npm run nope", 4123, scripts)).toBeUndefined()
  })

  it("leaves alone what it does not know, what places its own port, and compound commands", () => {
    for (const command of [
      "node server.js",
      "vite build",
      "vite --port 5000",
      "vite --port=5000",
      "next dev -p 3001",
      "cd web && vite",
      "vite | tee log",
      "vite > out.log",
      "echo $(vite)",
      "vite 'unclosed"
    ]) {
      expect(injectDevServer(command, 4123), command).toBeUndefined()
    }
  })

  it("allows a route outside .localhost through Vite's variable, one host, never all", () => {
    const server = injectDevServer("vite", 4123)!
    expect(allowedHostsEnv(server, "web.one.shop.localhost")).toEqual({})
    expect(allowedHostsEnv(server, "web.one.shop.test")).toEqual({
      __VITE_ADDITIONAL_SERVER_ALLOWED_HOSTS: "web.one.shop.test"
    })
    expect(allowedHostsEnv(injectDevServer("next dev", 4123)!, "web.one.shop.test")).toEqual({})
  })
})
