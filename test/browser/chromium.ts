/**
 * Debian's Chromium, headless, driven by playwright-core — with the flags a closed network needs (no background
 * traffic, no QUIC) and a profile and HOME of the test's own, whose NSS database may trust berth's CA.
 */
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync } from "node:fs"
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

export const launch = (base: string, home: string): Promise<BrowserContext> =>
  chromium.launchPersistentContext(join(base, "profile"), {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    env: { ...process.env, HOME: home }
  })

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
