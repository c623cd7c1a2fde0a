/**
 * `berth version [--json]`: what `berth --version` prints, as a command like the others; `--json` adds this build's
 * id and the Node and platform it runs on (what a bug report wants).
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import { build, version as berthVersion } from "../../version.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"

export const version = Command.make("version", { json }, ({ json }) =>
  json
    ? printDocument("version", {
        version: berthVersion,
        build,
        node: process.version,
        platform: `${process.platform}-${process.arch}`
      })
    : Console.log(berthVersion)
).pipe(Command.withDescription("Print berth's version (as --version does); --json adds the build, Node and platform"))
