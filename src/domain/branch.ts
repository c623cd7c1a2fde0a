/**
 * Git's rules for a branch name (`git check-ref-format --branch`), as a pure function: asking git costs a process
 * per `up`, and the rules are fixed (git-check-ref-format(1)). Also refused: a leading `-` (it would read as an
 * option), `@` alone and `@{` (which `--branch` expands rather than judges), `HEAD`, and a part too long for git to
 * keep as a file (`MAX_PART_BYTES`), which check-ref-format accepts and every later git command fails on.
 */

/**
 * git keeps a branch as the file `refs/heads/<name>` (each `/` a folder) and writes `<part>.lock` beside it while it
 * changes it; a file name cannot exceed 255 bytes, so no part may exceed 255 - ".lock".
 */
export const MAX_PART_BYTES = 255 - ".lock".length

const bytes = (text: string) => new TextEncoder().encode(text).length

/** Why `name` is not a branch name, or undefined when it is one. */
export const branchNameProblem = (name: string): string | undefined => {
  if (name === "") return "it is empty"
  if (name.startsWith("-")) return "it starts with '-'"
  if (name === "@" || name === "HEAD") return `'${name}' names HEAD, not a branch`
  if (name.includes("@{")) return "it contains '@{'"
  const rules =
    "git does not accept it (no spaces, control characters, ~ ^ : ? * [ \\, '..', '//', a leading or trailing " +
    "'/' or '.', or a '.lock' ending)"
  // control characters, DEL and space (by code point), and the characters git reserves for revision syntax
  if ([...name].some((c) => c.charCodeAt(0) <= 0x20 || c.charCodeAt(0) === 0x7f) || /[~^:?*[\\]/.test(name)) {
    return rules
  }
  if (name.includes("..") || name.startsWith("/") || name.endsWith("/") || name.includes("//")) return rules
  if (name.endsWith(".")) return rules
  for (const component of name.split("/")) {
    if (component.startsWith(".") || component.endsWith(".lock")) return rules
  }
  const long = name.split("/").find((component) => bytes(component) > MAX_PART_BYTES)
  if (long !== undefined) {
    const part = name.includes("/") ? "a part of it between slashes is" : "it is"
    return (
      `${part} ${bytes(long)} bytes long, over the ${MAX_PART_BYTES} git can keep: git stores a branch as a file ` +
      `under .git/refs/heads (and a .lock file beside it while it writes), and a file name cannot exceed 255 bytes; ` +
      "use a shorter name"
    )
  }
  return undefined
}
