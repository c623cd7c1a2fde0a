/**
 * What the daemon does for consent (`domain/consent.ts`) when it starts: the worlds an older berth ran keep their
 * leave to run.
 */
import { appendFileSync, existsSync } from "node:fs"
import * as Effect from "effect/Effect"
import { ConfigFiles } from "../services/ConfigFiles.js"
import { record, started } from "../services/Consent.js"
import { Home } from "../services/Home.js"
import { Registry } from "../services/Registry.js"

/**
 * The first start of a berth that asks for consent: the configs of the worlds this home has already run were run
 * with the user's leave before berth asked, so they are allowed as they are now (a config changed later asks).
 * Afterwards the store exists, and this does nothing again.
 */
export const allowKnownWorlds = Effect.gen(function* () {
  const home = yield* Home
  if (started(home.consentFile)) return
  const registry = yield* Registry
  const configs = yield* ConfigFiles
  for (const w of yield* registry.worlds()) {
    const folder = w.path !== "" && existsSync(w.path) ? w.path : w.mainRoot
    const loaded = yield* Effect.option(configs.load(folder))
    if (loaded._tag === "Some") record(home.consentFile, "allow", loaded.value.digest, loaded.value.file)
  }
  yield* Effect.sync(() => appendFileSync(home.consentFile, "", { mode: 0o600 }))
})
