/**
 * `berth reset [name] [slice]…`: a world's slices back to their golden (or a fresh migrate + seed), its processes
 * stopped and started around it; ports and files stay.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { DaemonClient } from "../../daemon/client.js"
import { definedEnv } from "../../domain/environment.js"
import { printDocument } from "../json.js"
import { json } from "../output.js"
import { renderWorld } from "../render.js"
import { consenting, yes } from "./consent.js"
import { askedBy, viaDaemon, withDaemon } from "./worlds.js"

const worldName = Args.text({ name: "name" }).pipe(
  Args.withDescription("the world: a branch name (default: the worktree you are in)"),
  Args.optional
)
const sliceNames = Args.text({ name: "slice" }).pipe(
  Args.withDescription("a slice service to reset (default: every slice of the world)"),
  Args.repeated
)

export const reset = Command.make(
  "reset",
  { name: worldName, slices: sliceNames, yes, json },
  ({ json, name, slices, yes }) =>
    viaDaemon(
      Effect.gen(function* () {
        const client = yield* DaemonClient
        const world = yield* consenting(
          yes,
          client.Reset({
            cwd: process.cwd(),
            world: Option.getOrUndefined(name),
            env: definedEnv(process.env),
            slices
          })
        )
        if (json) return yield* printDocument("reset", { world })
        yield* Console.log(renderWorld(world).join("\n"))
      })
    ).pipe(askedBy("reset", Option.getOrUndefined(name)))
).pipe(
  Command.withDescription(
    "Put a world's slices back to their golden (or a fresh migrate + seed), restarting around it"
  ),
  withDaemon
)
