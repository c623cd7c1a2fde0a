/**
 * Debian's Chromium, headless, driven by playwright-core — with the flags a closed network needs (no background
 * traffic, no QUIC) and a profile and HOME of the test's own, whose NSS database may trust berth's CA.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { type BrowserContext, chromium, type Page, type Response } from "playwright-core"

export const CHROMIUM = "/usr/bin/chromium"
export const hasChromium = existsSync(CHROMIUM)

export const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** A HOME whose NSS database (what Chromium reads on Linux) trusts the CA at `caPath`, when one is given. */
export const browserHome = (base: string, caPath?: string): string => {
  const home = join(base, "home")
  const nssdb = join(home, ".pki", "nssdb")
  mkdirSync(nssdb, { recursive: true })
  execFileSync("certutil", ["-N", "--empty-password", "-d", `sql:${nssdb}`])
  if (caPath !== undefined) {
    execFileSync("certutil", ["-A", "-n", "berth test CA", "-t", "C,,", "-i", caPath, "-d", `sql:${nssdb}`])
  }
  return home
}

/** The pid of the browser process (not a helper: those name a `--type`) whose profile is `profile`, if one runs. */
const browserPid = (profile: string): number | undefined => {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, "latin1").split("\u0000")
      if (args.includes(`--user-data-dir=${profile}`) && !args.some((a) => a.startsWith("--type=")))
        return Number(entry)
    } catch {
      // gone, or not ours to read
    }
  }
  return undefined
}

/**
 * Chromium on a profile of `base`'s. When the browser ends without being closed (it crashed, or something signalled
 * it) a line on stderr says so, with its pid, so a test that then finds its browser gone says why.
 */
export const launch = async (base: string, home: string): Promise<BrowserContext> => {
  const profile = join(base, "profile")
  let closing = false
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    env: { ...process.env, HOME: home }
  })
  const pid = browserPid(profile)
  const close = context.close.bind(context)
  context.close = (options) => {
    closing = true
    return close(options)
  }
  context.once("close", () => {
    if (!closing) process.stderr.write(`chromium (pid ${pid}, profile ${profile}) ended without being closed\n`)
  })
  return context
}

/**
 * The browser of `launch` for a file's tests, started again when it ended on its own (see `launch`: why goes to
 * stderr). Nothing the pages under test do can end the browser itself: a tab that crashes ends alone.
 */
export const relaunching = (base: string, home: string) => {
  let current: Promise<BrowserContext> | undefined
  let ended = false
  const start = () => {
    ended = false
    current = launch(base, home).then((context) => {
      context.once("close", () => {
        ended = true
      })
      return context
    })
    return current
  }
  const context = (): Promise<BrowserContext> => (current === undefined || ended ? start() : current)
  return {
    context,
    /** `use` on the browser; once more on a new one when the browser ended under it (a tab's own failure is not) */
    run: async <A>(use: (context: BrowserContext) => Promise<A>): Promise<A> => {
      try {
        return await use(await context())
      } catch (error) {
        if (!ended) throw error
        return await use(await context())
      }
    },
    close: async () => {
      if (current !== undefined && !ended) await (await current).close()
    }
  }
}

/**
 * `page.goto`, again when Chromium gave the navigation up because the machine's network changed: the cluster tests,
 * running beside these, add and remove network namespaces and their links, which Chromium hears of and answers by
 * aborting whatever loads (`net::ERR_NETWORK_CHANGED`). Nothing of berth's; a user would load the page again.
 */
export const goto = async (page: Page, url: string): Promise<Response | null> => {
  // a namespace's setup or teardown changes the links in a burst: the pause lets it pass
  for (let attempt = 1; ; attempt++) {
    try {
      return await page.goto(url)
    } catch (error) {
      if (attempt >= 10 || !String(error).includes("net::ERR_NETWORK_CHANGED")) throw error
      await new Promise((resolve) => setTimeout(resolve, 300))
    }
  }
}

/** Opens `url`, waits until the page's `#out` stops saying "loading", and returns its text. */
export const render = async (context: BrowserContext, url: string): Promise<string> => {
  const tab = await context.newPage()
  try {
    const response = await goto(tab, url)
    if (response?.status() !== 200) throw new Error(`${url} answered ${response?.status()}`)
    // a string: the predicate runs in the page, where `document` exists
    await tab.waitForFunction('document.getElementById("out").textContent !== "loading"', undefined, {
      timeout: 15_000
    })
    return (await tab.textContent("#out")) ?? ""
  } finally {
    await tab.close()
  }
}
