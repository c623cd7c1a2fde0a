/**
 * Other names people (and agents) reach for: `ls`/`list` for `status`, `stop` for `down`, `restart` for `reload`,
 * `dash` for `dashboard`.
 * @effect/cli has no aliases for commands, so argv's first word is rewritten before either path (lean or full) reads it.
 */
export const commandAliases: Readonly<Record<string, string>> = {
  ls: "status",
  list: "status",
  stop: "down",
  restart: "reload",
  dash: "dashboard"
}

/** argv with an alias in the command's place replaced by the command it names. */
export const expandAlias = (argv: ReadonlyArray<string>): ReadonlyArray<string> => {
  const [first, ...rest] = argv
  const target = first === undefined ? undefined : commandAliases[first]
  return target === undefined ? argv : [target, ...rest]
}
