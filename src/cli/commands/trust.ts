/**
 * `berth trust [--remove] [--dry-run]`: puts berth's local CA into (or takes it out of) the trust stores of this
 * machine — the system store and the NSS databases Chrome and Firefox read on Linux — and says exactly what it did,
 * and what needs root. Runs here, not in the daemon: it may need the user's terminal for sudo.
 */
import { join } from "node:path"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { InvalidRequest } from "../../domain/errors.js"
import { Home } from "../../services/Home.js"
import { loadOrCreateCa } from "../../services/proxy/ca.js"
import {
  commandLine,
  formatTrustReport,
  gatherTrustFacts,
  planTrust,
  runTrust,
  type TrustCa
} from "../../services/proxy/trust.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"

export const trust = Command.make(
  "trust",
  {
    remove: Options.boolean("remove").pipe(Options.withDescription("take berth's CA out of the trust stores")),
    dryRun: Options.boolean("dry-run").pipe(Options.withDescription("only print what would be run")),
    json
  },
  ({ dryRun, json, remove }) =>
    Effect.gen(function* () {
      const home = yield* Home
      const ca = yield* loadOrCreateCa(join(home.root, "ca")).pipe(
        Effect.mapError((e) => new InvalidRequest({ reason: `berth's CA: ${e.message}` }))
      )
      const subject: TrustCa = {
        certPath: ca.certPath,
        commonName: ca.commonName,
        fingerprint: ca.fingerprint,
        sha1: ca.cert.fingerprint.replaceAll(":", "").toUpperCase()
      }
      const facts = gatherTrustFacts()
      const plan = planTrust(facts, subject, remove ? "remove" : "install")
      if (dryRun) {
        if (json) return yield* printDocument("trust", { ca: subject, plan })
        const lines = [
          `berth's CA: ${ca.certPath} (${ca.commonName})`,
          ...plan.steps.map((s) => `${s.root && !facts.isRoot ? "sudo " : ""}${commandLine(s.argv)}    # ${s.store}`),
          ...plan.skipped.map((s) => `# skipped the ${s.store}: ${s.reason}`)
        ]
        return yield* Console.log(lines.join("\n"))
      }
      const report = yield* runTrust(plan, { isRoot: facts.isRoot })
      if (json) yield* printDocument("trust", { ca: subject, report })
      else yield* Console.log(`berth's CA: ${ca.certPath} (${ca.commonName})\n${formatTrustReport(report)}`)
      if (report.failed.length > 0) process.exitCode = 1
    })
).pipe(
  Command.withDescription("Trust berth's local CA in this machine's stores (or --remove it), for HTTPS routes"),
  Command.provide(Home.layer)
)
