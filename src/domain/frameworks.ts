/**
 * Dev servers that ignore `$PORT` or bind another address (Vite and what runs on it, Astro, Nuxt, Next.js, Angular,
 * Storybook, Expo/Metro, …): berth recognises them in a service's `cmd` — named directly, through `npx`, or through
 * `npm|pnpm|yarn|bun run <script>` with the script read from package.json — and appends that framework's flags for the
 * leased port, a strict port where the framework has one (without it Vite moves to another port silently and the route
 * points at nothing) and the loopback host. A pure decision over the command text: the actor reads package.json.
 */

export interface DevServer {
  /** the framework, as `berth status` and `check` name it */
  readonly framework: string
  /** what berth appends to the command */
  readonly flags: ReadonlyArray<string>
  /** the framework checks the Host header against a list: names outside `.localhost` must be allowed (see `allowedHostsEnv`) */
  readonly checksHost: boolean
}

interface Framework {
  readonly framework: string
  /** the subcommands that serve (the first non-flag argument); `undefined` in the list: the program alone serves */
  readonly serves: ReadonlyArray<string | undefined>
  readonly flags: (port: Port) => ReadonlyArray<string>
  /** flags whose presence means the user placed the port or host themselves: then nothing is added */
  readonly placed: ReadonlyArray<string>
  readonly checksHost?: boolean
}

const LOOPBACK = "127.0.0.1"

/** The leased port, or a token standing for it (`${self.port}`) where the flags are shown rather than run. */
export type Port = number | string

const vite = (framework: string, serves: ReadonlyArray<string | undefined>): Framework => ({
  framework,
  serves,
  flags: (port) => ["--port", String(port), "--strictPort", "--host", LOOPBACK],
  placed: ["--port", "--host", "--strictPort"],
  checksHost: true
})

const portHost = (framework: string, serves: ReadonlyArray<string | undefined>, short = false): Framework => ({
  framework,
  serves,
  flags: (port) => (short ? ["-p", String(port), "-H", LOOPBACK] : ["--port", String(port), "--host", LOOPBACK]),
  placed: short ? ["-p", "--port", "-H", "--hostname"] : ["--port", "-p", "--host"]
})

/** By the program's name (the basename of the first word). */
const frameworks: Readonly<Record<string, Framework>> = {
  vite: vite("vite", [undefined, "dev", "serve", "preview"]),
  "react-router": vite("react-router", ["dev"]),
  remix: vite("remix", ["vite:dev"]),
  astro: { ...portHost("astro", ["dev", "preview"]), checksHost: true },
  nuxi: portHost("nuxt", ["dev"]),
  nuxt: portHost("nuxt", ["dev"]),
  next: portHost("next", ["dev", "start"], true),
  ng: portHost("angular", ["serve", "s"]),
  storybook: {
    framework: "storybook",
    serves: ["dev"],
    flags: (port) => ["-p", String(port), "--host", LOOPBACK, "--exact-port"],
    placed: ["-p", "--port", "--host"]
  },
  "start-storybook": {
    framework: "storybook",
    serves: [undefined],
    flags: (port) => ["-p", String(port), "--host", LOOPBACK],
    placed: ["-p", "--port", "--host"]
  },
  expo: {
    framework: "expo",
    serves: ["start"],
    flags: (port) => ["--port", String(port), "--localhost"],
    placed: ["--port", "-p", "--lan", "--tunnel", "--localhost"]
  },
  "react-native": portHost("metro", ["start"]),
  "webpack-dev-server": portHost("webpack-dev-server", [undefined, "serve"]),
  webpack: portHost("webpack-dev-server", ["serve"]),
  "vue-cli-service": portHost("vue-cli", ["serve"]),
  gatsby: portHost("gatsby", ["develop"], true),
  docusaurus: portHost("docusaurus", ["start", "serve"])
}

