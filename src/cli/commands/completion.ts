/**
 * `berth completion <shell>`: the completion script for bash, zsh, fish or PowerShell (as `--completions <shell>`
 * prints it), each asking `berth __complete` for the words under the cursor.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import { completionScript, SHELLS, type Shell } from "../completion.js"

export const completion = Command.make(
  "completion",
  {
    shell: Args.choice(
      SHELLS.map((s): [string, Shell] => [s, s]),
      { name: "shell" }
    ).pipe(Args.withDescription(`the shell: ${SHELLS.join(", ")}`))
  },
  ({ shell }) =>
    Effect.sync(() => {
      process.stdout.write(completionScript(shell))
    })
).pipe(
  Command.withDescription(
    "Print a shell completion script: berth completion bash > /etc/bash_completion.d/berth; powershell: >> $PROFILE"
  )
)
