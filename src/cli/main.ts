// Placeholder: the @effect/cli program lands here.
export const run = (argv: ReadonlyArray<string>): void => {
  process.stdout.write(`berth ${argv.join(" ")}\n`)
}