/** Characters that make a command more than one simple command: flags appended to it could land anywhere. */
const COMPOUND = /[;&|<>`()\n]|\$\(/

/** Words of a simple command: spaces split, quotes group (enough to find the program and its arguments). */
const words = (command: string): ReadonlyArray<string> | undefined => {
  const out: Array<string> = []
  let current = ""
  let quote: string | undefined
  let started = false
  for (const ch of command) {
    if (quote !== undefined) {
      if (ch === quote) quote = undefined
      else current += ch
    } else if (ch === "'" || ch === '"') {
      quote = ch
      started = true
    } else if (/\s/.test(ch)) {
      if (started || current !== "") out.push(current)
      current = ""
      started = false
    } else {
      current += ch
      started = true
    }
  }
  if (quote !== undefined) return undefined
  if (started || current !== "") out.push(current)
  return out
}

const basename = (word: string) => word.slice(word.lastIndexOf("/") + 1)

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/

/** The words after env assignments, `exec`, and a runner of binaries (`npx vite`, `pnpm exec vite`, `bunx vite`). */
const program = (argv: ReadonlyArray<string>): ReadonlyArray<string> => {
  let rest = argv
  while (rest[0] !== undefined && ASSIGNMENT.test(rest[0])) rest = rest.slice(1)
  if (rest[0] === "exec") rest = rest.slice(1)
  const first = rest[0] === undefined ? undefined : basename(rest[0])
  if (first === "npx" || first === "pnpx" || first === "bunx") rest = rest.slice(1)
  else if ((first === "pnpm" || first === "yarn") && rest[1] === "exec") rest = rest.slice(2)
  // npx's own flags (`npx --yes vite`)
  while (rest[0]?.startsWith("-") === true && first === "npx") rest = rest.slice(1)
  return rest
}

/** The dev server a simple command starts directly, if any. */
const direct = (argv: ReadonlyArray<string>, port: Port): DevServer | undefined => {
  const rest = program(argv)
  const name = rest[0] === undefined ? undefined : basename(rest[0])
  const f = name === undefined ? undefined : frameworks[name]
  if (f === undefined) return undefined
  const args = rest.slice(1)
  const sub = args.find((a) => !a.startsWith("-"))
  if (!f.serves.includes(sub)) return undefined
  if (args.some((a) => f.placed.includes(a.split("=")[0]!))) return undefined
  return { framework: f.framework, flags: f.flags(port), checksHost: f.checksHost === true }
}

interface ScriptRun {
  readonly script: string
  /** npm needs `--` before arguments meant for the script; pnpm, yarn and bun pass them on */
  readonly separator: boolean
  /** the run already has a `--` (arguments of its own after it) */
  readonly hasSeparator: boolean
}

/** `npm run dev`, `npm start`, `pnpm dev`, `yarn run dev`, `bun run dev`: which script, and how to pass flags to it. */
const scriptRun = (argv: ReadonlyArray<string>, scripts: Readonly<Record<string, string>>): ScriptRun | undefined => {
  let rest = argv
  while (rest[0] !== undefined && ASSIGNMENT.test(rest[0])) rest = rest.slice(1)
  if (rest[0] === "exec") rest = rest.slice(1)
  const runner = rest[0] === undefined ? undefined : basename(rest[0])
  if (runner !== "npm" && runner !== "pnpm" && runner !== "yarn" && runner !== "bun") return undefined
  const args = rest.slice(1).filter((a) => !a.startsWith("-") || a === "--")
  const hasSeparator = rest.includes("--")
  const [verb, next] = args
  const script =
    verb === "run" || verb === "run-script"
      ? next
      : verb === "start" || verb === "dev"
        ? verb
        : runner !== "npm" && verb !== undefined && verb !== "--"
          ? verb
          : undefined
  if (script === undefined || scripts[script] === undefined) return undefined
  return { script, separator: runner === "npm", hasSeparator }
}

export interface Injected extends DevServer {
  readonly command: string
}

/**
 * The command with the dev server's flags appended, or undefined when it starts no dev server berth knows (or places
 * its port itself, or is more than one simple command). `scripts` are the package.json scripts of the service's
 * folder.
 */
export const injectDevServer = (
  command: string,
  port: Port,
  scripts: Readonly<Record<string, string>> = {}
): Injected | undefined => {
  if (COMPOUND.test(command)) return undefined
  const argv = words(command)
  if (argv === undefined || argv.length === 0) return undefined
  const found = direct(argv, port)
  if (found !== undefined) return { ...found, command: `${command} ${found.flags.join(" ")}` }
  const run = scriptRun(argv, scripts)
  if (run === undefined) return undefined
  // only the script's own command: one that runs another script would hand the flags to its runner, not the server
  const body = scripts[run.script]!
  const inner = COMPOUND.test(body) ? undefined : words(body)
  const server = inner === undefined ? undefined : direct(inner, port)
  if (server === undefined) return undefined
  const separator = run.separator && !run.hasSeparator ? " -- " : " "
  return { ...server, command: `${command}${separator}${server.flags.join(" ")}` }
}

/**
 * The dev server one of the simple commands of `text` starts directly (`npm run codegen && vite`: vite), for saying
 * how to pass its port by hand where berth cannot append flags to the whole.
 */
export const devServerIn = (text: string, port: Port): DevServer | undefined => {
  for (const part of text.split(/&&|\|\||[;|&\n]/)) {
    const argv = COMPOUND.test(part) ? undefined : words(part.trim())
    const found = argv === undefined || argv.length === 0 ? undefined : direct(argv, port)
    if (found !== undefined) return found
  }
  return undefined
}

/**
 * Vite (7) checks the Host header and allows `localhost` names by default; a route under another domain is added, as
 * one entry, through the variable Vite reads for it — never `allowedHosts: true`, which lets any site in.
 */
export const allowedHostsEnv = (server: DevServer, host: string): Readonly<Record<string, string>> =>
  server.checksHost && host !== "localhost" && !host.endsWith(".localhost")
    ? { __VITE_ADDITIONAL_SERVER_ALLOWED_HOSTS: host }
    : {}
